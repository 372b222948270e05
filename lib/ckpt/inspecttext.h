/*
 * inspecttext.h: ckpt-inspect's human display, the table a terminal gets in
 * place of the JSONL records of inspect.h: the same findings, as lines of text
 * appended to a string buffer (core/strbuf.h), so that the library decides what
 * a line says and the caller only writes it out. Beside the records they render,
 * so a field added to one is seen to be missing from the other.
 *
 * Column widths and number formats are the display's (a test compares them); w
 * is the tensor-name column's width, the longest name shown.
 */
#ifndef LMT_INSPECTTEXT_H
#define LMT_INSPECTTEXT_H

#include "ckpt/inspect.h"
#include "core/strbuf.h"

/* Why dir is not a checkpoint, and what it holds (lmt_ckpt_explain). */
void lmt_ckpt_text_explanation(struct lmt_strbuf *b, const char *dir, const struct lmt_ckpt_explanation *x);
/* The checkpoint's head: update, world, schema, each file and its state. */
void lmt_ckpt_text_checkpoint(struct lmt_strbuf *b, const struct lmt_ckpt_target *k);
/* The listing's column heads; with stats the statistics' too. */
void lmt_ckpt_text_tensor_head(struct lmt_strbuf *b, int w, int stats);
/* One tensor's row. */
void lmt_ckpt_text_tensor(struct lmt_strbuf *b, const struct lmt_ckpt_tscan *t, int w);
/* The listing's totals. */
void lmt_ckpt_text_summary(struct lmt_strbuf *b, const struct lmt_ckpt_target *k, const struct lmt_ckpt_scan *s,
			   int stats);
/* One tensor's comparison (nothing for one that is the same). */
void lmt_ckpt_text_tdiff(struct lmt_strbuf *b, const struct lmt_ckpt_entry *ea, const struct lmt_ckpt_entry *eb,
			 enum lmt_ckpt_tstatus st, const struct lmt_ckpt_tdiff *t, const char *err, int w);
/* A state field that differs (its JSON texts, NULL: absent). */
void lmt_ckpt_text_state(struct lmt_strbuf *b, const char *key, const char *a, const char *bv);
/* A comparison's totals. */
void lmt_ckpt_text_diff_summary(struct lmt_strbuf *b, const int n[LMT_CKPT_TSTATUS_COUNT], int nstate,
				int identical);

#endif
