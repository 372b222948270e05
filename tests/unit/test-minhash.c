/*
 * test-minhash: the text normaliser, the MinHash arithmetic, the choice of bands
 * and rows, and the LSH S-curve on planted pairs of known Jaccard similarity.
 *
 * Expected normaliser outputs were worked out by hand and checked against Python's
 * unicodedata (Unicode 14.0: NFD, drop Mn, str.lower, categories Nd and P*,
 * str.isspace less U+001C..U+001F). The permutation arithmetic is checked against
 * a slow reference that reduces the full 128-bit product with '%'. Bands and rows
 * are checked against a minimisation done here with another quadrature rule and
 * against the values datasketch 2.0.0 chooses. One-permutation signatures are
 * checked against a reference written from minhash.h's definition (bins,
 * densification probes), and their estimates against the mean and variance that
 * definition promises, over many seeds. Statistical checks give their tolerance
 * where they make it; with the fixed seeds they are deterministic.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/dedup.h"
#include "data/minhash.h"
#include "tap.h"
#include "data/textnorm.h"
#include "core/utf8.h"
#include "core/util.h"

/* ---- normaliser ---- */

static void norm_case(unsigned flags, const char *in, const char *want, const char *what)
{
	char out[1024];
	size_t n = strlen(in);
	LMT_ASSERT(lmt_textnorm_bound(n) <= sizeof out);
	size_t m = lmt_textnorm_apply(flags, in, n, out);
	int ok = m == strlen(want) && !memcmp(out, want, m);
	if (!tap_ok(ok, "normalise %s", what))
		tap_diag("  got '%.*s', expected '%s'", (int)m, out, want);
}

static void test_normaliser(void)
{
	const unsigned ALL = LMT_TEXTNORM_ALL;
	norm_case(ALL, "Hello,   World!", "hello world", "ASCII case, punctuation, spaces");
	norm_case(ALL, "  \t leading and trailing \n ", "leading and trailing", "no space at the ends");
	norm_case(ALL, "Caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9 \xc3\x85ngstr\xc3\xb6m",
		  "cafe naive resume angstrom", "Latin accents (precomposed)");
	norm_case(ALL, "Cafe\xcc\x81 n\xcc\x83", "cafe n", "Latin accents (combining marks)");
	norm_case(ALL, "\xef\xac\x81nance \xef\xbc\xa1", "\xef\xac\x81nance \xef\xbd\x81",
		  "ligature kept (NFD, not NFKD); full-width A lowercased only");
	norm_case(ALL, "\xe2\x84\xab \xe2\x84\xa6", "a \xcf\x89", "singletons: angstrom sign, ohm sign");
	norm_case(ALL, "\xe1\xbc\x88\xce\xb8\xe1\xbf\x86\xce\xbd\xce\xb1\xce\xb9 \xce\x9a\xce\x91\xce\x9b\xce\x97",
		  "\xce\xb1\xce\xb8\xce\xb7\xce\xbd\xce\xb1\xce\xb9 \xce\xba\xce\xb1\xce\xbb\xce\xb7",
		  "Greek: breathing and circumflex stripped, capitals lowered");
	norm_case(ALL, "\xd0\x99\xd0\xbe\xd1\x88\xd0\xba\xd0\xb0\xd1\x80-\xd0\x9e\xd0\xbb\xd0\xb0 \xd0\x81\xd0\x96",
		  "\xd0\xb8\xd0\xbe\xd1\x88\xd0\xba\xd0\xb0\xd1\x80 \xd0\xbe\xd0\xbb\xd0\xb0 \xd0\xb5\xd0\xb6",
		  "Cyrillic: short i and yo lose their marks, hyphen is a space");
	/* telugu: U+0C46 vowel sign e and U+0C4D virama are Mn (dropped); U+0C41 vowel
	 * sign u is Mc (kept); Telugu digits are Nd */
	norm_case(ALL, "\xe0\xb0\xa4\xe0\xb1\x86\xe0\xb0\xb2\xe0\xb1\x81\xe0\xb0\x97\xe0\xb1\x81",
		  "\xe0\xb0\xa4\xe0\xb0\xb2\xe0\xb1\x81\xe0\xb0\x97\xe0\xb1\x81", "Telugu: Mn vowel sign dropped, Mc kept");
	norm_case(ALL, "\xe0\xb0\x95\xe0\xb1\x8d\xe0\xb0\xb7 \xe0\xb1\xa7\xe0\xb1\xa8\xe0\xb1\xa9",
		  "\xe0\xb0\x95\xe0\xb0\xb7 0", "Telugu: virama dropped, digit run is 0");
	norm_case(LMT_TEXTNORM_ALL & ~LMT_TEXTNORM_ACCENTS,
		  "\xe0\xb0\xa4\xe0\xb1\x86\xe0\xb0\xb2\xe0\xb1\x81", "\xe0\xb0\xa4\xe0\xb1\x86\xe0\xb0\xb2\xe0\xb1\x81",
		  "Telugu unchanged without accent stripping");
	norm_case(ALL, "In 2024, pi was 3.14159 and \xd9\xa3\xd9\xa4 x1y22",
		  "in 0 pi was 0 0 and 0 x0y0", "digit runs (ASCII and Arabic-Indic) become 0");
	norm_case(ALL, "a\xe3\x80\x80" "b\xc2\xa0" "c\xe2\x80\xa8" "d\xc2\x85" "e\xe1\xa0\x8e" "f",
		  "a b c d e\xe1\xa0\x8e" "f", "White_Space (U+180E is not)");
	norm_case(ALL, "\xc4\xb0stanbul \xe1\xba\x9e", "istanbul \xc3\x9f", "capital I with dot, capital sharp s");
	norm_case(ALL, "a\xff" "b \xc3( \xed\xa0\x80 \xf4\x90\x80\x80", "a\xff" "b \xc3 \xed\xa0\x80 \xf4\x90\x80\x80",
		  "invalid UTF-8 bytes kept as they are");
	norm_case(ALL, "!!! ... ???", "", "only punctuation: empty");
	norm_case(0, "  Caf\xc3\xa9, 12!\t", "  Caf\xc3\xa9, 12!\t", "no flags: unchanged");
	norm_case(LMT_TEXTNORM_PUNCT, "a,b  c", "a b  c", "punctuation without collapsing spaces");
	norm_case(LMT_TEXTNORM_SPACE, "a,b \t c", "a,b c", "spaces only");
	norm_case(LMT_TEXTNORM_DIGITS, "a1b22 333", "a0b0 0", "digits only");
	norm_case(LMT_TEXTNORM_LOWER, "\xc3\x89T\xc3\x89", "\xc3\xa9t\xc3\xa9", "lowercase keeps accents");
	norm_case(LMT_TEXTNORM_ACCENTS, "\xc3\x89T\xc3\x89 e\xcc\x81", "ETE e", "accents only keep case");
	norm_case(LMT_TEXTNORM_LOWER, "The QUICK Brown Fox @[`{ Jumps OVER the lazy dog \xc3\x89T\xc3\x89 AND MORE TEXT\tHERE",
		  "the quick brown fox @[`{ jumps over the lazy dog \xc3\xa9t\xc3\xa9 and more text\there",
		  "lowercase 16 bytes at a time: A-Z only, not their neighbours @ [ ` {");
	norm_case(LMT_TEXTNORM_LOWER | LMT_TEXTNORM_ACCENTS, "ABCDEFGHIJKLMNOPQRSTUVWXYZ \xc3\x80\xc3\x89 0123456789 XYZ!",
		  "abcdefghijklmnopqrstuvwxyz ae 0123456789 xyz!", "lowercase and accents, runs of 16 and more");
	norm_case(ALL, "\xc8\xba", "\xe2\xb1\xa5", "U+023A lowercases to a longer U+2C65");
	norm_case(LMT_TEXTNORM_LOWER,
		  "ABCDEFG\xc8\xba" "HIJKLMNOPQRSTUVWXYZ\xc8\xba\xc3\x89" "AB \xe4\xb8\xad" "CDEFGHIJKLMNOPQRS\xc3\x89TUVWXYZ0123456789!",
		  "abcdefg\xe2\xb1\xa5hijklmnopqrstuvwxyz\xe2\xb1\xa5\xc3\xa9" "ab \xe4\xb8\xad" "cdefghijklmnopqrs\xc3\xa9tuvwxyz0123456789!",
		  "lowercase 16 bytes at a time up to a character of another script, longer or not");

	unsigned f;
	const char *bad;
	tap_ok(lmt_textnorm_parse("space,lower", &f, &bad) == 0 && f == (LMT_TEXTNORM_SPACE | LMT_TEXTNORM_LOWER),
	       "parse a list of steps");
	tap_ok(lmt_textnorm_parse("none", &f, &bad) == 0 && f == 0, "parse none");
	tap_ok(lmt_textnorm_parse("lower,bogus", &f, &bad) == -1 && !strcmp(bad, "bogus"), "an unknown step is named");
	char buf[64];
	tap_ok(!strcmp(lmt_textnorm_format(LMT_TEXTNORM_ALL, buf), "lower,digits,punct,space,accents"),
	       "format all steps");

	uint32_t cp;
	tap_ok(lmt_utf8_decode((const unsigned char *)"\xc0\x80", 2, &cp) == 1 && cp == LMT_UTF8_BAD + 0xc0,
	       "overlong encoding is a bad byte");
	tap_ok(lmt_utf8_decode((const unsigned char *)"\xf0\x9f\x98\x80", 4, &cp) == 4 && cp == 0x1f600,
	       "4-byte character decoded");
	tap_ok(lmt_uni_is_space(0x3000) && !lmt_uni_is_space(0x180e) && !lmt_uni_is_space(0x1c), "White_Space table");
	tap_ok(lmt_uni_lower(0x1e9e) == 0xdf && lmt_uni_lower(0x100) == 0x101 && lmt_uni_lower(0x101) == 0x101,
	       "lowercase runs with stride 2");
	tap_ok(!strcmp(lmt_uni_version(), "14.0.0"), "tables are Unicode %s", lmt_uni_version());

	/* words: split at White_Space only */
	const char *t = " ab\xe3\x80\x80" "cd  e\xc2\xa0";
	size_t pos = 0, s, l, nw = 0;
	char got[64] = "";
	while (lmt_textnorm_next_word(t, strlen(t), &pos, &s, &l)) {
		strncat(got, t + s, l);
		strcat(got, "|");
		nw++;
	}
	tap_ok(nw == 3 && !strcmp(got, "ab|cd|e|"), "words split at Unicode white space (%s)", got);
}

