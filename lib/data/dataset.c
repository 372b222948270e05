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

static int verify_shard_pool(struct lmt_dataset *d, size_t i, struct lmt_workpool *pool, struct lmt_err *err)
{
	struct lmt_shard sh;
	const struct lmt_dataset_shard *s = &d->shards[i];
	int rc = lmt_shard_open_pool(&sh, s->path, 1, pool, err);
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
	if (nt > 1 && d->nshards < (size_t)nt) {
		/* threads would idle: the shards one after another, each in two threads
		 * (a shard has one SHA-256, which one thread must hash in order) */
		struct lmt_workpool *pool = lmt_workpool_new(2);
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
