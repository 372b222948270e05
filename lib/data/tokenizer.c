/*
 * tokenizer.c: the BPE model, its file format, encoding and decoding.
 *
 * Encoding a piece: pieces of one byte map straight to the byte's id; other pieces
 * go through a per-thread cache (most pieces in real text repeat), then through one
 * of two implementations of the same greedy rule, "apply the lowest-priority rule
 * among adjacent pairs, leftmost first": an array scan for short pieces, and a
 * linked list with a min-heap keyed (priority, position) for long ones, which keeps
 * a megabyte-long whitespace run O(n log n) instead of O(n^2). The tests check that
 * both give the same tokens.
 */
#include "data/tokenizer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/atomicfile.h"
#include "core/binformat.h"
#include "core/util.h"

/* ---- byte-level map (GPT-2's bytes_to_unicode) ---- */

static char bl_char[256][3];
static int16_t bl_rev[512]; /* code point (< 512) -> byte, or -1 */
static int bl_ready;

static void bl_init(void)
{
	int n = 0;
	for (int i = 0; i < 512; i++)
		bl_rev[i] = -1;
	for (int b = 0; b < 256; b++) {
		int printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
		int cp = printable ? b : 256 + n++;
		if (cp < 0x80) {
			bl_char[b][0] = (char)cp;
			bl_char[b][1] = 0;
		} else {
			bl_char[b][0] = (char)(0xc0 | cp >> 6);
			bl_char[b][1] = (char)(0x80 | (cp & 0x3f));
			bl_char[b][2] = 0;
		}
		bl_rev[cp] = (int16_t)b;
	}
	__atomic_store_n(&bl_ready, 1, __ATOMIC_RELEASE);
}

const char *lmt_bytelevel_char(uint8_t b)
{
	if (!__atomic_load_n(&bl_ready, __ATOMIC_ACQUIRE))
		bl_init();
	return bl_char[b];
}

long lmt_bytelevel_decode(const char *s, size_t n, uint8_t *out)
{
	if (!__atomic_load_n(&bl_ready, __ATOMIC_ACQUIRE))
		bl_init();
	const unsigned char *p = (const unsigned char *)s;
	long k = 0;
	for (size_t i = 0; i < n;) {
		unsigned cp;
		if (p[i] < 0x80) {
			cp = p[i++];
		} else if ((p[i] & 0xe0) == 0xc0 && i + 1 < n && (p[i + 1] & 0xc0) == 0x80) {
			cp = (unsigned)(p[i] & 0x1f) << 6 | (p[i + 1] & 0x3f);
			i += 2;
		} else {
			return -1;
		}
		if (cp >= 512 || bl_rev[cp] < 0)
			return -1;
		out[k++] = (uint8_t)bl_rev[cp];
	}
	return k;
}

/* ---- building ---- */

void lmt_tok_init(struct lmt_tokenizer *t)
{
	memset(t, 0, sizeof *t);
	t->eos = t->bos = t->pad = LMT_NO_TOKEN;
	for (int i = 0; i < 256; i++)
		t->byte_id[i] = LMT_NO_TOKEN;
}

/* the lookup tables lmt_tok_finalize builds, freed (and NULL) */
static void drop_tables(struct lmt_tokenizer *t)
{
	free(t->pairs);
	free(t->str_hash);
	free(t->str_id);
	free(t->special_ids);
	free(t->special_str);
	free(t->special_len);
	lmt_specmatch_release(&t->special_match);
	t->pairs = NULL;
	t->str_hash = NULL;
	t->str_id = NULL;
	t->special_ids = NULL;
	t->special_str = NULL;
	t->special_len = NULL;
}

void lmt_tok_release(struct lmt_tokenizer *t)
{
	free(t->off);
	free(t->bytes);
	free(t->special);
	free(t->merges);
	drop_tables(t);
	lmt_pretok_release(&t->pt);
	lmt_tok_init(t);
}

/* Arrays grow to powers of two of their counts, so the capacity is implied. */
static size_t cap_for(size_t n)
{
	size_t c = 16;
	while (c < n)
		c *= 2;
	return c;
}

int lmt_tok_add_token(struct lmt_tokenizer *t, const void *s, size_t n, int special,
		      uint32_t *id, struct lmt_err *err)
{
	uint32_t i = t->n_vocab;
	if (i == LMT_NO_TOKEN - 1)
		return lmt_err_set(err, LMT_ERANGE, "too many tokens");
	size_t used = t->off ? t->off[i] : 0;
	if (n > UINT32_MAX - used)
		return lmt_err_set(err, LMT_ERANGE, "token bytes exceed 4 GiB");
	/* capacities are powers of two of the counts, so grow when crossing one */
	if (!t->off || cap_for(i + 2) != cap_for(i + 1) || i == 0) {
		size_t c = cap_for(i + 2);
		uint32_t *o = realloc(t->off, c * sizeof *o);
		uint8_t *sp = o ? realloc(t->special, c) : NULL;
		if (o)
			t->off = o;
		if (!o || !sp)
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		t->special = sp;
		if (i == 0)
			t->off[0] = 0;
	}
	if (cap_for(used + n + 1) != cap_for(used + 1) || !t->bytes) {
		uint8_t *b = realloc(t->bytes, cap_for(used + n + 1));
		if (!b)
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		t->bytes = b;
	}
	memcpy(t->bytes + used, s, n);
	t->off[i + 1] = (uint32_t)(used + n);
	t->special[i] = special ? 1 : 0;
	t->n_vocab = i + 1;
	if (id)
		*id = i;
	return 0;
}

int lmt_tok_add_merge(struct lmt_tokenizer *t, uint32_t a, uint32_t b, uint32_t c,
		      uint32_t prio, struct lmt_err *err)
{
	uint32_t i = t->n_merges;
	if (!t->merges || cap_for(i + 1) != cap_for(i)) {
		struct lmt_merge *m = realloc(t->merges, cap_for(i + 1) * sizeof *m);
		if (!m)
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		t->merges = m;
	}
	t->merges[i] = (struct lmt_merge){ a, b, c, prio };
	t->n_merges = i + 1;
	return 0;
}

int lmt_tok_set_pattern(struct lmt_tokenizer *t, const char *name, const char *regex,
			struct lmt_err *err)
{
	lmt_pretok_release(&t->pt);
	return lmt_pretok_init(&t->pt, name, regex, err);
}

