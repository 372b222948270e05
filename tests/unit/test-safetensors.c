/*
 * test-safetensors: the GPT-2 export (safetensors.h) read back by a reader written
 * here from the format's description, and run as GPT-2 is in transformers.
 *
 *   - conversions: bf16 and fp16 of named values (ties to even at 1 + 2^-8 and
 *     1 + 2^-11, 65504 and 65520 in fp16, subnormals, signed zeros, infinities,
 *     NaN) and of 2^22 random bit patterns (every exponent, subnormals and NaNs
 *     included) against round-to-nearest-even computed in double with rint(), and
 *     against the compiler's _Float16 where it has one; every fp16 and bf16 value
 *     converts back to itself;
 *   - the file: a model made in-process (lmt_gpt_init, lmt_gpt_init_weights, then
 *     order-1 random values so every path carries weight), saved as a checkpoint
 *     with lmt_ckpt_write and exported; the reader checks the 8-byte length, the
 *     JSON, the dtypes, the shapes GPT-2 wants, the offsets (contiguous from 0, no
 *     gap, ending at the end of the file) and the set of names, exactly;
 *   - the numbers: GPT-2's forward pass written here in double with
 *     transformers' conventions (Conv1D y = x W + b with W (in, out), gelu_new,
 *     LayerNorm eps 1e-5, causal attention, logits = h wte^T over V rows) on the
 *     exported tensors gives the library's own logits (lmt_gpt_logits), tied and
 *     untied, in fp32, bf16 and fp16; reading c_proj.weight as (out, in) instead
 *     must not (the check can fail);
 *   - vocabulary 300 (padded to 384): wte has exactly V rows, bitwise the model's;
 *     config.json says what GPT2Config needs; a value beyond fp16's range becomes
 *     inf and is counted, NaN stays NaN; a checkpoint whose state.model
 *     disagrees with its tensors is refused naming the tensor.
 */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "ckpt/ckpt.h"
#include "core/rng.h"
#include "model/model.h"
#include "ckpt/safetensors.h"
#include "fixtures.h"
#include "tap.h"
#include "ckpt/trainstate.h"
#include "core/util.h"

static char dir[] = "/tmp/lmt-test-safetensors.XXXXXX";
static struct lmt_backend be;
static struct lmt_rng rng;

static void *xmalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);
	if (!p) {
		fprintf(stderr, "test-safetensors: out of memory\n");
		exit(1);
	}
	return p;
}

static uint32_t bits(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	return u;
}

static float flt(uint32_t u)
{
	float x;
	memcpy(&x, &u, 4);
	return x;
}

/* ---- the reference conversions: decoding by the definition, rounding in double ---- */

static double dec_f16(uint16_t h)
{
	int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
	double v = e == 31 ? (m ? NAN : INFINITY) : e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
	return s ? -v : v;
}

static double dec_bf16(uint16_t h)
{
	return flt((uint32_t)h << 16);
}

/* x rounded to p significant bits, ties to even (rint in the default mode), with
 * gradual underflow below 2^emin and overflow past maxf to infinity. */
static double ref_round(double x, int p, int emin, double maxf)
{
	if (isnan(x) || isinf(x) || x == 0)
		return x;
	int e;
	frexp(fabs(x), &e); /* |x| in [2^(e-1), 2^e) */
	int q = LMT_MAX(e - 1, emin) - (p - 1);
	double r = ldexp(rint(ldexp(fabs(x), -q)), q);
	return copysign(r > maxf ? INFINITY : r, x);
}

static double ref_f16(float x)
{
	return ref_round(x, 11, -14, 65504);
}

static double ref_bf16(float x)
{
	return ref_round(x, 8, -126, ldexp(255, 120));
}

static int same_value(double a, double b)
{
	return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
}

