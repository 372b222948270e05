/*
 * shard.c: writing and reading shards (see shard.h).
 */
#include "data/shard.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"

const char *lmt_split_name(int split)
{
	switch (split) {
	case LMT_SPLIT_TRAIN: return "train";
	case LMT_SPLIT_VAL: return "val";
	case LMT_SPLIT_TEST: return "test";
	}
	return "?";
}

int lmt_shardw_open(struct lmt_shardw *w, const char *path, const struct lmt_shard_info *info,
		    struct lmt_err *err)
{
	memset(w, 0, sizeof *w);
	w->info = *info;
	w->info.n_seqs = w->info.n_segments = 0;
	if (info->token_bytes != 2 && info->token_bytes != 4)
		return lmt_err_set(err, LMT_EINVAL, "token width %u (expected 2 or 4)", info->token_bytes);
	if (LMT_GROW(w->seg_index, w->si_cap, 1))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	w->seg_index[0] = 0;
	int rc = lmt_binwriter_open(&w->w, path, &lmt_format_shard, err);
	if (rc) {
		free(w->seg_index);
		w->seg_index = NULL;
	}
	return rc;
}

void lmt_shardw_chunks(struct lmt_shardw *w, uint64_t chunk_bytes)
{
	w->chunk_bytes = chunk_bytes;
}

/* Finish the chunk being hashed: its digest joins the list. */
static int chunk_end(struct lmt_shardw *w, struct lmt_err *err)
{
	if (LMT_GROW(w->chunk_sha, w->chunk_cap, (w->nchunks + 1) * LMT_SHA256_LEN))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	lmt_sha256_final(&w->chunk, w->chunk_sha + w->nchunks++ * LMT_SHA256_LEN);
	w->chunk_fill = 0;
	return 0;
}

/* Payload bytes: to the file, and through the chunk hashes. */
static int put(struct lmt_shardw *w, const void *data, size_t n, struct lmt_err *err)
{
	int rc = lmt_binwriter_write(&w->w, data, n, err);
	const uint8_t *p = data;
	while (!rc && w->chunk_bytes && n) {
		if (w->chunk_fill == 0 && lmt_sha256_init(&w->chunk))
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		uint64_t k = w->chunk_bytes - w->chunk_fill < n ? w->chunk_bytes - w->chunk_fill : n;
		lmt_sha256_update(&w->chunk, p, (size_t)k);
		w->chunk_fill += k;
		p += k;
		n -= (size_t)k;
		if (w->chunk_fill == w->chunk_bytes)
			rc = chunk_end(w, err);
	}
	return rc;
}

int lmt_shardw_add(struct lmt_shardw *w, const uint32_t *toks, const struct lmt_segment *segs,
		   uint32_t nseg, struct lmt_err *err)
{
	size_t n = (size_t)w->info.seq_len + 1;
	int rc;
	if (w->info.token_bytes == 2) {
		if (LMT_GROW(w->conv, w->conv_cap, n * 2))
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		for (size_t i = 0; i < n; i++)
			lmt_store_u16(w->conv + 2 * i, (uint16_t)toks[i]);
		rc = put(w, w->conv, n * 2, err);
	} else {
		rc = put(w, toks, n * 4, err);
	}
	if (rc)
		return rc;
	if (LMT_GROW(w->seg_index, w->si_cap, w->info.n_seqs + 2) ||
	    LMT_GROW(w->segs, w->seg_cap, w->seg_len + (size_t)nseg * LMT_SEG_REC))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	for (uint32_t k = 0; k < nseg; k++) {
		uint8_t *r = w->segs + w->seg_len;
		lmt_store_u32(r, segs[k].start);
		lmt_store_u32(r + 4, segs[k].len);
		lmt_store_u64(r + 8, segs[k].doc);
		w->seg_len += LMT_SEG_REC;
	}
	w->info.n_segments += nseg;
	w->info.n_seqs++;
	w->seg_index[w->info.n_seqs] = w->info.n_segments;
	return 0;
}