static uint32_t find_special(const struct lmt_tokenizer *t, const char *s)
{
	size_t n = strlen(s);
	for (uint32_t i = 0; i < t->n_vocab; i++)
		if (t->special[i] && lmt_tok_len(t, i) == n && !memcmp(lmt_tok_bytes(t, i), s, n))
			return i;
	return LMT_NO_TOKEN;
}

int lmt_tok_set_roles(struct lmt_tokenizer *t, const char *eos, const char *bos, const char *pad,
		      struct lmt_err *err)
{
	const char *names[3] = { eos, bos, pad }, *what[3] = { "eos", "bos", "pad" };
	uint32_t *slot[3] = { &t->eos, &t->bos, &t->pad };
	for (int k = 0; k < 3; k++) {
		*slot[k] = LMT_NO_TOKEN;
		if (!names[k])
			continue;
		uint32_t id = find_special(t, names[k]);
		if (id == LMT_NO_TOKEN)
			return lmt_err_set(err, LMT_EINVAL, "%s token '%s' is not a special token",
					   what[k], names[k]);
		*slot[k] = id;
	}
	if (!eos) {
		/* the conventions: a lone special token, or <|endoftext|>, ends documents */
		uint32_t n = 0, last = LMT_NO_TOKEN;
		for (uint32_t i = 0; i < t->n_vocab; i++)
			if (t->special[i] && strncmp((const char *)lmt_tok_bytes(t, i), "<|lmt_unused_", 13)) {
				n++;
				last = i;
			}
		t->eos = n == 1 && last != t->bos && last != t->pad ? last : find_special(t, "<|endoftext|>");
		if (t->eos == t->bos || t->eos == t->pad)
			t->eos = LMT_NO_TOKEN;
	}
	return 0;
}

static size_t pow2_at_least(size_t n)
{
	size_t c = 16;
	while (c < n)
		c *= 2;
	return c;
}

static inline uint64_t pair_hash(uint64_t key)
{
	return lmt_mix64(key);
}

static inline const struct lmt_pair_ent *pair_lookup(const struct lmt_tokenizer *t, uint32_t a,
						     uint32_t b)
{
	uint64_t key = ((uint64_t)a << 32 | b) + 1;
	size_t i = pair_hash(key) & t->pair_mask;
	for (;;) {
		const struct lmt_pair_ent *e = &t->pairs[i];
		if (e->key == key)
			return e;
		if (!e->key)
			return NULL;
		i = (i + 1) & t->pair_mask;
	}
}

uint32_t lmt_tok_find(const struct lmt_tokenizer *t, const void *s, size_t n)
{
	if (!t->str_hash)
		return LMT_NO_TOKEN;
	uint64_t h = lmt_hash_bytes(s, n, 0) | 1;
	size_t i = h & t->str_mask;
	for (;;) {
		uint64_t k = t->str_hash[i];
		if (!k)
			return LMT_NO_TOKEN;
		if (k == h) {
			uint32_t id = t->str_id[i];
			if (lmt_tok_len(t, id) == n && !memcmp(lmt_tok_bytes(t, id), s, n))
				return id;
		}
		i = (i + 1) & t->str_mask;
	}
}

/* a token's bytes, for sorting specials by them */
struct span {
	const uint8_t *s;
	uint32_t n, id;
};

static int cmp_span(const void *x, const void *y)
{
	const struct span *a = x, *b = y;
	int c = memcmp(a->s, b->s, LMT_MIN(a->n, b->n));
	return c ? c : a->n != b->n ? (a->n < b->n ? -1 : 1) : (a->id < b->id ? -1 : a->id > b->id);
}

/* Special tokens' strings: unique, or encoding could reach only one of two. */
static int specials_distinct(const struct lmt_tokenizer *t, struct lmt_err *err)
{
	if (t->n_special < 2)
		return 0;
	struct span *v = malloc(t->n_special * sizeof *v);
	if (!v)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	for (uint32_t k = 0; k < t->n_special; k++) {
		uint32_t id = t->special_ids[k];
		v[k] = (struct span){ lmt_tok_bytes(t, id), lmt_tok_len(t, id), id };
	}
	qsort(v, t->n_special, sizeof *v, cmp_span);
	int rc = 0;
	for (uint32_t k = 1; k < t->n_special && !rc; k++)
		if (v[k].n == v[k - 1].n && !memcmp(v[k].s, v[k - 1].s, v[k].n))
			rc = lmt_err_set(err, LMT_EFORMAT, "special tokens %u and %u have the same bytes",
					 v[k - 1].id, v[k].id);
	free(v);
	return rc;
}

int lmt_tok_check_specials(const char *const *specials, int n, struct lmt_err *err)
{
	for (int i = 0; i < n; i++) {
		if (!*specials[i])
			return lmt_err_set(err, LMT_EINVAL, "special token is empty");
		for (int k = 0; k < i; k++)
			if (!strcmp(specials[k], specials[i]))
				return lmt_err_set(err, LMT_EINVAL, "special token '%s' given twice", specials[i]);
	}
	return 0;
}

