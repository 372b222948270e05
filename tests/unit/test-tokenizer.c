/*
 * test-tokenizer: the tokenizer against tiktoken and the reference pattern engine.
 *
 * Fixtures (tests/data, made by scripts/gen-fixtures from the real libraries):
 *   tiktoken/ENC-3000.tiktoken   the first 3000 ranks of gpt2, cl100k_base, o200k_base
 *   tiktoken/TEXT.ENC-3000       the ids tiktoken gives for each text with that file
 *   pretok/TEXT.PATTERN          the pieces the reference regex splits each text into
 * Checks: identical ids and pieces; tiktoken -> lmt -> HF tokenizer.json -> lmt gives
 * identical ids; save/load keeps the identity; encode/decode round-trips arbitrary
 * bytes (NUL, invalid UTF-8, long runs); the array and heap BPE agree; special
 * tokens appear only when allowed.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/atomicfile.h"
#include "tap.h"
#include "data/batchenc.h"
#include "data/tokenizer.h"
#include "data/tokinterop.h"
#include "data/tokstream.h"
#include "core/util.h"

int lmt_tok_bpe_impl(struct lmt_tok_state *s, const uint8_t *p, size_t n, int heap,
		     struct lmt_u32vec *out);

static const char *texts[] = { "cjk.txt", "code.c", "edge.txt", "emoji.txt",
			       "en.txt", "numbers.txt", "te.txt", "ws.txt" };
static const char *encs[][2] = { { "gpt2", "gpt2" }, { "cl100k", "cl100k" }, { "o200k", "o200k" } };

static char *slurp(const char *path, size_t *n)
{
	char *d;
	struct lmt_err err;
	if (lmt_read_file(path, &d, n, &err)) {
		tap_diag("%s", err.msg);
		return NULL;
	}
	return d;
}

static size_t parse_ids(const char *s, uint32_t **out)
{
	size_t n = 0, cap = 0;
	*out = NULL;
	while (*s) {
		char *e;
		unsigned long v = strtoul(s, &e, 10);
		if (e == s)
			break;
		LMT_GROW(*out, cap, n + 1);
		(*out)[n++] = (uint32_t)v;
		s = e;
	}
	return n;
}

static int encode_all(const struct lmt_tokenizer *t, const char *text, size_t len, int special,
		      struct lmt_u32vec *v)
{
	struct lmt_tok_state *s = lmt_tok_state_new(t);
	v->n = 0;
	int rc = lmt_tok_encode(t, s, text, len, special, v);
	lmt_tok_state_free(s);
	return rc;
}

static int same_ids(const uint32_t *a, size_t na, const uint32_t *b, size_t nb, const char *what)
{
	if (na == nb && !memcmp(a, b, na * 4))
		return 1;
	size_t i = 0;
	while (i < na && i < nb && a[i] == b[i])
		i++;
	tap_diag("%s: %zu vs %zu ids, first difference at %zu (%u vs %u)", what, na, nb, i,
		 i < na ? a[i] : 0, i < nb ? b[i] : 0);
	return 0;
}

/* The text encoded twice with one state whose piece cache is emptied every few
 * entries: the second pass finds some pieces cached and some emptied away. 1 if
 * both passes give want's ids. */
static int encode_emptying(const struct lmt_tokenizer *t, const char *text, size_t len, const uint32_t *want,
			   size_t nwant, const char *what)
{
	struct lmt_tok_state *s = lmt_tok_state_new(t);
	struct lmt_u32vec v = { 0 };
	int ok = s != NULL;
	if (s)
		lmt_tok_state_cache_limit(s, 5);
	for (int pass = 0; pass < 2 && ok; pass++) {
		v.n = 0;
		ok = !lmt_tok_encode(t, s, text, len, 0, &v) && same_ids(v.v, v.n, want, nwant, what);
	}
	free(v.v);
	lmt_tok_state_free(s);
	return ok;
}

/* Threads' iterators, made one after another in one thread, must not share a cache
 * line: every match writes the match data, and two threads writing one line in turns
 * cost tok-encode -j2 a fifth of its user time. Each PCRE2 object starts a line (and
 * takes whole lines). */
static void check_iter_lines(const struct lmt_pretok *pt, const char *name)
{
	struct lmt_pretok_iter it[3];
	int made = 0, lines = 1;
	for (int i = 0; i < 3; i++) {
		made += lmt_pretok_iter_init(&it[i], pt) == 0;
		const void *obj[] = { it[i].md, it[i].mctx, it[i].jstack };
		for (size_t k = 0; k < LMT_ARRAY_SIZE(obj); k++)
			if (obj[k] && (uintptr_t)obj[k] % 64) {
				tap_diag("%s: iterator %d's object %zu at %p", name, i, k, obj[k]);
				lines = 0;
			}
	}
	tap_ok(made == 3 && it[0].md && it[0].mctx && lines,
	       "%s: three iterators, each PCRE2 object on lines of its own", name);
	for (int i = 0; i < 3; i++)
		lmt_pretok_iter_release(&it[i]);
}

static void check_pretok(void)
{
	for (size_t e = 0; e < LMT_ARRAY_SIZE(encs); e++) {
		struct lmt_pretok pt;
		struct lmt_err err;
		if (!tap_ok(lmt_pretok_init(&pt, encs[e][0], NULL, &err) == 0, "compile pattern %s", encs[e][0]))
			continue;
		struct lmt_pretok_iter it;
		lmt_pretok_iter_init(&it, &pt);
		for (size_t k = 0; k < LMT_ARRAY_SIZE(texts); k++) {
			char path[256];
			size_t tn, en;
			snprintf(path, sizeof path, "tests/data/text/%s", texts[k]);
			char *text = slurp(path, &tn);
			snprintf(path, sizeof path, "tests/data/pretok/%s.%s", texts[k], encs[e][1]);
			char *exp = slurp(path, &en);
			if (!text || !exp) {
				tap_ok(0, "fixtures for %s/%s", texts[k], encs[e][0]);
				continue;
			}
			/* render our pieces in the fixture's format: hex per line */
			size_t cap = tn * 3 + 64, o = 0;
			char *got = malloc(cap);
			size_t st, n;
			lmt_pretok_iter_reset(&it, text, tn);
			while (lmt_pretok_next(&it, &st, &n)) {
				for (size_t i = 0; i < n; i++)
					o += (size_t)sprintf(got + o, "%02x", (unsigned char)text[st + i]);
				got[o++] = '\n';
			}
			got[o] = 0;
			int ok = o == en && !memcmp(got, exp, en);
			if (!tap_ok(ok, "pieces of %s with %s match the reference regex", texts[k], encs[e][0])) {
				size_t i = 0;
				while (i < o && i < en && got[i] == exp[i])
					i++;
				size_t ls = i;
				while (ls > 0 && got[ls - 1] != '\n')
					ls--;
				tap_diag("first difference at byte %zu: got '%.40s' expected '%.40s'", i, got + ls, exp + ls);
			}
			free(got);
			free(text);
			free(exp);
		}
		lmt_pretok_iter_release(&it);
		check_iter_lines(&pt, encs[e][0]);
		lmt_pretok_release(&pt);
	}
}

