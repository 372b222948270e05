/*
 * pack.c: the packing pipeline of pack.h.
 *
 * Each split has its own packer (a sequence being filled, its segments, an open
 * shard writer), so documents can arrive in stream order while each split's
 * shards fill at their own pace. Every token of the stream is accounted for: in a
 * sequence, or counted as dropped tail; padding is counted apart.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomicfile.h"
#include "core/digest.h"
#include "core/json.h"
#include "core/jsonseal.h"
#include "core/util.h"
#include "core/version.h"
#include "data/dataset.h"
#include "data/pack.h"
#include "data/tokenizer.h"

#define LMT_PACK_DOCUMENTS "documents.jsonl"

static int oom(struct lmt_err *err)
{
	return lmt_err_set(err, LMT_ENOMEM, "out of memory");
}

/* ---- the dataset directory ---- */

/* out without trailing slashes: its length */
static size_t trimmed_len(const char *out)
{
	size_t ol = strlen(out);
	while (ol > 1 && out[ol - 1] == '/')
		ol--;
	return ol;
}

int lmt_pack_stage(const char *out, int force, char *staging, size_t cap, struct lmt_err *err)
{
	struct stat st;
	int rc;
	if (stat(out, &st) == 0) {
		if (!force)
			return lmt_err_set(err, LMT_EINVAL, "'%s' exists; use --force to replace it", out);
		char mf[PATH_MAX];
		if ((rc = lmt_path_fmt(mf, sizeof mf, err, "%s/manifest.json", out)))
			return rc;
		DIR *dd = S_ISDIR(st.st_mode) ? opendir(out) : NULL;
		int entries = 0;
		struct dirent *de;
		while (dd && (de = readdir(dd)))
			entries += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
		if (dd)
			closedir(dd);
		if (!S_ISDIR(st.st_mode) || (entries && access(mf, F_OK)))
			return lmt_err_set(err, LMT_EINVAL,
				"'%s' is not a dataset (no manifest.json) nor an empty directory; --force replaces only those",
				out);
	}
	if ((rc = lmt_path_fmt(staging, cap, err, "%s.partial-XXXXXX", out)) ||
	    (rc = lmt_path_fmt(staging, cap, err, "%.*s.partial-XXXXXX", (int)trimmed_len(out), out)))
		return rc;
	if (!lmt_mkdtemp(staging)) {
		int e = errno;
		staging[0] = 0;
		return lmt_err_set(err, LMT_EIO, "'%s': cannot create a staging directory: %s", out, strerror(e));
	}
	return 0;
}

int lmt_pack_commit(const char *staging, const char *out, struct lmt_err *err)
{
	struct stat st;
	size_t ol = trimmed_len(out);
	char old[PATH_MAX] = "";
	int rc;
	if (stat(out, &st) == 0) {
		if ((rc = lmt_path_fmt(old, sizeof old, err, "%.*s.old-XXXXXX", (int)ol, out)))
			return rc;
		if (!mkdtemp(old))
			return lmt_err_errno(err, "'%s': cannot move the old dataset aside", out);
		rmdir(old);
		if (rename(out, old))
			return lmt_err_errno(err, "'%s': cannot move the old dataset aside", out);
	}
	if (rename(staging, out)) {
		int e = errno;
		if (old[0])
			rename(old, out);
		return lmt_err_set(err, LMT_EIO, "'%s': cannot rename the new dataset into place: %s", out, strerror(e));
	}
	if (old[0])
		lmt_remove_dir(old);
	struct lmt_err ignored;
	if (lmt_fsync_dir(out, &ignored) == 0) {
		char parent[PATH_MAX];
		if (lmt_path_fmt(parent, sizeof parent, err, "%.*s", (int)ol, out) == 0)
			lmt_fsync_dir(parent, &ignored); /* the directory holding out: fsync_dir takes its dirname */
	}
	return 0;
}

/* ---- packing ---- */

