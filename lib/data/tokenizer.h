/*
 * tokenizer.h: the byte-level BPE tokenizer: its model, its file, encode and decode.
 *
 * Model. Ids 0..n_vocab-1 each name a byte string. Every single byte has an id, so
 * any byte sequence is encodable and there is no unknown token. Merges are rules
 * (a, b) -> c with a priority; encoding a piece starts from its bytes and repeatedly
 * applies the rule of lowest priority among adjacent pairs, leftmost first, until no
 * rule applies. This is exactly tiktoken's algorithm when each rule's priority is
 * the rank of c and every split of c into two tokens is a rule (what an imported
 * rank file gives), and exactly HuggingFace's/GPT-2's when the priorities are the
 * positions in a merges list (what tok-train and the other importers give).
 *
 * Special tokens (end of text, padding, ...) have ids of their own and are never the
 * input or the result of a merge, so text can never produce them by merging.
 * Encoding treats their strings as ordinary text unless asked to recognise them.
 * Roles: EOS ends a document (tok-encode --eos), BOS starts one (--bos), PAD fills
 * unused positions (shard-pack's pad mode); each is a special token or none. When EOS
 * is not named, a tokenizer's only special token, or else its <|endoftext|>, is EOS
 * (the GPT-2 convention), unless that token already has another role.
 *
 * File (lmt tokenizer, magic "\x89LMTTOK\n", version 1.0), after the common 64-byte
 * header of binformat.h, 64 bytes of fields:
 *	 0 u32 n_vocab        8 u32 n_special     16 u32 eos_id (0xffffffff: none)
 *	 4 u32 n_merges      12 u32 flags (1: ignore_merges)   20 u32 bos_id  24 u32 pad_id
 *	28 u32 name_len      32 u32 regex_len     36 u32 max_token_len (bytes)
 *	40 u64 vocab_bytes   48..63 zero
 * and the payload, each section padded with zeros to a multiple of 8 bytes:
 *	pattern name (name_len bytes) and regex (regex_len bytes)
 *	u32 offsets[n_vocab + 1]; token i is bytes[offsets[i] .. offsets[i+1])
 *	bytes[vocab_bytes]
 *	u32 special_ids[n_special]
 *	struct { u32 a, b, c, priority } merges[n_merges]
 * The SHA-256 of the whole file is the tokenizer's identity.
 */
#ifndef LMT_TOKENIZER_H
#define LMT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "core/digest.h"
#include "core/error.h"
#include "data/pretok.h"

#define LMT_NO_TOKEN 0xffffffffu
#define LMT_TOK_IGNORE_MERGES 1u  /* a piece that is itself a token encodes as it (HF) */

struct lmt_merge {
	uint32_t a, b, c, prio;
};

/*
 * Finding special token strings in a text: lmt_specmatch_next gives the leftmost
 * occurrence at or after pos, the longest of those that start there. The text is
 * read once: each byte that starts a string is a candidate, and the strings,
 * sorted, are narrowed a byte at a time (two binary searches) for as far as one
 * still agrees with the text, so a candidate costs at most the longest string's
 * length, whatever the number of strings. (Searching for every string again from
 * each occurrence of any, as encoding and training did, took 12 s on 17 MB with
 * two strings, one every 2 kB; a pass a string, 2.7 s against 1.7 s on 64 MB with
 * 201 strings.) Built once, read by any number of threads. Empty strings are never
 * found; the strings must outlive it.
 */
struct lmt_specmatch {
	uint32_t n, maxlen;
	const char *const *str;
	const uint32_t *slen;
	uint32_t *order;             /* the strings' indices, by their bytes */
	uint8_t first[256];          /* whether a string starts with the byte */
	int only;                    /* the one byte every string starts with, or -1 */
	uint64_t *steps;             /* if set, bytes looked at are added here (the tests') */
};
/* 0, or LMT_ENOMEM */
int lmt_specmatch_init(struct lmt_specmatch *m, uint32_t n, const char *const *str, const uint32_t *slen);
void lmt_specmatch_release(struct lmt_specmatch *m);
/* 1 with the occurrence's start and string, or 0 when none starts at pos or later */
int lmt_specmatch_next(const struct lmt_specmatch *m, const char *text, size_t len, size_t pos, size_t *start,
		       uint32_t *which);