int lmt_tok_finalize(struct lmt_tokenizer *t, struct lmt_err *err)
{
	drop_tables(t);
	if (t->n_vocab == 0)
		return lmt_err_set(err, LMT_EFORMAT, "empty vocabulary");

	/* strings of non-special tokens: unique; single bytes: all present */
	t->str_mask = pow2_at_least(2 * (size_t)t->n_vocab) - 1;
	t->str_hash = calloc(t->str_mask + 1, sizeof *t->str_hash);
	t->str_id = malloc((t->str_mask + 1) * sizeof *t->str_id);
	if (!t->str_hash || !t->str_id)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	for (int i = 0; i < 256; i++)
		t->byte_id[i] = LMT_NO_TOKEN;
	t->n_special = 0;
	t->max_token_len = 0;
	/* Tables far larger than the caches, filled in a random order: loading o200k
	 * took 57 ms, most of it waiting on misses. So the hash of the token LOOK ahead
	 * is taken now and its slots fetched (hs[] holds the hashes in between). */
	enum { LOOK = 16 };
	uint64_t hs[LOOK];
	for (uint32_t id = 0; id < LOOK && id < t->n_vocab; id++)
		hs[id] = lmt_hash_bytes(lmt_tok_bytes(t, id), lmt_tok_len(t, id), 0) | 1;
	for (uint32_t id = 0; id < t->n_vocab; id++) {
		uint64_t h = hs[id % LOOK];
		if (id + LOOK < t->n_vocab) {
			uint64_t f = lmt_hash_bytes(lmt_tok_bytes(t, id + LOOK), lmt_tok_len(t, id + LOOK), 0) | 1;
			hs[id % LOOK] = f;
			__builtin_prefetch(&t->str_hash[f & t->str_mask], 1);
			__builtin_prefetch(&t->str_id[f & t->str_mask], 1);
		}
		uint32_t len = lmt_tok_len(t, id);
		if (t->special[id]) {
			if (len == 0)
				return lmt_err_set(err, LMT_EFORMAT, "special token %u is empty", id);
			t->n_special++;
			continue;
		}
		if (len == 0)
			return lmt_err_set(err, LMT_EFORMAT, "token %u is empty", id);
		if (len > t->max_token_len)
			t->max_token_len = len;
		/* as lmt_tok_find, the first free slot then taking the token */
		const uint8_t *s = lmt_tok_bytes(t, id);
		size_t i = h & t->str_mask;
		for (; t->str_hash[i]; i = (i + 1) & t->str_mask) {
			uint32_t dup = t->str_id[i];
			if (t->str_hash[i] == h && lmt_tok_len(t, dup) == len && !memcmp(lmt_tok_bytes(t, dup), s, len))
				return lmt_err_set(err, LMT_EFORMAT, "tokens %u and %u have the same bytes", dup, id);
		}
		t->str_hash[i] = h;
		t->str_id[i] = id;
		if (len == 1)
			t->byte_id[s[0]] = id;
	}
	for (int b = 0; b < 256; b++)
		if (t->byte_id[b] == LMT_NO_TOKEN)
			return lmt_err_set(err, LMT_EFORMAT,
				"byte 0x%02x has no token (a byte-level vocabulary needs all 256)", b);
	t->special_ids = malloc((t->n_special ? t->n_special : 1) * sizeof *t->special_ids);
	t->special_str = malloc((t->n_special ? t->n_special : 1) * sizeof *t->special_str);
	t->special_len = malloc((t->n_special ? t->n_special : 1) * sizeof *t->special_len);
	if (!t->special_ids || !t->special_str || !t->special_len)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	uint32_t k = 0;
	for (uint32_t id = 0; id < t->n_vocab; id++)
		if (t->special[id]) {
			t->special_str[k] = (const char *)lmt_tok_bytes(t, id);
			t->special_len[k] = lmt_tok_len(t, id);
			t->special_ids[k++] = id; /* ascending, as the loop goes */
		}
	if (lmt_specmatch_init(&t->special_match, k, t->special_str, t->special_len))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	int rc = specials_distinct(t, err);
	if (rc)
		return rc;

	/* merges: in range, not special, consistent, no pair twice */
	t->pair_mask = pow2_at_least(2 * (size_t)t->n_merges + 2) - 1;
	t->pairs = calloc(t->pair_mask + 1, sizeof *t->pairs);
	if (!t->pairs)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	for (uint32_t m = 0; m < t->n_merges; m++) {
		const struct lmt_merge *g = &t->merges[m];
		/* as above: the slot and the tokens' offsets of the merge 2 * LOOK ahead,
		 * and the bytes of the one LOOK ahead (its offsets fetched by then) */
		if (m + 2 * LOOK < t->n_merges) {
			const struct lmt_merge *f = g + 2 * LOOK;
			if (f->a < t->n_vocab && f->b < t->n_vocab && f->c < t->n_vocab) {
				__builtin_prefetch(&t->off[f->a]);
				__builtin_prefetch(&t->off[f->b]);
				__builtin_prefetch(&t->off[f->c]);
				__builtin_prefetch(&t->pairs[pair_hash(((uint64_t)f->a << 32 | f->b) + 1) & t->pair_mask], 1);
			}
		}
		if (m + LOOK < t->n_merges) {
			const struct lmt_merge *f = g + LOOK;
			if (f->a < t->n_vocab && f->b < t->n_vocab && f->c < t->n_vocab) {
				__builtin_prefetch(lmt_tok_bytes(t, f->a));
				__builtin_prefetch(lmt_tok_bytes(t, f->b));
				__builtin_prefetch(lmt_tok_bytes(t, f->c));
			}
		}
		if (g->a >= t->n_vocab || g->b >= t->n_vocab || g->c >= t->n_vocab)
			return lmt_err_set(err, LMT_EFORMAT, "merge %u names a token id out of range", m);
		if (t->special[g->a] || t->special[g->b] || t->special[g->c])
			return lmt_err_set(err, LMT_EFORMAT, "merge %u involves a special token", m);
		if (g->prio == LMT_NO_TOKEN)
			return lmt_err_set(err, LMT_EFORMAT, "merge %u has the reserved priority 0xffffffff", m);
		uint32_t la = lmt_tok_len(t, g->a), lb = lmt_tok_len(t, g->b);
		if (lmt_tok_len(t, g->c) != la + lb ||
		    memcmp(lmt_tok_bytes(t, g->c), lmt_tok_bytes(t, g->a), la) ||
		    memcmp(lmt_tok_bytes(t, g->c) + la, lmt_tok_bytes(t, g->b), lb))
			return lmt_err_set(err, LMT_EFORMAT,
				"merge %u: token %u is not the concatenation of tokens %u and %u",
				m, g->c, g->a, g->b);
		uint64_t key = ((uint64_t)g->a << 32 | g->b) + 1;
		size_t i = pair_hash(key) & t->pair_mask;
		while (t->pairs[i].key) {
			if (t->pairs[i].key == key)
				return lmt_err_set(err, LMT_EFORMAT, "merge %u repeats the pair (%u, %u)",
						   m, g->a, g->b);
			i = (i + 1) & t->pair_mask;
		}
		t->pairs[i] = (struct lmt_pair_ent){ key, g->c, g->prio };
	}
	uint32_t roles[3] = { t->eos, t->bos, t->pad };
	for (int r = 0; r < 3; r++)
		if (roles[r] != LMT_NO_TOKEN && (roles[r] >= t->n_vocab || !t->special[roles[r]]))
			return lmt_err_set(err, LMT_EFORMAT, "%s id %u is not a special token",
					   r == 0 ? "eos" : r == 1 ? "bos" : "pad", roles[r]);
	return 0;
}