int lmt_pack_init(struct lmt_pack *pk, const struct lmt_pack_params *params, const char *dir,
		  const struct lmt_tokstream_reader *r, struct lmt_err *err)
{
	memset(pk, 0, sizeof *pk);
	pk->p = *params;
	pk->dir = dir;
	pk->token_bytes = r->info.token_bytes;
	pk->add_eos = !params->eos_none && !params->eos_in_stream;
	pk->seqs_per_shard = LMT_MAX(1, params->shard_tokens / ((uint64_t)params->seq_len + 1));
	for (int s = 0; s < 3; s++) {
		pk->S[s].split = s;
		pk->S[s].buf = malloc(((size_t)params->seq_len + 1) * sizeof *pk->S[s].buf);
		if (!pk->S[s].buf)
			return lmt_err_set(err, LMT_ENOMEM, "out of memory for sequences of %u tokens",
					   params->seq_len + 1);
		pk->vocab = r->info.vocab_size;
		if (!(pk->S[s].freq = calloc(pk->vocab ? pk->vocab : 1, sizeof *pk->S[s].freq)))
			return oom(err);
	}
	pk->sources = calloc(r->info.n_sources ? r->info.n_sources : 1, sizeof *pk->sources);
	if (!pk->sources)
		return oom(err);
	return 0;
}

void lmt_pack_release(struct lmt_pack *pk)
{
	for (int s = 0; s < 3; s++) {
		if (pk->S[s].open)
			lmt_shardw_abort(&pk->S[s].w);
		free(pk->S[s].buf);
		free(pk->S[s].segs);
		free(pk->S[s].freq);
	}
	free(pk->sources);
	for (size_t i = 0; i < pk->nshards; i++)
		free(pk->shards[i].chunk_sha);
	free(pk->shards);
	memset(pk, 0, sizeof *pk);
}

static int emit(struct lmt_pack *pk, struct lmt_pack_split *p, struct lmt_err *err)
{
	uint32_t n = pk->p.seq_len + 1;
	int rc;
	if (!p->open) {
		struct lmt_shard_info info = { 0 };
		info.token_bytes = pk->token_bytes;
		info.seq_len = pk->p.seq_len;
		info.split = (uint32_t)p->split;
		info.shard_index = p->shard_no;
		info.pad_id = pk->p.pad_id;
		info.flags = pk->p.pad_mode ? LMT_SHARD_PADDED : LMT_SHARD_PACKED;
		char path[PATH_MAX];
		if ((rc = lmt_path_fmt(path, sizeof path, err, "%s/%s-%05u.lmshard", pk->dir, lmt_split_name(p->split),
				   p->shard_no)) ||
		    (rc = lmt_shardw_open(&p->w, path, &info, err)))
			return rc;
		lmt_shardw_chunks(&p->w, pk->p.chunk_bytes);
		p->open = 1;
	}
	for (uint32_t i = p->fill; i < n; i++)
		p->buf[i] = pk->p.pad_id;
	p->pad_tokens += n - p->fill;
	if ((rc = lmt_shardw_add(&p->w, p->buf, p->segs, p->nseg, err)))
		return rc;
	p->sequences++;
	p->fill = 0;
	p->nseg = 0;
	return 0;
}

static int close_shard(struct lmt_pack *pk, struct lmt_pack_split *p, struct lmt_err *err)
{
	if (!p->open)
		return 0;
	if (LMT_GROW(pk->shards, pk->capshards, pk->nshards + 1))
		return oom(err);
	struct lmt_pack_shard *r = &pk->shards[pk->nshards++];
	memset(r, 0, sizeof *r);
	r->split = p->split;
	snprintf(r->name, sizeof r->name, "%s-%05u.lmshard", lmt_split_name(p->split), p->shard_no);
	r->seqs = p->w.info.n_seqs;
	r->segments = p->w.info.n_segments;
	r->tokens = r->seqs * (pk->p.seq_len + 1);
	p->open = 0;
	int rc = lmt_shardw_finish(&p->w, r->sha, &r->bytes, err);
	if (rc)
		return rc;
	r->chunk_sha = p->w.chunk_sha;
	r->nchunks = p->w.nchunks;
	p->w.chunk_sha = NULL;
	p->shard_no++;
	return 0;
}

