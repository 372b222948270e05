/*
 * fuzz-safetensors.c: the safetensors writer against a reader.
 *
 * lib/ckpt has no safetensors reader (lmt writes safetensors, never reads them), so
 * the untrusted bytes here are the checkpoint the writer reads: a checkpoint
 * directory as fuzz-ckpt.c takes it (fuzz.h's cut: manifest.json with a
 * state.model, then the data files) is opened and verified, and exported by
 * lmt_safetensors_export_gpt2 in a dtype picked by the input's length. Whatever
 * the writer writes is then read back by a strict reader here, the checks of
 * tests/unit/test-safetensors.c's st_load: an 8-byte length N within the file and a
 * multiple of 8, a JSON object of N bytes padded with fewer than 8 spaces, every
 * entry's dtype, shape and data_offsets agreeing, the offsets tiling the buffer
 * exactly; and the result's counts agreeing with the file. Any disagreement aborts.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/safetensors.h"
#include "core/atomicfile.h"
#include "fuzz.h"

static int cmp_u64pair(const void *x, const void *y)
{
	const uint64_t *a = x, *b = y;
	return a[0] < b[0] ? -1 : a[0] > b[0];
}

/* The reader: 0 if the file is well-formed safetensors, else which check failed. */
static int st_check(const uint8_t *d, size_t size, const struct lmt_st_result *r)
{
	if (size < 8 || size != r->bytes)
		return 1;
	uint64_t n = 0;
	for (int i = 7; i >= 0; i--)
		n = n << 8 | d[i];
	if (n > size - 8 || n % 8 || n == 0 || d[8] != '{' || n != r->header_bytes)
		return 2;
	size_t end = 8 + n;
	while (end > 8 && d[end - 1] == ' ')
		end--;
	if (8 + n - end >= 8)
		return 3;
	json_error_t je;
	json_t *h = json_loadb((const char *)d + 8, n, 0, &je), *v;
	if (!json_is_object(h)) {
		json_decref(h);
		return 4;
	}
	uint64_t total = size - 8 - n, (*iv)[2] = calloc(json_object_size(h) + 1, sizeof *iv), elements = 0;
	size_t m = 0;
	int bad = 0;
	const char *k;
	json_object_foreach(h, k, v) {
		if (!strcmp(k, "__metadata__")) {
			const char *mk;
			json_t *mv;
			json_object_foreach(v, mk, mv)
				bad |= !json_is_string(mv);
			continue;
		}
		const char *dt = json_string_value(json_object_get(v, "dtype"));
		json_t *sh = json_object_get(v, "shape"), *of = json_object_get(v, "data_offsets"), *x;
		int es = !dt ? 0 : !strcmp(dt, "F32") ? 4 : !strcmp(dt, "BF16") || !strcmp(dt, "F16") ? 2 : 0;
		uint64_t numel = 1;
		size_t i;
		json_array_foreach(sh, i, x)
			numel *= (uint64_t)json_integer_value(x);
		uint64_t a = (uint64_t)json_integer_value(json_array_get(of, 0)),
			 b = (uint64_t)json_integer_value(json_array_get(of, 1));
		if (!es || !json_is_array(sh) || json_array_size(of) != 2 || b < a || b - a != numel * (uint64_t)es) {
			bad = 1;
			continue;
		}
		iv[m][0] = a;
		iv[m][1] = b;
		m++;
		elements += numel;
	}
	qsort(iv, m, sizeof *iv, cmp_u64pair);
	uint64_t at = 0;
	for (size_t i = 0; i < m; i++) {
		bad |= iv[i][0] != at;
		at = iv[i][1];
	}
	bad |= at != total || (int)m != r->tensors || elements != r->elements;
	free(iv);
	json_decref(h);
	return bad ? 5 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lmt_ckpt c;
	struct lmt_err err;
	fuzz_dir_write(data, size, "manifest.json");
	/* verify: the data files are there and of the sizes the manifest gives, so the
	 * tensors the writer holds are no larger than the input */
	if (lmt_ckpt_open(&c, fuzz_dir(), 1, &err))
		return 0;
	char st[512], cfg[512];
	snprintf(st, sizeof st, "%s/out.safetensors", fuzz_dir());
	snprintf(cfg, sizeof cfg, "%s/out-config.json", fuzz_dir());
	struct lmt_st_opts o = { .path = st, .config_path = cfg, .dtype = (int)(size % 3), .bos_id = -1, .eos_id = 0 };
	struct lmt_st_result r;
	if (!lmt_safetensors_export_gpt2(&c, &o, &r, &err)) {
		char *d;
		size_t n;
		if (lmt_read_file(st, &d, &n, &err))
			abort();
		int why = st_check((const uint8_t *)d, n, &r);
		if (why) {
			fprintf(stderr, "fuzz-safetensors: the written file fails check %d\n", why);
			abort();
		}
		free(d);
		json_error_t je;
		json_t *j = json_load_file(cfg, 0, &je);
		if (!json_is_object(j))
			abort(); /* config.json is JSON */
		json_decref(j);
	}
	lmt_ckpt_close(&c);
	return 0;
}