/* ---- file ---- */

static size_t pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* A growable byte buffer for serialising. */
struct bbuf {
	uint8_t *p;
	size_t n, cap;
	int oom;
};

static void bput(struct bbuf *b, const void *s, size_t n)
{
	if (b->oom || LMT_GROW(b->p, b->cap, b->n + n + 8)) {
		b->oom = 1;
		return;
	}
	if (n)
		memcpy(b->p + b->n, s, n);
	b->n += n;
}

static void bpad(struct bbuf *b)
{
	static const uint8_t zero[8];
	bput(b, zero, pad8(b->n) - b->n);
}

int lmt_tok_serialize(struct lmt_tokenizer *t, uint8_t **out, size_t *outlen, struct lmt_err *err)
{
	uint8_t ext[64] = { 0 };
	const char *name = t->pt.name[0] ? t->pt.name : "none";
	const char *regex = t->pt.regex ? t->pt.regex : "";
	uint32_t nl = (uint32_t)strlen(name), rl = (uint32_t)strlen(regex);
	uint64_t vb = t->off[t->n_vocab];
	lmt_store_u32(ext + 0, t->n_vocab);
	lmt_store_u32(ext + 4, t->n_merges);
	lmt_store_u32(ext + 8, t->n_special);
	lmt_store_u32(ext + 12, t->flags);
	lmt_store_u32(ext + 16, t->eos);
	lmt_store_u32(ext + 20, t->bos);
	lmt_store_u32(ext + 24, t->pad);
	lmt_store_u32(ext + 28, nl);
	lmt_store_u32(ext + 32, rl);
	lmt_store_u32(ext + 36, t->max_token_len);
	lmt_store_u64(ext + 40, vb);
	struct bbuf b = { 0 };
	bput(&b, name, nl);
	bput(&b, regex, rl);
	bpad(&b);
	bput(&b, t->off, ((size_t)t->n_vocab + 1) * 4);
	bpad(&b);
	bput(&b, t->bytes, vb);
	bpad(&b);
	bput(&b, t->special_ids, (size_t)t->n_special * 4);
	bpad(&b);
	for (uint32_t m = 0; m < t->n_merges; m++) {
		uint8_t r[16];
		lmt_store_u32(r, t->merges[m].a);
		lmt_store_u32(r + 4, t->merges[m].b);
		lmt_store_u32(r + 8, t->merges[m].c);
		lmt_store_u32(r + 12, t->merges[m].prio);
		bput(&b, r, 16);
	}
	if (b.oom) {
		free(b.p);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	int rc = lmt_bin_pack(&lmt_format_tokenizer, ext, b.p, b.n, out, outlen, err);
	free(b.p);
	if (!rc)
		lmt_sha256(*out, *outlen, t->sha256);
	return rc;
}

int lmt_tok_save(struct lmt_tokenizer *t, const char *path, struct lmt_err *err)
{
	uint8_t *buf;
	size_t n;
	int rc = lmt_tok_serialize(t, &buf, &n, err);
	if (rc)
		return rc;
	rc = lmt_write_file_atomic(path, buf, n, err);
	free(buf);
	return rc;
}

int lmt_tok_load(struct lmt_tokenizer *t, const char *path, struct lmt_err *err)
{
	struct lmt_binreader f;
	lmt_tok_init(t);
	int rc = lmt_binreader_open(&f, path, &lmt_format_tokenizer, LMT_BIN_VERIFY, err);
	if (rc)
		return rc;
	const uint8_t *e = f.ext;
	uint32_t nv = lmt_load_u32(e), nm = lmt_load_u32(e + 4), ns = lmt_load_u32(e + 8);
	uint32_t nl = lmt_load_u32(e + 28), rl = lmt_load_u32(e + 32);
	uint64_t vb = lmt_load_u64(e + 40);
	t->flags = lmt_load_u32(e + 12);
	t->eos = lmt_load_u32(e + 16);
	t->bos = lmt_load_u32(e + 20);
	t->pad = lmt_load_u32(e + 24);
	/* the sections must add up to the payload exactly */
	uint64_t need = pad8((uint64_t)nl + rl) + pad8(((uint64_t)nv + 1) * 4) + pad8(vb) +
			pad8((uint64_t)ns * 4) + (uint64_t)nm * 16;
	if (nv == 0 || nl > 4096 || rl > (1u << 20) || vb > UINT32_MAX || need != f.payload_size) {
		rc = lmt_err_set(err, LMT_EFORMAT,
			"'%s': header fields (vocab %u, merges %u, specials %u, %llu token bytes) "
			"do not match the %llu-byte payload", path, nv, nm, ns,
			(unsigned long long)vb, (unsigned long long)f.payload_size);
		goto out;
	}
	if (t->flags & ~LMT_TOK_IGNORE_MERGES) {
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': unknown tokenizer flags 0x%x", path, t->flags);
		goto out;
	}
	const uint8_t *p = f.payload;
	char name[64], *regex = malloc(rl + 1);
	if (!regex) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto out;
	}
	snprintf(name, sizeof name, "%.*s", (int)LMT_MIN(nl, 63u), (const char *)p);
	if (memchr(p, 0, (size_t)nl + rl)) {
		/* the lengths are explicit: a NUL would cut the pattern short unseen */
		free(regex);
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': the pattern name or regex holds a NUL byte", path);
		goto out;
	}
	memcpy(regex, p + nl, rl);
	regex[rl] = 0;
	p += pad8((size_t)nl + rl);
	rc = lmt_pretok_init(&t->pt, name, rl ? regex : NULL, err);
	free(regex);
	if (rc) {
		lmt_err_prefix(err, "'%s'", path);
		goto out;
	}
	t->off = malloc(((size_t)nv + 1) * 4);
	t->bytes = malloc(vb ? vb : 1);
	t->special = calloc(nv, 1);
	t->merges = malloc((nm ? nm : 1) * sizeof *t->merges);
	if (!t->off || !t->bytes || !t->special || !t->merges) {
		rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
		goto out;
	}
	memcpy(t->off, p, ((size_t)nv + 1) * 4);
	p += pad8(((size_t)nv + 1) * 4);
	if (t->off[0] != 0 || t->off[nv] != vb) {
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': token offsets do not span the token bytes", path);
		goto out;
	}
	for (uint32_t i = 0; i < nv; i++)
		if (t->off[i + 1] < t->off[i]) {
			rc = lmt_err_set(err, LMT_EFORMAT, "'%s': token offsets decrease at token %u", path, i);
			goto out;
		}
	memcpy(t->bytes, p, vb);
	p += pad8(vb);
	for (uint32_t i = 0; i < ns; i++) {
		uint32_t id = lmt_load_u32(p + 4 * i);
		if (id >= nv || t->special[id]) {
			rc = lmt_err_set(err, LMT_EFORMAT, "'%s': special token id %u is %s", path, id,
					 id >= nv ? "out of range" : "listed twice");
			goto out;
		}
		t->special[id] = 1;
	}
	p += pad8((size_t)ns * 4);
	for (uint32_t m = 0; m < nm; m++, p += 16)
		t->merges[m] = (struct lmt_merge){ lmt_load_u32(p), lmt_load_u32(p + 4),
						   lmt_load_u32(p + 8), lmt_load_u32(p + 12) };
	t->n_vocab = nv;
	t->n_merges = nm;
	if ((rc = lmt_tok_finalize(t, err))) {
		lmt_err_prefix(err, "'%s'", path);
		goto out;
	}
	if (t->n_special != ns) {
		rc = lmt_err_set(err, LMT_EFORMAT, "'%s': %u special tokens, header says %u", path,
				 t->n_special, ns);
		goto out;
	}
	memset(t->sha256, 0, sizeof t->sha256);
	{
		/* the identity is the SHA-256 of the whole file, as sha256sum prints it */
		lmt_sha256(f.map, f.size, t->sha256);
	}
out:
	lmt_binreader_close(&f);
	if (rc)
		lmt_tok_release(t);
	return rc;
}