static int emit_seq(struct lmt_pack *pk, struct lmt_pack_split *p, struct lmt_err *err)
{
	int rc = emit(pk, p, err);
	if (!rc && p->w.info.n_seqs >= pk->seqs_per_shard)
		rc = close_shard(pk, p, err);
	return rc;
}

static int add_segment(struct lmt_pack_split *p, uint32_t start, uint32_t len, uint64_t doc)
{
	if (p->nseg == p->segcap) {
		uint32_t nc = p->segcap ? p->segcap * 2 : 16;
		struct lmt_segment *s = realloc(p->segs, nc * sizeof *p->segs);
		if (!s)
			return -1;
		p->segs = s;
		p->segcap = nc;
	}
	p->segs[p->nseg++] = (struct lmt_segment){ start, len, doc };
	return 0;
}

/* Append one document's tokens (with a trailing EOS if add_eos). */
static int pack_doc(struct lmt_pack *pk, struct lmt_pack_split *p, const struct lmt_tokstream_reader *r,
		    const struct lmt_tokstream_doc *d, uint64_t docno, struct lmt_err *err)
{
	uint32_t n = pk->p.seq_len + 1, eos = pk->p.eos;
	const int add_eos = pk->add_eos;
	uint64_t total = d->n_tok + (add_eos ? 1 : 0), done = 0;
	int rc;
	if (pk->p.pad_mode && p->fill > 0 && (rc = emit_seq(pk, p, err)))
		return rc;
	while (done < total) {
		uint32_t room = n - p->fill;
		uint64_t take = LMT_MIN((uint64_t)room, total - done);
		for (uint64_t k = 0; k < take; k++) {
			uint64_t t = done + k;
			uint32_t id = t < d->n_tok ? lmt_tokstream_reader_token(r, d->tok_off + t) : eos;
			p->buf[p->fill + k] = id;
			if (id < pk->vocab) /* always: the stream's ids are below its vocab_size */
				p->freq[id]++;
		}
		if (add_segment(p, p->fill, (uint32_t)take, docno))
			return oom(err);
		p->fill += (uint32_t)take;
		done += take;
		if (p->fill == n && (rc = emit_seq(pk, p, err)))
			return rc;
	}
	p->docs++;
	p->doc_tokens += total;
	p->eos_added += add_eos ? 1 : 0;
	return 0;
}

/* Where a document goes: a hash of its tokens and the seed. The document alone
 * decides: not its path, its place in its source, nor the other documents, and
 * copies of one text land in one split. */
int lmt_pack_split_of(const struct lmt_pack_params *o, const struct lmt_tokstream_reader *r,
		      const struct lmt_tokstream_doc *d)
{
	uint64_t h = lmt_mix64(o->seed ^ 0x5b117ULL) ^ d->n_tok;
	for (uint64_t t = 0; t < d->n_tok; t++)
		h = lmt_mix64(h ^ ((uint64_t)lmt_tokstream_reader_token(r, d->tok_off + t) + 0x9e3779b97f4a7c15ULL));
	double u = (double)(lmt_mix64(h) >> 11) * 0x1.0p-53;
	if (u < o->frac[LMT_SPLIT_TEST])
		return LMT_SPLIT_TEST;
	if (u < o->frac[LMT_SPLIT_TEST] + o->frac[LMT_SPLIT_VAL])
		return LMT_SPLIT_VAL;
	return LMT_SPLIT_TRAIN;
}

int lmt_pack_doc(struct lmt_pack *pk, const struct lmt_tokstream_reader *r, uint64_t i, struct lmt_err *err)
{
	struct lmt_tokstream_doc d;
	lmt_tokstream_reader_doc(r, i, &d);
	int s = lmt_pack_split_of(&pk->p, r, &d);
	int rc = pack_doc(pk, &pk->S[s], r, &d, i, err);
	if (rc)
		return rc;
	pk->sources[d.source].docs[s]++;
	pk->sources[d.source].tokens[s] += d.n_tok + (pk->add_eos ? 1 : 0);
	return 0;
}

