/*
 * dataset.c: reading and checking a dataset manifest (see dataset.h).
 */
#include "data/dataset.h"
#include "core/workpool.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/atomicfile.h"
#include "core/jsonseal.h"
#include "core/util.h"

int lmt_split_parse(const char *s)
{
	for (int i = 0; i < 3; i++)
		if (!strcmp(s, lmt_split_name(i)))
			return i;
	return -1;
}

static int get_u64(json_t *o, const char *key, uint64_t *v)
{
	json_t *x = json_object_get(o, key);
	if (!json_is_integer(x) || json_integer_value(x) < 0)
		return -1;
	*v = (uint64_t)json_integer_value(x);
	return 0;
}

/* A shard's optional chunk digests: chunk_bytes and chunk_sha256, both or neither. */
static int get_chunks(json_t *x, struct lmt_dataset_shard *s, const char *path, size_t i, struct lmt_err *err)
{
	json_t *cs = json_object_get(x, "chunk_sha256");
	if (!cs && !json_object_get(x, "chunk_bytes"))
		return 0;
	size_t n = json_array_size(cs);
	if (get_u64(x, "chunk_bytes", &s->chunk_bytes) || s->chunk_bytes == 0 || !json_is_array(cs) ||
	    n - 1 > s->bytes / s->chunk_bytes)
		return lmt_err_set(err, LMT_EFORMAT, "'%s': shards[%zu]: chunk_bytes or chunk_sha256 is missing or invalid",
				   path, i);
	if (!(s->chunk_sha = malloc(n * LMT_SHA256_LEN + 1)))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	s->nchunks = n;
	for (size_t k = 0; k < n; k++) {
		json_t *h = json_array_get(cs, k);
		if (!json_is_string(h) || lmt_sha256_parse(json_string_value(h), s->chunk_sha + k * LMT_SHA256_LEN))
			return lmt_err_set(err, LMT_EFORMAT, "'%s': shards[%zu].chunk_sha256[%zu] is not a SHA-256",
					   path, i, k);
	}
	return 0;
}