/* ---- encoding ---- */

/* the cache's slots: it is emptied when half are taken, which at 2^16 slots came every
 * 32,768 distinct pieces, a few times a megabyte of real text, and every thread
 * then recomputed what the emptying dropped. At 2^18 (6 MiB a thread) tok-encode
 * took 0.91-0.98x the time on 20 MB of either benchmark corpus, gpt2 and cl100k, on
 * 1 and 2 threads (paired medians of 5 runs); 2^20 was faster again, by 4%, at 24
 * MiB a thread */
#define CACHE_BITS 18
#define CACHE_MAX_PIECE 256
#define SHORT_PIECE 48

struct cache_ent {
	uint64_t h;          /* 0 = empty */
	uint32_t key_off, key_len;
	uint32_t tok_off, ntok;
};

struct lmt_tok_state {
	const struct lmt_tokenizer *t;
	struct lmt_pretok_iter it;
	struct cache_ent *ent;
	size_t nent;
	uint8_t *keys;
	size_t keys_len, keys_cap;
	uint32_t *toks;
	size_t toks_len, toks_cap;
	size_t clear_at;       /* entries at which the cache is emptied */
	/* scratch for BPE */
	uint32_t *sym, *pr, *res, *nxt, *prv;
	uint64_t *heap;
	size_t scap, hcap;
};

void lmt_tok_state_cache_limit(struct lmt_tok_state *s, size_t entries)
{
	if (entries && entries < ((size_t)1 << CACHE_BITS) / 2)
		s->clear_at = entries;
}

struct lmt_tok_state *lmt_tok_state_new(const struct lmt_tokenizer *t)
{
	/* its own cache lines: threads update their state for every piece */
	size_t sz = (sizeof(struct lmt_tok_state) + 63) & ~(size_t)63;
	struct lmt_tok_state *s = aligned_alloc(64, sz);
	if (!s)
		return NULL;
	memset(s, 0, sz);
	s->t = t;
	s->clear_at = ((size_t)1 << CACHE_BITS) / 2;
	if (lmt_pretok_iter_init(&s->it, &t->pt)) {
		lmt_tok_state_free(s);
		return NULL;
	}
	return s;
}

void lmt_tok_state_free(struct lmt_tok_state *s)
{
	if (!s)
		return;
	lmt_pretok_iter_release(&s->it);
	free(s->ent);
	free(s->keys);
	free(s->toks);
	free(s->sym);
	free(s->pr);
	free(s->res);
	free(s->nxt);
	free(s->prv);
	free(s->heap);
	free(s);
}

static int vec_push(struct lmt_u32vec *v, uint32_t x)
{
	if (v->n == v->cap && LMT_GROW(v->v, v->cap, v->n + 1))
		return LMT_ENOMEM;
	v->v[v->n++] = x;
	return 0;
}

static int vec_append(struct lmt_u32vec *v, const uint32_t *x, size_t n)
{
	if (LMT_GROW(v->v, v->cap, v->n + n))
		return LMT_ENOMEM;
	memcpy(v->v + v->n, x, n * sizeof *x);
	v->n += n;
	return 0;
}

static int scratch(struct lmt_tok_state *s, size_t n)
{
	if (n <= s->scap)
		return 0;
	size_t c = pow2_at_least(n);
	uint32_t **arrs[] = { &s->sym, &s->pr, &s->res, &s->nxt, &s->prv };
	for (size_t k = 0; k < LMT_ARRAY_SIZE(arrs); k++) {
		uint32_t *a = realloc(*arrs[k], c * sizeof *a);
		if (!a)
			return LMT_ENOMEM; /* the arrays already grown stay valid */
		*arrs[k] = a;
	}
	s->scap = c;
	return 0;
}

/* Priority of merging a and b, LMT_NO_TOKEN if no rule; *c gets the result. */
static inline uint32_t prio_of(const struct lmt_tokenizer *t, uint32_t a, uint32_t b, uint32_t *c)
{
	const struct lmt_pair_ent *e = pair_lookup(t, a, b);
	if (!e)
		return LMT_NO_TOKEN;
	*c = e->c;
	return e->prio;
}

/* Array version: O(n^2) worst case, fastest for the short pieces of real text.
 * pr[i] and res[i] hold the priority and result of merging sym[i] and sym[i+1]. */
