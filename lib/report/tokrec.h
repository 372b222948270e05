/*
 * tokrec.h: the JSONL records of tok-train(1) (its man page documents each
 * field): the count, merge progress, the trained tokenizer, the summary of the
 * file written, and the fertility of a corpus, written into a struct lmt_json.
 *
 * As in evalrec.h, each function begins its record in j and leaves it open for
 * the caller to end and write (lmt_json_end_line), so the tool writes it with its
 * own error handling. The fields and their order are the format.
 */
#ifndef LMT_TOKREC_H
#define LMT_TOKREC_H

#include <stdint.h>

#include "core/json.h"
#include "data/tokenizer.h"
#include "data/toktrain.h"

/* "counted": what lmt_toktrain_count read, on threads threads. */
void lmt_tokrec_counted(struct lmt_json *j, const struct lmt_toktrain *t, int threads);
/* "progress": merges made, tokens, the best pair's count, seconds since merging began. */
void lmt_tokrec_progress(struct lmt_json *j, uint32_t merges, uint32_t tokens, uint64_t best, double seconds);
/* "trained": the merges (or, chars, the characters seen) and the trainer's costs. */
void lmt_tokrec_trained(struct lmt_json *j, const struct lmt_toktrain *t, int chars);

/* What training read, for the summary (trained 0: an imported or loaded tokenizer). */
struct lmt_tokrec_input {
	uint64_t docs, bytes, words, distinct_words;
	int trained;
};
/* "summary": the file written (path), the tokenizer, what it was trained on,
 * export_hf (NULL: none) and the run's seconds. The caller adds what else it
 * reports (the corpus's skips). */
void lmt_tokrec_summary(struct lmt_json *j, const struct lmt_tokenizer *tok, const char *path, const char *export_hf,
			const struct lmt_tokrec_input *in, double seconds);
/* "fertility": tokens per byte and per word of source (label: NULL for none). */
void lmt_tokrec_fertility(struct lmt_json *j, const char *source, const char *label, const struct lmt_fertility *f);

#endif
