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
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

/* The documents table, if listed: a file of the directory, its SHA-256, lines and
 * size (which manifests written before the size was added do not give). */
static int get_documents(struct lmt_dataset *d, json_t *m, const char *dir, const char *path, struct lmt_err *err)
{
	json_t *dj = json_object_get(m, "documents"), *name = json_object_get(dj, "path"),
	       *sha = json_object_get(dj, "sha256");
	if (!dj)
		return 0;
	const char *n = json_string_value(name);
	d->docs_bytes = UINT64_MAX;
	if (!n || !*n || strchr(n, '/') || !strcmp(n, "..") || !strcmp(n, ".") || !json_is_string(sha) ||
	    lmt_sha256_parse(json_string_value(sha), d->docs_sha256) || get_u64(dj, "count", &d->docs_count) ||
	    (json_object_get(dj, "bytes") && get_u64(dj, "bytes", &d->docs_bytes)))
		return lmt_err_set(err, LMT_EFORMAT, "'%s': documents is incomplete or names no file of the dataset",
				   path);
	size_t pl = strlen(dir) + strlen(n) + 2;
	if (!(d->docs_path = malloc(pl)))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	snprintf(d->docs_path, pl, "%s/%s", dir, n);
	return 0;
}

/* Each split's totals in the manifest against the shards it lists: a manifest that
 * contradicts itself (re-sealed by hand) is refused, not trained on. */
static int check_splits(const struct lmt_dataset *d, json_t *splits, const char *path, struct lmt_err *err)
{
	uint64_t split_tokens[3] = { 0 };
	for (size_t i = 0; i < d->nshards; i++)
		split_tokens[d->shards[i].split] += d->shards[i].tokens;
	for (int k = 0; k < 3; k++) {
		json_t *x = json_object_get(splits, lmt_split_name(k));
		uint64_t seqs, tokens, shards, held = split_tokens[k];
		if (get_u64(x, "sequences", &seqs) || get_u64(x, "tokens", &tokens) || get_u64(x, "shards", &shards))
			return lmt_err_set(err, LMT_EFORMAT, "'%s': splits.%s is missing or incomplete", path,
					   lmt_split_name(k));
		if (seqs != d->split_seqs[k] || tokens != held || shards != d->split_shards[k])
			return lmt_err_set(err, LMT_EFORMAT,
					   "'%s': splits.%s says %llu sequences, %llu tokens in %llu shards; the shards it "
					   "lists hold %llu, %llu in %u (the manifest contradicts itself)",
					   path, lmt_split_name(k), (unsigned long long)seqs, (unsigned long long)tokens,
					   (unsigned long long)shards, (unsigned long long)d->split_seqs[k],
					   (unsigned long long)held, d->split_shards[k]);
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
	if (stat(dir, &st) != 0)
		return lmt_err_errno(err, "'%s': cannot open the dataset directory", dir);
	if (!S_ISDIR(st.st_mode))
		return lmt_err_set(err, LMT_EFORMAT, "'%s' is a file, not a dataset directory (shard-pack writes one)", dir);
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
	if ((rc = check_splits(d, json_object_get(m, "splits"), path, err)))
		goto out;
	rc = get_documents(d, m, dir, path, err);
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
	free(d->docs_path);
	free(d->dir);
	pthread_mutex_destroy(&d->mu);
	memset(d, 0, sizeof *d);
}

/* A mapped shard file's size and its header's payload SHA-256 against what the
 * manifest says of the shard. */
static int check_file(const struct lmt_dataset_shard *s, const struct lmt_binreader *f, struct lmt_err *err)
{
	char a[LMT_SHA256_HEX], b[LMT_SHA256_HEX];
	if (f->size != s->bytes)
		return lmt_err_set(err, LMT_EFORMAT, "'%s': %zu bytes, the manifest says %llu", s->path, f->size,
				   (unsigned long long)s->bytes);
	if (!LMT_FUZZING && memcmp(f->hdr.payload_sha256, s->sha256, 32)) /* LMT_FUZZING: skipped in the fuzz build */
		return lmt_err_set(err, LMT_ECHECKSUM, "'%s': payload sha256 %s, the manifest says %s", s->path,
				   lmt_sha256_hex(f->hdr.payload_sha256, a), lmt_sha256_hex(s->sha256, b));
	return 0;
}

/* A shard's fields against the manifest. */
static int check_fields(const struct lmt_dataset *d, const struct lmt_dataset_shard *s, const struct lmt_shard *sh,
			struct lmt_err *err)
{
	if (sh->info.pad_id != d->pad_id)
		return lmt_err_set(err, LMT_EFORMAT, "'%s': pad id %u, the manifest says %u", s->path, sh->info.pad_id,
				   d->pad_id);
	if (sh->info.shard_index != s->index)
		return lmt_err_set(err, LMT_EFORMAT, "'%s': shard %u of its split, the manifest lists it as %u", s->path,
				   sh->info.shard_index, s->index);
	if (sh->info.n_seqs != s->seqs || sh->info.n_segments != s->segments || sh->info.seq_len != d->seq_len ||
	    sh->info.token_bytes != d->token_bytes || (int)sh->info.split != s->split)
		return lmt_err_set(err, LMT_EFORMAT,
			"'%s': %llu sequences of %u tokens, %llu segments, %u-byte tokens (%s); the manifest says "
			"%llu of %u, %llu segments, %u-byte tokens (%s)", s->path,
			(unsigned long long)sh->info.n_seqs, sh->info.seq_len + 1, (unsigned long long)sh->info.n_segments,
			sh->info.token_bytes, lmt_split_name((int)sh->info.split), (unsigned long long)s->seqs,
			d->seq_len + 1, (unsigned long long)s->segments, d->token_bytes, lmt_split_name(s->split));
	return 0;
}

/* The checks of a mapped shard against what the manifest says about it. */
static int check_against(const struct lmt_dataset *d, const struct lmt_dataset_shard *s,
			 const struct lmt_shard *sh, struct lmt_err *err)
{
	int rc = check_file(s, &sh->f, err);
	return rc ? rc : check_fields(d, s, sh, err);
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

/* ---- verification: the shards' payloads and the documents table, hashed in
 * pieces by the threads of a work pool ---- */

/* at most this much payload, or this many shards, mapped at once */
#define WINDOW_BYTES (1ull << 30)
#define WINDOW_SHARDS 64

/* One file being verified: a shard (its payload in the manifest's chunks, or
 * whole against its header where the manifest lists none) or, with s NULL, the
 * documents table (whole, mapped). */
struct vfile {
	const struct lmt_dataset_shard *s;
	struct lmt_binreader f;
	int mapped;
	const uint8_t *want;     /* npieces digests */
	uint64_t piece, npieces; /* bytes a piece (the last one shorter) */
	uint64_t bad;            /* the first piece whose digest differs (UINT64_MAX: none) */
	uint64_t lines, size;    /* the documents table's */
	uint8_t got[LMT_SHA256_LEN];
	int failed;              /* err says what is wrong */
	struct lmt_err err;
};

struct vitem {
	uint32_t file;
	uint64_t piece;
};

struct vjob {
	const struct lmt_dataset *d;
	struct vfile *F;
	const struct vitem *it;
};

/* Newlines in p[0, n). */
static uint64_t count_lines(const unsigned char *p, size_t n)
{
	uint64_t k = 0;
	size_t i = 0;
#if defined(__SSE2__)
	const __m128i nl = _mm_set1_epi8('\n');
	for (; i + 16 <= n; i += 16)
		k += (uint64_t)__builtin_popcount((unsigned)_mm_movemask_epi8(
			_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + i)), nl)));