int lmt_dataset_open(struct lmt_dataset *d, const char *dir, struct lmt_err *err)
{
	memset(d, 0, sizeof *d);
	pthread_mutex_init(&d->mu, NULL);
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/manifest.json", dir);
	struct stat st;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return lmt_err_errno(err, "'%s': not a dataset directory", dir);
	if (stat(path, &st) != 0)
		return lmt_err_set(err, LMT_EFORMAT,
			"'%s': no manifest.json: not a dataset (an interrupted shard-pack leaves none)", dir);
	int rc;
	char *text;
	size_t tn;
	if ((rc = lmt_read_file(path, &text, &tn, err)))
		return rc;
	lmt_sha256(text, tn, d->manifest_sha256);
	json_error_t je;
	json_t *m = json_loadb(text, tn, 0, &je);
	if (!m) {
		free(text);
		return lmt_err_set(err, LMT_EFORMAT, "'%s': line %d: invalid JSON: %s", path, je.line, je.text);
	}
	d->dir = strdup(dir);
	uint64_t seq_len, tb, vocab, pad;
	json_t *packing = json_object_get(m, "packing");
	json_t *tsha = json_object_get(m, "tokenizer_sha256");
	json_t *shards = json_object_get(m, "shards");
	json_t *eos = json_object_get(packing, "eos_id");
	/* no other field is believed before the manifest's own checksum holds */
	static const struct lmt_jsonseal_kind kind = {
		"lmt-dataset", "dataset", "manifest schema version", LMT_DATASET_SCHEMA, LMT_DATASET_SEAL,
		" (an older manifest carries no checksum of itself: pack the dataset again with shard-pack)",
	};
	if ((rc = lmt_jsonseal_check_manifest(text, tn, m, &kind, path, err)))
		goto out;
	if (get_u64(m, "seq_len", &seq_len) || get_u64(m, "token_bytes", &tb) || get_u64(m, "vocab_size", &vocab) ||
	    get_u64(packing, "pad_id", &pad) || !json_is_string(tsha) ||
	    lmt_sha256_parse(json_string_value(tsha), d->tokenizer_sha256) || !json_is_array(shards) ||
	    seq_len == 0 || seq_len >= UINT32_MAX || (tb != 2 && tb != 4) || vocab > UINT32_MAX || pad >= vocab) {
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': missing or invalid field (seq_len, token_bytes, vocab_size, "
				 "packing.pad_id, tokenizer_sha256 or shards)", path);
		goto out;
	}
	d->seq_len = (uint32_t)seq_len;
	d->token_bytes = (uint32_t)tb;
	d->vocab_size = (uint32_t)vocab;
	d->pad_id = (uint32_t)pad;
	d->eos_id = json_is_integer(eos) ? (uint32_t)json_integer_value(eos) : UINT32_MAX;
	d->nshards = json_array_size(shards);
	d->shards = calloc(d->nshards ? d->nshards : 1, sizeof *d->shards);
	if (!d->shards) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < d->nshards; i++) {
		json_t *x = json_array_get(shards, i);
		struct lmt_dataset_shard *s = &d->shards[i];
		json_t *name = json_object_get(x, "path"), *split = json_object_get(x, "split"),
		       *sha = json_object_get(x, "payload_sha256");
		if (!json_is_string(name) || !json_is_string(split) || !json_is_string(sha) ||
		    (s->split = lmt_split_parse(json_string_value(split))) < 0 ||
		    lmt_sha256_parse(json_string_value(sha), s->sha256) || get_u64(x, "bytes", &s->bytes) ||
		    get_u64(x, "tokens", &s->tokens) || get_u64(x, "sequences", &s->seqs) ||
		    get_u64(x, "segments", &s->segments) || strchr(json_string_value(name), '/') ||
		    s->tokens != s->seqs * (seq_len + 1)) {
			rc = lmt_err_set(err, LMT_EFORMAT, "'%s': shards[%zu] is incomplete or inconsistent", path, i);
			goto out;
		}
		if ((rc = get_chunks(x, s, path, i, err)))
			goto out;
		if (i && s->split < d->shards[i - 1].split) {
			rc = lmt_err_set(err, LMT_EFORMAT, "'%s': shards are not listed train, val, test", path);
			goto out;
		}
		s->name = strdup(json_string_value(name));
		size_t pl = strlen(dir) + strlen(s->name) + 2;
		s->path = malloc(pl);
		if (!s->name || !s->path) {
			rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
			goto out;
		}
		snprintf(s->path, pl, "%s/%s", dir, s->name);
		s->index = d->split_shards[s->split]++;
		d->split_seqs[s->split] += s->seqs;
	}
out:
	free(text);
	json_decref(m);
	if (rc)
		lmt_dataset_close(d);
	return rc;
}

void lmt_dataset_close(struct lmt_dataset *d)
{
	for (size_t i = 0; i < d->nshards; i++) {
		if (d->shards[i].open)
			lmt_shard_close(&d->shards[i].sh);
		free(d->shards[i].name);
		free(d->shards[i].path);
		free(d->shards[i].chunk_sha);
	}
	free(d->shards);
	free(d->dir);
	pthread_mutex_destroy(&d->mu);
	memset(d, 0, sizeof *d);
}