static void test_conversions(void)
{
	static const struct { float x; uint16_t f16, bf16; const char *what; } cases[] = {
		{ 1.0f, 0x3c00, 0x3f80, "1" },
		{ 1.0f + 0x1p-8f, 0x3c04, 0x3f80, "1 + 2^-8: a bf16 tie, to even (down)" },
		{ 1.0f + 3 * 0x1p-8f, 0x3c0c, 0x3f82, "1 + 3*2^-8: a bf16 tie, to even (up)" },
		{ 1.0f + 0x1p-8f + 0x1p-20f, 0x3c04, 0x3f81, "just above the bf16 tie" },
		{ 1.0f + 0x1p-11f, 0x3c00, 0x3f80, "1 + 2^-11: an fp16 tie, to even (down)" },
		{ 1.0f + 3 * 0x1p-11f, 0x3c02, 0x3f80, "1 + 3*2^-11: an fp16 tie, to even (up)" },
		{ -1.0f - 3 * 0x1p-11f, 0xbc02, 0xbf80, "negative ties" },
		{ 65504.0f, 0x7bff, 0x4780, "65504, fp16's largest" },
		{ 65519.996f, 0x7bff, 0x4780, "just below 65520" },
		{ 65520.0f, 0x7c00, 0x4780, "65520: fp16 overflow to inf" },
		{ -65520.0f, 0xfc00, 0xc780, "-65520: to -inf" },
		{ 0x1p-24f, 0x0001, 0x3380, "2^-24, fp16's smallest subnormal" },
		{ 0x1p-25f, 0x0000, 0x3300, "2^-25: a tie, to even 0" },
		{ 0x1.8p-24f, 0x0002, 0x33c0, "1.5*2^-24: a tie, to even 2^-23" },
		{ 0x1.0p-14f - 0x1p-25f, 0x0400, 0x3880, "2^-14 - 2^-25: rounds up to the smallest normal" },
		{ 0x3ffp-24f, 0x03ff, 0x3880, "the largest subnormal" },
		{ -0.0f, 0x8000, 0x8000, "-0" },
		{ 3.4028235e38f, 0x7c00, 0x7f80, "FLT_MAX: inf in both" },
		{ 0x1p-149f, 0x0000, 0x0000, "fp32's smallest subnormal" },
	};
	int ok16 = 1, okbf = 1;
	for (size_t i = 0; i < LMT_ARRAY_SIZE(cases); i++) {
		uint16_t a = lmt_f32_to_f16(cases[i].x), b = lmt_f32_to_bf16(cases[i].x);
		if (a != cases[i].f16) {
			ok16 = 0;
			tap_diag("fp16 of %a (%s): %04x, expected %04x", cases[i].x, cases[i].what, a, cases[i].f16);
		}
		if (b != cases[i].bf16) {
			okbf = 0;
			tap_diag("bf16 of %a (%s): %04x, expected %04x", cases[i].x, cases[i].what, b, cases[i].bf16);
		}
	}
	tap_ok(ok16, "fp16 of %zu named values (ties to even, 65520 to inf, subnormals)", LMT_ARRAY_SIZE(cases));
	tap_ok(okbf, "bf16 of the same values (ties to even at 1 + 2^-8, FLT_MAX to inf)");
	uint16_t n16 = lmt_f32_to_f16(NAN), nb = lmt_f32_to_bf16(-NAN), sn = lmt_f32_to_f16(flt(0x7f800001));
	tap_ok(isnan(dec_f16(n16)) && isnan(dec_bf16(nb)) && signbit(dec_bf16(nb)) && isnan(dec_f16(sn)),
	       "NaN stays NaN (sign kept; a signalling NaN whose payload is in the dropped bits too): %04x %04x %04x",
	       n16, nb, sn);

	/* random bit patterns: every exponent, subnormals, infinities and NaNs */
	int bad16 = 0, badbf = 0;
#ifdef __FLT16_MAX__
	int badh = 0;
#endif
	for (int i = 0; i < 1 << 22; i++) {
		uint32_t u = (uint32_t)lmt_rng_next(&rng);
		if (i & 1) /* half of them near fp16's range, where its rounding happens */
			u = (u & 0x807fffffu) | ((uint32_t)(100 + (u >> 23) % 50) << 23);
		float x = flt(u);
		if (!same_value(dec_f16(lmt_f32_to_f16(x)), ref_f16(x)) && bad16++ < 3)
			tap_diag("fp16 of %a (%08x): %a, expected %a", x, u, dec_f16(lmt_f32_to_f16(x)), ref_f16(x));
		if (!same_value(dec_bf16(lmt_f32_to_bf16(x)), ref_bf16(x)) && badbf++ < 3)
			tap_diag("bf16 of %a (%08x): %a, expected %a", x, u, dec_bf16(lmt_f32_to_bf16(x)), ref_bf16(x));
#ifdef __FLT16_MAX__
		_Float16 h = (_Float16)x;
		uint16_t hb;
		memcpy(&hb, &h, 2);
		if (!isnan(x) && hb != lmt_f32_to_f16(x) && badh++ < 3)
			tap_diag("fp16 of %a: %04x, the compiler's _Float16 %04x", x, lmt_f32_to_f16(x), hb);
#endif
	}
	tap_ok(!bad16, "fp16 of 2^22 random floats is round-to-nearest-even (rint in double): %d differ", bad16);
	tap_ok(!badbf, "bf16 of 2^22 random floats likewise: %d differ", badbf);
#ifdef __FLT16_MAX__
	tap_ok(!badh, "fp16 agrees with the compiler's _Float16 conversion: %d differ", badh);
#endif
	/* every half value back to itself, and the decoders agree with the definition */
	int rt = 1;
	for (uint32_t h = 0; h < 65536; h++) {
		double d = dec_f16((uint16_t)h);
		rt &= same_value(lmt_f16_to_f32((uint16_t)h), d);
		rt &= isnan(d) ? isnan(dec_f16(lmt_f32_to_f16((float)d))) : lmt_f32_to_f16((float)d) == h;
		rt &= isnan(dec_bf16((uint16_t)h)) ? isnan(lmt_bf16_to_f32((uint16_t)h))
						   : lmt_f32_to_bf16(lmt_bf16_to_f32((uint16_t)h)) == h;
	}
	tap_ok(rt, "every fp16 and bf16 value converts to fp32 and back to itself");
}

