/*
 * llmctokens.c: llm.c's token file (llmctokens.h).
 */
#include "data/llmctokens.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

int lmt_llmc_tokens_open(struct lmt_llmc_tokens *l, const char *path, uint32_t n_vocab, struct lmt_err *err)
{
	memset(l, 0, sizeof *l);
	l->version = n_vocab > 65536 ? 2 : 1;
	int rc = lmt_atomicfile_open(&l->af, path, err);
	if (rc)
		return rc;
	int32_t hdr[256] = { 0 };
	if (fwrite(hdr, sizeof hdr, 1, l->af.fp) != 1)
		return lmt_err_errno(err, "'%s': write", path);
	return 0;
}

int lmt_llmc_tokens_write(struct lmt_llmc_tokens *l, const uint32_t *t, size_t n, struct lmt_err *err)
{
	if (l->version == 2) {
		if (n && fwrite(t, 4, n, l->af.fp) != n)
			return lmt_err_errno(err, "'%s': write", l->af.path);
		l->ntok += n;
		return 0;
	}
	if (LMT_GROW(l->conv, l->cap, n + 1))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		l->conv[i] = (uint16_t)t[i];
	if (n && fwrite(l->conv, 2, n, l->af.fp) != n)
		return lmt_err_errno(err, "'%s': write", l->af.path);
	l->ntok += n;
	return 0;
}

int lmt_llmc_tokens_finish(struct lmt_llmc_tokens *l, struct lmt_err *err)
{
	int32_t hdr[256] = { 0 };
	int rc;
	free(l->conv);
	l->conv = NULL;
	hdr[0] = 20240520;
	hdr[1] = l->version;
	if (l->ntok > INT32_MAX) {
		rc = lmt_err_set(err, LMT_ERANGE, "'%s': %llu tokens do not fit llm.c's int32 count", l->af.path,
				 (unsigned long long)l->ntok);
		lmt_atomicfile_abort(&l->af);
		return rc;
	}
	hdr[2] = (int32_t)l->ntok;
	if (fflush(l->af.fp) || fseeko(l->af.fp, 0, SEEK_SET) || fwrite(hdr, sizeof hdr, 1, l->af.fp) != 1) {
		rc = lmt_err_errno(err, "'%s': write", l->af.path);
		lmt_atomicfile_abort(&l->af);
		return rc;
	}
	return lmt_atomicfile_commit(&l->af, err);
}