static size_t bpe_short(const struct lmt_tokenizer *t, uint32_t *sym, uint32_t *pr, uint32_t *res,
			size_t n)
{
	for (size_t i = 0; i + 1 < n; i++)
		pr[i] = prio_of(t, sym[i], sym[i + 1], &res[i]);
	while (n > 1) {
		uint32_t best = LMT_NO_TOKEN;
		size_t bi = 0;
		for (size_t i = 0; i + 1 < n; i++)
			if (pr[i] < best) {
				best = pr[i];
				bi = i;
			}
		if (best == LMT_NO_TOKEN)
			break;
		sym[bi] = res[bi];
		memmove(sym + bi + 1, sym + bi + 2, (n - bi - 2) * sizeof *sym);
		if (bi + 2 < n) {
			memmove(pr + bi + 1, pr + bi + 2, (n - bi - 3) * sizeof *pr);
			memmove(res + bi + 1, res + bi + 2, (n - bi - 3) * sizeof *res);
		}
		n--;
		if (bi > 0)
			pr[bi - 1] = prio_of(t, sym[bi - 1], sym[bi], &res[bi - 1]);
		if (bi + 1 < n)
			pr[bi] = prio_of(t, sym[bi], sym[bi + 1], &res[bi]);
	}
	return n;
}

/* min-heap of (priority << 32 | position) */
static void heap_push(uint64_t *h, size_t *n, uint64_t x)
{
	size_t i = (*n)++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (h[p] <= x)
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = x;
}

static uint64_t heap_pop(uint64_t *h, size_t *n)
{
	uint64_t top = h[0], x = h[--(*n)];
	size_t i = 0, m = *n;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, c = i;
		uint64_t v = x;
		if (l < m && h[l] < v) {
			c = l;
			v = h[l];
		}
		if (r < m && h[r] < v)
			c = r;
		if (c == i)
			break;
		h[i] = h[c];
		i = c;
	}
	if (m)
		h[i] = x;
	return top;
}

/* Heap version: O(n log n). Same rule: lowest priority, then leftmost position. */
static int bpe_long(struct lmt_tok_state *s, size_t n, size_t *out_n)
{
	const struct lmt_tokenizer *t = s->t;
	uint32_t *sym = s->sym, *nxt = s->nxt, *prv = s->prv;
	const uint32_t END = LMT_NO_TOKEN;
	if (LMT_GROW(s->heap, s->hcap, 3 * n + 1))
		return LMT_ENOMEM;
	uint64_t *h = s->heap;
	size_t hn = 0;
	for (size_t i = 0; i < n; i++) {
		nxt[i] = i + 1 < n ? (uint32_t)(i + 1) : END;
		prv[i] = i > 0 ? (uint32_t)(i - 1) : END;
	}
	for (size_t i = 0; i + 1 < n; i++) {
		uint32_t c, p = prio_of(t, sym[i], sym[i + 1], &c);
		if (p != END)
			heap_push(h, &hn, (uint64_t)p << 32 | i);
	}
	/* removed nodes are marked by prv == i itself (never true for a live node) */
	while (hn) {
		uint64_t top = heap_pop(h, &hn);
		uint32_t p = (uint32_t)(top >> 32), i = (uint32_t)top;
		if (prv[i] == i || nxt[i] == END)
			continue;
		uint32_t j = nxt[i];
		const struct lmt_pair_ent *e = pair_lookup(t, sym[i], sym[j]);
		if (!e || e->prio != p)
			continue;
		sym[i] = e->c;
		nxt[i] = nxt[j];
		if (nxt[j] != END)
			prv[nxt[j]] = i;
		prv[j] = j;
		if (hn + 2 > s->hcap) {
			if (LMT_GROW(s->heap, s->hcap, hn + 2))
				return LMT_ENOMEM;
			h = s->heap;
		}
		uint32_t c;
		if (prv[i] != END) {
			uint32_t q = prio_of(t, sym[prv[i]], sym[i], &c);
			if (q != END)
				heap_push(h, &hn, (uint64_t)q << 32 | prv[i]);
		}
		if (nxt[i] != END) {
			uint32_t q = prio_of(t, sym[i], sym[nxt[i]], &c);
			if (q != END)
				heap_push(h, &hn, (uint64_t)q << 32 | i);
		}
	}
	size_t k = 0;
	for (uint32_t i = 0; i != END; i = nxt[i])
		sym[k++] = sym[i];
	*out_n = k;
	return 0;
}

/*
 * The cache's slots are made by the first piece a state encodes, not with the state:
 * a state is used by one thread, and tok-encode makes every thread's state in its
 * main thread, which then wrote 6 MiB a thread before any encoding began (2.7 ms a
 * thread on the 2-core VM here: 0.17 s at 64 threads), the slots of every core on
 * the memory of the main thread's node. A state that encodes nothing takes none.
 */
static int cache_ready(struct lmt_tok_state *s)
{
	if (!s->ent && !(s->ent = lmt_zalloc((size_t)1 << CACHE_BITS, sizeof *s->ent)))
		return LMT_ENOMEM;
	return 0;
}

static void cache_clear(struct lmt_tok_state *s)
{
	memset(s->ent, 0, ((size_t)1 << CACHE_BITS) * sizeof *s->ent);
	s->nent = 0;
	s->keys_len = 0;
	s->toks_len = 0;
}

static const struct cache_ent *cache_get(struct lmt_tok_state *s, const uint8_t *p, size_t n,
					 uint64_t h)
{
	size_t mask = ((size_t)1 << CACHE_BITS) - 1, i = h & mask;
	for (;;) {
		const struct cache_ent *e = &s->ent[i];
		if (!e->h)
			return NULL;
		if (e->h == h && e->key_len == n && !memcmp(s->keys + e->key_off, p, n))
			return e;
		i = (i + 1) & mask;
	}
}