/* ---- an independent reader ---- */

struct stfile {
	uint8_t *data;
	size_t size;
	uint64_t n;                  /* header length */
	json_t *hdr;
	const uint8_t *buf;          /* the byte buffer */
};

static int st_load(struct stfile *s, const char *path)
{
	memset(s, 0, sizeof *s);
	FILE *f = fopen(path, "rb");
	if (!f)
		return tap_ok(0, "'%s' opens", path), -1;
	fseek(f, 0, SEEK_END);
	s->size = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	s->data = xmalloc(s->size);
	size_t got = fread(s->data, 1, s->size, f);
	fclose(f);
	if (got != s->size || s->size < 8)
		return tap_ok(0, "'%s' reads (%zu bytes)", path, s->size), -1;
	for (int i = 7; i >= 0; i--)
		s->n = s->n << 8 | s->data[i]; /* little-endian, by hand */
	if (!tap_ok(s->n <= s->size - 8 && s->n % 8 == 0 && s->n > 0 && s->data[8] == '{',
		    "header length %llu: within the file of %zu bytes, a multiple of 8, starts with '{'",
		    (unsigned long long)s->n, s->size))
		return -1;
	int pad = 1;
	size_t end = 8 + s->n;
	while (end > 8 && s->data[end - 1] == ' ')
		end--;
	pad = 8 + s->n - end < 8;
	json_error_t je;
	s->hdr = json_loadb((const char *)s->data + 8, (size_t)s->n, 0, &je);
	if (!tap_ok(s->hdr && json_is_object(s->hdr) && pad, "the header is a JSON object (padded with < 8 spaces)%s%s",
		    s->hdr ? "" : ": ", s->hdr ? "" : je.text))
		return -1;
	s->buf = s->data + 8 + s->n;
	/* every entry well formed; offsets sorted tile [0, buffer size) exactly */
	const char *k;
	json_t *v;
	uint64_t total = s->size - 8 - s->n, (*iv)[2] = xmalloc(json_object_size(s->hdr) * sizeof *iv);
	size_t m = 0;
	int ok = 1;
	json_object_foreach(s->hdr, k, v) {
		if (!strcmp(k, "__metadata__")) {
			const char *mk;
			json_t *mv;
			json_object_foreach(v, mk, mv)
				ok &= json_is_string(mv);
			continue;
		}
		const char *dt = json_string_value(json_object_get(v, "dtype"));
		json_t *sh = json_object_get(v, "shape"), *of = json_object_get(v, "data_offsets");
		int es = !dt ? 0 : !strcmp(dt, "F32") ? 4 : !strcmp(dt, "BF16") || !strcmp(dt, "F16") ? 2 : 0;
		uint64_t numel = 1;
		size_t i;
		json_t *d;
		json_array_foreach(sh, i, d)
			numel *= (uint64_t)json_integer_value(d);
		if (!es || !json_is_array(sh) || json_array_size(of) != 2 ||
		    (uint64_t)json_integer_value(json_array_get(of, 1)) - (uint64_t)json_integer_value(json_array_get(of, 0)) !=
			    numel * (uint64_t)es) {
			tap_diag("entry '%s' is malformed", k);
			ok = 0;
			continue;
		}
		iv[m][0] = (uint64_t)json_integer_value(json_array_get(of, 0));
		iv[m][1] = (uint64_t)json_integer_value(json_array_get(of, 1));
		m++;
	}
	/* sort by begin (insertion sort: tens of entries) */
	for (size_t i = 1; i < m; i++)
		for (size_t j = i; j > 0 && iv[j][0] < iv[j - 1][0]; j--) {
			uint64_t a = iv[j][0], b = iv[j][1];
			iv[j][0] = iv[j - 1][0], iv[j][1] = iv[j - 1][1];
			iv[j - 1][0] = a, iv[j - 1][1] = b;
		}
	uint64_t at = 0;
	for (size_t i = 0; i < m; i++) {
		ok &= iv[i][0] == at;
		at = iv[i][1];
	}
	ok &= at == total;
	free(iv);
	return tap_ok(ok, "%zu entries: dtype, shape and size agree; offsets tile the %llu-byte buffer exactly", m,
		      (unsigned long long)total) ? 0 : -1;
}

static void st_free(struct stfile *s)
{
	json_decref(s->hdr);
	free(s->data);
	memset(s, 0, sizeof *s);
}