static void check_tiktoken(void)
{
	char tmpdir[] = "/tmp/lmt-test-tok.XXXXXX";
	if (!mkdtemp(tmpdir)) {
		tap_ok(0, "mkdtemp");
		return;
	}
	for (size_t e = 0; e < LMT_ARRAY_SIZE(encs); e++) {
		char path[512], hf[512], saved[512];
		struct lmt_err err = { 0 };
		struct lmt_tokenizer t, h, l;
		snprintf(path, sizeof path, "tests/data/tiktoken/%s-3000.tiktoken", encs[e][1]);
		const char *spec[] = { "<|endoftext|>=3000" };
		int rc = lmt_tok_import_tiktoken(&t, path, encs[e][0], spec, 1, &err);
		if (!tap_ok(rc == 0, "import %s", path)) {
			tap_diag("%s", err.msg);
			continue;
		}
		tap_ok(t.n_vocab == 3001 && t.eos == 3000 && (t.flags & LMT_TOK_IGNORE_MERGES),
		       "%s: 3001 tokens, <|endoftext|> is EOS, tiktoken semantics", encs[e][1]);
		snprintf(hf, sizeof hf, "%s/%s.json", tmpdir, encs[e][1]);
		snprintf(saved, sizeof saved, "%s/%s.lmtok", tmpdir, encs[e][1]);
		rc = lmt_tok_export_hf(&t, hf, &err) || lmt_tok_import_hf(&h, hf, &err);
		if (!tap_ok(rc == 0, "%s: export to tokenizer.json and import it back", encs[e][1])) {
			tap_diag("%s", err.msg);
			lmt_tok_release(&t);
			continue;
		}
		rc = lmt_tok_save(&t, saved, &err) || lmt_tok_load(&l, saved, &err);
		if (!tap_ok(rc == 0, "%s: save and load", encs[e][1])) {
			tap_diag("%s", err.msg);
			lmt_tok_release(&t);
			lmt_tok_release(&h);
			continue;
		}
		tap_ok(!memcmp(t.sha256, l.sha256, 32), "%s: loaded file has the saved identity", encs[e][1]);
		tap_ok(h.n_vocab == t.n_vocab && h.n_special == 1 && h.eos == 3000 &&
		       !strcmp(h.pt.name, t.pt.name),
		       "%s: HF round trip keeps vocab, specials, roles and pattern (%s)", encs[e][1], h.pt.name);
		struct lmt_u32vec v = { 0 }, vh = { 0 }, vl = { 0 };
		for (size_t k = 0; k < LMT_ARRAY_SIZE(texts); k++) {
			size_t tn, en;
			snprintf(path, sizeof path, "tests/data/text/%s", texts[k]);
			char *text = slurp(path, &tn);
			snprintf(path, sizeof path, "tests/data/tiktoken/%s.%s-3000", texts[k], encs[e][1]);
			char *exp = slurp(path, &en);
			if (!text || !exp) {
				tap_ok(0, "fixtures for %s", texts[k]);
				continue;
			}
			uint32_t *ids;
			size_t ni = parse_ids(exp, &ids);
			encode_all(&t, text, tn, 0, &v);
			encode_all(&h, text, tn, 0, &vh);
			encode_all(&l, text, tn, 0, &vl);
			char what[128];
			snprintf(what, sizeof what, "%s %s", encs[e][1], texts[k]);
			tap_ok(same_ids(v.v, v.n, ids, ni, what), "%s: ids equal tiktoken's", what);
			tap_ok(encode_emptying(&t, text, tn, ids, ni, what),
			       "%s: the same with the piece cache emptied every 5 entries, twice over", what);
			tap_ok(same_ids(vh.v, vh.n, ids, ni, what) && same_ids(vl.v, vl.n, ids, ni, what),
			       "%s: ids equal after HF and file round trips", what);
			/* decode gives the text back */
			size_t need = lmt_tok_decode(&t, v.v, v.n, 0, NULL, 0);
			uint8_t *back = malloc(need + 1);
			lmt_tok_decode(&t, v.v, v.n, 0, back, need);
			tap_ok(need == tn && !memcmp(back, text, tn), "%s: decode restores the bytes", what);
			free(back);
			free(ids);
			free(text);
			free(exp);
		}
		free(v.v);
		free(vh.v);
		free(vl.v);
		lmt_tok_release(&t);
		lmt_tok_release(&h);
		lmt_tok_release(&l);
		unlink(hf);
		unlink(saved);
	}
	rmdir(tmpdir);
}

static uint64_t rng = 0x243f6a8885a308d3ULL;
static uint64_t next_rand(void)
{
	rng += 0x9e3779b97f4a7c15ULL;
	return lmt_mix64(rng);
}

/* random bytes biased towards what breaks tokenizers: NUL, invalid UTF-8, runs */
static void random_bytes(uint8_t *p, size_t n)
{
	static const char *frags[] = { " ", "  ", "\n", "\r\n", "\t", "'s", "'LL", "12345", "e\xcc\x81",
				       "\xe0\xb0\xa4\xe0\xb1\x86", "\xf0\x9f\x98\x80", "\xc3", "\xff\xfe",
				       "\xed\xa0\x80", "\xf4\x90\x80\x80", "the", "The", "\0", "\xc0\xaf" };
	size_t i = 0;
	while (i < n) {
		uint64_t r = next_rand();
		if (r % 3 == 0) {
			p[i++] = (uint8_t)(r >> 8);
		} else {
			const char *f = frags[(r >> 8) % LMT_ARRAY_SIZE(frags)];
			size_t fl = (r >> 8) % LMT_ARRAY_SIZE(frags) == 17 ? 1 : strlen(f);
			for (size_t k = 0; k < fl && i < n; k++)
				p[i++] = (uint8_t)f[k];
		}
	}
}