/*
 * The kernel lmt_textnorm_apply runs (AVX-512 where the CPU has VBMI2) against
 * the one-character-at-a-time reference, for every set of flags: random texts of 0 to 700 bytes built from runs of ASCII letters,
 * capitals, digits, punctuation, white space and control bytes (so that runs
 * cross the 64-byte blocks), and characters of 2 to 4 bytes of every class
 * (White_Space, Nd, P*, Mn, a capital with an accent, one whose lowercase is
 * longer, ones beyond the BMP) and invalid bytes.
 */
static void test_normaliser_kernel(void)
{
	static const char *const piece[] = {
		"\xc2\xa0", "\xe3\x80\x80", "\xe2\x80\xa8", "\xc2\x85", "\xe1\xa0\x8e", "\xd9\xa3", "\xe0\xb1\xa7",
		"\xe2\x80\x94", "\xc2\xbf", "\xcc\x81", "\xe0\xb1\x8d", "\xc3\x89", "\xc3\xa9", "\xc8\xba", "\xe4\xb8\xad",
		"\xd0\x99", "\xf0\x9f\x98\x80", "\xf0\x90\x90\x80", "\xf0\x9d\x9f\x8e", "\x80", "\xc3", "\xff", "\xe2\x80",
		"\xed\xa0\x80",
	};
	static const char ascii_run[][12] = { "abcxyz", "QWERTY", "0123456789", ".,;!?-(", " \t\n\r\v\f", "\x01\x1c\x1f\x7f" };
	const char *kernel = lmt_textnorm_kernel();
	if (!strcmp(kernel, "scalar")) {
		tap_diag("normaliser kernel: this CPU runs the scalar reference only, nothing to compare");
		return;
	}
	uint64_t rs = 7;
	int wrong = 0, texts = 0;
	char t[720], a[2 * 720 + 1], b[2 * 720 + 1];
	for (int len = 0; len <= 700; len += 1 + len / 50) {
		for (int rep = 0; rep < 12; rep++) {
			size_t tl = 0;
			int ascii_share = rep % 4; /* 0: mostly other characters ... 3: nearly all ASCII */
			while (tl < (size_t)len) {
				uint64_t r = lmt_mix64(rs++);
				if ((int)(r % 8) > 2 * ascii_share) {
					const char *pc = piece[(r >> 8) % LMT_ARRAY_SIZE(piece)];
					size_t pl = strlen(pc);
					if (tl + pl > (size_t)len)
						break;
					memcpy(t + tl, pc, pl);
					tl += pl;
				} else {
					const char *run = ascii_run[(r >> 8) % LMT_ARRAY_SIZE(ascii_run)];
					size_t rl = strlen(run), k = 1 + (r >> 16) % (ascii_share == 3 ? 40 : 4);
					for (size_t i = 0; i < k && tl < (size_t)len; i++)
						t[tl++] = run[(r >> (24 + i % 32)) % rl];
				}
			}
			for (unsigned f = 0; f <= LMT_TEXTNORM_ALL; f++) {
				size_t m1 = lmt_textnorm_apply(f, t, tl, a), m2 = lmt_textnorm_apply_scalar(f, t, tl, b);
				if (m1 != m2 || memcmp(a, b, m1)) {
					if (wrong++ < 3)
						tap_diag("  flags %u, %zu bytes: %zu bytes against %zu", f, tl, m1, m2);
				}
			}
			texts++;
		}
	}
	tap_ok(wrong == 0, "normaliser: the %s kernel writes what the reference writes, "
	       "%d texts x 32 flag sets (%d differ)", kernel, texts, wrong);
}