int lmt_pack_finish(struct lmt_pack *pk, struct lmt_err *err)
{
	int rc;
	for (int s = 0; s < 3; s++) {
		struct lmt_pack_split *p = &pk->S[s];
		if (p->fill > 0) {
			if (pk->p.pad_mode || pk->p.tail_pad) {
				if ((rc = emit_seq(pk, p, err)))
					return rc;
			} else {
				p->tail_dropped += p->fill;
				p->fill = 0;
				p->nseg = 0;
			}
		}
		if ((rc = close_shard(pk, p, err)))
			return rc;
	}
	/* shards sorted: train, val, test, each by index */
	struct lmt_pack_shard *sorted = malloc((pk->nshards ? pk->nshards : 1) * sizeof *sorted);
	if (!sorted)
		return oom(err);
	size_t k = 0;
	for (int s = 0; s < 3; s++)
		for (size_t i = 0; i < pk->nshards; i++)
			if (pk->shards[i].split == s)
				sorted[k++] = pk->shards[i];
	free(pk->shards);
	pk->shards = sorted;
	pk->capshards = pk->nshards ? pk->nshards : 1;
	return 0;
}

/* ---- the manifest ---- */

/* v in decimal at p; the end */
static char *put_dec(char *p, uint64_t v)
{
	char t[20];
	int n = 0;
	do
		t[n++] = (char)('0' + v % 10);
	while ((v /= 10));
	while (n)
		*p++ = t[--n];
	return p;
}

static char *put_str(char *p, const char *s)
{
	size_t n = strlen(s);
	memcpy(p, s, n);
	return p + n;
}

/*
 * documents.jsonl: one line per document of the stream, in stream order (the
 * segments' document numbers index it): its tokens, the bytes of its source text
 * and its source (an index into the manifest's sources). evalppl takes bits per
 * byte from these, so a dataset packed from a pipe, whose stream is gone, has them
 * as one packed from a file does; the manifest records the file's SHA-256.
 */
static int write_documents(const struct lmt_pack *pk, const struct lmt_tokstream_reader *r, uint8_t *sha,
			   uint64_t *bytes, struct lmt_err *err)
{
	/* lines formatted by hand into a buffer, hashed and written a buffer at a
	 * time (snprintf, one hash update and one fwrite a line were a tenth of
	 * packing short documents) */
	enum { CAP = 1 << 16, LINE = 96 };
	char path[PATH_MAX], *buf = malloc(CAP), *p = buf;
	struct lmt_atomicfile af;
	struct lmt_sha256 h;
	int rc = lmt_path_fmt(path, sizeof path, err, "%s/" LMT_PACK_DOCUMENTS, pk->dir);
	if (rc || !buf || lmt_sha256_init(&h)) {
		free(buf);
		return rc ? rc : oom(err);
	}
	if ((rc = lmt_atomicfile_open(&af, path, err))) {
		lmt_sha256_release(&h);
		free(buf);
		return rc;
	}
	*bytes = 0;
	for (uint64_t i = 0; i <= r->info.n_docs; i++) {
		if (i == r->info.n_docs || (size_t)(p - buf) > CAP - LINE) {
			size_t n = (size_t)(p - buf);
			lmt_sha256_update(&h, buf, n);
			*bytes += n;
			if (fwrite(buf, 1, n, af.fp) != n) {
				rc = lmt_err_errno(err, "'%s': write", path);
				lmt_atomicfile_abort(&af);
				lmt_sha256_release(&h);
				free(buf);
				return rc;
			}
			p = buf;
			if (i == r->info.n_docs)
				break;
		}
		struct lmt_tokstream_doc d;
		lmt_tokstream_reader_doc(r, i, &d);
		p = put_dec(put_str(p, "{\"tokens\":"), d.n_tok);
		p = put_dec(put_str(p, ",\"bytes\":"), d.n_bytes);
		p = put_dec(put_str(p, ",\"source\":"), d.source);
		p = put_str(p, "}\n");
	}
	free(buf);
	lmt_sha256_final(&h, sha);
	return lmt_atomicfile_commit(&af, err);
}

