/*
 * gencorpus.h: the built-in corpus, a toy English whose every document has a known
 * exact probability.
 *
 * A generator writes short stories: a title line, then sentences in paragraphs about
 * a named protagonist (name, pronoun and belongings carried through the document),
 * with number agreement, a/an, counts written in digits that later sentences must
 * keep track of ("She has 7 apples. She gives 2 apples to Leo. Now she has 5
 * apples."), facts whose answers are forced ("3 and 4 make 7"), and quoted dialogue.
 * Each document is drawn by a probabilistic automaton: in each state the generator
 * picks the next piece of text among a few options with integer weights. Its log
 * probability is the sum of log(w/W) over the choices made, and it counts the final
 * choice to end the document (the event a model sees as its EOS token), so
 * -logprob is the information content of the text plus its end.
 *
 * That sum is the text's exact probability only if no other choice sequence renders
 * to the same text (unique decodability); otherwise the probabilities of all such
 * sequences would have to be added. The language is built so that it holds:
 *   - Text is read as tokens: maximal runs of letters, of digits, of spaces, of
 *     newlines; every other byte is a token by itself.
 *   - Every piece the automaton emits (a chosen option or a fixed string) starts and
 *     ends on a token boundary: two pieces never meet letter-letter, digit-digit,
 *     space-space or newline-newline (the generator asserts this on every emission).
 *   - In every choice the options, as rendered (plural form, capital letter, a/an),
 *     are distinct and none is a token-prefix of another (lmt_gen_token_prefix).
 *   - The next state is a function of the state and the option chosen.
 * Then at every choice at most one option can match the text, so the text determines
 * the choice sequence. lmt_gen_parse() recovers that sequence from the text alone,
 * checking at every choice that exactly one option matches; the generator's `check`
 * mode asserts the pairwise condition for every choice it visits.
 *
 * Determinism: the text depends only on (seed, document id) and LMT_GEN_LANGUAGE. The
 * random numbers come from xoshiro256** seeded by splitmix64, written here, and every
 * choice is made with integer arithmetic (unbiased rejection on a 64-bit draw), so
 * the bytes are the same on every machine and compiler. logprob goes through libm's
 * log() and may differ in the last bits between libms.
 *
 *	struct lmt_gen g;
 *	lmt_gen_init(&g, seed);
 *	for (...) {
 *		const char *text; size_t len; double lp;
 *		if (lmt_gen_doc(&g, &text, &len, &lp, &err)) ...
 *	}
 *	lmt_gen_release(&g);
 */
#ifndef LMT_GENCORPUS_H
#define LMT_GENCORPUS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/rng.h"

/* Version of the language and sampler: the same (seed, id) gives the same text for
 * the same LMT_GEN_LANGUAGE. Bump it whenever a word, weight or rule changes
 * (test-gencorpus pins the text of seed 1 and fails when it changes). */
#define LMT_GEN_LANGUAGE 1

/* ---- the generator ---- */

/* Which choices made a document: their number and a hash of the sequence (the option
 * taken at each choice, in order). Equal for a generated document and its parse. */
struct lmt_gen_trace {
	uint64_t choices;
	uint64_t hash;
};

struct lmt_gen {
	uint64_t seed;
	uint64_t next_id;            /* id of the next document; may be set to seek */
	int check;                   /* nonzero: before each choice, verify that its
	                              * options are pairwise token-prefix-free (slow) */
	struct lmt_gen_trace trace;  /* of the last document */
	/* private */
	char *buf;
	size_t len, cap;
};

void lmt_gen_init(struct lmt_gen *g, uint64_t seed);
void lmt_gen_release(struct lmt_gen *g);

/*
 * Generate document g->next_id (its random stream is (g->seed, id), so a document
 * does not depend on the ones before it) and advance next_id. *text points into the
 * generator and stays valid until the next call or lmt_gen_release; it is
 * NUL-terminated and holds no other NUL. *logprob (may be NULL) is the natural log of
 * the document's exact
 * probability, end-of-document choice included. Returns 0, LMT_ENOMEM, or (check
 * mode) LMT_EFORMAT naming two options that collide.
 */
int lmt_gen_doc(struct lmt_gen *g, const char **text, size_t *len, double *logprob,
		struct lmt_err *err);

/*
 * Read a document back with the same automaton, from its text alone (no random
 * numbers): recover the choice sequence and return its log probability in *logprob
 * and, if trace is non-NULL, its trace. Returns 0, or LMT_EFORMAT if the text is not
 * a document of the language (the message gives the byte offset, the text found and
 * what was expected there), including when two options would match (which would be
 * a bug in the language).
 */
int lmt_gen_parse(const char *text, size_t len, double *logprob, struct lmt_gen_trace *trace,
		  struct lmt_err *err);

/*
 * 1 if a (alen bytes) is a token-prefix of b: b starts with a and the byte after it in
 * b, if any, does not continue a's last token (see the token rule above). Equal
 * strings are token-prefixes of each other. Two options of one choice collide iff
 * one is a token-prefix of the other.
 */
int lmt_gen_token_prefix(const char *a, size_t alen, const char *b, size_t blen);

#endif