static void check_roundtrip(void)
{
	struct lmt_err err = { 0 };
	struct lmt_tokenizer t;
	const char *spec[] = { "<|endoftext|>=3000" };
	if (!tap_ok(lmt_tok_import_tiktoken(&t, "tests/data/tiktoken/cl100k-3000.tiktoken", "cl100k", spec, 1,
					    &err) == 0, "import cl100k fixture for round trips"))
		return;
	const char *pats[] = { "gpt2", "cl100k", "o200k", "none" };
	struct lmt_tok_state *s;
	struct lmt_u32vec v = { 0 }, a = { 0 }, b = { 0 };
	size_t maxn = 1 << 16;
	uint8_t *buf = malloc(maxn), *back = malloc(maxn);
	for (size_t pi = 0; pi < LMT_ARRAY_SIZE(pats); pi++) {
		lmt_tok_set_pattern(&t, pats[pi], NULL, &err);
		s = lmt_tok_state_new(&t);
		int ok = 1, ok_impl = 1;
		for (int trial = 0; trial < 200 && ok; trial++) {
			size_t n = trial < 100 ? next_rand() % 64 : next_rand() % maxn;
			random_bytes(buf, n);
			v.n = 0;
			lmt_tok_encode(&t, s, (const char *)buf, n, 0, &v);
			size_t m = lmt_tok_decode(&t, v.v, v.n, 0, back, maxn);
			if (m != n || memcmp(buf, back, n)) {
				tap_diag("pattern %s trial %d: %zu bytes decode to %zu", pats[pi], trial, n, m);
				ok = 0;
			}
			if (n <= 4096) { /* both BPE implementations on the whole buffer as one piece */
				a.n = b.n = 0;
				lmt_tok_bpe_impl(s, buf, n, 0, &a);
				lmt_tok_bpe_impl(s, buf, n, 1, &b);
				if (a.n != b.n || memcmp(a.v, b.v, a.n * 4)) {
					tap_diag("trial %d: array BPE gives %zu ids, heap BPE %zu", trial, a.n, b.n);
					ok_impl = 0;
				}
			}
		}
		tap_ok(ok, "pattern %s: encode/decode round-trips 200 random byte strings (NUL, invalid UTF-8)",
		       pats[pi]);
		if (pi == 0)
			tap_ok(ok_impl, "array and heap BPE agree on 200 random byte strings");
		lmt_tok_state_free(s);
	}
	/* a long run: the heap path must finish and agree with the array path */
	memset(buf, ' ', 20000);
	lmt_tok_set_pattern(&t, "cl100k", NULL, &err);
	s = lmt_tok_state_new(&t);
	a.n = b.n = 0;
	lmt_tok_bpe_impl(s, buf, 20000, 0, &a);
	lmt_tok_bpe_impl(s, buf, 20000, 1, &b);
	tap_ok(a.n == b.n && !memcmp(a.v, b.v, a.n * 4) && a.n < 20000,
	       "20000 spaces: array and heap BPE agree (%zu tokens)", a.n);
	/* special tokens: only when allowed */
	const char *txt = "a<|endoftext|>b";
	v.n = 0;
	lmt_tok_encode(&t, s, txt, strlen(txt), 0, &v);
	int has = 0;
	for (size_t i = 0; i < v.n; i++)
		has |= v.v[i] == 3000;
	tap_ok(!has && v.n > 3, "special token text is ordinary text by default (%zu tokens)", v.n);
	v.n = 0;
	lmt_tok_encode(&t, s, txt, strlen(txt), 1, &v);
	tap_ok(v.n == 3 && v.v[1] == 3000, "with allow_special it becomes the special token");
	lmt_tok_state_free(s);
	free(buf);
	free(back);
	free(v.v);
	free(a.v);
	free(b.v);
	lmt_tok_release(&t);
}

/* the parallel batch encoder (data/batchenc.h): per document, framed, in order,
 * the same tokens as lmt_tok_encode one document at a time, at 1 and 4 threads */

/* the side job of lmt_batchenc_run_side: copies what the batch encoder holds */
struct side_seen {
	const struct lmt_batchenc *e;
	int calls, same, ntok_ok;
	size_t n;
	uint32_t *copy;
	const uint32_t *want;
	const size_t *counts;
	int nd;
};

static void side_check(void *ctx)
{
	struct side_seen *S = ctx;
	S->calls++;
	S->n = S->e->all.n;
	S->copy = malloc(S->n * 4 + 4);
	if (S->copy)
		memcpy(S->copy, S->e->all.v, S->n * 4);
	S->same = S->copy && S->want && !memcmp(S->copy, S->want, S->n * 4);
	S->ntok_ok = 1;
	for (int i = 0; i < S->nd; i++)
		S->ntok_ok &= S->e->ntok[i] == S->counts[i];
}

/* by hand: BOS 3000 and EOS 3000 around each document's own encoding, whole */
static void framed(const struct lmt_tokenizer *t, const struct lmt_doc *docs, int nd, int allow,
		   struct lmt_u32vec *want, size_t *counts)
{
	struct lmt_tok_state *s = lmt_tok_state_new(t);
	for (int i = 0; i < nd; i++) {
		size_t before = want->n;
		LMT_GROW(want->v, want->cap, want->n + 1);
		want->v[want->n++] = 3000;
		lmt_tok_encode(t, s, docs[i].text, docs[i].len, allow, want);
		LMT_GROW(want->v, want->cap, want->n + 1);
		want->v[want->n++] = 3000;
		counts[i] = want->n - before;
	}
	lmt_tok_state_free(s);
}