int lmt_shardw_finish(struct lmt_shardw *w, uint8_t sha_out[32], uint64_t *bytes, struct lmt_err *err)
{
	static const uint8_t zero[8];
	uint64_t tb = w->info.n_seqs * ((uint64_t)w->info.seq_len + 1) * w->info.token_bytes;
	size_t pad = (size_t)((8 - tb % 8) % 8);
	int rc = put(w, zero, pad, err);
	uint64_t si_off = tb + pad, seg_off = si_off + (w->info.n_seqs + 1) * 8;
	for (uint64_t i = 0; !rc && i <= w->info.n_seqs; i++) {
		uint8_t b[8];
		lmt_store_u64(b, w->seg_index[i]);
		rc = put(w, b, 8, err);
	}
	if (!rc)
		rc = put(w, w->segs, w->seg_len, err);
	if (!rc && w->chunk_fill)
		rc = chunk_end(w, err);
	if (rc) {
		lmt_shardw_abort(w);
		return rc;
	}
	uint8_t ext[64] = { 0 };
	lmt_store_u32(ext, w->info.token_bytes);
	lmt_store_u32(ext + 4, w->info.seq_len);
	lmt_store_u64(ext + 8, w->info.n_seqs);
	lmt_store_u64(ext + 16, w->info.n_segments);
	lmt_store_u32(ext + 24, w->info.split);
	lmt_store_u32(ext + 28, w->info.shard_index);
	lmt_store_u32(ext + 32, w->info.pad_id);
	lmt_store_u32(ext + 36, w->info.flags);
	lmt_store_u64(ext + 40, si_off);
	lmt_store_u64(ext + 48, seg_off);
	if (bytes)
		*bytes = LMT_HDR_SIZE + lmt_format_shard.ext_size + w->w.payload_size;
	rc = lmt_binwriter_finish(&w->w, ext, NULL, err);
	if (!rc && sha_out)
		memcpy(sha_out, w->w.payload_sha256, 32);
	if (rc) {
		free(w->chunk_sha);
		w->chunk_sha = NULL;
		w->nchunks = 0;
	}
	free(w->seg_index);
	free(w->segs);
	free(w->conv);
	w->seg_index = NULL;
	w->segs = w->conv = NULL;
	return rc;
}

void lmt_shardw_abort(struct lmt_shardw *w)
{
	lmt_binwriter_abort(&w->w);
	if (w->chunk_fill)
		lmt_sha256_release(&w->chunk);
	free(w->chunk_sha);
	w->chunk_sha = NULL;
	w->chunk_fill = 0;
	w->nchunks = 0;
	free(w->seg_index);
	free(w->segs);
	free(w->conv);
	w->seg_index = NULL;
	w->segs = w->conv = NULL;
}

int lmt_shard_open(struct lmt_shard *s, const char *path, int verify, struct lmt_err *err)
{
	struct lmt_binreader f;
	int rc = lmt_binreader_open(&f, path, &lmt_format_shard, verify ? LMT_BIN_VERIFY : 0, err);
	if (rc) {
		memset(s, 0, sizeof *s);
		return rc;
	}
	return lmt_shard_adopt(s, &f, err);
}