/* ---- permutation arithmetic ---- */

static uint64_t slow_affine(uint64_t a, uint64_t b, uint64_t h)
{
	unsigned __int128 x = (unsigned __int128)a * h + b;
	return (uint64_t)(x % LMT_MINHASH_PRIME);
}

static uint64_t ref_splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* OPH as minhash.h defines it, written out plainly: bins, minima, and for an
 * empty bin j the first non-empty one in sigma_j, shuffled here */
static void ref_oph(const struct lmt_minhash *m, const uint64_t *sh, size_t n, uint32_t *sig, uint64_t *mn)
{
	const uint64_t K = (uint64_t)m->num_perm;
	for (uint64_t j = 0; j < K; j++)
		mn[j] = UINT64_MAX;
	for (size_t i = 0; i < n; i++) {
		uint64_t v = slow_affine(m->oa, m->ob, sh[i] % LMT_MINHASH_PRIME);
		uint64_t j = ((v >> 29) * K) >> 32;
		mn[j] = v < mn[j] ? v : mn[j];
	}
	for (uint64_t j = 0; j < K; j++) {
		uint64_t sigma[136], st = lmt_mix64(m->oc + j);
		for (uint64_t i = 0; i < K; i++)
			sigma[i] = i;
		for (uint64_t i = K - 1; i > 0; i--) {
			uint64_t x = (uint64_t)(((unsigned __int128)ref_splitmix(&st) * (i + 1)) >> 64);
			uint64_t tmp = sigma[i];
			sigma[i] = sigma[x];
			sigma[x] = tmp;
		}
		uint64_t d = j, t = 0;
		while (mn[d] == UINT64_MAX)
			d = sigma[t++];
		sig[j] = (uint32_t)mn[d];
	}
}

/* Sign 20 random documents of 1 to 300 shingles (the small ones have empty bins)
 * with m's kernel and method; the number of values unlike the reference's. */
static int kernel_vs_reference(const struct lmt_minhash *m, uint64_t *s)
{
	const uint64_t P = LMT_MINHASH_PRIME;
	const int np = m->num_perm;
	uint64_t sh[300], mins[136], rmins[136];
	uint32_t sig[131], rsig[131];
	int wrong = 0;
	for (int doc = 0; doc < 20; doc++) {
		size_t n = 1 + (size_t)(lmt_mix64((uint64_t)doc) % 300);
		for (size_t i = 0; i < n; i++)
			sh[i] = lmt_mix64((*s)++);
		if (doc == 0)
			sh[0] = UINT64_MAX; /* >= p: reduced first */
		if (doc == 1)
			sh[1] = sh[2] = sh[0]; /* repeats */
		lmt_minhash_sign(m, sh, n, sig, mins);
		if (m->method == LMT_MINHASH_METHOD_OPH) {
			ref_oph(m, sh, n, rsig, rmins);
			for (int j = 0; j < np; j++)
				wrong += sig[j] != rsig[j] || mins[j] != rmins[j];
			continue;
		}
		for (int j = 0; j < np; j++) {
			uint64_t mn = UINT64_MAX;
			for (size_t i = 0; i < n; i++) {
				uint64_t v = slow_affine(m->a[j], m->b[j], sh[i] % P);
				mn = v < mn ? v : mn;
			}
			wrong += sig[j] != (uint32_t)mn || mins[j] != mn;
		}
	}
	return wrong;
}

static void test_arith(void)
{
	const uint64_t P = LMT_MINHASH_PRIME;
	const uint64_t edge[] = { 0, 1, 2, 7, P - 2, P - 1, P, P + 1, (1ULL << 32) - 1, 1ULL << 32,
				  (1ULL << 61), UINT64_MAX - 1, UINT64_MAX };
	int bad = 0;
	for (size_t i = 0; i < LMT_ARRAY_SIZE(edge); i++)
		bad += lmt_mod61(edge[i]) != edge[i] % P;
	tap_ok(bad == 0, "x mod (2^61-1) for edge values (%d wrong)", bad);
	uint64_t s = 42;
	bad = 0;
	for (int i = 0; i < 2000000; i++) {
		uint64_t a = lmt_mix64(s++) % P, b = lmt_mix64(s++) % P, h = lmt_mix64(s++);
		if (i < 200) { /* the corners: a, b, h at 0, 1 and p-1 */
			uint64_t c[3] = { 0, 1, P - 1 };
			a = c[i % 3];
			b = c[(i / 3) % 3];
			h = i < 100 ? c[(i / 9) % 3] : h;
		}
		bad += lmt_mod61_affine(a, b, lmt_mod61(h)) != slow_affine(a, b, h);
	}
	tap_ok(bad == 0, "(a*h+b) mod (2^61-1) equals the 128-bit reference on 2e6 cases (%d wrong)", bad);

	/* every signing kernel the CPU runs gives the reference signature, by both methods */
	struct lmt_minhash m;
	struct lmt_err err;
	const char *kernels[] = { "scalar", "avx2", "avx512" };
	int bad2 = 0;
	for (int meth = 0; meth < 2; meth++) {
		for (int np = 1; np <= 131; np += 13) {
			if (lmt_minhash_init(&m, np, 5, 7, &err)) {
				tap_ok(0, "init %d permutations", np);
				continue;
			}
			m.method = meth;
			for (size_t k = 0; k < LMT_ARRAY_SIZE(kernels); k++) {
				if (lmt_minhash_set_kernel(&m, kernels[k]))
					continue; /* not on this CPU */
				int wrong = kernel_vs_reference(&m, &s);
				if (np == 1 || np == 131 || wrong)
					tap_ok(wrong == 0, "%s, %s kernel, %d bins: signatures equal the reference (%d wrong)",
					       lmt_minhash_method(&m), kernels[k], np, wrong);
				else
					bad2 += wrong;
			}
			lmt_minhash_release(&m);
		}
	}
	bad = bad2;
	tap_ok(bad == 0, "both methods, all kernels, 1 to 131 bins: signatures equal the reference");
	lmt_minhash_init(&m, 128, 5, 1, &err);
	tap_ok(m.a[0] >= 1 && m.a[0] < P && m.b[0] < P && m.oa >= 1 && m.oa < P && m.ob < P,
	       "coefficients in range (a in [1,p-1], b in [0,p-1])");
	struct lmt_minhash m2;
	lmt_minhash_init(&m2, 128, 5, 1, &err);
	tap_ok(!memcmp(m.a, m2.a, 128 * 8) && !memcmp(m.b, m2.b, 128 * 8), "the same seed gives the same permutations");
	lmt_minhash_release(&m2);
	lmt_minhash_init(&m2, 128, 5, 2, &err);
	tap_ok(memcmp(m.a, m2.a, 128 * 8) != 0, "another seed gives other permutations");
	lmt_minhash_release(&m2);
	uint32_t sig[128];
	uint64_t mins[128], one = 12345;
	lmt_minhash_sign(&m, NULL, 0, sig, mins);
	tap_ok(sig[0] == LMT_MINHASH_EMPTY && sig[127] == LMT_MINHASH_EMPTY, "no shingles: the empty signature");
	lmt_minhash_sign(&m, &one, 1, sig, mins);
	int same = 1;
	for (int j = 1; j < 128; j++)
		same &= sig[j] == sig[0];
	tap_ok(same && sig[0] != LMT_MINHASH_EMPTY, "one shingle: every bin borrows its one value");
	tap_ok(!strcmp(lmt_minhash_method(&m), "oph") && lmt_minhash_set_method(&m, "classic") == 0 &&
	       m.method == LMT_MINHASH_METHOD_CLASSIC && lmt_minhash_set_method(&m, "bogus") == -1,
	       "the method: oph by default, classic by name, an unknown name refused");
	lmt_minhash_release(&m);
}