/* A tensor as doubles, with the shape asked for (else NULL, with a diagnostic). */
static double *st_get(const struct stfile *s, const char *name, int ndim, long d0, long d1)
{
	json_t *v = json_object_get(s->hdr, name), *sh = json_object_get(v, "shape");
	const char *dt = json_string_value(json_object_get(v, "dtype"));
	long want[2] = { d0, d1 };
	int ok = v && dt && (int)json_array_size(sh) == ndim;
	for (int i = 0; ok && i < ndim; i++)
		ok = json_integer_value(json_array_get(sh, (size_t)i)) == want[i];
	if (!ok) {
		char *txt = v ? json_dumps(v, JSON_COMPACT) : NULL;
		tap_diag("'%s': %s, expected shape [%ld%s%.0ld]", name, txt ? txt : "missing", d0, ndim > 1 ? ", " : "",
			 ndim > 1 ? d1 : 0);
		free(txt);
		return NULL;
	}
	size_t n = (size_t)d0 * (ndim > 1 ? (size_t)d1 : 1);
	const uint8_t *p = s->buf + json_integer_value(json_array_get(json_object_get(v, "data_offsets"), 0));
	double *out = xmalloc(n * sizeof *out);
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(dt, "F32")) {
			uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
				     (uint32_t)p[4 * i + 3] << 24;
			out[i] = flt(u);
		} else {
			uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
			out[i] = !strcmp(dt, "F16") ? dec_f16(h) : dec_bf16(h);
		}
	}
	return out;
}

/* ---- GPT-2 as transformers computes it ---- */

static void layernorm(const double *x, double *o, const double *w, const double *b, int N, int C)
{
	for (int n = 0; n < N; n++) {
		const double *v = x + (size_t)n * C;
		double m = 0, var = 0;
		for (int c = 0; c < C; c++)
			m += v[c];
		m /= C;
		for (int c = 0; c < C; c++)
			var += (v[c] - m) * (v[c] - m);
		double r = 1 / sqrt(var / C + 1e-5);
		for (int c = 0; c < C; c++)
			o[(size_t)n * C + c] = (v[c] - m) * r * w[c] + b[c];
	}
}

/* Conv1D: o (N, OUT) = x (N, IN) @ W (IN, OUT) + b. wrong: read W as (OUT, IN). */
static void conv1d(const double *x, double *o, const double *W, const double *b, int N, int IN, int OUT, int wrong)
{
	for (int n = 0; n < N; n++)
		for (int j = 0; j < OUT; j++) {
			double s = b[j];
			for (int i = 0; i < IN; i++)
				s += x[(size_t)n * IN + i] * (wrong ? W[(size_t)j * IN + i] : W[(size_t)i * OUT + j]);
			o[(size_t)n * OUT + j] = s;
		}
}

struct hf {
	int L, NH, C, V, maxT, untied;
};

/* logits (B*T, V); returns 0, or -1 if a tensor is missing or misshapen */
static int hf_forward(const struct stfile *s, const struct hf *m, const int32_t *tok, int B, int T, double *logits,
		      int wrong)
{
	int C = m->C, N = B * T, HS = C / m->NH, rc = -1;
	char nm[128];
	double *wte = st_get(s, "transformer.wte.weight", 2, m->V, C);
	double *wpe = st_get(s, "transformer.wpe.weight", 2, m->maxT, C);
	double *head = m->untied ? st_get(s, "lm_head.weight", 2, m->V, C) : wte;
	double *x = xmalloc((size_t)N * C * 8), *h = xmalloc((size_t)N * C * 8), *qkv = xmalloc((size_t)N * 3 * C * 8);
	double *y = xmalloc((size_t)N * C * 8), *t = xmalloc((size_t)N * C * 8), *f = xmalloc((size_t)N * 4 * C * 8);
	double *w[12] = { 0 };
	if (!wte || !wpe || !head)
		goto out;
	for (int n = 0; n < N; n++)
		for (int c = 0; c < C; c++)
			x[(size_t)n * C + c] = wte[(size_t)tok[n] * C + c] + wpe[(size_t)(n % T) * C + c];
	for (int l = 0; l < m->L; l++) {
		static const char *const names[12] = { "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
						       "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
						       "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
						       "mlp.c_proj.bias" };
		const long shapes[12][3] = { { 1, C }, { 1, C }, { 2, C, 3 * C }, { 1, 3 * C }, { 2, C, C }, { 1, C },
					     { 1, C }, { 1, C }, { 2, C, 4 * C }, { 1, 4 * C }, { 2, 4 * C, C }, { 1, C } };
		int ok = 1;
		for (int k = 0; k < 12; k++) {
			snprintf(nm, sizeof nm, "transformer.h.%d.%s", l, names[k]);
			free(w[k]);
			w[k] = st_get(s, nm, (int)shapes[k][0], shapes[k][1], shapes[k][2]);
			ok &= w[k] != NULL;
		}
		if (!ok)
			goto out;
		layernorm(x, h, w[0], w[1], N, C);
		conv1d(h, qkv, w[2], w[3], N, C, 3 * C, 0);
		/* q, k, v are thirds of c_attn's output; head hd is columns [hd*HS, (hd+1)*HS) of each */
		for (int b = 0; b < B; b++)
			for (int hd = 0; hd < m->NH; hd++)
				for (int i = 0; i < T; i++) {
					double sc[64], mx = -INFINITY, sum = 0;
					const double *q = qkv + ((size_t)b * T + i) * 3 * C + hd * HS;
					for (int j = 0; j <= i; j++) {
						const double *k = qkv + ((size_t)b * T + j) * 3 * C + C + hd * HS;
						double d = 0;
						for (int e = 0; e < HS; e++)
							d += q[e] * k[e];
						sc[j] = d / sqrt((double)HS);
						mx = fmax(mx, sc[j]);
					}
					for (int j = 0; j <= i; j++)
						sum += exp(sc[j] - mx);
					double *o = y + ((size_t)b * T + i) * C + hd * HS;
					for (int e = 0; e < HS; e++)
						o[e] = 0;
					for (int j = 0; j <= i; j++) {
						const double *v = qkv + ((size_t)b * T + j) * 3 * C + 2 * C + hd * HS;
						for (int e = 0; e < HS; e++)
							o[e] += exp(sc[j] - mx) / sum * v[e];
					}
				}
		conv1d(y, t, w[4], w[5], N, C, C, wrong);
		for (size_t i = 0; i < (size_t)N * C; i++)
			x[i] += t[i];
		layernorm(x, h, w[6], w[7], N, C);
		conv1d(h, f, w[8], w[9], N, C, 4 * C, 0);
		for (size_t i = 0; i < (size_t)N * 4 * C; i++) /* gelu_new */
			f[i] = 0.5 * f[i] * (1 + tanh(sqrt(2 / M_PI) * (f[i] + 0.044715 * pow(f[i], 3))));
		conv1d(f, t, w[10], w[11], N, 4 * C, C, 0);
		for (size_t i = 0; i < (size_t)N * C; i++)
			x[i] += t[i];
	}
	{
		double *lw = st_get(s, "transformer.ln_f.weight", 1, C, 0), *lb = st_get(s, "transformer.ln_f.bias", 1, C, 0);
		if (lw && lb) {
			layernorm(x, h, lw, lb, N, C);
			for (int n = 0; n < N; n++) /* the head: Linear, (V, C), no bias */
				for (int v = 0; v < m->V; v++) {
					double z = 0;
					for (int c = 0; c < C; c++)
						z += h[(size_t)n * C + c] * head[(size_t)v * C + c];
					logits[(size_t)n * m->V + v] = z;
				}
			rc = 0;
		}
		free(lw);
		free(lb);
	}
out:
	for (int k = 0; k < 12; k++)
		free(w[k]);
	if (head != wte)
		free(head);
	free(wte), free(wpe), free(x), free(h), free(qkv), free(y), free(t), free(f);
	return rc;
}