static void check_batchenc(void)
{
	struct lmt_err err = { 0 };
	struct lmt_tokenizer t;
	const char *spec[] = { "<|endoftext|>=3000" };
	if (!tap_ok(lmt_tok_import_tiktoken(&t, "tests/data/tiktoken/cl100k-3000.tiktoken", "cl100k", spec, 1,
					    &err) == 0, "import cl100k fixture for the batch encoder"))
		return;
	enum { ND = 300 };
	static char text[ND * 80];
	struct lmt_doc docs[ND];
	size_t at = 0;
	for (int i = 0; i < ND; i++) {
		int n = snprintf(text + at, 80, "document %d: %.*s", i, i % 50, "the quick brown fox jumps over a lazy dog, "
				 "again");
		docs[i] = (struct lmt_doc){ .text = text + at, .len = (size_t)n };
		at += (size_t)n;
	}
	struct lmt_docbatch b = { .docs = docs, .n = ND };
	struct lmt_u32vec want = { 0 };
	size_t counts[ND];
	framed(&t, docs, ND, 0, &want, counts);
	for (int threads = 1; threads <= 4; threads += 3) {
		struct lmt_batchenc e;
		struct lmt_batchenc_opts o = { .bos = 3000, .eos = 3000, .threads = threads };
		int rc = lmt_batchenc_init(&e, &t, &o, &err) || lmt_batchenc_run(&e, &b, &err);
		int same = !rc && e.all.n == want.n && !memcmp(e.all.v, want.v, want.n * 4);
		for (int i = 0; same && i < ND; i++)
			same = e.ntok[i] == counts[i];
		tap_ok(same, "batch encoder, %d thread%s: %zu tokens of %d documents in order, framed by BOS and EOS",
		       threads, threads == 1 ? "" : "s", want.n, ND);
		if (!rc) { /* a second batch reuses the vectors: the same again */
			rc = lmt_batchenc_run(&e, &b, &err);
			tap_ok(!rc && e.all.n == want.n && !memcmp(e.all.v, want.v, want.n * 4),
			       "batch encoder, %d thread%s: a second batch gives the same", threads, threads == 1 ? "" : "s");
		}
		if (!rc) { /* a third, of the first half, with a side job that sees the second */
			struct side_seen seen = { &e, 0, 0, 0, 0, NULL, want.v, counts, ND };
			struct lmt_docbatch half = { .docs = docs, .n = ND / 2 };
			size_t nhalf = 0;
			for (int i = 0; i < ND / 2; i++)
				nhalf += counts[i];
			rc = lmt_batchenc_run_side(&e, &half, side_check, &seen, &err);
			int ntok_seen = seen.ntok_ok;
			tap_ok(!rc && seen.calls == 1 && seen.n == want.n && seen.same && ntok_seen,
			       "batch encoder, %d thread%s: the side job ran once, and saw the previous batch's "
			       "%zu tokens and counts", threads, threads == 1 ? "" : "s", want.n);
			tap_ok(!rc && e.all.n == nhalf && !memcmp(e.all.v, want.v, nhalf * 4) && e.ntok[ND / 2 - 1] ==
			       counts[ND / 2 - 1], "batch encoder, %d thread%s: then the batch's own %zu tokens", threads,
			       threads == 1 ? "" : "s", nhalf);
			free(seen.copy);
		}
		lmt_batchenc_release(&e);
	}
	free(want.v);

	lmt_tok_release(&t);
	/* long documents cut into parts of 100 bytes or a little more, with special
	 * strings in them (with allow_special, no cut inside one, "a b" included):
	 * each document's tokens are its own encoding whole, framed once; and without
	 * allow_special */
	const char *spec2[] = { "<|endoftext|>=3000", "a b=3001" };
	if (!tap_ok(lmt_tok_import_tiktoken(&t, "tests/data/tiktoken/cl100k-3000.tiktoken", "cl100k", spec2, 2,
					    &err) == 0, "import cl100k fixture with the special \"a b\""))
		return;
	static char big[3][20000];
	struct lmt_doc bd[4];
	uint64_t x = 3;
	for (int i = 0; i < 3; i++) {
		static const char *bits[] = { "the", " fox", "\n", " <|endoftext|>", "<|endoftext|>\n", "  ", "\r\n",
			"Jumps", "'s", " 123", ".\n", "\xc3\xa9t\xc3\xa9", " ", "\t", "a b", "xa bx", " a" };
		size_t n = 0;
		while (n < sizeof big[i] - 20) {
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			const char *p = bits[(x >> 33) % LMT_ARRAY_SIZE(bits)];
			memcpy(big[i] + n, p, strlen(p));
			n += strlen(p);
		}
		bd[i] = (struct lmt_doc){ .text = big[i], .len = n };
	}
	bd[3] = bd[1];
	bd[1] = (struct lmt_doc){ .text = "a short one", .len = 11 };
	struct lmt_docbatch bb = { .docs = bd, .n = 4 };
	for (int allow = 0; allow <= 1; allow++) {
		struct lmt_u32vec whole = { 0 };
		size_t bcounts[4];
		framed(&t, bd, 4, allow, &whole, bcounts);
		for (int threads = 1; threads <= 4; threads += 3) {
			struct lmt_batchenc e;
			struct lmt_batchenc_opts o = { .bos = 3000, .eos = 3000, .allow_special = allow, .threads = threads,
						       .chunk_bytes = 100 };
			int rc = lmt_batchenc_init(&e, &t, &o, &err) || lmt_batchenc_run(&e, &bb, &err);
			int same = !rc && e.all.n == whole.n && !memcmp(e.all.v, whole.v, whole.n * 4);
			for (int i = 0; same && i < 4; i++)
				same = e.ntok[i] == bcounts[i];
			tap_ok(same && e.nrec > 300, "batch encoder, %d thread%s%s: 3 documents of 20 kB in %zu parts "
			       "of 100 bytes or more give each one's tokens, framed once", threads, threads == 1 ? "" : "s",
			       allow ? ", special strings allowed" : "", e.nrec);
			lmt_batchenc_release(&e);
		}
		free(whole.v);
	}
	/* custom patterns, which have no cut rule: long documents are cut where a piece
	 * probably starts and settled where the parts' pieces meet the whole's
	 * (batchenc.c). Patterns whose pieces meet at once, after a piece, never (pieces
	 * of 3 bytes, from the part's start: encoded again on one thread, past
	 * GUESS_MARKS pieces too), that leave bytes unmatched, that look behind, and
	 * whose pieces run over several parts; documents with special strings (not cut
	 * with allow_special), with a newline now and then (the guess's place) and without */
	static const char *const res[] = {
		("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
		 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
		"(?s).{1,3}", "\\n[a-z]+|[a-z]+|.", "(?<=\\n)[a-z]{1,2}|[a-z]+|\\s+|.", "[^x]+|x", "(?s).",
	};
	static char nonl[20000];
	memcpy(nonl, big[0], bd[0].len);
	for (size_t i = 0; i < bd[0].len; i++)
		nonl[i] = nonl[i] == '\n' ? ' ' : nonl[i] == 'x' ? 'y' : nonl[i];
	struct lmt_doc gd[5] = { bd[0], bd[1], bd[2], bd[3], { .text = nonl, .len = bd[0].len } };
	struct lmt_docbatch gb = { .docs = gd, .n = 5 };
	for (size_t ri = 0; ri < LMT_ARRAY_SIZE(res); ri++) {
		if (lmt_tok_set_pattern(&t, "custom", res[ri], &err)) {
			tap_ok(0, "custom pattern %zu: %s", ri, err.msg);
			continue;
		}
		int all = 1, fixed = 0;
		size_t parts = 0;
		for (int allow = 0; allow <= 1; allow++) {
			struct lmt_u32vec whole = { 0 };
			size_t gcounts[5];
			framed(&t, gd, 5, allow, &whole, gcounts);
			for (int threads = 1; threads <= 4; threads += 3)
				for (size_t chunk = 100; chunk <= 400; chunk += 300) {
					struct lmt_batchenc e;
					struct lmt_batchenc_opts o = { .bos = 3000, .eos = 3000, .allow_special = allow,
								       .threads = threads, .chunk_bytes = chunk };
					int rc = lmt_batchenc_init(&e, &t, &o, &err) || lmt_batchenc_run(&e, &gb, &err);
					int same = !rc && e.all.n == whole.n && !memcmp(e.all.v, whole.v, whole.n * 4);
					for (int i = 0; same && i < 5; i++)
						same = e.ntok[i] == gcounts[i];
					all &= same;
					parts += e.nrec;
					fixed += e.fix.n > 0;
					lmt_batchenc_release(&e);
				}
			free(whole.v);
		}
		tap_ok(all && parts > 1000, "batch encoder, custom pattern /%.30s/: 4 documents of 20 kB in %zu parts "
		       "(at 1 and 4 threads, 100 and 400 bytes, special strings allowed or not) give each one's tokens, "
		       "%d times settled by pieces encoded on one thread", res[ri], parts, fixed);
	}
	lmt_tok_release(&t);
}

static void check_bad_models(void)
{
	struct lmt_err err = { 0 };
	struct lmt_tokenizer t;
	/* missing byte tokens */
	lmt_tok_init(&t);
	for (int i = 0; i < 255; i++) {
		uint8_t c = (uint8_t)i;
		lmt_tok_add_token(&t, &c, 1, 0, NULL, &err);
	}
	lmt_tok_set_pattern(&t, "gpt2", NULL, &err);
	tap_ok(lmt_tok_finalize(&t, &err) == LMT_EFORMAT && strstr(err.msg, "0xff"),
	       "a vocabulary without byte 0xff is rejected: %s", err.msg);
	/* a merge that is not a concatenation */
	uint8_t c = 255;
	uint32_t id;
	lmt_tok_add_token(&t, &c, 1, 0, NULL, &err);
	lmt_tok_add_token(&t, "ab", 2, 0, &id, &err);
	lmt_tok_add_merge(&t, 'a', 'c', id, 0, &err);
	tap_ok(lmt_tok_finalize(&t, &err) == LMT_EFORMAT && strstr(err.msg, "concatenation"),
	       "a merge whose result is not a+b is rejected: %s", err.msg);
	lmt_tok_release(&t);
	/* a merge producing a special token */
	lmt_tok_init(&t);
	for (int i = 0; i < 256; i++) {
		c = (uint8_t)i;
		lmt_tok_add_token(&t, &c, 1, 0, NULL, &err);
	}
	lmt_tok_add_token(&t, "ab", 2, 1, &id, &err);
	lmt_tok_add_merge(&t, 'a', 'b', id, 0, &err);
	tap_ok(lmt_tok_finalize(&t, &err) == LMT_EFORMAT && strstr(err.msg, "special"),
	       "a merge that produces a special token is rejected: %s", err.msg);
	lmt_tok_release(&t);
	/* two special tokens with the same bytes (a special may share a non-special
	 * token's bytes: that is how imports mark one) */
	lmt_tok_init(&t);
	for (int i = 0; i < 256; i++) {
		c = (uint8_t)i;
		lmt_tok_add_token(&t, &c, 1, 0, NULL, &err);
	}
	lmt_tok_add_token(&t, "<a>", 3, 1, NULL, &err);
	lmt_tok_add_token(&t, "<b>", 3, 1, NULL, &err);
	lmt_tok_add_token(&t, "a", 1, 1, NULL, &err);
	lmt_tok_set_pattern(&t, "gpt2", NULL, &err);
	tap_ok(lmt_tok_finalize(&t, &err) == 0, "specials of distinct bytes, one also a byte token's, pass");
	lmt_tok_add_token(&t, "<a>", 3, 1, NULL, &err);
	tap_ok(lmt_tok_finalize(&t, &err) == LMT_EFORMAT && strstr(err.msg, "special tokens 256 and 259 have the same bytes"),
	       "two special tokens with the same bytes are rejected: %s", err.msg);
	lmt_tok_release(&t);
	/* the string table is filled looking ahead (lmt_tok_finalize): every token of
	 * a vocabulary larger than the look-ahead is found, a pair listed twice and two
	 * tokens of the same bytes far apart are rejected */
	lmt_tok_init(&t);
	for (int i = 0; i < 256; i++) {
		c = (uint8_t)i;
		lmt_tok_add_token(&t, &c, 1, 0, NULL, &err);
	}
	char name[16];
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof name, "w%d", i);
		lmt_tok_add_token(&t, name, strlen(name), 0, NULL, &err);
	}
	uint32_t ab;
	lmt_tok_add_token(&t, "ab", 2, 0, &ab, &err);
	lmt_tok_add_merge(&t, 'a', 'b', ab, 0, &err);
	lmt_tok_set_pattern(&t, "gpt2", NULL, &err);
	int found = lmt_tok_finalize(&t, &err) == 0;
	for (int i = 0; found && i < 1000; i++) {
		snprintf(name, sizeof name, "w%d", i);
		found = lmt_tok_find(&t, name, strlen(name)) == 256u + (uint32_t)i;
	}
	tap_ok(found && lmt_tok_find(&t, "ab", 2) == ab && lmt_tok_find(&t, "w1000", 5) == LMT_NO_TOKEN,
	       "each of 1257 tokens is found by its bytes, and no other string");
	lmt_tok_add_merge(&t, 'a', 'b', ab, 1, &err);
	tap_ok(lmt_tok_finalize(&t, &err) == LMT_EFORMAT && strstr(err.msg, "merge 1 repeats the pair (97, 98)"),
	       "a pair merged twice is rejected: %s", err.msg);
	t.n_merges = 1;
	lmt_tok_add_token(&t, "w5", 2, 0, NULL, &err);
	tap_ok(lmt_tok_finalize(&t, &err) == LMT_EFORMAT && strstr(err.msg, "tokens 261 and 1257 have the same bytes"),
	       "two tokens with the same bytes, 996 apart, are rejected: %s", err.msg);
	lmt_tok_release(&t);
	/* special token strings as training takes them */
	const char *ok3[] = { "<|a|>", "<|b|>", "<|a|>x" }, *dup[] = { "<|a|>", "<|b|>", "<|a|>" },
		   *empty[] = { "<|a|>", "" };
	tap_ok(lmt_tok_check_specials(ok3, 3, &err) == 0 && lmt_tok_check_specials(NULL, 0, &err) == 0,
	       "distinct special strings pass, as do none");
	tap_ok(lmt_tok_check_specials(dup, 3, &err) == LMT_EINVAL && strstr(err.msg, "'<|a|>' given twice"),
	       "a special string given twice is refused: %s", err.msg);
	tap_ok(lmt_tok_check_specials(empty, 2, &err) == LMT_EINVAL && strstr(err.msg, "empty"),
	       "an empty special string is refused: %s", err.msg);
	/* an import's "STRING=ID": the last '=' starts the id only before digits alone */
	tap_ok(lmt_tok_special_spec_len("<a>=5") == 3 && lmt_tok_special_spec_len("<a>") == 3 &&
		       lmt_tok_special_spec_len("a=b=12") == 3 && lmt_tok_special_spec_len("a=b") == 3 &&
		       lmt_tok_special_spec_len("<a>=-1") == 6 && lmt_tok_special_spec_len("x=") == 2 &&
		       lmt_tok_special_spec_len("=5") == 2,
	       "the string of an import's special token spec");
}