/* The checks of a mapped shard against what the manifest says about it. */
static int check_against(const struct lmt_dataset *d, const struct lmt_dataset_shard *s,
			 const struct lmt_shard *sh, struct lmt_err *err)
{
	char a[LMT_SHA256_HEX], b[LMT_SHA256_HEX];
	if (sh->f.size != s->bytes)
		return lmt_err_set(err, LMT_EFORMAT, "'%s': %zu bytes, the manifest says %llu", s->path, sh->f.size,
				   (unsigned long long)s->bytes);
	if (!LMT_FUZZING && memcmp(sh->f.hdr.payload_sha256, s->sha256, 32)) /* LMT_FUZZING: skipped in the fuzz build */
		return lmt_err_set(err, LMT_ECHECKSUM, "'%s': payload sha256 %s, the manifest says %s", s->path,
				   lmt_sha256_hex(sh->f.hdr.payload_sha256, a), lmt_sha256_hex(s->sha256, b));
	if (sh->info.pad_id != d->pad_id)
		return lmt_err_set(err, LMT_EFORMAT, "'%s': pad id %u, the manifest says %u", s->path, sh->info.pad_id,
				   d->pad_id);
	if (sh->info.shard_index != s->index)
		return lmt_err_set(err, LMT_EFORMAT, "'%s': shard %u of its split, the manifest lists it as %u", s->path,
				   sh->info.shard_index, s->index);
	if (sh->info.n_seqs != s->seqs || sh->info.n_segments != s->segments || sh->info.seq_len != d->seq_len ||
	    sh->info.token_bytes != d->token_bytes || (int)sh->info.split != s->split)
		return lmt_err_set(err, LMT_EFORMAT,
			"'%s': %llu sequences of %u tokens (%s), the manifest says %llu of %u (%s)", s->path,
			(unsigned long long)sh->info.n_seqs, sh->info.seq_len + 1, lmt_split_name((int)sh->info.split),
			(unsigned long long)s->seqs, d->seq_len + 1, lmt_split_name(s->split));
	return 0;
}

int lmt_dataset_shard(struct lmt_dataset *d, size_t i, const struct lmt_shard **out, struct lmt_err *err)
{
	struct lmt_dataset_shard *s = &d->shards[i];
	int rc = 0;
	pthread_mutex_lock(&d->mu);
	if (!s->open) {
		rc = lmt_shard_open(&s->sh, s->path, 1, err); /* checked once, when first mapped */
		if (!rc && (rc = check_against(d, s, &s->sh, err)))
			lmt_shard_close(&s->sh);
		s->open = rc == 0;
	}
	pthread_mutex_unlock(&d->mu);
	*out = rc ? NULL : &s->sh;
	return rc;
}

/* Chunk digests checked by the threads of a pool: the first bad chunk is kept. */
struct chunk_job {
	const struct lmt_dataset_shard *s;
	struct lmt_workpool *pool;
	const uint8_t *p;
	uint64_t n;
	uint64_t base;           /* the chunk of item 0 in this run */
	uint64_t bad;            /* the first chunk whose digest differs (UINT64_MAX: none) */
};