/* ---- bands and rows ---- */

/*
 * FP + FN in closed form, independent of any quadrature: with u = s^r,
 *
 *	integral_0^x (1 - s^r)^b ds = (1/r) B(1/r, b+1) I_{x^r}(1/r, b+1)
 *
 * where I is the regularised incomplete beta function (continued fraction,
 * modified Lentz; Numerical Recipes 6.4). FP = t - that at x = t; FN = the rest.
 */
static double betacf(double a, double b, double x)
{
	double qab = a + b, qap = a + 1, qam = a - 1, c = 1, d = 1 - qab * x / qap;
	if (fabs(d) < 1e-300)
		d = 1e-300;
	d = 1 / d;
	double h = d;
	for (int m = 1; m <= 10000; m++) {
		int m2 = 2 * m;
		double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
		d = 1 + aa * d;
		d = fabs(d) < 1e-300 ? 1e-300 : d;
		c = 1 + aa / c;
		c = fabs(c) < 1e-300 ? 1e-300 : c;
		d = 1 / d;
		h *= d * c;
		aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
		d = 1 + aa * d;
		d = fabs(d) < 1e-300 ? 1e-300 : d;
		c = 1 + aa / c;
		c = fabs(c) < 1e-300 ? 1e-300 : c;
		d = 1 / d;
		double del = d * c;
		h *= del;
		if (fabs(del - 1) < 1e-15)
			break;
	}
	return h;
}

static double betai(double a, double b, double x)
{
	if (x <= 0)
		return 0;
	if (x >= 1)
		return 1;
	double bt = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
	return x < (a + 1) / (a + b + 2) ? bt * betacf(a, b, x) / a : 1 - bt * betacf(b, a, 1 - x) / b;
}

static void closed_form(double t, int b, int r, double *fp, double *fn)
{
	double a = 1.0 / r, bb = b + 1.0;
	double full = a * exp(lgamma(a) + lgamma(bb) - lgamma(a + bb)); /* integral_0^1 */
	double part = full * betai(a, bb, pow(t, r));
	*fp = t - part;
	*fn = full - part;
}

static double objective(double t, int b, int r)
{
	double fp, fn;
	closed_form(t, b, r, &fp, &fn);
	return 0.5 * fp + 0.5 * fn;
}

static void test_params(void)
{
	/* what datasketch 2.0.0 picks (_optimal_param(t, n, 0.5, 0.5), scipy quad) */
	static const struct { int np; double t; int b, r; } ds[] = {
		{ 128, 0.5, 25, 5 }, { 128, 0.7, 14, 9 }, { 128, 0.8, 9, 13 }, { 128, 0.85, 8, 16 },
		{ 128, 0.9, 5, 25 }, { 128, 0.95, 3, 42 }, { 64, 0.5, 14, 4 }, { 64, 0.8, 5, 11 },
		{ 64, 0.9, 3, 21 }, { 256, 0.7, 25, 10 }, { 256, 0.8, 17, 15 }, { 256, 0.9, 9, 28 },
	};
	int agree = 0;
	for (size_t i = 0; i < LMT_ARRAY_SIZE(ds); i++) {
		int b, r;
		lmt_lsh_params(ds[i].t, ds[i].np, 0.5, 0.5, &b, &r);
		if (b == ds[i].b && r == ds[i].r)
			agree++;
		else
			tap_diag("  t=%g num_perm=%d: lmt (%d, %d), datasketch (%d, %d)", ds[i].t, ds[i].np, b, r,
				 ds[i].b, ds[i].r);
	}
	tap_ok(agree == (int)LMT_ARRAY_SIZE(ds), "bands and rows equal datasketch's in %d of %zu cases", agree,
	       LMT_ARRAY_SIZE(ds));

	/* an independent minimisation over the closed form; where the argmins differ,
	 * the objective values must be within 1e-9 (a tie the library's quadrature,
	 * accurate to about 1e-10 here, cannot separate) */
	const double ts[] = { 0.3, 0.5, 0.6, 0.75, 0.8, 0.85, 0.92, 0.97 };
	const int nps[] = { 16, 64, 100, 128, 256 };
	for (size_t a = 0; a < LMT_ARRAY_SIZE(ts); a++) {
		for (size_t c = 0; c < LMT_ARRAY_SIZE(nps); c++) {
			double t = ts[a];
			int np = nps[c], b, r, bb = 1, br = 1;
			lmt_lsh_params(t, np, 0.5, 0.5, &b, &r);
			double best = INFINITY;
			for (int x = 1; x <= np; x++)
				for (int y = 1; x * y <= np; y++) {
					double e = objective(t, x, y);
					if (e < best) {
						best = e;
						bb = x;
						br = y;
					}
				}
			double mine = objective(t, b, r);
			if (!tap_ok((b == bb && r == br) || mine - best < 1e-9,
				    "t=%g num_perm=%d: (%d, %d), independent minimum (%d, %d)", t, np, b, r, bb, br))
				tap_diag("  objective %.12f vs %.12f", mine, best);
		}
	}
	double fp = lmt_lsh_false_positive(0.8, 9, 13), fn = lmt_lsh_false_negative(0.8, 9, 13);
	double ofp = 0, ofn = 0;
	for (int k = 0; k < 100000; k++) {
		double s = (k + 0.5) * 0.8 / 100000;
		ofp += (1 - pow(1 - pow(s, 13), 9)) * 0.8 / 100000;
		s = 0.8 + (k + 0.5) * 0.2 / 100000;
		ofn += pow(1 - pow(s, 13), 9) * 0.2 / 100000;
	}
	double cfp, cfn;
	closed_form(0.8, 9, 13, &cfp, &cfn);
	tap_ok(fabs(fp - ofp) < 1e-8 && fabs(fn - ofn) < 1e-8, "FP and FN integrals (b=9, r=13) within 1e-8 of "
	       "a 1e5-step midpoint rule: %.9f %.9f", fp, fn);
	tap_ok(fabs(fp - cfp) < 1e-9 && fabs(fn - cfn) < 1e-9, "and within 1e-9 of the closed form: %.9f %.9f",
	       cfp, cfn);
}