/* ---- the model, its checkpoint, its export ---- */

enum { MAXT = 16, V = 300, L = 2, NH = 4, C = 32, B = 2, T = 8 };

static double unif(double lo, double hi)
{
	return lo + (hi - lo) * ((lmt_rng_next(&rng) >> 11) * 0x1.0p-53);
}

/* GPT-2's initialisation, then order-1 values (its N(0, 0.02) would make every
 * logit nearly 0 and a wrong layout nearly invisible). Row 15 of wpe (beyond the
 * T = 8 positions run) holds 70000 and a NaN: the fp16 overflow and NaN checks. */
static int make_model(struct lmt_gpt *g, int untied, struct lmt_err *err)
{
	struct lmt_gpt_config cfg = { MAXT, V, lmt_gpt_padded_vocab(V), L, NH, C, untied };
	if (lmt_gpt_init(g, &cfg, &be, err) || lmt_gpt_init_weights(g, 7, err) || lmt_gpt_alloc_optimizer(g, err) ||
	    lmt_gpt_alloc_acts(g, B, T, err))
		return -1;
	float *h = xmalloc(g->nparams * 4);
	lmt_gpt_gather(g, h, g->params);
	fixture_params(g, h, 0.3, 1, unif);
	const struct lmt_tensor *wpe = lmt_gpt_tensor(g, "wpe");
	h[wpe->offset + 15 * C + 3] = 70000.0f;
	h[wpe->offset + 15 * C + 4] = NAN;
	lmt_gpt_scatter(g, g->params, h);
	lmt_gpt_sync_weights(g);
	free(h);
	return 0;
}

/* Save g as RUN/ckpt/step-00000001 with state.model as given; path out. */
static int save(struct lmt_gpt *g, const char *run, int layers_claimed, char *out, size_t cap)
{
	struct lmt_err err = { 0 };
	struct lmt_ckpt_tensor *t;
	int n;
	float *host;
	char state[1024];
	snprintf(state, sizeof state,
		 "{\"update\":1,\"tokenizer_sha256\":\"%064d\",\"model\":{\"layers\":%d,\"heads\":%d,\"channels\":%d,"
		 "\"context\":%d,\"vocab\":%d,\"vocab_padded\":%d,\"untied\":%s}}",
		 0, layers_claimed, g->cfg.NH, g->cfg.C, g->cfg.max_T, g->cfg.V, g->cfg.Vp, g->cfg.untied ? "true" : "false");
	if (mkdir(run, 0755))
		return tap_ok(0, "mkdir '%s'", run), -1;
	if (lmt_trainstate_tensors(g, &t, &n, &host, &err))
		return tap_ok(0, "checkpoint tensors: %s", err.msg), -1;
	struct lmt_ckpt_save sv = { run, 1, 1, t, n, state };
	struct lmt_ckpt_result r;
	int rc = lmt_ckpt_write(&sv, &r, &err);
	free(t);
	free(host);
	if (rc)
		return tap_ok(0, "lmt_ckpt_write: %s", err.msg), -1;
	snprintf(out, cap, "%s", r.path);
	return 0;
}

