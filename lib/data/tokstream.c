/*
 * tokstream.c: writing and reading token streams (see tokstream.h).
 */
#include "data/tokstream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

static void info_encode(const struct lmt_tokstream_info *in, uint8_t *e)
{
	memset(e, 0, 128);
	lmt_store_u32(e, in->token_bytes);
	lmt_store_u32(e + 4, in->flags);
	lmt_store_u64(e + 8, in->n_tokens);
	lmt_store_u64(e + 16, in->n_docs);
	lmt_store_u32(e + 24, in->n_sources);
	lmt_store_u32(e + 28, in->vocab_size);
	memcpy(e + 32, in->tokenizer_sha256, 32);
	lmt_store_u64(e + 80, in->text_bytes);
	lmt_store_u32(e + 88, in->bos);
	lmt_store_u32(e + 92, in->eos);
}

int lmt_tokstream_writer_open(struct lmt_tokstream_writer *w, const char *path, const struct lmt_tokstream_info *info,
		 struct lmt_err *err)
{
	memset(w, 0, sizeof *w);
	w->info = *info;
	w->written = 0;
	w->info.n_tokens = w->info.n_docs = 0;
	w->info.n_sources = 0;
	w->info.text_bytes = 0;
	if (w->info.token_bytes != 2 && w->info.token_bytes != 4)
		return lmt_err_set(err, LMT_EINVAL, "token width %u (expected 2 or 4)", w->info.token_bytes);
	return lmt_binwriter_open(&w->w, path, &lmt_format_tokens, err);
}

int lmt_tokstream_writer_tokens(struct lmt_tokstream_writer *w, const uint32_t *toks, size_t n, struct lmt_err *err)
{
	int rc;
	if (w->info.token_bytes == 2) {
		if (LMT_GROW(w->conv, w->conv_cap, n * 2 + 1))
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		uint16_t *c = (uint16_t *)(void *)w->conv;
		for (size_t i = 0; i < n; i++)
			c[i] = (uint16_t)toks[i];
		rc = lmt_binwriter_write(&w->w, c, n * 2, err);
	} else {
		rc = lmt_binwriter_write(&w->w, toks, n * 4, err);
	}
	if (!rc)
		w->written += n;
	return rc;
}

int lmt_tokstream_writer_index(struct lmt_tokstream_writer *w, uint64_t ntok, uint64_t nbytes, uint32_t source,
		  uint64_t ordinal, struct lmt_err *err)
{
	if (ntok > w->written - w->info.n_tokens)
		return lmt_err_set(err, LMT_EINVAL, "index record for %llu tokens, only %llu written",
				   (unsigned long long)ntok, (unsigned long long)(w->written - w->info.n_tokens));
	const size_t limit = LMT_MAX(w->index_limit ? w->index_limit : LMT_TS_INDEX_MEM, LMT_TS_INDEX_REC);
	if (w->index_len + LMT_TS_INDEX_REC > limit) { /* the older records to the spill file */
		if (!w->spill && !(w->spill = tmpfile()))
			return lmt_err_errno(err, "cannot create a temporary file for the document index");
		if (fwrite(w->index, 1, w->index_len, w->spill) != w->index_len)
			return lmt_err_errno(err, "writing the document index to a temporary file");
		w->index_len = 0;
	}
	if (LMT_GROW(w->index, w->index_cap, w->index_len + LMT_TS_INDEX_REC))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory for the document index");
	uint8_t *r = w->index + w->index_len;
	w->index_len += LMT_TS_INDEX_REC;
	lmt_store_u64(r, w->info.n_tokens);
	lmt_store_u64(r + 8, ntok);
	lmt_store_u64(r + 16, nbytes);
	lmt_store_u32(r + 24, source);
	lmt_store_u32(r + 28, 0);
	lmt_store_u64(r + 32, ordinal);
	w->info.n_tokens += ntok;
	w->info.n_docs++;
	w->info.text_bytes += nbytes;
	return 0;
}

int lmt_tokstream_writer_doc(struct lmt_tokstream_writer *w, const uint32_t *toks, size_t n, uint64_t nbytes,
		uint32_t source, uint64_t ordinal, struct lmt_err *err)
{
	int rc = lmt_tokstream_writer_tokens(w, toks, n, err);
	return rc ? rc : lmt_tokstream_writer_index(w, n, nbytes, source, ordinal, err);
}

