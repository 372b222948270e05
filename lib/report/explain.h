/*
 * explain.h: the evidence around one update of a run, and what it points to.
 *
 * For update N of a run (runview.h), the explanation lines up what the run's
 * files know around it: the loss against the mean and deviation of the updates
 * before it; the learning rate, the gradient norm against its median, clipping,
 * and which units (embeddings, layers, head) moved most in the nearest statistics
 * record (train --stats-every); the batch's samples (every rank's, rebuilt from
 * the loader's deterministic order and config.json, checked against what train
 * --log-samples recorded; the recorded ones alone where the world size changed at
 * a resume) mapped through the dataset to shards, documents and source files, with their token
 * statistics (each source's mean surprisal under the train split's unigram
 * distribution, against that distribution's entropy: junk tokens are rare ones);
 * the data wait, the communication time, the slowest rank and its skew; the
 * memory against memledger's prediction; the alerts near it; and the newest
 * checkpoint from before it, to roll back to. What is not recorded is said
 * (as "missing": why), never guessed.
 *
 * Then the findings, each a cause with a score in [0, 1] and a sentence, the
 * strongest first: data (a source of the batch far above the split's surprisal
 * while the loss is up), optimization (the learning rate or gradient norm far
 * above their recent values), a slow rank, input starvation, exposed
 * communication, memory near the prediction's bound, non-finite values. The
 * verdict is the strongest finding ("likely data: ..."), with its confidence
 * (high, medium, low), or "nothing stands out" when none passes its threshold.
 *
 * The result is a jansson object (JSONL's record "explain"); lmt_explain_text
 * writes it as lines for a terminal.
 */
#ifndef LMT_EXPLAIN_H
#define LMT_EXPLAIN_H

#include <jansson.h>
#include <stdint.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "report/runview.h"

/* The window of updates before N whose loss, gradient norm and times are the
 * baseline (as the alerts' default window, alerts.h). */
#define LMT_EXPLAIN_WINDOW 50

/*
 * Explain update n of v into *out (a new reference; the caller json_decrefs).
 * LMT_ENOTFOUND naming metrics.jsonl when the run has no update n (past its
 * last, or before its first).
 */
int lmt_explain(struct lmt_runview *v, uint64_t n, json_t **out, struct lmt_err *err);

/* The explanation as text for a terminal, one finding per line. */
void lmt_explain_text(json_t *e, struct lmt_strbuf *out);

#endif
