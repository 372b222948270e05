/*
 * evalinput.h: what an evaluation reads, found the way a run records it: the
 * checkpoints of a run (or one checkpoint), the model and provenance each manifest
 * records, the tokenizer and dataset the run was trained with (found by their
 * recorded SHA-256), the model's parameters, and the documents to score: rebuilt from
 * a dataset split's packed sequences, or read from raw text, with their byte and word
 * counts and, where known, their entropy floor.
 *
 * evalppl reads all this on one process; each rank of a distributed evaluation needs
 * the same checkpoints, the same documents in the same order and the same framing, so
 * it is here and returns data. Nothing prints: failures leave in struct lmt_err the
 * messages the tool used to die with, and what is only worth a warning comes back
 * through a callback or a field the caller looks at.
 */
#ifndef LMT_EVALINPUT_H
#define LMT_EVALINPUT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt/ckpt.h"
#include "core/error.h"
#include "data/corpus.h"
#include "data/dataset.h"
#include "data/tokenizer.h"
#include "model/model.h"

/* A message worth a warning (the caller prints it, or not). */
typedef void (*lmt_eval_warn_fn)(void *ctx, const char *msg);

/* ---- the checkpoints ---- */

struct lmt_eval_ckref {
	char *path;
	uint64_t update;
};

/*
 * The checkpoints target names: a checkpoint (RUN/ckpt/step-N, its run two levels
 * up), or every checkpoint of a run in update order; with latest, the newest that
 * verifies (each that does not is reported through warn, which may be NULL). The run
 * directory goes into run_dir (cap bytes). *refs is the caller's to free with
 * lmt_eval_ckrefs_free.
 */
int lmt_eval_ckpts_list(const char *target, int latest, struct lmt_eval_ckref **refs, int *n, char *run_dir,
			size_t cap, lmt_eval_warn_fn warn, void *warn_ctx, struct lmt_err *err);
void lmt_eval_ckrefs_free(struct lmt_eval_ckref *refs, int n);

/* What a checkpoint's manifest says of the model and where it came from. */
struct lmt_eval_ckinfo {
	uint64_t update, tokens;
	struct lmt_gpt_config cfg;
	uint8_t tok_sha[32], data_sha[32];
	int has_data_sha;
	const char *cfg_tokenizer, *cfg_data;  /* borrowed from the manifest: valid while it is open */
};

int lmt_eval_ckinfo_read(const struct lmt_ckpt *c, struct lmt_eval_ckinfo *ci, struct lmt_err *err);

/*
 * Open and verify the checkpoint at path and read its info; with first (the info of
 * the first checkpoint evaluated, at first_path), check it was trained with the same
 * tokenizer and vocabulary, since the documents were read with them. On failure
 * nothing is left open.
 */
int lmt_eval_ckpt_open(struct lmt_ckpt *c, struct lmt_eval_ckinfo *ci, const char *path,
		       const struct lmt_eval_ckinfo *first, const char *first_path, struct lmt_err *err);

/*
 * The checkpoint's parameters into g, which is (re)built on be when *have is 0 or its
 * configuration is not ci's (so a curve over a run keeps one model while the shape
 * holds). *have says whether g holds a model for the caller to lmt_gpt_release.
 */
int lmt_eval_model_load(struct lmt_gpt *g, int *have, struct lmt_backend *be, const struct lmt_ckpt *c,
			const struct lmt_eval_ckinfo *ci, struct lmt_err *err);

/* ---- the files a run names ---- */

/*
 * A path recorded by another tool, relative to the directory that tool ran in: tried
 * as given, then (if relative) under base and each of its ancestors. The first
 * candidate whose SHA-256 is want goes into out; returns 1 then, 0 when none is (why
 * says what was found instead), a negative code when a path does not fit.
 */
int lmt_eval_find_recorded(const char *path, const char *base, const uint8_t want[32], char *out, size_t cap,
			   char *why, size_t whycap, struct lmt_err *err);

/*
 * The checkpoint's (at ck_path, read into ci) tokenizer: the file given, checked
 * against the SHA-256 the checkpoint records, else the one its run recorded, searched
 * for from run_dir. Returns 1 with tok loaded (the caller releases it) and its path in
 * path (cap bytes); 0 when given is NULL and the run's is not found (why says why, or
 * is empty when the run records none); a negative code on error, a vocabulary that is
 * not the model's included.
 */
int lmt_eval_tokenizer_open(struct lmt_tokenizer *tok, const char *given, const struct lmt_eval_ckinfo *ci,
			    const char *ck_path, const char *run_dir, char *path, size_t cap, char *why, size_t whycap,
			    struct lmt_err *err);

/* The dataset manifest's fields an evaluation uses. */
struct lmt_eval_dsinfo {
	void *m;                 /* json_t *: the manifest, owned */
	const char *input_path;  /* borrowed from m */
	uint8_t input_sha[32];
	int has_input;
	uint64_t tail_dropped[3];
	int add_eos;             /* shard-pack appended an EOS to each document */
	int pad_mode;            /* each document started a sequence (shard-pack --mode pad) */
};