/* the index records in the spill file, if any, into the stream */
static int copy_spill(struct lmt_tokstream_writer *w, struct lmt_err *err)
{
	if (!w->spill)
		return 0;
	if (fflush(w->spill) || fseek(w->spill, 0, SEEK_SET))
		return lmt_err_errno(err, "writing the document index to a temporary file");
	char buf[1 << 16];
	size_t n;
	int rc = 0;
	while (!rc && (n = fread(buf, 1, sizeof buf, w->spill)) > 0)
		rc = lmt_binwriter_write(&w->w, buf, n, err);
	if (!rc && ferror(w->spill))
		rc = lmt_err_errno(err, "reading the document index back from a temporary file");
	fclose(w->spill);
	w->spill = NULL;
	return rc;
}

int lmt_tokstream_writer_finish(struct lmt_tokstream_writer *w, const char *const *sources, uint32_t nsources,
		   uint8_t *sha_out, struct lmt_err *err)
{
	static const uint8_t zero[8];
	uint64_t tb = w->info.n_tokens * w->info.token_bytes;
	int rc = 0;
	if (w->written != w->info.n_tokens) {
		rc = lmt_err_set(err, LMT_EINVAL, "%llu tokens written but %llu indexed",
				 (unsigned long long)w->written, (unsigned long long)w->info.n_tokens);
		goto fail;
	}
	size_t pad = (size_t)((8 - tb % 8) % 8);
	if ((rc = lmt_binwriter_write(&w->w, zero, pad, err)))
		goto fail;
	uint64_t index_off = tb + pad;
	if ((rc = copy_spill(w, err)) || (rc = lmt_binwriter_write(&w->w, w->index, w->index_len, err)))
		goto fail;
	uint64_t src_off = index_off + w->info.n_docs * LMT_TS_INDEX_REC;
	uint64_t sl = 0;
	for (uint32_t i = 0; i < nsources; i++) {
		uint8_t l[4];
		uint32_t n = (uint32_t)strlen(sources[i]);
		lmt_store_u32(l, n);
		if ((rc = lmt_binwriter_write(&w->w, l, 4, err)) || (rc = lmt_binwriter_write(&w->w, sources[i], n, err)))
			goto fail;
		sl += 4 + n;
	}
	if ((rc = lmt_binwriter_write(&w->w, zero, (size_t)((8 - sl % 8) % 8), err)))
		goto fail;
	w->info.n_sources = nsources;
	uint8_t ext[128];
	info_encode(&w->info, ext);
	lmt_store_u64(ext + 64, index_off);
	lmt_store_u64(ext + 72, src_off);
	rc = lmt_binwriter_finish(&w->w, ext, sha_out, err);
	free(w->index);
	free(w->conv);
	w->index = w->conv = NULL;
	w->index_len = 0;
	return rc;
fail:
	lmt_tokstream_writer_abort(w);
	return rc;
}

void lmt_tokstream_writer_abort(struct lmt_tokstream_writer *w)
{
	lmt_binwriter_abort(&w->w);
	free(w->index);
	free(w->conv);
	if (w->spill)
		fclose(w->spill);
	w->spill = NULL;
	w->index = w->conv = NULL;
	w->index_len = 0;
}

void lmt_tokstream_reader_doc(const struct lmt_tokstream_reader *r, uint64_t i, struct lmt_tokstream_doc *d)
{
	const uint8_t *p = r->index + i * LMT_TS_INDEX_REC;
	d->tok_off = lmt_load_u64(p);
	d->n_tok = lmt_load_u64(p + 8);
	d->n_bytes = lmt_load_u64(p + 16);
	d->source = lmt_load_u32(p + 24);
	d->ordinal = lmt_load_u64(p + 32);
}

void lmt_tokstream_reader_close(struct lmt_tokstream_reader *r)
{
	if (r->sources)
		for (uint32_t i = 0; i < r->info.n_sources; i++)
			free(r->sources[i]);
	free(r->sources);
	lmt_binreader_close(&r->f);
	memset(r, 0, sizeof *r);
}