/* ---- the S-curve on planted pairs ---- */

/* Two documents of distinct random words whose word sets (shingles of 1 word)
 * have Jaccard similarity exactly k/u: k common words, u - k split between them. */
static void make_pair(uint64_t *seed, int u, int k, char *a, char *b)
{
	char w[24];
	a[0] = b[0] = 0;
	for (int i = 0; i < u; i++) {
		snprintf(w, sizeof w, "w%016llx ", (unsigned long long)lmt_mix64((*seed)++));
		if (i < k) {
			strcat(a, w);
			strcat(b, w);
		} else if ((i - k) % 2 == 0) {
			strcat(a, w);
		} else {
			strcat(b, w);
		}
	}
}

struct signer {
	uint64_t *w, *sh, *mins;
	size_t wcap, shcap;
};

static void sign_text(const struct lmt_minhash *m, struct signer *s, const char *text, uint32_t *sig)
{
	size_t nw = 0;
	LMT_ASSERT(lmt_word_hashes(text, strlen(text), &s->w, &s->wcap, &nw) == 0);
	LMT_ASSERT(LMT_GROW(s->sh, s->shcap, nw + 1) == 0);
	size_t n = lmt_shingles(s->w, nw, m->ngram, s->sh);
	lmt_minhash_sign(m, s->sh, n, sig, s->mins);
}

static int share_band(const uint32_t *x, const uint32_t *y, int b, int r)
{
	for (int k = 0; k < b; k++)
		if (lmt_lsh_band_key(x, k, r) == lmt_lsh_band_key(y, k, r))
			return 1;
	return 0;
}

static void test_scurve(void)
{
	const int NP = 128, PAIRS = 200, U = 200;
	const double T = 0.8;
	struct lmt_minhash m;
	struct lmt_err err;
	lmt_minhash_init(&m, NP, 1, 11, &err);
	int b, r;
	lmt_lsh_params(T, NP, 0.5, 0.5, &b, &r);
	struct signer sg = { 0 };
	sg.mins = malloc((size_t)m.npad * sizeof *sg.mins);
	char *ta = malloc(U * 24), *tb = malloc(U * 24);
	uint32_t sa[128], sb[128];
	uint64_t seed = 1000;
	double exp_tp = 0, exp_fp = 0, obs_tp = 0, obs_fp = 0, npos = 0;
	tap_diag("S-curve, b=%d r=%d, %d pairs a bucket; tolerance 4 standard errors sqrt(p(1-p)/n)", b, r, PAIRS);
	for (int step = 0; step <= 10; step++) {
		double s = 0.5 + 0.05 * step;
		int k = (int)lround(s * U), hits = 0;
		double est = 0;
		for (int p = 0; p < PAIRS; p++) {
			make_pair(&seed, U, k, ta, tb);
			sign_text(&m, &sg, ta, sa);
			sign_text(&m, &sg, tb, sb);
			hits += share_band(sa, sb, b, r);
			est += lmt_minhash_similarity(sa, sb, NP);
		}
		double pexp = lmt_lsh_probability(s, b, r), rate = (double)hits / PAIRS;
		double se = sqrt(pexp * (1 - pexp) / PAIRS);
		if (!tap_ok(fabs(rate - pexp) <= 4 * se, "J=%.2f: found %d of %d (%.3f), S-curve %.3f +- %.3f",
			    s, hits, PAIRS, rate, pexp, 4 * se))
			tap_diag("  outside the tolerance");
		/* the estimate: mean of PAIRS estimates, each with variance s(1-s)/NP */
		double mse = sqrt(s * (1 - s) / NP / PAIRS);
		tap_ok(fabs(est / PAIRS - s) <= 4 * mse + 1e-12, "J=%.2f: mean estimated similarity %.4f (tolerance %.4f)",
		       s, est / PAIRS, 4 * mse);
		if (s >= T - 1e-9) {
			exp_tp += pexp;
			obs_tp += rate;
			npos++;
		} else {
			exp_fp += pexp;
			obs_fp += rate;
		}
	}
	/* recall and precision over the buckets, against what the S-curve predicts;
	 * tolerance: 4 standard errors of the pooled counts */
	double rec = obs_tp / npos, erec = exp_tp / npos;
	double prec = obs_tp / (obs_tp + obs_fp), eprec = exp_tp / (exp_tp + exp_fp);
	double serec = sqrt(erec * (1 - erec) / (npos * PAIRS));
	tap_ok(fabs(rec - erec) <= 4 * serec, "recall over J >= %.1f: %.3f, predicted %.3f", T, rec, erec);
	tap_ok(fabs(prec - eprec) <= 0.05, "precision: %.3f, predicted %.3f (tolerance 0.05)", prec, eprec);

	/* the same through clustering: exact duplicates always together */
	size_t n = 400;
	struct lmt_sigstore st = { NP, NULL, 0, 0 };
	uint32_t *parent = malloc(n * sizeof *parent);
	LMT_ASSERT(lmt_sigstore_reserve(&st, n) == 0);
	for (size_t i = 0; i < n; i += 2) {
		make_pair(&seed, U, U, ta, tb); /* J = 1: ta and tb hold the same words */
		sign_text(&m, &sg, ta, lmt_sigstore_at(&st, i));
		sign_text(&m, &sg, tb, lmt_sigstore_at(&st, i + 1));
	}
	for (size_t i = 0; i < n; i++)
		parent[i] = (uint32_t)i;
	lmt_lsh_cluster(&st, n, b, r, NULL, 0, parent, &err);
	int together = 0, apart = 0;
	for (size_t i = 0; i < n; i += 2) {
		together += lmt_uf_find(parent, (uint32_t)i + 1) == i;
		apart += lmt_uf_find(parent, (uint32_t)i) == i;
	}
	tap_ok(together == (int)n / 2 && apart == (int)n / 2,
	       "clustering: every identical pair joined (%d), no pair joined to another (%d)", together, apart);
	lmt_sigstore_release(&st);
	free(parent);
	free(ta);
	free(tb);
	free(sg.w);
	free(sg.sh);
	free(sg.mins);
	lmt_minhash_release(&m);
}