static double max_abs(const double *a, const float *b, int rows, int cols, int ldb, double *scale)
{
	double d = 0, s = 0;
	for (int r = 0; r < rows; r++)
		for (int c = 0; c < cols; c++) {
			d = fmax(d, fabs(a[(size_t)r * cols + c] - b[(size_t)r * ldb + c]));
			s = fmax(s, fabs(a[(size_t)r * cols + c]));
		}
	*scale = s;
	return d;
}

static void model_case(int untied)
{
	struct lmt_err err = { 0 };
	struct lmt_gpt g;
	const char *label = untied ? "untied" : "tied";
	if (!tap_ok(make_model(&g, untied, &err) == 0, "%s model L=%d NH=%d C=%d V=%d (Vp %d)%s%s", label, L, NH, C, V,
		    lmt_gpt_padded_vocab(V), err.msg[0] ? ": " : "", err.msg))
		return;
	/* the library's logits */
	int32_t tok[B * T];
	for (int n = 0; n < B * T; n++)
		tok[n] = (int32_t)(lmt_rng_next(&rng) % V);
	tok[1] = V - 1; /* the last real row */
	tok[9] = 0;
	be.to_device(&be, g.tok, tok, sizeof tok);
	lmt_gpt_logits(&g, 0);
	float *lib = xmalloc((size_t)B * T * g.cfg.Vp * 4);
	be.to_host(&be, lib, g.a.logits, (size_t)B * T * g.cfg.Vp * 4);
	float *params = xmalloc(g.nparams * 4);
	lmt_gpt_gather(&g, params, g.params);

	char run[512], ck[4096];
	snprintf(run, sizeof run, "%s/%s", dir, label);
	if (save(&g, run, L, ck, sizeof ck))
		goto done;
	struct lmt_ckpt c;
	if (!tap_ok(lmt_ckpt_open(&c, ck, 1, &err) == 0, "%s: the checkpoint opens and verifies %s", label, err.msg))
		goto done;
	struct hf m = { L, NH, C, V, MAXT, untied };
	static const int dtypes[3] = { LMT_ST_DTYPE_F32, LMT_ST_DTYPE_BF16, LMT_ST_DTYPE_F16 };
	struct stfile f32 = { 0 };
	for (int k = 0; k < 3; k++) {
		int dt = dtypes[k];
		const char *dn = lmt_st_dtype_name(dt);
		char path[1100], cfgp[1100];
		snprintf(path, sizeof path, "%s/%s-%s.safetensors", dir, label, dn);
		snprintf(cfgp, sizeof cfgp, "%s/%s-%s.json", dir, label, dn);
		struct lmt_st_opts o = { path, cfgp, dt, -1, k == 2 ? 299 : -1, 0 };
		struct lmt_st_result r;
		if (!tap_ok(lmt_safetensors_export_gpt2(&c, &o, &r, &err) == 0, "%s %s: export %s", label, dn, err.msg))
			continue;
		struct stfile s;
		if (st_load(&s, path)) {
			st_free(&s);
			continue;
		}
		/* exactly GPT-2's names */
		int names = (int)json_object_size(s.hdr) == 1 + 4 + 12 * L + untied;
		char nm[128];
		const char *top[5] = { "transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight",
				       "transformer.ln_f.bias", "lm_head.weight" };
		for (int i = 0; i < 4 + untied; i++)
			names &= json_object_get(s.hdr, top[i]) != NULL;
		names &= untied || !json_object_get(s.hdr, "lm_head.weight");
		static const char *const per[12] = { "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
						     "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
						     "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias" };
		for (int l = 0; l < L; l++)
			for (int i = 0; i < 12; i++) {
				snprintf(nm, sizeof nm, "transformer.h.%d.%s", l, per[i]);
				names &= json_object_get(s.hdr, nm) != NULL;
			}
		json_t *md = json_object_get(s.hdr, "__metadata__");
		names &= json_is_string(json_object_get(md, "format")) &&
			 !strcmp(json_string_value(json_object_get(md, "format")), "pt");
		tap_ok(names, "%s %s: the names are GPT-2's, %s lm_head, and __metadata__.format is \"pt\"", label, dn,
		       untied ? "with" : "without");
		tap_ok(r.bytes == s.size && r.overflow == (dt == LMT_ST_DTYPE_F16) && r.nan == 1,
		       "%s %s: result: %llu bytes (file %zu), %llu overflow%s, %llu NaN", label, dn,
		       (unsigned long long)r.bytes, s.size, (unsigned long long)r.overflow,
		       dt == LMT_ST_DTYPE_F16 ? " (70000 in fp16)" : "", (unsigned long long)r.nan);

		double *ref = xmalloc((size_t)B * T * V * 8);
		if (tap_ok(hf_forward(&s, &m, tok, B, T, ref, 0) == 0, "%s %s: GPT-2's forward pass reads every tensor",
			   label, dn)) {
			double scale, d = max_abs(ref, lib, B * T, V, g.cfg.Vp, &scale);
			/*
			 * fp32: the same weights; float (sgemm, float LayerNorm and softmax)
			 * against double through 2 layers; observed ~2e-6 of the logit scale.
			 * bf16 keeps 8 significant bits: each weight off by up to 2^-9
			 * relative, errors of sums of 32..128 products partly cancel; observed
			 * ~5e-3 of the scale, bound 3e-2. fp16 keeps 11 bits: 8x closer,
			 * bound 5e-3.
			 */
			double tol = dt == LMT_ST_DTYPE_F32 ? 2e-5 : dt == LMT_ST_DTYPE_BF16 ? 3e-2 : 5e-3;
			tap_ok(d <= tol * scale, "%s %s: logits equal the library's: max |diff| %.3g, %.2g of the logit scale "
			       "%.3g (bound %.0e)", label, dn, d, d / scale, scale, tol);
			if (dt == LMT_ST_DTYPE_F32) {
				double *bad = xmalloc((size_t)B * T * V * 8);
				hf_forward(&s, &m, tok, B, T, bad, 1);
				double d2 = max_abs(bad, lib, B * T, V, g.cfg.Vp, &scale);
				tap_ok(d2 > 1000 * tol * scale, "%s: reading attn.c_proj.weight as (out, in) is caught: max |diff| "
				       "%.3g", label, d2);
				free(bad);
			}
		}
		free(ref);
		if (dt == LMT_ST_DTYPE_F32) {
			/* wte: the V real rows, bitwise the model's; and c_fc transposed exactly */
			double *wte = st_get(&s, "transformer.wte.weight", 2, V, C);
			double *fc = st_get(&s, "transformer.h.1.mlp.c_fc.weight", 2, C, 4 * C);
			const struct lmt_tensor *tw = lmt_gpt_tensor(&g, "wte"), *tf = lmt_gpt_tensor(&g, "fcw");
			int eq = wte && fc;
			for (size_t i = 0; eq && i < (size_t)V * C; i++)
				eq = bits((float)wte[i]) == bits(params[tw->offset + i]);
			for (int i = 0; eq && i < C; i++) /* fcw (L, 4C, C): layer 1, row j, column i */
				for (int j = 0; eq && j < 4 * C; j++)
					eq = bits((float)fc[(size_t)i * 4 * C + j]) ==
					     bits(params[tf->offset + (size_t)4 * C * C + (size_t)j * C + i]);
			tap_ok(eq, "%s: wte is [%d, %d], bitwise the model's real rows; h.1.mlp.c_fc.weight is fcw[1]^T "
			       "bitwise", label, V, C);
			free(wte);
			free(fc);
			f32 = s;
			s.hdr = NULL, s.data = NULL;
		} else if (f32.hdr) {
			/* every element is the fp32 export's, converted */
			int eq = 1;
			const char *k2;
			json_t *v2;
			json_object_foreach(s.hdr, k2, v2) {
				if (!strcmp(k2, "__metadata__"))
					continue;
				json_t *a = json_object_get(f32.hdr, k2);
				uint64_t b16 = (uint64_t)json_integer_value(json_array_get(json_object_get(v2, "data_offsets"), 0));
				uint64_t b32 = (uint64_t)json_integer_value(json_array_get(json_object_get(a, "data_offsets"), 0));
				uint64_t e32 = (uint64_t)json_integer_value(json_array_get(json_object_get(a, "data_offsets"), 1));
				for (uint64_t i = 0; eq && i < (e32 - b32) / 4; i++) {
					uint32_t u;
					uint16_t h;
					memcpy(&u, f32.buf + b32 + 4 * i, 4);
					memcpy(&h, s.buf + b16 + 2 * i, 2);
					double want = dt == LMT_ST_DTYPE_F16 ? ref_f16(flt(u)) : ref_bf16(flt(u));
					eq = same_value(dt == LMT_ST_DTYPE_F16 ? dec_f16(h) : dec_bf16(h), want);
				}
			}
			tap_ok(eq, "%s %s: every element is the fp32 export's, rounded to nearest even", label, dn);
		}
		/* config.json */
		json_error_t je;
		json_t *cj = json_load_file(cfgp, 0, &je);
		int cok = cj != NULL;
		struct { const char *k; long v; } ints[] = { { "vocab_size", V }, { "n_positions", MAXT }, { "n_ctx", MAXT },
							     { "n_embd", C }, { "n_layer", L }, { "n_head", NH } };
		for (size_t i = 0; cok && i < LMT_ARRAY_SIZE(ints); i++)
			cok = json_integer_value(json_object_get(cj, ints[i].k)) == ints[i].v;
		cok = cok && !strcmp(json_string_value(json_object_get(cj, "model_type")), "gpt2") &&
		      !strcmp(json_string_value(json_array_get(json_object_get(cj, "architectures"), 0)), "GPT2LMHeadModel") &&
		      !strcmp(json_string_value(json_object_get(cj, "activation_function")), "gelu_new") &&
		      json_is_null(json_object_get(cj, "n_inner")) &&
		      json_number_value(json_object_get(cj, "layer_norm_epsilon")) == 1e-5 &&
		      json_is_boolean(json_object_get(cj, "tie_word_embeddings")) &&
		      json_is_true(json_object_get(cj, "tie_word_embeddings")) == !untied &&
		      !strcmp(json_string_value(json_object_get(cj, "torch_dtype")), lmt_st_dtype_torch(dt)) &&
		      !json_object_get(cj, "bos_token_id") &&
		      (k == 2 ? json_integer_value(json_object_get(cj, "eos_token_id")) == 299
			      : !json_object_get(cj, "eos_token_id"));
		tap_ok(cok, "%s %s: config.json is GPT2Config's (sizes, gelu_new, eps 1e-5, tying, dtype, eos only when "
		       "known)", label, dn);
		json_decref(cj);
		if (dt == LMT_ST_DTYPE_F16) {
			double *wpe = st_get(&s, "transformer.wpe.weight", 2, MAXT, C);
			tap_ok(wpe && isinf(wpe[15 * C + 3]) && wpe[15 * C + 3] > 0 && isnan(wpe[15 * C + 4]),
			       "%s fp16: 70000 is written as +inf, NaN as NaN", label);
			free(wpe);
		}
		st_free(&s);
	}
	st_free(&f32);
	lmt_ckpt_close(&c);
done:
	free(lib);
	free(params);
	lmt_gpt_release(&g);
}