/* The hand splits of ASCII text (pretok.c) against PCRE2 alone, for each built-in
 * pattern, on strings of pieces chosen to meet every branch: contractions in both
 * cases and cut short, runs of each class (o200k's upper and lower case) with and
 * without a character before them, whitespace before text, line ends inside and
 * after whitespace, other whitespace and the end, slashes after others, and bytes
 * above 0x7f (letters, digits, spaces of other scripts, long s, a mark, symbols and
 * invalid UTF-8) where the hand split must leave the decision to PCRE2 */
static void check_ascii_split(void)
{
	static const char *bits[] = { "a", "Z", "5", " ", "  ", "\n", "\t", "\r\n", "'", "'s", "'re",
		"'ll", "'ve", "'d", "'m", "'t", "'x", "'r", "'v", "'l", "!", ".", "\x1c", "\v", "\x7f",
		"\xc3\xa9", "\xe4\xb8\xad", "\xc2\xa0", "\xe2\x80\x83", "\xc2\x85", "\xd9\xa1", "\xff",
		"\xc3", "\xf0\x9f\x98\x80", "-", "ab", "12", "'S", "'RE", "'Ll", "'vE", "'D", "Hello", "HELLO",
		"heLLo", "/", "\n\n", "\r", "\f", "1234", "\xc5\xbf", "\xcc\x81", "\xc3\x89", "'\xc5\xbf",
		" \n", "\t\n ", "A", "b", "\"", "0" };
	static const char *pats[] = { "gpt2", "cl100k", "o200k" };
	const int nb = (int)(sizeof bits / sizeof *bits);
	struct lmt_err err;
	for (int q = 0; q < 3; q++) {
		struct lmt_pretok fast, ref;
		struct lmt_pretok_iter a, b;
		if (!tap_ok(lmt_pretok_init(&fast, pats[q], NULL, &err) == 0 &&
			    lmt_pretok_init(&ref, pats[q], NULL, &err) == 0, "compile %s twice", pats[q]))
			return;
		tap_ok(fast.ascii == LMT_PRETOK_ASCII_GPT2 + q, "%s splits ASCII by hand", pats[q]);
		ref.ascii = 0;
		lmt_pretok_iter_init(&a, &fast);
		lmt_pretok_iter_init(&b, &ref);
		uint64_t x = 12345;
		int bad = 0, strings = 0;
		char text[256];
		for (; strings < 200000 && !bad; strings++) {
			size_t n = 0;
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			int k = (int)(x >> 60);
			for (int j = 0; j < k; j++) {
				x = x * 6364136223846793005ULL + 1442695040888963407ULL;
				const char *p = bits[(x >> 33) % (uint64_t)nb];
				size_t l = strlen(p);
				memcpy(text + n, p, l);
				n += l;
			}
			lmt_pretok_iter_reset(&a, text, n);
			lmt_pretok_iter_reset(&b, text, n);
			for (;;) {
				size_t s1 = 0, n1 = 0, s2 = 0, n2 = 0;
				int r1 = lmt_pretok_next(&a, &s1, &n1), r2 = lmt_pretok_next(&b, &s2, &n2);
				if (r1 != r2 || s1 != s2 || n1 != n2) {
					tap_diag("%s: '%.*s': piece at %zu+%zu, PCRE2 %zu+%zu", pats[q], (int)n, text, s1, n1,
						 s2, n2);
					bad = 1;
				}
				if (!r1 || bad)
					break;
			}
		}
		tap_ok(!bad, "%s: the ASCII split equals PCRE2's on %d generated strings", pats[q], strings);
		lmt_pretok_iter_release(&a);
		lmt_pretok_iter_release(&b);
		lmt_pretok_release(&fast);
		lmt_pretok_release(&ref);
	}
}