int lmt_shard_adopt(struct lmt_shard *s, struct lmt_binreader *f, struct lmt_err *err)
{
	int rc;
	const char *path = f->path;
	memset(s, 0, sizeof *s);
	s->f = *f;
	memset(f, 0, sizeof *f);
	const uint8_t *e = s->f.ext;
	struct lmt_shard_info *in = &s->info;
	in->token_bytes = lmt_load_u32(e);
	in->seq_len = lmt_load_u32(e + 4);
	in->n_seqs = lmt_load_u64(e + 8);
	in->n_segments = lmt_load_u64(e + 16);
	in->split = lmt_load_u32(e + 24);
	in->shard_index = lmt_load_u32(e + 28);
	in->pad_id = lmt_load_u32(e + 32);
	in->flags = lmt_load_u32(e + 36);
	uint64_t si_off = lmt_load_u64(e + 40), seg_off = lmt_load_u64(e + 48), ps = s->f.payload_size;
	if ((in->flags != LMT_SHARD_PACKED && in->flags != LMT_SHARD_PADDED) || lmt_load_u64(e + 56)) {
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': unknown shard flags 0x%x or reserved bytes set", path, in->flags);
		goto fail;
	}
	uint64_t w = (uint64_t)in->seq_len + 1;
	if ((in->token_bytes != 2 && in->token_bytes != 4) || in->seq_len == 0 || in->split > 2 ||
	    in->n_seqs > ps / (w * in->token_bytes) || si_off < in->n_seqs * w * in->token_bytes ||
	    si_off > ps || (ps - si_off) / 8 < in->n_seqs + 1 || seg_off != si_off + (in->n_seqs + 1) * 8 ||
	    in->n_segments != (ps - seg_off) / LMT_SEG_REC || (ps - seg_off) % LMT_SEG_REC) {
		rc = lmt_err_set(err, LMT_EFORMAT,
			"'%s': shard fields (%llu sequences of %u tokens, %llu segments) do not fit the %llu-byte payload",
			path, (unsigned long long)in->n_seqs, in->seq_len + 1, (unsigned long long)in->n_segments,
			(unsigned long long)ps);
		goto fail;
	}
	s->tokens = s->f.payload;
	s->seg_index = s->f.payload + si_off;
	s->segs = s->f.payload + seg_off;
	/* segment lists: monotone index, segments inside their sequence, in order */
	uint64_t prev = 0;
	for (uint64_t i = 0; i <= in->n_seqs; i++) {
		uint64_t v = lmt_load_u64(s->seg_index + 8 * i);
		if ((i == 0 && v != 0) || v < prev || v > in->n_segments || (i == in->n_seqs && v != in->n_segments)) {
			rc = lmt_err_set(err, LMT_EFORMAT, "'%s': segment index is inconsistent at sequence %llu",
					 path, (unsigned long long)i);
			goto fail;
		}
		if (i > 0) {
			uint32_t end = 0;
			for (uint64_t k = prev; k < v; k++) {
				uint32_t st = lmt_load_u32(s->segs + k * LMT_SEG_REC),
					 ln = lmt_load_u32(s->segs + k * LMT_SEG_REC + 4);
				if (st < end || ln == 0 || (uint64_t)st + ln > w) {
					rc = lmt_err_set(err, LMT_EFORMAT,
						"'%s': sequence %llu: segment at %u of %u tokens is out of place", path,
						(unsigned long long)(i - 1), st, ln);
					goto fail;
				}
				end = st + ln;
			}
		}
		prev = v;
	}
	return 0;
fail:
	lmt_shard_close(s);
	return rc;
}

void lmt_shard_close(struct lmt_shard *s)
{
	lmt_binreader_close(&s->f);
	memset(s, 0, sizeof *s);
}

void lmt_shard_tokens(const struct lmt_shard *s, uint64_t i, uint32_t *out)
{
	size_t n = (size_t)s->info.seq_len + 1;
	if (s->info.token_bytes == 2) {
		const uint8_t *p = s->tokens + i * n * 2;
		for (size_t k = 0; k < n; k++)
			out[k] = lmt_load_u16(p + 2 * k);
	} else {
		memcpy(out, s->tokens + i * n * 4, n * 4);
	}
}

uint32_t lmt_shard_segments(const struct lmt_shard *s, uint64_t i, struct lmt_segment *out, uint32_t max)
{
	uint64_t a = lmt_load_u64(s->seg_index + 8 * i), b = lmt_load_u64(s->seg_index + 8 * (i + 1));
	uint32_t n = (uint32_t)(b - a);
	for (uint32_t k = 0; k < n && k < max; k++) {
		const uint8_t *r = s->segs + (a + k) * LMT_SEG_REC;
		out[k] = (struct lmt_segment){ lmt_load_u32(r), lmt_load_u32(r + 4), lmt_load_u64(r + 8) };
	}
	return n;
}