/* -sum p ln p over the split's token frequencies: the cross-entropy, on the split
 * itself, of a model that predicts every token by its frequency there and ignores
 * the context. For the train split it is the unigram baseline a trained model's
 * loss should fall below. Summed in id order, so the same dataset gives the same
 * bits. NaN (null in the manifest) for an empty split. */
static double unigram_nats(const struct lmt_pack *pk, const struct lmt_pack_split *p)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < pk->vocab; i++)
		n += p->freq[i];
	double h = 0;
	for (uint32_t i = 0; i < pk->vocab; i++)
		if (p->freq[i]) {
			double q = (double)p->freq[i] / (double)n;
			h -= q * log(q);
		}
	return n ? h : NAN;
}

static void manifest_splits(struct lmt_json *j, const struct lmt_pack *pk)
{
	lmt_json_obj(j, "splits");
	for (int s = 0; s < 3; s++) {
		const struct lmt_pack_split *p = &pk->S[s];
		lmt_json_obj(j, lmt_split_name(s));
		lmt_json_u64(j, "documents", p->docs);
		lmt_json_u64(j, "sequences", p->sequences);
		lmt_json_u64(j, "tokens", p->sequences * ((uint64_t)pk->p.seq_len + 1));
		lmt_json_u64(j, "document_tokens", p->doc_tokens);
		lmt_json_u64(j, "eos_added", p->eos_added);
		lmt_json_u64(j, "pad_tokens", p->pad_tokens);
		lmt_json_u64(j, "tail_dropped", p->tail_dropped);
		lmt_json_u64(j, "shards", p->shard_no);
		lmt_json_num(j, "unigram_nats_per_token", unigram_nats(pk, p)); /* null when empty */
		lmt_json_obj_end(j);
	}
	lmt_json_obj_end(j);
}

static void manifest_lists(struct lmt_json *j, const struct lmt_pack *pk, const struct lmt_tokstream_reader *r)
{
	char hex[LMT_SHA256_HEX];
	lmt_json_arr(j, "shards");
	for (size_t i = 0; i < pk->nshards; i++) {
		const struct lmt_pack_shard *s = &pk->shards[i];
		lmt_json_obj(j, NULL);
		lmt_json_str(j, "split", lmt_split_name(s->split));
		lmt_json_str(j, "path", s->name);
		lmt_json_u64(j, "bytes", s->bytes);
		lmt_json_u64(j, "tokens", s->tokens);
		lmt_json_u64(j, "sequences", s->seqs);
		lmt_json_u64(j, "segments", s->segments);
		lmt_json_str(j, "payload_sha256", lmt_sha256_hex(s->sha, hex));
		if (pk->p.chunk_bytes) {
			lmt_json_u64(j, "chunk_bytes", pk->p.chunk_bytes);
			lmt_json_arr(j, "chunk_sha256");
			for (size_t k = 0; k < s->nchunks; k++)
				lmt_json_str(j, NULL, lmt_sha256_hex(s->chunk_sha + k * LMT_SHA256_LEN, hex));
			lmt_json_arr_end(j);
		}
		lmt_json_obj_end(j);
	}
	lmt_json_arr_end(j);
	lmt_json_arr(j, "sources");
	for (uint32_t i = 0; i < r->info.n_sources; i++) {
		lmt_json_obj(j, NULL);
		lmt_json_str(j, "name", r->sources[i]);
		for (int s = 0; s < 3; s++) {
			lmt_json_obj(j, lmt_split_name(s));
			lmt_json_u64(j, "documents", pk->sources[i].docs[s]);
			lmt_json_u64(j, "tokens", pk->sources[i].tokens[s]);
			lmt_json_obj_end(j);
		}
		lmt_json_obj_end(j);
	}
	lmt_json_arr_end(j);
}

