/*
 * evalrec.h: the JSONL records of an evaluation (evalppl(1) documents each field):
 * eval-config, ppl, floor and memorization, written into a struct lmt_json.
 *
 * Each function begins a record in j (initialised; lmt_json_begin empties it) and
 * leaves it open for the caller to end and write (lmt_json_end_line), so a tool emits
 * it with its own error handling and a gathering rank could write the same records
 * from the same data. The fields and
 * their order are the format: a test compares them byte for byte.
 */
#ifndef LMT_EVALREC_H
#define LMT_EVALREC_H

#include <stdint.h>

#include "core/json.h"
#include "data/tokenizer.h"
#include "model/evalinput.h"
#include "model/evalrun.h"

/* How the documents were chosen and scored, for the eval-config record. */
struct lmt_evalrec_setup {
	const char *const *texts;  /* raw text files, ntexts of them; none: a dataset split */
	int ntexts;
	const char *data_dir;      /* the dataset, its split, whether the run trained on it */
	int split, same_data;
	const char *tok_path;      /* NULL: unknown */
	int context, stride;
	int resamples;             /* the bootstrap */
	uint64_t seed;
	double level;
	const uint64_t *edges;     /* the length buckets' edges */
	int nedges;
};

void lmt_evalrec_config(struct lmt_json *j, const char *path, const struct lmt_eval_ckinfo *ci,
			const struct lmt_evalrec_setup *u, const struct lmt_eval_docset *s);
/* cnt: the scoring counts, for the overall group only (else NULL). */
void lmt_evalrec_ppl(struct lmt_json *j, const char *path, const struct lmt_eval_ckinfo *ci,
		     const struct lmt_eval_docset *s, const struct lmt_eval_group *g, const struct lmt_eval_count *cnt);
void lmt_evalrec_floor(struct lmt_json *j, const char *path, const struct lmt_eval_ckinfo *ci,
		       const struct lmt_eval_docset *s, const struct lmt_ppl *all, const struct lmt_eval_floor *f);
void lmt_evalrec_memorization(struct lmt_json *j, const char *path, const struct lmt_eval_ckinfo *ci,
			      const struct lmt_eval_memset *m, int prefix, int cont, uint64_t exact, double lo,
			      double hi, uint64_t seed);
/* How a sample was drawn, for its record. */
struct lmt_evalrec_sampling {
	double temperature;
	int top_k;
	uint64_t seed;
	double tokens_per_s;
};
/* "sample": the prompt (NULL: none) and its ids, the n ids drawn, their text
 * (decoded with tok; null without one) and how they were drawn. A text that
 * cannot be allocated marks j out of memory (j->out.oom). */
void lmt_evalrec_sample(struct lmt_json *j, const char *path, const struct lmt_eval_ckinfo *ci, const char *prompt,
			const int32_t *prompt_ids, int np, const int32_t *ids, int n, const struct lmt_tokenizer *tok,
			const struct lmt_evalrec_sampling *how);
/* "summary": nck checkpoints of the documents of s scored into a, in wall
 * seconds on threads threads. */
void lmt_evalrec_summary(struct lmt_json *j, int nck, const struct lmt_eval_docset *s, const struct lmt_eval_acc *a,
			 double wall, int threads);
/* The fields every record of a checkpoint carries first after its event. */
void lmt_evalrec_ckpt(struct lmt_json *j, const char *path, const struct lmt_eval_ckinfo *ci);

#endif