int lmt_tokstream_reader_open(struct lmt_tokstream_reader *r, const char *path, int verify, struct lmt_err *err)
{
	memset(r, 0, sizeof *r);
	int rc;
	if (!strcmp(path, "-"))
		rc = lmt_binreader_read_stream(&r->f, stdin, "<stdin>", &lmt_format_tokens, err);
	else
		rc = lmt_binreader_open(&r->f, path, &lmt_format_tokens, verify ? LMT_BIN_VERIFY : 0, err);
	if (rc)
		return rc;
	const char *name = r->f.path;
	const uint8_t *e = r->f.ext;
	struct lmt_tokstream_info *in = &r->info;
	in->token_bytes = lmt_load_u32(e);
	in->flags = lmt_load_u32(e + 4);
	in->n_tokens = lmt_load_u64(e + 8);
	in->n_docs = lmt_load_u64(e + 16);
	in->n_sources = lmt_load_u32(e + 24);
	in->vocab_size = lmt_load_u32(e + 28);
	memcpy(in->tokenizer_sha256, e + 32, 32);
	uint64_t index_off = lmt_load_u64(e + 64), src_off = lmt_load_u64(e + 72);
	in->text_bytes = lmt_load_u64(e + 80);
	in->bos = lmt_load_u32(e + 88);
	in->eos = lmt_load_u32(e + 92);
	uint64_t ps = r->f.payload_size;
	if (in->token_bytes != 2 && in->token_bytes != 4) {
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': token width %u, expected 2 or 4", name, in->token_bytes);
		goto fail;
	}
	if (in->flags & ~(LMT_TS_BOS | LMT_TS_EOS)) {
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': unknown flags 0x%x", name, in->flags);
		goto fail;
	}
	if (in->n_tokens > ps / in->token_bytes || index_off < in->n_tokens * in->token_bytes ||
	    index_off > ps || in->n_docs > (ps - index_off) / LMT_TS_INDEX_REC ||
	    src_off != index_off + in->n_docs * LMT_TS_INDEX_REC || src_off > ps ||
	    (uint64_t)in->n_sources * 4 > ps - src_off) {
		rc = lmt_err_set(err, LMT_EFORMAT,
			"'%s': section sizes (%llu tokens, %llu documents, %u sources) do not fit the %llu-byte payload",
			name, (unsigned long long)in->n_tokens, (unsigned long long)in->n_docs, in->n_sources,
			(unsigned long long)ps);
		goto fail;
	}
	r->tokens = r->f.payload;
	r->index = r->f.payload + index_off;
	/* documents must tile the tokens exactly, in order */
	uint64_t next = 0;
	for (uint64_t i = 0; i < in->n_docs; i++) {
		struct lmt_tokstream_doc d;
		lmt_tokstream_reader_doc(r, i, &d);
		if (d.tok_off != next || d.n_tok > in->n_tokens - next || d.source >= in->n_sources) {
			rc = lmt_err_set(err, LMT_EFORMAT,
				"'%s': document %llu: index record is inconsistent (offset %llu, %llu tokens, source %u)",
				name, (unsigned long long)i, (unsigned long long)d.tok_off,
				(unsigned long long)d.n_tok, d.source);
			goto fail;
		}
		next += d.n_tok;
	}
	if (next != in->n_tokens) {
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': documents hold %llu tokens, header says %llu", name,
				 (unsigned long long)next, (unsigned long long)in->n_tokens);
		goto fail;
	}
	r->sources = calloc(in->n_sources ? in->n_sources : 1, sizeof *r->sources);
	if (!r->sources) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto fail;
	}
	const uint8_t *p = r->f.payload + src_off, *end = r->f.payload + ps;
	for (uint32_t i = 0; i < in->n_sources; i++) {
		uint32_t l = (uint32_t)(end - p) >= 4 ? lmt_load_u32(p) : UINT32_MAX;
		if (l > (uint64_t)(end - p) - 4) {
			rc = lmt_err_set(err, LMT_EFORMAT, "'%s': source name %u runs past the payload", name, i);
			goto fail;
		}
		if (!(r->sources[i] = strndup((const char *)p + 4, l))) {
			rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
			goto fail;
		}
		p += 4 + l;
	}
	if (verify) {
		for (uint64_t i = 0; i < in->n_tokens; i++)
			if (lmt_tokstream_reader_token(r, i) >= in->vocab_size) {
				rc = lmt_err_set(err, LMT_EFORMAT, "'%s': token %llu is %u, vocabulary size is %u", name,
						 (unsigned long long)i, lmt_tokstream_reader_token(r, i), in->vocab_size);
				goto fail;
			}
	}
	return 0;
fail:
	lmt_tokstream_reader_close(r);
	return rc;
}