/* ---- the estimator's mean and variance ---- */

/*
 * Sets A and B of known Jaccard similarity J = a/f (a shared elements, f in the
 * union, the rest split between them), fresh random elements and a fresh seed
 * for each of R trials. The estimates' mean must be J, and their mean squared
 * error the variance minhash.h states for OPH with optimal densification:
 *
 *	V(N) = J(1-J)/K^2 * ((K + 2N + N(N-1)/(K-N)) f/(f-1) - K^2/(f-1))
 *
 * averaged over the trials' N (bins empty in both, read from mins), or J(1-J)/K
 * for classic MinHash. Tolerances: 4 standard errors, of the mean (sqrt(V/R)) and
 * of the mean squared error (the standard deviation of the squared errors over
 * sqrt(R), measured), so each check fails by chance with probability about 6e-5.
 * The cases span no empty bins (f = 2000, where V is 0.94 J(1-J)/K) to most bins
 * empty (f = 24, V about 1.36 J(1-J)/K): a densification that borrowed from
 * correlated bins or let empty bins match each other misses the variance or the
 * mean (probing with a linear hash of (bin, attempt) gave 2.4 times V at f = 24;
 * f = 24 and 96 take the donors by rank, f = 300 by walking the orders).
 */
static void variance_case(int method, int f, int a, int R)
{
	const int K = 128;
	const double J = (double)a / f;
	uint64_t *sa = malloc((size_t)f * sizeof *sa), *sb = malloc((size_t)f * sizeof *sb);
	uint64_t ma[128], mb[128], ctr = 0x5eed0000ULL + (uint64_t)f * 1000 + (uint64_t)a;
	uint32_t xa[128], xb[128];
	double sum = 0, sq = 0, sq2 = 0, pred = 0, empty = 0;
	struct lmt_err err;
	for (int t = 0; t < R; t++) {
		struct lmt_minhash m;
		LMT_ASSERT(lmt_minhash_init(&m, K, 5, 1000 + (uint64_t)t, &err) == 0);
		m.method = method;
		size_t na = 0, nb = 0;
		for (int i = 0; i < f; i++) {
			uint64_t h = lmt_mix64(ctr++);
			if (i < a) {
				sa[na++] = h;
				sb[nb++] = h;
			} else if ((i - a) % 2 == 0) {
				sa[na++] = h;
			} else {
				sb[nb++] = h;
			}
		}
		lmt_minhash_sign(&m, sa, na, xa, ma);
		lmt_minhash_sign(&m, sb, nb, xb, mb);
		double e = lmt_minhash_similarity(xa, xb, K) - J;
		sum += e;
		sq += e * e;
		sq2 += e * e * e * e;
		if (method == LMT_MINHASH_METHOD_OPH) {
			int N = 0;
			for (int j = 0; j < K; j++)
				N += ma[j] == LMT_MINHASH_NOBIN && mb[j] == LMT_MINHASH_NOBIN;
			double w = K + 2.0 * N + (double)N * (N - 1) / (K - N);
			pred += J * (1 - J) / ((double)K * K) * (w * f / (f - 1.0) - (double)K * K / (f - 1.0));
			empty += N;
		} else {
			pred += J * (1 - J) / K;
		}
		lmt_minhash_release(&m);
	}
	double mean = sum / R, mse = sq / R, v = pred / R;
	double se_mse = sqrt((sq2 / R - mse * mse) / R);
	const char *name = method == LMT_MINHASH_METHOD_OPH ? "oph" : "classic";
	tap_ok(fabs(mean) <= 4 * sqrt(v / R), "%s, |A u B| = %d, J = %.3f: mean estimate %.4f (tolerance %.4f)",
	       name, f, J, J + mean, 4 * sqrt(v / R));
	tap_ok(fabs(mse - v) <= 4 * se_mse, "%s, |A u B| = %d, J = %.3f: variance %.3g, predicted %.3g (+- %.2g), "
	       "%.2f J(1-J)/K; %.1f bins empty in both", name, f, J, mse, v, 4 * se_mse, mse / (J * (1 - J) / K),
	       empty / R);
	free(sa);
	free(sb);
}

static void test_variance(void)
{
	variance_case(LMT_MINHASH_METHOD_OPH, 2000, 1000, 3000);
	variance_case(LMT_MINHASH_METHOD_OPH, 2000, 1600, 3000);
	variance_case(LMT_MINHASH_METHOD_OPH, 300, 240, 3000);
	variance_case(LMT_MINHASH_METHOD_OPH, 96, 48, 3000);
	variance_case(LMT_MINHASH_METHOD_OPH, 24, 12, 3000);
	variance_case(LMT_MINHASH_METHOD_CLASSIC, 2000, 1000, 1000);
}

/* ---- threads, union-find, sets, tables ---- */