#endif
	for (; i < n; i++)
		k += p[i] == '\n';
	return k;
}

/* The documents table: its size, then its SHA-256 and its lines, a mapped MiB at a
 * time (so the count reads what the hash has just brought into the cache). */
static void hash_documents(const struct lmt_dataset *d, struct vfile *v)
{
	struct lmt_sha256 h;
	struct stat st;
	const unsigned char *p = NULL;
	int fd = open(d->docs_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0 ||
	    (st.st_size && (p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED)) {
		lmt_err_errno(&v->err, "'%s'", d->docs_path);
		v->failed = 1;
		if (fd >= 0)
			close(fd);
		return;
	}
	close(fd);
	size_t n = (size_t)st.st_size;
	v->size = n;
	if (d->docs_bytes != UINT64_MAX && n != d->docs_bytes) {
		/* cut short or grown: no need to hash it to know */
		lmt_err_set(&v->err, LMT_EFORMAT, "'%s': %zu bytes, the manifest says %llu", d->docs_path, n,
			    (unsigned long long)d->docs_bytes);
		v->failed = 1;
	} else if (lmt_sha256_init(&h)) {
		lmt_err_set(&v->err, LMT_ENOMEM, "out of memory");
		v->failed = 1;
	} else {
		for (size_t off = 0; off < n; off += 1u << 20) {
			size_t k = n - off < (1u << 20) ? n - off : 1u << 20;
			lmt_sha256_update(&h, p + off, k);
			v->lines += count_lines(p + off, k);
		}
		lmt_sha256_final(&h, v->got);
	}
	if (n)
		munmap((void *)p, n);
}

/* Piece k of v: its offset in the payload, and its length in *n (the last is shorter). */
static uint64_t piece_span(const struct vfile *v, uint64_t k, uint64_t *n)
{
	uint64_t off = k * v->piece;
	*n = v->f.payload_size - off < v->piece ? v->f.payload_size - off : v->piece;
	return off;
}

static void verify_item(void *ctx, size_t item, int worker)
{
	struct vjob *J = ctx;
	const struct vitem *x = &J->it[item];
	struct vfile *v = &J->F[x->file];
	(void)worker;
	if (!v->s) {
		hash_documents(J->d, v);
		return;
	}
	uint64_t n, off = piece_span(v, x->piece, &n);
	uint8_t got[LMT_SHA256_LEN];
	lmt_sha256(v->f.payload + off, (size_t)n, got);
	/* unmapping an 80 MB shard took 4 ms on one thread after the hashing */
	lmt_binreader_drop(&v->f, v->f.payload + off, (size_t)n);
	if (!LMT_FUZZING && memcmp(got, v->want + x->piece * LMT_SHA256_LEN, LMT_SHA256_LEN)) { /* LMT_FUZZING: skipped in the fuzz build */
		uint64_t b = __atomic_load_n(&v->bad, __ATOMIC_RELAXED);
		while (x->piece < b && !__atomic_compare_exchange_n(&v->bad, &b, x->piece, 0, __ATOMIC_RELAXED,
								    __ATOMIC_RELAXED))
			;
	}
}

/* Map shard s and check what can be checked before hashing: its header (by the
 * reader), its size and the header's payload SHA-256 against the manifest
 * (check_file), the number of chunks. 0, or v->failed set. */
static int open_vfile(struct vfile *v, const struct lmt_dataset_shard *s)
{
	memset(v, 0, sizeof *v);
	v->s = s;
	v->bad = UINT64_MAX;
	if (lmt_binreader_open(&v->f, s->path, &lmt_format_shard, 0, &v->err))
		return v->failed = 1;
	v->mapped = 1;
	uint64_t n = v->f.payload_size;
	if (check_file(s, &v->f, &v->err))
		return v->failed = 1;
	if (!s->chunk_bytes) {
		/* the whole payload, one piece, against the header's digest */
		v->piece = n ? n : 1;
		v->npieces = 1;
		v->want = v->f.hdr.payload_sha256;
		return 0;
	}
	uint64_t nch = n ? (n - 1) / s->chunk_bytes + 1 : 0;
	if (nch != s->nchunks) {
		lmt_err_set(&v->err, LMT_EFORMAT, "'%s': %llu payload bytes are %llu chunks of %llu, the manifest lists %zu",
			    s->path, (unsigned long long)n, (unsigned long long)nch, (unsigned long long)s->chunk_bytes,
			    s->nchunks);
		return v->failed = 1;
	}
	v->piece = s->chunk_bytes;
	v->npieces = nch;
	v->want = s->chunk_sha;
	return 0;
}

/* After hashing: a bad piece, then the shard's fields against the manifest; the
 * shard unmapped. */
static void finish_vfile(const struct lmt_dataset *d, struct vfile *v)
{
	char a[LMT_SHA256_HEX], b[LMT_SHA256_HEX];
	const struct lmt_dataset_shard *s = v->s;
	if (!v->failed && v->bad != UINT64_MAX) {
		uint64_t n, off = piece_span(v, v->bad, &n);
		uint8_t got[LMT_SHA256_LEN];
		lmt_sha256(v->f.payload + off, (size_t)n, got);
		if (s->chunk_bytes)
			lmt_err_set(&v->err, LMT_ECHECKSUM,
				    "'%s': payload sha256 of bytes %llu-%llu (chunk %llu of %llu) is %s, the manifest says %s",
				    s->path, (unsigned long long)off, (unsigned long long)(off + n - 1),
				    (unsigned long long)v->bad + 1, (unsigned long long)v->npieces, lmt_sha256_hex(got, a),
				    lmt_sha256_hex(v->want + v->bad * LMT_SHA256_LEN, b));
		else
			lmt_err_set(&v->err, LMT_ECHECKSUM,
				    "'%s': payload sha256 %s does not match the header's %s (payload corrupted)", s->path,
				    lmt_sha256_hex(got, a), lmt_sha256_hex(v->want, b));
		v->failed = 1;
	}
	if (!v->failed) {
		struct lmt_shard sh;
		v->mapped = 0; /* the shard owns the mapping now (adopt closes it on failure) */
		v->failed = lmt_shard_adopt(&sh, &v->f, &v->err) || check_fields(d, s, &sh, &v->err);
		lmt_shard_close(&sh);
	}
	if (v->mapped)
		lmt_binreader_close(&v->f);
	v->mapped = 0;
}

/*
 * Verify shards [lo, hi) of d into F[0..hi - lo) (and, with docs, the documents
 * table into F[hi - lo]), a window of them mapped at a time: every piece of every
 * mapped file is an item of one run, the documents table first, so the threads
 * stay busy across shard boundaries and on datasets of one shard.
 */
static int verify_files(const struct lmt_dataset *d, struct lmt_workpool *pool, struct vfile *F, size_t lo, size_t hi,
			int docs, struct lmt_err *err)
{
	struct vitem *it = NULL;
	size_t cap = 0, base = lo;
	while (lo < hi || docs) {
		size_t n = 0, w = lo;
		if (docs) {
			struct vfile *v = &F[hi - base];
			memset(v, 0, sizeof *v);
			if (LMT_GROW(it, cap, 1))
				goto oom;
			it[n++] = (struct vitem){ (uint32_t)(hi - base), 0 };
			docs = 0;
		}
		for (uint64_t bytes = 0; w < hi && w - lo < WINDOW_SHARDS && bytes < WINDOW_BYTES; w++) {
			struct vfile *v = &F[w - base];
			if (open_vfile(v, &d->shards[w]))
				continue;
			bytes += v->f.payload_size;
			if (LMT_GROW(it, cap, n + v->npieces))
				goto oom;
			for (uint64_t k = 0; k < v->npieces; k++)
				it[n++] = (struct vitem){ (uint32_t)(w - base), k };
		}
		struct vjob J = { d, F, it };
		lmt_workpool_for(pool, verify_item, &J, n);
		for (size_t i = lo; i < w; i++)
			finish_vfile(d, &F[i - base]);
		lo = w;
	}
	free(it);
	return 0;
oom:
	for (size_t i = lo; i < hi; i++)
		if (F[i - base].mapped)
			lmt_binreader_close(&F[i - base].f);
	free(it);
	return lmt_err_set(err, LMT_ENOMEM, "out of memory");
}

/* The documents table's digest and lines against the manifest's. */
static void finish_documents(const struct lmt_dataset *d, struct vfile *v)
{
	char a[LMT_SHA256_HEX], b[LMT_SHA256_HEX];
	if (v->failed)
		return;
	if (!LMT_FUZZING && memcmp(v->got, d->docs_sha256, LMT_SHA256_LEN)) /* LMT_FUZZING: skipped in the fuzz build */
		lmt_err_set(&v->err, LMT_ECHECKSUM, "'%s': sha256 %s, the manifest says %s", d->docs_path,
			    lmt_sha256_hex(v->got, a), lmt_sha256_hex(d->docs_sha256, b));
	else if (v->lines != d->docs_count)
		lmt_err_set(&v->err, LMT_EFORMAT, "'%s': %llu lines, the manifest counts %llu documents", d->docs_path,
			    (unsigned long long)v->lines, (unsigned long long)d->docs_count);
	else
		return;
	v->failed = 1;
}

int lmt_dataset_verify_shard(struct lmt_dataset *d, size_t i, struct lmt_err *err)
{
	struct vfile *F = calloc(1, sizeof *F);
	if (!F)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	int rc = verify_files(d, NULL, F, i, i + 1, 0, err);
	if (!rc && F[0].failed) {
		*err = F[0].err;
		rc = err->code ? err->code : LMT_EFORMAT;
	}
	free(F);
	return rc;
}

int lmt_dataset_verify(struct lmt_dataset *d, int nt, lmt_dataset_report_fn report, void *ctx,
		       struct lmt_err *err)
{
	size_t nf = d->nshards + (d->docs_path != NULL);
	struct vfile *F = calloc(nf + 1, sizeof *F);
	if (!F)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	struct lmt_workpool *pool = lmt_workpool_new(nt);
	int nbad = verify_files(d, pool, F, 0, d->nshards, d->docs_path != NULL, err);
	lmt_workpool_free(pool);
	if (nbad) {
		free(F);
		return nbad;
	}
	if (d->docs_path) {
		finish_documents(d, &F[d->nshards]);
		if (d->docs_bytes == UINT64_MAX && !F[d->nshards].failed)
			d->docs_bytes = F[d->nshards].size;
	}
	for (size_t i = 0; i < nf; i++) {
		nbad += F[i].failed;
		int rc = report ? report(ctx, i < d->nshards ? d->shards[i].path : d->docs_path,
					 F[i].failed ? &F[i].err : NULL) : 0;
		if (rc < 0) {
			nbad = rc;
			break;
		}
	}
	free(F);
	return nbad;
}