/* A state.model that disagrees with the tensors is refused, naming the tensor. */
static void test_mismatch(void)
{
	struct lmt_err err = { 0 };
	struct lmt_gpt g;
	if (make_model(&g, 0, &err))
		return (void)tap_ok(0, "model: %s", err.msg);
	char run[512], ck[4096], path[1100];
	snprintf(run, sizeof run, "%s/mismatch", dir);
	snprintf(path, sizeof path, "%s/mismatch.safetensors", dir);
	if (save(&g, run, L + 1, ck, sizeof ck) == 0) {
		struct lmt_ckpt c;
		if (lmt_ckpt_open(&c, ck, 0, &err) == 0) {
			struct lmt_st_opts o = { path, NULL, LMT_ST_DTYPE_F32, -1, -1, 0 };
			struct lmt_st_result r;
			int rc = lmt_safetensors_export_gpt2(&c, &o, &r, &err);
			tap_ok(rc == LMT_EFORMAT && strstr(err.msg, "'param/ln1w' has shape [2 32], state.model implies [3 32]") &&
				       access(path, F_OK) != 0,
			       "state.model with 3 layers over a 2-layer checkpoint is refused, nothing written: %s", err.msg);
			lmt_ckpt_close(&c);
		}
	}
	lmt_gpt_release(&g);
}