/* the pieces of text[0..n) as start + length pairs, shifted by base, appended to v */
static void pieces_of(struct lmt_pretok_iter *it, const char *text, size_t n, size_t base, struct lmt_u32vec *v)
{
	size_t st, len;
	lmt_pretok_iter_reset(it, text, n);
	while (lmt_pretok_next(it, &st, &len)) {
		LMT_GROW(v->v, v->cap, v->n + 2);
		v->v[v->n++] = (uint32_t)(base + st);
		v->v[v->n++] = (uint32_t)len;
	}
}

/* whether cutting text at c leaves its pieces as they are */
static int cut_keeps(struct lmt_pretok_iter *it, const char *text, size_t n, size_t c, struct lmt_u32vec *whole,
		     struct lmt_u32vec *parts)
{
	whole->n = parts->n = 0;
	pieces_of(it, text, n, 0, whole);
	pieces_of(it, text, c, 0, parts);
	pieces_of(it, text + c, n - c, c, parts);
	return whole->n == parts->n && !memcmp(whole->v, parts->v, whole->n * 4);
}

/* every place lmt_pretok_cut gives in text, as " 3 7 ..." in got (cap bytes) */
static void cut_places(const struct lmt_pretok *p, const char *text, char *got, size_t cap)
{
	size_t n = strlen(text);
	got[0] = 0;
	for (size_t c = lmt_pretok_cut(p, text, n, 0); c < n; c = lmt_pretok_cut(p, text, n, c + 1))
		snprintf(got + strlen(got), cap - strlen(got), " %zu", c);
}

/* lmt_pretok_cut's cuts, on random strings of every class the patterns tell
 * apart (letters of each case and script, marks, digits, contractions, each kind
 * of whitespace and line end, punctuation, invalid UTF-8): the two parts split
 * as the whole does, for each built-in pattern (gpt2 also by PCRE2 alone). That
 * the check can fail: cuts elsewhere (after a space, say) change the pieces. */