static void chunk_item(void *ctx, uint32_t item, int worker)
{
	struct chunk_job *J = ctx;
	uint64_t k = J->base + item, cb = J->s->chunk_bytes, off = k * cb;
	uint8_t d[LMT_SHA256_LEN];
	size_t len = (size_t)(J->n - off < cb ? J->n - off : cb);
	(void)worker;
	lmt_sha256(J->p + off, len, d);
	if (!LMT_FUZZING && memcmp(d, J->s->chunk_sha + k * LMT_SHA256_LEN, LMT_SHA256_LEN)) { /* LMT_FUZZING: skipped in the fuzz build */
		uint64_t b = __atomic_load_n(&J->bad, __ATOMIC_RELAXED);
		while (k < b && !__atomic_compare_exchange_n(&J->bad, &b, k, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
	}
}

/* lmt_shard_check_fn: the payload against the manifest's chunk digests, chunks in
 * parallel. Size and the header's whole-payload SHA-256 first, with the messages
 * check_against gives them. */
static int check_chunks(void *ctx, const struct lmt_binreader *f, struct lmt_err *err)
{
	struct chunk_job *J = ctx;
	const struct lmt_dataset_shard *s = J->s;
	char a[LMT_SHA256_HEX], b[LMT_SHA256_HEX];
	if (f->size != s->bytes)
		return lmt_err_set(err, LMT_EFORMAT, "'%s': %zu bytes, the manifest says %llu", s->path, f->size,
				   (unsigned long long)s->bytes);
	if (!LMT_FUZZING && memcmp(f->hdr.payload_sha256, s->sha256, 32)) /* LMT_FUZZING: skipped in the fuzz build */
		return lmt_err_set(err, LMT_ECHECKSUM, "'%s': payload sha256 %s, the manifest says %s", s->path,
				   lmt_sha256_hex(f->hdr.payload_sha256, a), lmt_sha256_hex(s->sha256, b));
	J->p = f->payload;
	J->n = f->payload_size;
	uint64_t cb = s->chunk_bytes, nch = J->n ? (J->n - 1) / cb + 1 : 0;
	if (nch != s->nchunks)
		return lmt_err_set(err, LMT_EFORMAT, "'%s': %llu payload bytes are %llu chunks of %llu, the manifest lists %zu",
				   s->path, (unsigned long long)J->n, (unsigned long long)nch, (unsigned long long)cb,
				   s->nchunks);
	J->bad = UINT64_MAX;
	for (J->base = 0; J->base < nch && J->bad == UINT64_MAX; J->base += LMT_WORKPOOL_MAX_ITEMS) {
		uint64_t m = nch - J->base;
		lmt_workpool_run(J->pool, chunk_item, J, (uint32_t)(m < LMT_WORKPOOL_MAX_ITEMS ? m : LMT_WORKPOOL_MAX_ITEMS));
	}
	if (J->bad == UINT64_MAX)
		return 0;
	uint64_t off = J->bad * cb, len = J->n - off < cb ? J->n - off : cb;
	uint8_t d[LMT_SHA256_LEN];
	lmt_sha256(J->p + off, (size_t)len, d);
	return lmt_err_set(err, LMT_ECHECKSUM, "'%s': payload sha256 of bytes %llu-%llu (chunk %llu of %llu) is %s, "
			   "the manifest says %s", s->path, (unsigned long long)off, (unsigned long long)(off + len - 1),
			   (unsigned long long)J->bad + 1, (unsigned long long)nch, lmt_sha256_hex(d, a),
			   lmt_sha256_hex(s->chunk_sha + J->bad * LMT_SHA256_LEN, b));
}

static int verify_shard_pool(struct lmt_dataset *d, size_t i, struct lmt_workpool *pool, struct lmt_err *err)
{
	struct lmt_shard sh;
	const struct lmt_dataset_shard *s = &d->shards[i];
	struct chunk_job J = { .s = s, .pool = pool };
	int rc = s->chunk_bytes ? lmt_shard_open_check(&sh, s->path, check_chunks, &J, err)
				: lmt_shard_open_pool(&sh, s->path, 1, pool, err);
	if (rc)
		return rc;
	rc = check_against(d, s, &sh, err);
	lmt_shard_close(&sh);
	return rc;
}

int lmt_dataset_verify_shard(struct lmt_dataset *d, size_t i, struct lmt_err *err)
{
	return verify_shard_pool(d, i, NULL, err);
}

int lmt_dataset_verify(struct lmt_dataset *d, int nt, lmt_dataset_report_fn report, void *ctx,
		       struct lmt_err *err)
{
	struct lmt_err *errs = calloc(d->nshards ? d->nshards : 1, sizeof *errs);
	int *bad = calloc(d->nshards ? d->nshards : 1, sizeof *bad);
	int nbad = 0;
	if (!errs || !bad) {
		nbad = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto out;
	}
	int chunked = 1;
	for (size_t i = 0; i < d->nshards; i++)
		chunked &= d->shards[i].chunk_bytes != 0;
	if (nt > 1 && (chunked || d->nshards < (size_t)nt)) {
		/* the shards one after another, each in nt threads by its chunks or
		 * (fewer shards than threads, and a shard has one SHA-256, which one
		 * thread must hash in order) in two */
		struct lmt_workpool *pool = lmt_workpool_new(chunked ? nt : 2);
		for (size_t i = 0; i < d->nshards; i++)
			bad[i] = verify_shard_pool(d, i, pool, &errs[i]) != 0;
		lmt_workpool_free(pool);
	} else {
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
		for (size_t i = 0; i < d->nshards; i++)
			bad[i] = lmt_dataset_verify_shard(d, i, &errs[i]) != 0;
	}
	for (size_t i = 0; i < d->nshards; i++) {
		nbad += bad[i];
		int rc = report ? report(ctx, &d->shards[i], bad[i] ? &errs[i] : NULL) : 0;
		if (rc < 0) {
			nbad = rc;
			break;
		}
	}
out:
	free(errs);
	free(bad);
	return nbad;
}