int lmt_eval_dsinfo_read(const struct lmt_dataset *d, struct lmt_eval_dsinfo *x, struct lmt_err *err);
void lmt_eval_dsinfo_release(struct lmt_eval_dsinfo *x);

/*
 * The dataset: the directory given, else the one the checkpoint's run was trained on,
 * its manifest found by the recorded SHA-256 from run_dir. Returns 1 with ds and x
 * open (the caller closes ds and releases x), its directory in dir (cap bytes) and
 * *same_data whether it is the checkpoint's training dataset; 0 when given is NULL
 * and the run's is not found (why says why) or not recorded (why empty); a negative
 * code on error, a tokenizer or vocabulary that is not the checkpoint's included.
 */
int lmt_eval_dataset_open(struct lmt_dataset *ds, struct lmt_eval_dsinfo *x, const char *given,
			  const struct lmt_eval_ckinfo *ci, const char *ck_path, const char *run_dir, char *dir,
			  size_t cap, int *same_data, char *why, size_t whycap, struct lmt_err *err);

/* ---- the documents ---- */

struct lmt_eval_docinfo {
	uint64_t off, n;         /* its tokens in the pool: D, EOS included when the data has one */
	uint64_t bytes, words;   /* UTF-8 bytes and words of its text (meaningful when known) */
	uint32_t source;         /* UINT32_MAX: unknown */
	uint64_t line;           /* JSONL: the record's line, for the floor field */
	double gen_lp, field_lp; /* natural-log probabilities: gen-corpus parse, JSONL field (NAN: none) */
};

enum { LMT_EVAL_FLOOR_NONE = 0, LMT_EVAL_FLOOR_FIELD, LMT_EVAL_FLOOR_GEN };

/* The documents to score, in order; not to be copied (bytes_from may point into it). */
struct lmt_eval_docset {
	struct lmt_eval_docinfo *d;
	size_t n, cap;
	uint32_t *tok;
	size_t ntok, tokcap;
	char **sources;
	uint32_t nsources;
	int has_bytes, has_words, has_sources;
	char bytes_why[1200];    /* why bytes are unknown (empty when known, or not looked for) */
	char stream_path[PATH_MAX];
	char bytes_from_buf[PATH_MAX + 32];
	const char *bytes_from;
	uint32_t ctx;            /* the token before each document (EOS), or LMT_EVAL_NO_CTX */
	uint32_t append;         /* raw text: the token after each document (EOS), or LMT_NO_TOKEN */
	char framing[400];       /* how documents are framed, and why */
	uint64_t cut;            /* documents left out: cut by shard-pack's tail drop */
	char floor_source[256];
	int floor_kind;          /* LMT_EVAL_FLOOR_* */
};

/*
 * An empty set framed as the run's dataset presented documents to the model (ds and
 * x when at hand, else NULL; tok NULL when unknown): see the comment in evalinput.c.
 */
void lmt_eval_docset_init(struct lmt_eval_docset *s, const struct lmt_dataset *ds, const struct lmt_eval_dsinfo *x,
			  const struct lmt_tokenizer *tok);
void lmt_eval_docset_release(struct lmt_eval_docset *s);

/*
 * Raw documents from files (tok-encode's corpus options), each encoded with tok and
 * followed by s->append, until max_docs documents or max_tokens tokens are held (0:
 * no limit); floor_field names the JSONL field with each one's log-probability.
 */
int lmt_eval_docset_read_text(struct lmt_eval_docset *s, const char **texts, int ntexts,
			      const struct lmt_corpus_opts *copts, struct lmt_tokenizer *tok, uint64_t max_docs,
			      uint64_t max_tokens, const char *floor_field, struct lmt_err *err);

/*
 * The documents of a split, rebuilt from its packed sequences, those cut by
 * shard-pack's tail drop left out (counted in s->cut); bytes and sources from the
 * token stream the dataset was packed from, when it is found (otherwise
 * s->bytes_why says why, also when this fails later, for a warning first); words and
 * the gen-corpus floor from the text decoded with tok (NULL: unknown).
 */
int lmt_eval_docset_read_split(struct lmt_eval_docset *s, struct lmt_dataset *ds, const struct lmt_eval_dsinfo *x,
			       int split, const struct lmt_tokenizer *tok, uint64_t max_docs, uint64_t max_tokens,
			       struct lmt_err *err);

/*
 * Which entropy floor these documents have: floor_given (the caller's figure), else
 * each one's log-probability from floor_field, else from the gen-corpus language.
 * Returns 1 when floor_field_given and no floor was found (worth a warning), else 0.
 */
int lmt_eval_docset_choose_floor(struct lmt_eval_docset *s, int floor_given, const char *floor_field,
				 int floor_field_given);

#endif