static void cache_put(struct lmt_tok_state *s, const uint8_t *p, size_t n, uint64_t h,
		      const uint32_t *toks, size_t ntok)
{
	size_t mask = ((size_t)1 << CACHE_BITS) - 1;
	if (s->nent >= s->clear_at || s->keys_len > (64u << 20))
		cache_clear(s);
	if (LMT_GROW(s->keys, s->keys_cap, s->keys_len + n) ||
	    LMT_GROW(s->toks, s->toks_cap, s->toks_len + ntok))
		return; /* the cache is an optimisation: skip it when memory is short */
	size_t i = h & mask;
	while (s->ent[i].h)
		i = (i + 1) & mask;
	struct cache_ent *e = &s->ent[i];
	e->h = h;
	e->key_off = (uint32_t)s->keys_len;
	e->key_len = (uint32_t)n;
	e->tok_off = (uint32_t)s->toks_len;
	e->ntok = (uint32_t)ntok;
	memcpy(s->keys + s->keys_len, p, n);
	memcpy(s->toks + s->toks_len, toks, ntok * sizeof *toks);
	s->keys_len += n;
	s->toks_len += ntok;
	s->nent++;
}

/* BPE without the cache (exposed to tests through lmt_tok_encode_piece's callers). */
static int bpe(struct lmt_tok_state *s, const uint8_t *p, size_t n, size_t *out_n, int force_long)
{
	const struct lmt_tokenizer *t = s->t;
	if (scratch(s, n))
		return LMT_ENOMEM;
	for (size_t i = 0; i < n; i++)
		s->sym[i] = t->byte_id[p[i]];
	if (n <= SHORT_PIECE && !force_long) {
		*out_n = bpe_short(t, s->sym, s->pr, s->res, n);
		return 0;
	}
	return bpe_long(s, n, out_n);
}

/* One piece, s's cache made (cache_ready): encode_ordinary's loop and
 * lmt_tok_encode_piece. */
static int encode_piece(const struct lmt_tokenizer *t, struct lmt_tok_state *s, const uint8_t *p, size_t n,
			struct lmt_u32vec *out)
{
	if (n == 0)
		return 0;
	if (n == 1)
		return vec_push(out, t->byte_id[p[0]]);
	uint64_t h = 0;
	if (n <= CACHE_MAX_PIECE) {
		h = lmt_hash_bytes(p, n, 0x5eed) | 1;
		const struct cache_ent *e = cache_get(s, p, n, h);
		if (e)
			return vec_append(out, s->toks + e->tok_off, e->ntok);
	}
	if (t->flags & LMT_TOK_IGNORE_MERGES) {
		uint32_t id = lmt_tok_find(t, p, n);
		if (id != LMT_NO_TOKEN) {
			if (h)
				cache_put(s, p, n, h, &id, 1);
			return vec_push(out, id);
		}
	}
	size_t k;
	int rc = bpe(s, p, n, &k, 0);
	if (rc)
		return rc;
	if (h)
		cache_put(s, p, n, h, s->sym, k);
	return vec_append(out, s->sym, k);
}

int lmt_tok_encode_piece(const struct lmt_tokenizer *t, struct lmt_tok_state *s,
			 const uint8_t *p, size_t n, struct lmt_u32vec *out)
{
	return cache_ready(s) ? LMT_ENOMEM : encode_piece(t, s, p, n, out);
}

/* For tests: BPE forced through one implementation (0: array, 1: heap). */
int lmt_tok_bpe_impl(struct lmt_tok_state *s, const uint8_t *p, size_t n, int heap,
		     struct lmt_u32vec *out);
int lmt_tok_bpe_impl(struct lmt_tok_state *s, const uint8_t *p, size_t n, int heap,
		     struct lmt_u32vec *out)
{
	size_t k;
	if (n == 0)
		return 0;
	if (!heap && scratch(s, n))
		return LMT_ENOMEM;
	int rc;
	if (!heap) {
		for (size_t i = 0; i < n; i++)
			s->sym[i] = s->t->byte_id[p[i]];
		k = bpe_short(s->t, s->sym, s->pr, s->res, n);
		rc = 0;
	} else {
		rc = bpe(s, p, n, &k, 1);
	}
	return rc ? rc : vec_append(out, s->sym, k);
}

/*
 * Pieces are found PIPE at a time and their cache slots prefetched before any is
 * looked up: the cache is larger than L2, and waiting on one miss per piece was the
 * largest single cost of encoding.
 */
#define PIPE 32

int lmt_tok_encode_from(const struct lmt_tokenizer *t, struct lmt_tok_state *s, const char *text, size_t len,
			size_t from, size_t to, struct lmt_u32vec *out, struct lmt_tok_mark *mark, size_t nmark,
			size_t *marked, size_t *end)
{
	size_t st[PIPE], n[PIPE], nm = 0, base = out->n, last = from;
	const size_t mask = ((size_t)1 << CACHE_BITS) - 1;
	*end = from;
	if (cache_ready(s))
		return LMT_ENOMEM;
	lmt_pretok_iter_reset(&s->it, text, len);
	lmt_pretok_iter_seek(&s->it, from);
	for (;;) {
		int k = 0;
		while (k < PIPE && lmt_pretok_next(&s->it, &st[k], &n[k]) && st[k] < to) {
			if (n[k] > 1 && n[k] <= CACHE_MAX_PIECE)
				__builtin_prefetch(&s->ent[(lmt_hash_bytes(text + st[k], n[k], 0x5eed) | 1) & mask]);
			k++;
		}
		for (int i = 0; i < k; i++) {
			int rc = encode_piece(t, s, (const uint8_t *)text + st[i], n[i], out);
			if (rc)
				return rc;
			last = st[i] + n[i];
			if (nm < nmark)
				mark[nm++] = (struct lmt_tok_mark){ last, out->n - base };
		}
		if (k < PIPE)
			break;
	}
	*end = last;
	if (marked)
		*marked = nm;
	return 0;
}

static int encode_ordinary(const struct lmt_tokenizer *t, struct lmt_tok_state *s,
			   const char *text, size_t len, struct lmt_u32vec *out)
{
	size_t end;
	return lmt_tok_encode_from(t, s, text, len, 0, SIZE_MAX, out, NULL, 0, NULL, &end);
}

int lmt_tok_encode(const struct lmt_tokenizer *t, struct lmt_tok_state *s, const char *text,
		   size_t len, int allow_special, struct lmt_u32vec *out)
{
	if (!allow_special || !t->n_special)
		return encode_ordinary(t, s, text, len, out);
	size_t pos = 0;
	while (pos < len) {
		/* the earliest special string; the longest one where several start there */
		size_t best = len;
		uint32_t k = 0;
		int found = lmt_specmatch_next(&t->special_match, text, len, pos, &best, &k);
		int rc = encode_ordinary(t, s, text + pos, best - pos, out);
		if (rc)
			return rc;
		if (!found)
			break;
		if ((rc = vec_push(out, t->special_ids[k])))
			return rc;
		pos = best + t->special_len[k];
	}
	return 0;
}