static void test_threads(void)
{
	const int N = 600, NP = 64;
	struct lmt_minhash m;
	struct lmt_err err;
	lmt_minhash_init(&m, NP, 3, 5, &err);
	char **docs = malloc(N * sizeof *docs);
	uint64_t seed = 77;
	for (int i = 0; i < N; i++) {
		docs[i] = malloc(24 * 120 + 1);
		char tmp[24 * 120 + 1];
		make_pair(&seed, 120, 60 + i % 60, docs[i], tmp);
	}
	uint32_t *sig1 = malloc((size_t)N * NP * 4), *sig4 = malloc((size_t)N * NP * 4);
	for (int pass = 0; pass < 2; pass++) {
		uint32_t *out = pass ? sig4 : sig1;
#pragma omp parallel num_threads(pass ? 4 : 1)
		{
			struct signer sg = { 0 };
			sg.mins = malloc((size_t)m.npad * sizeof *sg.mins);
#pragma omp for schedule(dynamic, 3)
			for (int i = 0; i < N; i++)
				sign_text(&m, &sg, docs[i], out + (size_t)i * NP);
			free(sg.w);
			free(sg.sh);
			free(sg.mins);
		}
	}
	tap_ok(!memcmp(sig1, sig4, (size_t)N * NP * 4), "signatures do not depend on the thread count (1 vs 4)");

	/* union-find: the same partition, rooted at the smallest index, in any order */
	uint32_t p1[100], p2[100];
	for (int i = 0; i < 100; i++)
		p1[i] = p2[i] = (uint32_t)i;
	uint32_t pairs[60][2];
	for (int i = 0; i < 60; i++) {
		pairs[i][0] = (uint32_t)(lmt_mix64(seed++) % 100);
		pairs[i][1] = (uint32_t)(lmt_mix64(seed++) % 100);
	}
	for (int i = 0; i < 60; i++)
		lmt_uf_union(p1, pairs[i][0], pairs[i][1]);
	for (int i = 59; i >= 0; i--)
		lmt_uf_union(p2, pairs[i][1], pairs[i][0]);
	int same = 1, minroot = 1;
	for (uint32_t i = 0; i < 100; i++) {
		uint32_t r = lmt_uf_find(p1, i);
		same &= r == lmt_uf_find(p2, i);
		minroot &= r <= i;
	}
	tap_ok(same && minroot, "union-find: order-independent roots, each the smallest member");

	uint64_t x[] = { 5, 1, 3, 3, 9, 1 }, y[] = { 3, 4, 5, 5 };
	size_t nx = 6, ny = 4;
	lmt_u64_sort_unique(x, &nx);
	lmt_u64_sort_unique(y, &ny);
	tap_ok(nx == 4 && ny == 3 && x[0] == 1 && x[3] == 9, "sort and drop repeats");
	tap_ok(fabs(lmt_jaccard_sorted(x, nx, y, ny) - 2.0 / 5) < 1e-15, "exact Jaccard {1,3,5,9} vs {3,4,5} = 2/5");
	tap_ok(lmt_jaccard_sorted(x, 0, y, 0) == 1 && lmt_jaccard_sorted(x, nx, y, 0) == 0, "Jaccard with empty sets");

	struct lmt_u64map map = { 0 };
	int okm = 1;
	for (uint64_t k = 0; k < 5000; k++)
		okm &= lmt_u64map_put(&map, lmt_mix64(k), (uint32_t)k) == 0;
	lmt_u64map_put(&map, lmt_mix64(7), 99); /* keeps the first */
	for (uint64_t k = 0; k < 5000; k++)
		okm &= lmt_u64map_get(&map, lmt_mix64(k)) == k;
	okm &= lmt_u64map_get(&map, 12345) == UINT32_MAX;
	tap_ok(okm && map.n == 5000, "u64 map: 5000 keys, first value kept, absent key");
	lmt_u64map_release(&map);

	struct lmt_lsh_table t;
	lmt_lsh_table_init(&t, 4, 8);
	uint32_t s0[32], s1[32], s2[32];
	for (int j = 0; j < 32; j++) {
		s0[j] = (uint32_t)j;
		s1[j] = (uint32_t)(j + 1000);
		s2[j] = (uint32_t)(j + 2000);
	}
	lmt_lsh_table_add(&t, s0, 0);
	lmt_lsh_table_add(&t, s1, 1);
	s2[17] = s1[17]; /* one value equal: no band */
	uint32_t q1 = lmt_lsh_table_query(&t, s2);
	memcpy(s2 + 16, s1 + 16, 8 * sizeof *s2); /* band 2 equal */
	uint32_t q2 = lmt_lsh_table_query(&t, s2);
	tap_ok(q1 == UINT32_MAX && q2 == 1, "LSH table: a match needs a whole band");
	lmt_lsh_table_release(&t);

	for (int i = 0; i < N; i++)
		free(docs[i]);
	free(docs);
	free(sig1);
	free(sig4);
	lmt_minhash_release(&m);
}

static void test_shingles(void)
{
	uint64_t *w = NULL, sh[16];
	size_t cap = 0, n = 0;
	lmt_word_hashes("a b c d e f", 11, &w, &cap, &n);
	tap_ok(n == 6 && lmt_shingles(w, n, 5, sh) == 2, "6 words: two 5-word shingles");
	uint64_t first = sh[0];
	tap_ok(sh[0] == lmt_ngram_hash(w, 5) && sh[1] == lmt_ngram_hash(w + 1, 5) && sh[0] != sh[1],
	       "each shingle is lmt_ngram_hash of its window");
	size_t n2 = 0;
	lmt_word_hashes("a  b\tc\nd e", 10, &w, &cap, &n2);
	lmt_shingles(w, n2, 5, sh);
	tap_ok(sh[0] == first, "a shingle does not depend on what separates its words");
	/* every window of 0 to 100 words for shingles of 1 to 9 words (the vector
	 * loop takes 8 windows at a time while they fit, the scalar one the rest) */
	int wrong = 0, windows = 0;
	uint64_t words[100], out[100];
	for (size_t k = 0; k < LMT_ARRAY_SIZE(words); k++)
		words[k] = lmt_mix64(k + 1000);
	for (size_t nw = 1; nw <= LMT_ARRAY_SIZE(words); nw++) {
		for (int g = 1; g <= 9; g++) {
			size_t got = lmt_shingles(words, nw, g, out);
			size_t want = nw < (size_t)g ? 1 : nw - (size_t)g + 1;
			wrong += got != want;
			for (size_t i = 0; i < got && got == want; i++, windows++)
				wrong += out[i] != lmt_ngram_hash(words + i, LMT_MIN((size_t)g, nw));
		}
	}
	tap_ok(wrong == 0 && windows > 40000, "every shingle of 1 to 100 words, 1 to 9 words a shingle, is "
	       "lmt_ngram_hash of its window (%d windows, %d wrong)", windows, wrong);
	n = 0;
	lmt_word_hashes("a b c", 5, &w, &cap, &n);
	tap_ok(lmt_shingles(w, n, 5, sh) == 1 && sh[0] == lmt_ngram_hash(w, 3), "fewer words: one shingle of all");
	n = 0;
	lmt_word_hashes("   ", 3, &w, &cap, &n);
	tap_ok(n == 0 && lmt_shingles(w, n, 5, sh) == 0, "no words: no shingles");

	/* a word hashes alike at the end of the text (its last bytes copied) and
	 * with more text after it (read 8 at a time and masked), 1 to 24 bytes */
	int alike = 1;
	for (int l = 1; l <= 24; l++) {
		char t[64];
		uint64_t *w2 = NULL, end_h;
		size_t cap2 = 0, n1 = 0, n3 = 0;
		for (int i = 0; i < l; i++)
			t[i] = (char)('a' + (i * 7 + l) % 26);
		lmt_word_hashes(t, (size_t)l, &w2, &cap2, &n1);
		end_h = w2[0];
		memcpy(t + l, " tail words here, long enough", 30);
		lmt_word_hashes(t, (size_t)l + 29, &w2, &cap2, &n3);
		alike &= n1 == 1 && n3 == 6 && w2[0] == end_h;
		free(w2);
	}
	tap_ok(alike, "a word's hash does not depend on what follows it (1 to 24 bytes)");

	/* texts are split 64 bytes at a time: the same words as
	 * lmt_textnorm_next_word finds, each hashed as a text of its own. Random
	 * pieces: ASCII bytes 1..127 (White_Space and the separators 0x1c..0x1f,
	 * which are not), characters of 2 to 4 bytes (White_Space U+0085, U+00A0,
	 * U+2028, U+3000; U+180E, which is not; letters), and invalid bytes, at every
	 * offset of the 64-byte blocks, texts of 0 to 400 bytes. */
	static const char *const piece[] = {
		" ", "\t", "\n", "\v", "\f", "\r", "\x1c", "\x1f", "\xc2\x85", "\xc2\xa0", "\xe2\x80\xa8",
		"\xe3\x80\x80", "\xe1\xa0\x8e", "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "\x80",
		"\xc3", "\xff", "\xe2\x80",
	};
	int same = 1, runs = 0;
	uint64_t rs = 99, *wa = NULL, *wb = NULL;
	size_t capa = 0, capb = 0;
	for (int len = 0; len <= 400; len++) {
		char t[420];
		size_t tl = 0;
		while (tl < (size_t)len) {
			uint64_t r = lmt_mix64(rs++);
			if (r % 3 == 0) {
				const char *pc = piece[(r >> 8) % LMT_ARRAY_SIZE(piece)];
				size_t pl = strlen(pc);
				if (tl + pl > (size_t)len)
					break;
				memcpy(t + tl, pc, pl);
				tl += pl;
			} else {
				t[tl++] = (char)(1 + (r >> 8) % 127);
			}
		}
		size_t na = 0, pos = 0, st, wl;
		lmt_word_hashes(t, tl, &wa, &capa, &na);
		size_t i = 0;
		while (lmt_textnorm_next_word(t, tl, &pos, &st, &wl)) {
			size_t nb = 0;
			lmt_word_hashes(t + st, wl, &wb, &capb, &nb);
			same &= i < na && nb == 1 && wa[i] == wb[0];
			i++;
		}
		same &= i == na;
		runs += na > 0;
	}
	tap_ok(same && runs > 350, "words split 64 bytes at a time are those of lmt_textnorm_next_word, "
	       "with other scripts, White_Space beyond ASCII and invalid bytes");
	int outside = 0;
	for (uint32_t cp = 0x80; cp <= 0x10ffff; cp++)
		outside += lmt_uni_is_space(cp) && !(cp == 0x85 || cp == 0xa0 || (cp >= 0x1680 && cp <= 0x3000));
	tap_ok(outside == 0, "White_Space beyond ASCII is U+0085, U+00A0 or in U+1680..U+3000, as the "
	       "word splitter's filter assumes (%d outside)", outside);
	free(wa);
	free(wb);
	free(w);
}