int lmt_pack_write_manifest(const struct lmt_pack *pk, const struct lmt_tokstream_reader *r,
			    const struct lmt_pack_input *in, struct lmt_err *err)
{
	const struct lmt_pack_params *o = &pk->p;
	uint32_t eos = pk->add_eos || o->eos_in_stream ? o->eos : LMT_NO_TOKEN;
	struct lmt_json j;
	char hex[LMT_SHA256_HEX];
	uint8_t docs_sha[LMT_SHA256_LEN];
	uint64_t docs_bytes = 0;
	int rc = write_documents(pk, r, docs_sha, &docs_bytes, err);
	if (rc)
		return rc;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "schema", "lmt-dataset");
	lmt_json_u64(&j, "schema_version", LMT_DATASET_SCHEMA);
	lmt_json_str(&j, "tool", in->tool);
	lmt_json_str(&j, "tool_version", LMT_VERSION);
	lmt_json_str(&j, "revision", lmt_revision());
	lmt_json_obj(&j, "input");
	lmt_json_str(&j, "path", in->path);
	lmt_json_str(&j, "sha256", lmt_sha256_hex(in->sha256, hex));
	lmt_json_u64(&j, "documents", r->info.n_docs);
	lmt_json_u64(&j, "tokens", r->info.n_tokens);
	lmt_json_u64(&j, "text_bytes", r->info.text_bytes);
	lmt_json_bool(&j, "eos_in_stream", o->eos_in_stream);
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "documents");
	lmt_json_str(&j, "path", LMT_PACK_DOCUMENTS);
	lmt_json_u64(&j, "count", r->info.n_docs);
	lmt_json_str(&j, "sha256", lmt_sha256_hex(docs_sha, hex));
	lmt_json_u64(&j, "bytes", docs_bytes);
	lmt_json_obj_end(&j);
	lmt_json_str(&j, "tokenizer_sha256", lmt_sha256_hex(r->info.tokenizer_sha256, hex));
	lmt_json_u64(&j, "vocab_size", r->info.vocab_size);
	lmt_json_u64(&j, "token_bytes", r->info.token_bytes);
	lmt_json_u64(&j, "seq_len", o->seq_len);
	lmt_json_obj(&j, "packing");
	lmt_json_str(&j, "mode", o->pad_mode ? "pad" : "pack");
	lmt_json_str(&j, "tail", o->pad_mode ? "pad" : o->tail_pad ? "pad" : "drop");
	lmt_json_str(&j, "eos", o->eos_none ? "none" : "add");
	if (eos != LMT_NO_TOKEN)
		lmt_json_u64(&j, "eos_id", eos);
	else
		lmt_json_null(&j, "eos_id");
	lmt_json_u64(&j, "pad_id", o->pad_id);
	lmt_json_u64(&j, "sequence_tokens", (uint64_t)o->seq_len + 1);
	lmt_json_str(&j, "overlap", "none");
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "split");
	lmt_json_str(&j, "rule", "hash(tokens, seed) < fraction, by document");
	lmt_json_u64(&j, "seed", o->seed);
	lmt_json_num(&j, "val", o->frac[LMT_SPLIT_VAL]);
	lmt_json_num(&j, "test", o->frac[LMT_SPLIT_TEST]);
	lmt_json_obj_end(&j);
	manifest_splits(&j, pk);
	manifest_lists(&j, pk, r);
	lmt_jsonseal_add(&j, LMT_DATASET_SEAL); /* last: a checksum of everything above */
	lmt_json_end(&j);
	char path[PATH_MAX];
	if (j.out.oom)
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory writing the manifest");
	else if (!(rc = lmt_path_fmt(path, sizeof path, err, "%s/manifest.json", pk->dir)) &&
		 LMT_GROW(j.out.buf, j.out.cap, j.out.len + 2))
		rc = oom(err);
	if (!rc) {
		j.out.buf[j.out.len++] = '\n';
		rc = lmt_write_file_atomic(path, j.out.buf, j.out.len, err);
	}
	lmt_json_release(&j);
	return rc;
}