static void check_pretok_cut(void)
{
	static const char *bits[] = { "a", "Z", "q", "\n", "\n", "\r\n", "\r", " ", "  ", "\t", "\v", "\f", "5", "123",
		"'s", "'S", "'re", "'LL", "'", ".", "!", "/", "-", "\xc3\xa9", "\xc3\x89", "e\xcc\x81", "\xe4\xb8\xad",
		"\xd9\xa1", "\xc2\xa0", "\xe2\x80\x83", "\xc2\x85", "\xe2\x80\xa8", "\xff", "\xc3", "\xf0\x9f\x98\x80",
		"\xca\xb0", "\xc7\x85", "\x1c", "\0", "\xe3\x80\x82", "\xe4\xb8\xad\xe6\x96\x87", "\xd0\xb4\xd0\xb0",
		"\xef\xbc\x8c", "\xf0\xa0\x80\x80", "\xe2\x80\x99", "\xc5\xbf", "\xcc\x81", "\xe0\xa4\x95\xe0\xa4\xbf",
		"\xed\xa0\x80", "\xef\xbf\xbd", "\xe2\x84\xaa" };
	const int nb = (int)(sizeof bits / sizeof *bits);
	const char *pats[] = { "gpt2", "cl100k", "o200k", "gpt2" };
	struct lmt_u32vec whole = { 0 }, parts = { 0 };
	struct lmt_err err;
	uint64_t x = 777;
	for (int q = 0; q < 4; q++) {
		struct lmt_pretok pt;
		struct lmt_pretok_iter it;
		if (!tap_ok(lmt_pretok_init(&pt, pats[q], NULL, &err) == 0, "compile %s", pats[q]))
			continue;
		if (q == 3)
			pt.ascii = 0; /* PCRE2 alone */
		lmt_pretok_iter_init(&it, &pt);
		int bad = 0, cuts = 0, other = 0, changed = 0;
		char text[512];
		for (int strings = 0; strings < 20000 && !bad; strings++) {
			size_t n = 0;
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			int k = 8 + (int)(x >> 58);
			for (int j = 0; j < k; j++) {
				x = x * 6364136223846793005ULL + 1442695040888963407ULL;
				const char *p = bits[(x >> 33) % (uint64_t)nb];
				size_t l = *p ? strlen(p) : 1;
				memcpy(text + n, p, l);
				n += l;
			}
			for (size_t c = lmt_pretok_cut(&pt, text, n, 0); c < n && !bad;
			     c = lmt_pretok_cut(&pt, text, n, c + 1)) {
				cuts++;
				if (c == 0 || !cut_keeps(&it, text, n, c, &whole, &parts)) {
					tap_diag("%s: cut at %zu of '%.*s' changes the pieces", pats[q], c, (int)n, text);
					bad = 1;
				}
			}
			/* a cut after a space, where one is followed by more text */
			for (size_t c = 1; c + 1 < n; c++)
				if (text[c - 1] == ' ') {
					other++;
					changed += !cut_keeps(&it, text, n, c, &whole, &parts);
					break;
				}
		}
		tap_ok(!bad && cuts > 1000, "%s%s: %d cuts leave the pieces as they are", pats[q],
		       q == 3 ? " (PCRE2 alone)" : "", cuts);
		tap_ok(changed > 0, "%s%s: a cut after a space changes them (%d of %d)", pats[q],
		       q == 3 ? " (PCRE2 alone)" : "", changed, other);
		lmt_pretok_iter_release(&it);
		lmt_pretok_release(&pt);
	}
	struct lmt_pretok none, custom;
	const char *t = "abc\ndef\r\nghi\n";
	if (lmt_pretok_init(&none, "none", NULL, &err) == 0 &&
	    lmt_pretok_init(&custom, "custom", "[a-z]+|\\s", &err) == 0) {
		tap_ok(lmt_pretok_cut(&none, t, strlen(t), 0) == strlen(t) &&
		       lmt_pretok_cut(&custom, t, strlen(t), 0) == strlen(t), "no cuts for none or a custom pattern");
		lmt_pretok_release(&none);
		lmt_pretok_release(&custom);
	}
	struct lmt_pretok g;
	if (lmt_pretok_init(&g, "custom", lmt_pretok_builtin("cl100k"), &err) == 0) {
		const char *u = "abc\ndef\r\ng1 h.\tij\t k's x\xc3\xa9 yz";
		char got[64];
		cut_places(&g, u, got, sizeof got);
		tap_ok(!strcmp(got, " 3 7 10 13 17 22 26"), "cuts after a letter (the s of 's, an e with an acute "
		       "too), before \\n, \\r\\n, a digit, a dot, a tab or a space; not after a digit or a space, nor "
		       "before an apostrophe: at%s (a custom regex that is cl100k's)", got);
		const char *v = "\xe6\x9d\xb1\xe4\xba\xac\xe3\x80\x82\xe0\xb0\x87\xe0\xb0\xa6\xe0\xb0\xbf x";
		cut_places(&g, v, got, sizeof got);
		tap_ok(!strcmp(got, " 6"), "cuts after a letter of another script (the second of two CJK letters, before "
		       "an ideographic full stop); not between two letters, nor before a mark (a Telugu vowel sign), "
		       "nor after one: at%s", got);
		lmt_pretok_release(&g);
	}
	free(whole.v);
	free(parts.v);
}

/* the old way, as reference: every string searched for again at each step */
static int naive_next(const char *t, size_t n, size_t pos, uint32_t ns, const char *const *str,
		      const uint32_t *slen, size_t *start, uint32_t *which)
{
	size_t best = n;
	uint32_t bk = 0;
	for (uint32_t k = 0; k < ns; k++) {
		const char *hit = slen[k] ? memmem(t + pos, n - pos, str[k], slen[k]) : NULL;
		size_t at = hit ? (size_t)(hit - t) : n;
		if (at < best || (at == best && at < n && slen[k] > slen[bk])) {
			best = at;
			bk = k;
		}
	}
	*start = best;
	*which = bk;
	return best < n;
}

/* lmt_specmatch against searching again at each step, on random texts over a small
 * alphabet and strings that overlap, nest and share starts (and, in a tenth of the
 * rounds, 300 strings of one long shared prefix, in a text of near misses): the
 * same occurrences, leftmost and longest first; the bytes it looks at are at most
 * the longest string's length for each byte that starts a string. And
 * lmt_specmatch_spans against a scan of every start. */