/*
 * dedup's second pass hands documents back only if the input is what pass 1 read:
 * it compares a hash of every text as it stands in the file (still escaped, since
 * kept texts in lmt's own escaping are copied through). A file rewritten between
 * the passes with one byte changed, in a plain text, in a text with escapes, or
 * with a document more, must be refused; the same file unchanged must not.
 */
static int ignore_kept(void *ctx, const struct lmt_doc *doc, const char *source, const char *id,
		       struct lmt_err *err)
{
	(void)doc, (void)source, (void)id, (void)err;
	++*(int *)ctx;
	return 0;
}

static int two_passes(const char *path, const char *first, const char *second, int *kept, struct lmt_err *err)
{
	FILE *f = fopen(path, "w");
	if (!f || fputs(first, f) < 0 || fclose(f))
		return lmt_err_set(err, LMT_EIO, "%s: cannot write", path);
	struct lmt_corpus_opts co = { .format = LMT_CORPUS_JSONL };
	struct lmt_dedup_params p = { .threshold = 0.8, .num_perm = 64, .shingle = 3, .seed = 1,
				      .norm = LMT_TEXTNORM_LOWER, .threads = 1, .corpus = &co, .kept_escaped = 1 };
	struct lmt_dedup d;
	struct lmt_dedup_callbacks cb = { .ctx = kept, .kept = ignore_kept };
	const char *in[] = { path };
	int rc = lmt_dedup_init(&d, &p, err);
	if (!rc)
		rc = lmt_dedup_pass1(&d, in, 1, &cb, err);
	if (!rc)
		rc = lmt_dedup_cluster(&d, err);
	if (!rc) {
		f = fopen(path, "w");
		if (!f || fputs(second, f) < 0 || fclose(f))
			rc = lmt_err_set(err, LMT_EIO, "%s: cannot write", path);
		else
			rc = lmt_dedup_pass2(&d, in, 1, &cb, err);
	}
	lmt_dedup_release(&d);
	return rc;
}

static void test_changed_input(void)
{
	char path[] = "/tmp/lmt-test-minhash-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0) {
		tap_ok(0, "mkstemp");
		return;
	}
	close(fd);
	const char *orig = "{\"text\":\"one two three four five six\"}\n"
			   "{\"text\":\"a line\\nand a tab\\there, seven eight\"}\n"
			   "{\"text\":\"caf\\u00e9 au lait, nine ten eleven\"}\n";
	static const struct {
		const char *what, *second;
	} cases[] = {
		{ "one byte of a plain text", "{\"text\":\"one two three four fivE six\"}\n"
					      "{\"text\":\"a line\\nand a tab\\there, seven eight\"}\n"
					      "{\"text\":\"caf\\u00e9 au lait, nine ten eleven\"}\n" },
		{ "an escape of a text kept as escaped (\\t for \\n)",
		  "{\"text\":\"one two three four five six\"}\n"
		  "{\"text\":\"a line\\tand a tab\\there, seven eight\"}\n"
		  "{\"text\":\"caf\\u00e9 au lait, nine ten eleven\"}\n" },
		{ "a \\u escape (e9 for e8)", "{\"text\":\"one two three four five six\"}\n"
					      "{\"text\":\"a line\\nand a tab\\there, seven eight\"}\n"
					      "{\"text\":\"caf\\u00e8 au lait, nine ten eleven\"}\n" },
	};
	struct lmt_err err = { 0 };
	int kept = 0;
	int rc = two_passes(path, orig, orig, &kept, &err);
	tap_ok(rc == 0 && kept == 3, "dedup: the same input twice: both passes agree, 3 documents kept (%d, %s)", kept,
	       rc ? err.msg : "ok");
	for (size_t i = 0; i < LMT_ARRAY_SIZE(cases); i++) {
		struct lmt_err e = { 0 };
		kept = 0;
		rc = two_passes(path, orig, cases[i].second, &kept, &e);
		tap_ok(rc == LMT_EFORMAT && strstr(e.msg, "input changed between the two passes"),
		       "dedup: %s changed between the passes is refused (%s)", cases[i].what, e.msg);
	}
	struct lmt_err e = { 0 };
	char more[512];
	snprintf(more, sizeof more, "%s{\"text\":\"one more\"}\n", orig);
	rc = two_passes(path, orig, more, &kept, &e);
	tap_ok(rc == LMT_EFORMAT && strstr(e.msg, "input changed between the two passes"),
	       "dedup: a document more in pass 2 is refused (%s)", e.msg);
	unlink(path);
}

int main(void)
{
	test_changed_input();
	test_normaliser();
	test_normaliser_kernel();
	test_arith();
	test_params();
	test_shingles();
	test_scurve();
	test_variance();
	test_threads();
	return tap_done();
}