/* HF's sizes: decimal and binary units, plain bytes; everything else refused */
static void test_sizes(void)
{
	static const struct { const char *s; uint64_t v; } good[] = {
		{ "5GB", 5000000000ull }, { "500MB", 500000000ull }, { "20KB", 20000 }, { "2GiB", 2147483648ull },
		{ "1.5MiB", 1572864 }, { "123", 123 }, { "7B", 7 }, { "1TB", 1000000000000ull },
	};
	static const char *const bad[] = { "", "5XB", "-1GB", "0", "GB", "5 GB", "5gb", "1e30" };
	struct lmt_err err = { 0 };
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		uint64_t v = 0;
		tap_ok(lmt_st_parse_size(good[i].s, &v, &err) == 0 && v == good[i].v, "size '%s' is %llu bytes (got %llu)",
		       good[i].s, (unsigned long long)good[i].v, (unsigned long long)v);
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		uint64_t v = 0;
		tap_ok(lmt_st_parse_size(bad[i], &v, &err) == LMT_EINVAL && strstr(err.msg, "is not a size"),
		       "size '%s' is refused: %s", bad[i], err.msg);
	}
}

int main(void)
{
	struct lmt_err err = { 0 };
	lmt_rng_seed(&rng, 20240611, 0);
	if (!mkdtemp(dir))
		return 1;
	test_conversions();
	test_sizes();
	if (tap_ok(lmt_backend_open(&be, "cpu", 1, &err) == 0, "the CPU backend, 1 thread %s", err.msg)) {
		model_case(0);
		model_case(1);
		test_mismatch();
		be.release(&be);
	}
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd))
		tap_diag("could not remove '%s'", dir);
	return tap_done();
}