size_t lmt_specmatch_cut(const struct lmt_specmatch *m, const struct lmt_pretok *p, const char *text, size_t len,
			 size_t from)
{
	if (!p->builtin) {
		/* No cut rule: the start of a special string that no other spans. The
		 * whole takes a special string there (the leftmost from any place before
		 * it ends at or before it, and the longest there is the same), and the
		 * ordinary text on either side ends, or starts, there alike */
		size_t at;
		uint32_t k;
		for (size_t pos = from; m && pos < len && lmt_specmatch_next(m, text, len, pos, &at, &k); pos = at + 1)
			if (at > 0 && !lmt_specmatch_spans(m, text, len, at))
				return at;
		return len;
	}
	for (size_t c = from;; c++) {
		c = lmt_pretok_cut(p, text, len, c);
		if (c >= len || !lmt_specmatch_spans(m, text, len, c))
			return c;
	}
}

int lmt_specmatch_guessed(const struct lmt_specmatch *m, const struct lmt_pretok *p, const char *text, size_t len)
{
	size_t at;
	uint32_t k;
	return p->code && !p->builtin && !lmt_specmatch_next(m, text, len, 0, &at, &k);
}

size_t lmt_tok_cut(const struct lmt_tokenizer *t, const char *text, size_t len, size_t from, int allow_special)
{
	return lmt_specmatch_cut(allow_special ? &t->special_match : NULL, &t->pt, text, len, from);
}

/* sorting the strings: by their bytes, a prefix first */
static const struct lmt_specmatch *sort_m;

static int cmp_special(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	uint32_t lx = sort_m->slen[x], ly = sort_m->slen[y];
	int c = memcmp(sort_m->str[x], sort_m->str[y], LMT_MIN(lx, ly));
	return c ? c : (lx > ly) - (lx < ly);
}

int lmt_specmatch_init(struct lmt_specmatch *m, uint32_t n, const char *const *str, const uint32_t *slen)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	memset(m, 0, sizeof *m);
	m->n = n;
	m->str = str;
	m->slen = slen;
	m->only = -1;
	m->order = malloc((n ? n : 1) * sizeof *m->order);
	if (!m->order)
		return LMT_ENOMEM;
	int distinct = 0;
	for (uint32_t k = 0; k < n; k++) {
		m->order[k] = k;
		m->maxlen = LMT_MAX(m->maxlen, slen[k]);
		if (slen[k] && !m->first[(uint8_t)str[k][0]]) {
			m->first[(uint8_t)str[k][0]] = 1;
			m->only = (uint8_t)str[k][0];
			distinct++;
		}
	}
	if (distinct != 1)
		m->only = -1;
	pthread_mutex_lock(&mu); /* qsort has no context argument */
	sort_m = m;
	qsort(m->order, n, sizeof *m->order, cmp_special);
	pthread_mutex_unlock(&mu);
	return 0;
}

void lmt_specmatch_release(struct lmt_specmatch *m)
{
	free(m->order);
	memset(m, 0, sizeof *m);
}

/* the first index in [lo, hi) whose string's byte d is at least b (all in the
 * range have more than d bytes and agree before d) */
static uint32_t byte_bound(const struct lmt_specmatch *m, uint32_t lo, uint32_t hi, uint32_t d, unsigned b)
{
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if ((uint8_t)m->str[m->order[mid]][d] < b)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The strings that start at text[i]: calls each's length on the way out, shortest
 * first, as the walk meets them; returns the longest's index + 1, or 0. Strings
 * narrowed to those agreeing with text[i..i+d) sit together in sorted order, the
 * one of length d (if any) first.
 */
static uint32_t walk(const struct lmt_specmatch *m, const char *text, size_t len, size_t i, size_t stop_after,
		     int *spans)
{
	uint32_t lo = 0, hi = m->n, best = 0;
	size_t d = 0;
	for (;; d++) {
		while (lo < hi && m->slen[m->order[lo]] == d)
			lo++;
		if (lo == hi || i + d == len)
			break;
		unsigned b = (uint8_t)text[i + d];
		lo = byte_bound(m, lo, hi, (uint32_t)d, b);
		hi = byte_bound(m, lo, hi, (uint32_t)d, b + 1);
		if (lo < hi && m->slen[m->order[lo]] == d + 1) {
			best = m->order[lo] + 1;
			if (spans && i + d + 1 > stop_after)
				*spans = 1;
		}
	}
	if (m->steps)
		*m->steps += d;
	return best;
}

int lmt_specmatch_next(const struct lmt_specmatch *m, const char *text, size_t len, size_t pos, size_t *start,
		       uint32_t *which)
{
	if (!m || !m->n)
		return 0;
	for (size_t i = pos; i < len; i++) {
		if (m->only >= 0) {
			const char *p = memchr(text + i, m->only, len - i);
			if (!p)
				break;
			i = (size_t)(p - text);
		} else if (!m->first[(uint8_t)text[i]]) {
			continue;
		}
		uint32_t k = walk(m, text, len, i, 0, NULL);
		if (k) {
			*start = i;
			*which = k - 1;
			return 1;
		}
	}
	return 0;
}

int lmt_specmatch_spans(const struct lmt_specmatch *m, const char *text, size_t len, size_t c)
{
	if (!m || !m->n || m->maxlen < 2)
		return 0;
	int spans = 0;
	for (size_t i = c >= m->maxlen - 1 ? c - (m->maxlen - 1) : 0; i < c && !spans; i++)
		if (m->first[(uint8_t)text[i]])
			walk(m, text, len, i, c, &spans);
	return spans;
}

size_t lmt_tok_decode(const struct lmt_tokenizer *t, const uint32_t *ids, size_t n,
		      int skip_special, uint8_t *out, size_t cap)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t id = ids[i];
		if (id >= t->n_vocab || (skip_special && t->special[id]))
			continue;
		uint32_t l = lmt_tok_len(t, id);
		if (k + l <= cap)
			memcpy(out + k, lmt_tok_bytes(t, id), l);
		k += l;
	}
	return k;
}