static void check_specmatch(void)
{
	enum { NS = 5, NR = 300 };
	const char *pool[] = { "ab", "abc", "b", "ba", "cab", "aa", "abcab", "c", "bcb", "<s>" };
	static char reserved[NR][40];
	char text[4096];
	const char *str[NR];
	uint32_t slen[NR];
	uint64_t x = 99;
	int bad = 0, spans_bad = 0, found = 0, bound = 1, many = 0;
	for (int k = 0; k < NR; k++)
		snprintf(reserved[k], sizeof reserved[k], "<|reserved_%d|>", k);
	for (int round = 0; round < 3000 && !bad; round++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		size_t n = 1 + (x >> 33) % sizeof text;
		uint32_t ns = 1 + (uint32_t)(x >> 20) % NS;
		int big = round % 10 == 9;
		if (big) { /* the reserved strings, and text of their pieces */
			ns = NR;
			n = n / 4 + 1;
			for (uint32_t k = 0; k < ns; k++) {
				str[k] = reserved[k];
				slen[k] = (uint32_t)strlen(str[k]);
			}
			for (size_t i = 0; i < n;) {
				x = x * 6364136223846793005ULL + 1442695040888963407ULL;
				const char *r = reserved[(x >> 33) % NR];
				size_t l = LMT_MIN(strlen(r) - (x >> 20) % 4, n - i);
				memcpy(text + i, r, l);
				i += l;
			}
			many++;
		} else {
			for (size_t i = 0; i < n; i++) {
				x = x * 6364136223846793005ULL + 1442695040888963407ULL;
				text[i] = "abc<s> "[(x >> 40) % 7];
			}
			for (uint32_t k = 0; k < ns; k++) {
				x = x * 6364136223846793005ULL + 1442695040888963407ULL;
				str[k] = pool[(k + (x >> 35)) % LMT_ARRAY_SIZE(pool)];
				for (uint32_t j = 0; j < k; j++)
					if (str[j] == str[k])
						str[k] = "zz"; /* distinct strings, as a tokenizer's are */
				slen[k] = (uint32_t)strlen(str[k]);
			}
		}
		struct lmt_specmatch m;
		uint64_t steps = 0;
		if (lmt_specmatch_init(&m, ns, str, slen)) {
			bad = 1;
			break;
		}
		m.steps = &steps;
		size_t pos = 0, hits = 0, starts = 0;
		while (pos < n && !bad) {
			size_t s1 = 0, s2 = 0;
			uint32_t k1 = 0, k2 = 0;
			int r1 = lmt_specmatch_next(&m, text, n, pos, &s1, &k1);
			int r2 = naive_next(text, n, pos, ns, str, slen, &s2, &k2);
			if (r1 != r2 || (r1 && (s1 != s2 || k1 != k2))) {
				tap_diag("round %d at %zu: %d %zu '%s', reference %d %zu '%s'", round, pos, r1, s1,
					 r1 ? str[k1] : "", r2, s2, r2 ? str[k2] : "");
				bad = 1;
			}
			for (size_t i = pos; i < (r1 ? s1 + 1 : n); i++)
				starts += m.first[(uint8_t)text[i]];
			if (!r1)
				break;
			hits++;
			pos = s1 + slen[k1];
		}
		found += (int)hits;
		bound &= steps <= (uint64_t)starts * m.maxlen;
		m.steps = NULL;
		for (size_t c = 0; c <= n && c < 64; c++) {
			int want = 0;
			for (uint32_t k = 0; k < ns; k++)
				for (size_t st = 0; st < c; st++)
					want |= st + slen[k] > c && st + slen[k] <= n && !memcmp(text + st, str[k], slen[k]);
			spans_bad += lmt_specmatch_spans(&m, text, n, c) != want;
		}
		lmt_specmatch_release(&m);
	}
	tap_ok(!bad && found > 10000 && many == 300, "special strings: %d occurrences found as searching again at each "
	       "step finds them", found);
	tap_ok(bound, "special strings: at most the longest string's length looked at for each byte that starts one");
	tap_ok(!spans_bad, "special strings: occurrences across a cut found (%d wrong)", spans_bad);
}

/* a stream of nd documents of 0-5 tokens, written with the writer's index kept in
 * memory up to limit bytes (0: the default), into path; its SHA-256 in sha */
static int write_stream(const char *path, size_t limit, int nd, uint8_t *sha)
{
	struct lmt_tokstream_writer w;
	struct lmt_tokstream_info in = { .token_bytes = 2, .vocab_size = 100, .bos = LMT_NO_TOKEN, .eos = LMT_NO_TOKEN };
	struct lmt_err err = { 0 };
	const char *src[] = { "a.txt", "b.txt" };
	if (lmt_tokstream_writer_open(&w, path, &in, &err))
		return -1;
	w.index_limit = limit;
	for (int i = 0; i < nd; i++) {
		uint32_t toks[5] = { (uint32_t)i % 100, 1, 2, 3, 4 };
		if (lmt_tokstream_writer_doc(&w, toks, (size_t)(i % 6 == 5 ? 0 : i % 6), (uint64_t)i, (uint32_t)(i & 1),
					     (uint64_t)i / 2, &err)) {
			lmt_tokstream_writer_abort(&w);
			return -1;
		}
	}
	return lmt_tokstream_writer_finish(&w, src, 2, sha, &err);
}

/* The writer keeps the newest LMT_TS_INDEX_MEM bytes of index records and the rest
 * in a temporary file: with 3 records (or 1, or 7) in memory, the same stream, byte
 * for byte, as with all of them; and it reads back, each document where it was. */
static void check_index_spill(void)
{
	char dir[] = "/tmp/lmt-test-spill-XXXXXX", a[64], b[64];
	if (!tap_ok(mkdtemp(dir) != NULL, "a scratch directory"))
		return;
	snprintf(a, sizeof a, "%s/a.lmtoks", dir);
	snprintf(b, sizeof b, "%s/b.lmtoks", dir);
	uint8_t sa[32], sb[32];
	int same = write_stream(a, 0, 1000, sa) == 0;
	for (size_t recs = 1; recs <= 7 && same; recs += 2) {
		same &= write_stream(b, recs * LMT_TS_INDEX_REC, 1000, sb) == 0 && !memcmp(sa, sb, 32);
		FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
		int ca, cb;
		do {
			ca = fa ? fgetc(fa) : -2;
			cb = fb ? fgetc(fb) : -3;
		} while (ca == cb && ca != EOF);
		same &= ca == cb;
		if (fa)
			fclose(fa);
		if (fb)
			fclose(fb);
	}
	tap_ok(same, "token stream: 1000 documents' index kept 1, 3, 5 or 7 records in memory, the rest in a temporary "
	       "file: the same bytes as kept whole");
	struct lmt_tokstream_reader r;
	struct lmt_err err = { 0 };
	int ok = lmt_tokstream_reader_open(&r, b, 1, &err) == 0;
	uint64_t at = 0;
	for (uint64_t i = 0; ok && i < 1000 && i < r.info.n_docs; i++) {
		struct lmt_tokstream_doc d;
		lmt_tokstream_reader_doc(&r, i, &d);
		ok = d.tok_off == at && d.n_tok == (i % 6 == 5 ? 0 : i % 6) && d.n_bytes == i && d.source == (i & 1) &&
		     d.ordinal == i / 2 && (!d.n_tok || lmt_tokstream_reader_token(&r, d.tok_off) == i % 100);
		at += d.n_tok;
	}
	ok &= r.info.n_docs == 1000;
	if (r.tokens)
		lmt_tokstream_reader_close(&r);
	tap_ok(ok, "... and it reads back (verified), each document's record where it was");
	unlink(a);
	unlink(b);
	rmdir(dir);
}

int main(void)
{
	check_specmatch();
	check_index_spill();
	check_pretok();
	check_ascii_split();
	check_pretok_cut();
	check_tiktoken();
	check_roundtrip();
	check_batchenc();
	check_bad_models();
	return tap_done();
}