/* Whether an occurrence of a string starts before c and ends after it (a document
 * cut at c would lose it). */
int lmt_specmatch_spans(const struct lmt_specmatch *m, const char *text, size_t len, size_t c);

struct lmt_tokenizer {
	uint32_t n_vocab;
	uint32_t *off;            /* n_vocab + 1 */
	uint8_t *bytes;
	uint8_t *special;         /* per id: 1 if special */
	uint32_t n_special;
	uint32_t *special_ids;    /* ascending */
	const char **special_str; /* their strings and lengths, in that order */
	uint32_t *special_len;
	struct lmt_specmatch special_match; /* over special_str */
	uint32_t n_merges;
	struct lmt_merge *merges;
	uint32_t byte_id[256];
	uint32_t eos, bos, pad;
	uint32_t flags;
	uint32_t max_token_len;
	struct lmt_pretok pt;
	uint8_t sha256[LMT_SHA256_LEN]; /* of the file it was loaded from or saved to */

	/* lookup tables built by lmt_tok_finalize */
	struct lmt_pair_ent {     /* one cache line holds all a lookup needs */
		uint64_t key;     /* (a << 32 | b) + 1, 0 = empty */
		uint32_t c, prio;
	} *pairs;
	size_t pair_mask;
	uint64_t *str_hash;       /* bytes -> id, for ignore_merges and imports */
	uint32_t *str_id;
	size_t str_mask;
};

static inline uint32_t lmt_tok_len(const struct lmt_tokenizer *t, uint32_t id)
{
	return t->off[id + 1] - t->off[id];
}
static inline const uint8_t *lmt_tok_bytes(const struct lmt_tokenizer *t, uint32_t id)
{
	return t->bytes + t->off[id];
}

/*
 * Building a tokenizer by hand (importers, the trainer): lmt_tok_init gives an
 * empty model; add tokens with lmt_tok_add_token, merges with lmt_tok_add_merge,
 * then lmt_tok_finalize checks everything (bytes all present, merges consistent,
 * specials untouched by merges, no two non-special tokens with the same bytes nor
 * two special ones) and builds the lookup tables. lmt_tok_release frees everything.
 */
void lmt_tok_init(struct lmt_tokenizer *t);
/* Add a token with the next id (returned in *id). */
int lmt_tok_add_token(struct lmt_tokenizer *t, const void *s, size_t n, int special,
		      uint32_t *id, struct lmt_err *err);
int lmt_tok_add_merge(struct lmt_tokenizer *t, uint32_t a, uint32_t b, uint32_t c,
		      uint32_t prio, struct lmt_err *err);
int lmt_tok_set_pattern(struct lmt_tokenizer *t, const char *name, const char *regex,
			struct lmt_err *err);
/* Resolve roles: each of eos/bos/pad is a special token's string, or NULL. */
int lmt_tok_set_roles(struct lmt_tokenizer *t, const char *eos, const char *bos, const char *pad,
		      struct lmt_err *err);
int lmt_tok_finalize(struct lmt_tokenizer *t, struct lmt_err *err);
/* Special token strings as given (to training, say): none empty, none twice;
 * LMT_EINVAL with a message naming the first that is not. */
int lmt_tok_check_specials(const char *const *specials, int n, struct lmt_err *err);
void lmt_tok_release(struct lmt_tokenizer *t);

/* Id of a byte string, or LMT_NO_TOKEN (needs lmt_tok_finalize). */
uint32_t lmt_tok_find(const struct lmt_tokenizer *t, const void *s, size_t n);

int lmt_tok_load(struct lmt_tokenizer *t, const char *path, struct lmt_err *err);
/* Write atomically; fills t->sha256. */
int lmt_tok_save(struct lmt_tokenizer *t, const char *path, struct lmt_err *err);
/* The file's bytes in memory (caller frees *out); fills t->sha256. */
int lmt_tok_serialize(struct lmt_tokenizer *t, uint8_t **out, size_t *outlen, struct lmt_err *err);

/* Per-thread scratch for encoding: a pre-tokenizer iterator and a piece cache. */
struct lmt_tok_state;
struct lmt_tok_state *lmt_tok_state_new(const struct lmt_tokenizer *t);
/* For tests: empty the piece cache whenever it holds this many entries (at most
 * its own limit, 131,072), so that a short text goes through many emptyings. */
void lmt_tok_state_cache_limit(struct lmt_tok_state *s, size_t entries);
void lmt_tok_state_free(struct lmt_tok_state *s);

struct lmt_u32vec {
	uint32_t *v;
	size_t n, cap;
};

/*
 * Append the tokens of text to out. With allow_special, occurrences of special
 * token strings in the text become those tokens (leftmost, longest first);
 * otherwise they are ordinary text. Returns 0 or LMT_ENOMEM.
 */
int lmt_tok_encode(const struct lmt_tokenizer *t, struct lmt_tok_state *s, const char *text,
		   size_t len, int allow_special, struct lmt_u32vec *out);
/* The first lmt_pretok_cut place in text at or after from that no string of m
 * spans (m may be NULL: any); for a pattern with no cut rule (none, custom), the
 * first start of a string of m that no other spans; len when there is none. */
size_t lmt_specmatch_cut(const struct lmt_specmatch *m, const struct lmt_pretok *p, const char *text, size_t len,
			 size_t from);
/* Whether a long text of p is cut by guesses (lmt_pretok_guess) rather than at
 * lmt_specmatch_cut's places: p is a custom pattern (no cut rule) and text holds no
 * string of m (m may be NULL: none counts). */
int lmt_specmatch_guessed(const struct lmt_specmatch *m, const struct lmt_pretok *p, const char *text, size_t len);
/* The first offset at or after from where text may be cut in two that encode
 * apart to its tokens (lmt_specmatch_cut, m the special strings with
 * allow_special, else none); len when there is none. */
size_t lmt_tok_cut(const struct lmt_tokenizer *t, const char *text, size_t len, size_t from, int allow_special);
/* A place in a text where a piece ends, and the tokens appended through that piece. */
struct lmt_tok_mark {
	size_t pos, ntok;
};
/*
 * Encode the pieces of text from from on, pre-tokenized as the whole text is (from
 * is where a piece starts, or is taken to: lmt_pretok_iter_seek), up to the first
 * piece that starts at or after to; *end: where the last one encoded ends (from if
 * none). The first nmark pieces' ends and the tokens appended through each go in
 * mark (*marked of them; marked may be NULL). No special tokens, and not for the
 * none pattern. 0 or LMT_ENOMEM.
 */
int lmt_tok_encode_from(const struct lmt_tokenizer *t, struct lmt_tok_state *s, const char *text, size_t len,
			size_t from, size_t to, struct lmt_u32vec *out, struct lmt_tok_mark *mark, size_t nmark,
			size_t *marked, size_t *end);
/* BPE on one piece (no pre-tokenization). */
int lmt_tok_encode_piece(const struct lmt_tokenizer *t, struct lmt_tok_state *s,
			 const uint8_t *p, size_t n, struct lmt_u32vec *out);

/* Bytes of a token sequence; returns bytes written, or the size needed if > cap.
 * Special tokens decode to their strings unless skip_special. */
size_t lmt_tok_decode(const struct lmt_tokenizer *t, const uint32_t *ids, size_t n,
		      int skip_special, uint8_t *out, size_t cap);

/* GPT-2's reversible byte <-> printable-unicode map, used by tokenizer.json files. */
/* UTF-8 of the character standing for byte b (up to 2 bytes + NUL). */
const char *lmt_bytelevel_char(uint8_t b);
/* Decode a byte-level string; returns length or -1 if a character is not in the map. */
long lmt_bytelevel_decode(const char *s, size_t n, uint8_t *out);

#endif
