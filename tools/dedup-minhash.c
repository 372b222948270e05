/*
 * dedup-minhash: remove exact and near-duplicate documents, and documents that
 * overlap evaluation sets, with MinHash and LSH.
 *
 *	dedup-minhash corpus/ > kept.jsonl
 *	dedup-minhash -t 0.7 --removed removed.jsonl --verify data.jsonl.zst > kept.jsonl
 *	dedup-minhash --against eval/ --removed removed.jsonl train/ > clean.jsonl
 *
 * Two passes, so that every document is clustered before any is written: pass 1
 * reads the input, signs the documents in threads and clusters them (union-find
 * over exact-hash groups and LSH band collisions; the first document of a cluster
 * in input order is kept); pass 2 reads the input again and writes what is kept,
 * in input order. Only signatures and a few words of bookkeeping per document stay
 * in memory, never texts. stdin cannot be read twice, so it is copied to an
 * unlinked temporary file first (unless it already is a regular file).
 *
 * stdout: the kept documents as JSONL; --removed and --summary: JSONL files,
 * written atomically; stderr: human messages.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomicfile.h"
#include "data/corpus.h"
#include "core/digest.h"
#include "core/json.h"
#include "data/minhash.h"
#include "progress.h"
#include "data/textnorm.h"
#include "tool.h"
#include "core/util.h"

#define DIGEST_LEN 16       /* bytes of SHA-256 kept for exact matching */
#define MAX_AGAINST 256
#define MAX_NGRAM 63        /* short evaluation lengths are bits of a uint64_t */

enum {
	OPT_REMOVED = OPT_TOOL_BASE,
	OPT_SUMMARY,
	OPT_NUM_PERM,
	OPT_SHINGLE,
	OPT_SEED,
	OPT_VERIFY,
	OPT_AGAINST,
	OPT_NGRAM,
	OPT_NGRAM_MIN,
	OPT_NORMALIZE,
};

static const struct option longopts[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ "threshold", required_argument, NULL, 't' },
	{ "num-perm", required_argument, NULL, OPT_NUM_PERM },
	{ "shingle", required_argument, NULL, OPT_SHINGLE },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "normalize", required_argument, NULL, OPT_NORMALIZE },
	{ "removed", required_argument, NULL, OPT_REMOVED },
	{ "summary", required_argument, NULL, OPT_SUMMARY },
	{ "verify", no_argument, NULL, OPT_VERIFY },
	{ "against", required_argument, NULL, OPT_AGAINST },
	{ "ngram", required_argument, NULL, OPT_NGRAM },
	{ "ngram-min", required_argument, NULL, OPT_NGRAM_MIN },
	{ "threads", required_argument, NULL, 'j' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "input-format", required_argument, NULL, OPT_INPUT_FORMAT },
	{ "txt-docs", required_argument, NULL, OPT_TXT_DOCS },
	{ "doc-sep", required_argument, NULL, OPT_DOC_SEP },
	{ "text-field", required_argument, NULL, OPT_TEXT_FIELD },
	{ "keep-empty", no_argument, NULL, OPT_KEEP_EMPTY },
	{ NULL, 0, NULL, 0 },
};

static void usage(void)
{
	printf("usage: dedup-minhash [options] INPUT... > kept.jsonl\n"
	       "\n"
	       "Remove exact and near-duplicate documents (MinHash + LSH), and with --against\n"
	       "documents that overlap evaluation sets. Inputs: files, directories, JSONL,\n"
	       "compressed files, archives, or '-' for stdin. The kept documents go to stdout\n"
	       "as JSONL {\"text\",\"source\",\"id\"}, in input order.\n"
	       "\n"
	       "Near duplicates:\n"
	       "  -t, --threshold T       Jaccard similarity to aim LSH at, 0.01 to 1 (0.8)\n"
	       "      --num-perm N        MinHash permutations, 1 to 1024 (128)\n"
	       "      --shingle N         words per shingle, 1 to 64 (5)\n"
	       "      --seed N            seed of the permutations (1)\n"
	       "      --normalize LIST    lower,digits,punct,space,accents (all), all or none\n"
	       "      --verify            also compute each removed document's exact Jaccard\n"
	       "                          similarity with the document it duplicates\n"
	       "\n"
	       "Decontamination:\n"
	       "      --against FILE      remove documents that match an evaluation document of\n"
	       "                          FILE (repeatable; same input options) by exact text,\n"
	       "                          a shared word n-gram, or MinHash\n"
	       "      --ngram N           words per n-gram, 1 to %d (13)\n"
	       "      --ngram-min N       evaluation documents of fewer words take part in\n"
	       "                          exact and MinHash matching only (8)\n"
	       "\n"
	       "Output:\n"
	       "      --removed FILE      one JSONL record per removed document: id, reason\n"
	       "                          (exact, near, contamination), what it duplicates,\n"
	       "                          similarity\n"
	       "      --summary FILE      a JSONL summary record\n"
	       "  -j, --threads N         signing threads (all cores)\n"
	       "  -q, --quiet             no progress or summary line on stderr\n"
	       "\n"
	       "Input:\n"
	       "      --input-format F    auto (by name), text or jsonl\n"
	       "      --txt-docs MODE     text documents: file (default), line, blank\n"
	       "      --doc-sep STR       split text documents at STR instead\n"
	       "      --text-field NAME   JSONL field with the text (text)\n"
	       "      --keep-empty        keep empty documents\n"
	       "\n"
	       "  -h, --help              this help\n"
	       "  -V, --version           version and backends\n"
	       "\n"
	       "Exit status: 0 success, 1 error, 2 usage error. See dedup-minhash(1).\n",
	       MAX_NGRAM);
}

struct opts {
	double threshold;
	int num_perm, shingle, ngram, ngram_min, threads, verify;
	uint64_t seed;
	unsigned norm;
	const char *removed, *summary;
	const char *against[MAX_AGAINST];
	int nagainst;
	struct lmt_corpus_opts corpus;
};

/* per-document flags */
enum {
	F_CONTAM = 1,    /* matches an evaluation document */
	F_EMPTY = 2,     /* no words after normalisation: no shingles */
	F_EXACTDUP = 4,  /* same normalised text as an earlier document */
	F_HASMEM = 8,    /* kept, with duplicates */
};

enum { M_NONE, M_EXACT, M_NGRAM, M_MINHASH };
static const char *const method_name[] = { "none", "exact", "ngram", "minhash" };

/* What each signing thread owns, a cache line apart. */
struct scratch {
	char *norm;
	size_t normcap;
	uint64_t *w;             /* word hashes of the current document */
	size_t wcap, nw;
	uint64_t *sh;            /* its shingles */
	size_t shcap, nsh;
	uint64_t *mins;
	int oom;
} __attribute__((aligned(64)));

struct evalset {
	struct lmt_corpus *c;
	size_t n;
	uint32_t *src;
	uint64_t *ord;
	uint8_t (*digest)[DIGEST_LEN];
	uint32_t *sigs;          /* n x num_perm */
	struct lmt_u64map exact; /* first 8 digest bytes -> document */
	struct lmt_u64map grams; /* n-gram hash -> first document that has it */
	struct lmt_lsh_table lsh;
	uint64_t short_lens;     /* bit L: a document of L < --ngram words is in grams */
	uint64_t **sets;         /* --verify: each document's sorted shingle set */
	size_t *nsets;
};

struct contam {
	uint32_t doc, eval;
	uint8_t method;
};

struct dedup {
	const struct opts *o;
	struct lmt_minhash mh;
	int bands, rows, nt;
	struct scratch *W;
	struct lmt_json j;
	char *idbuf, *idbuf2;
	size_t idcap, idcap2;

	/* one entry per document, in input order */
	size_t n, cap;
	struct lmt_sigstore sigs;
	uint8_t (*digest)[DIGEST_LEN];
	uint32_t *parent;        /* union-find; after clustering: the kept representative */
	uint32_t *src;
	uint64_t *ord;
	uint8_t *flags;
	uint64_t inhash;         /* hash of every input text in order: pass 2 checks it */

	uint32_t *table;         /* exact duplicates: document indices by digest */
	size_t tcap, tn;

	struct contam *contam;   /* contaminated documents, in input order */
	size_t ncontam, capcontam;

	struct evalset ev;
	uint64_t kept, exact, near, clusters;
	double t_eval, t_pass1, t_cluster, t_pass2;
};

static void oom(void)
{
	die("out of memory");
}

/* ---- stdin: spooled so that pass 2 can read it again ---- */

static off_t stdin_start = -1;

static void spool_stdin(void)
{
	struct stat st;
	if (fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode)) {
		stdin_start = lseek(STDIN_FILENO, 0, SEEK_CUR);
		if (stdin_start >= 0)
			return; /* a regular file: just read it again */
	}
	const char *dir = getenv("TMPDIR");
	if (!dir || !*dir)
		dir = "/tmp";
	char path[4096];
	snprintf(path, sizeof path, "%s/dedup-minhash-stdin.XXXXXX", dir);
	int fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		die("'%s': cannot create a temporary file to hold stdin: %s", dir, strerror(errno));
	unlink(path); /* nothing to clean up, whatever happens */
	char *buf = malloc(1 << 20);
	if (!buf)
		oom();
	for (;;) {
		ssize_t r = read(STDIN_FILENO, buf, 1 << 20);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("'<stdin>': read: %s", strerror(errno));
		if (r == 0)
			break;
		for (ssize_t off = 0; off < r;) {
			ssize_t w = write(fd, buf + off, (size_t)(r - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				die("'%s': writing the copy of stdin: %s", dir, strerror(errno));
			off += w;
		}
	}
	free(buf);
	if (dup2(fd, STDIN_FILENO) < 0)
		die("'<stdin>': dup2: %s", strerror(errno));
	close(fd);
	stdin_start = 0;
	if (lseek(STDIN_FILENO, 0, SEEK_SET) < 0)
		die("'<stdin>': seek: %s", strerror(errno));
}

static void rewind_stdin(void)
{
	if (stdin_start >= 0 && lseek(STDIN_FILENO, stdin_start, SEEK_SET) < 0)
		die("'<stdin>': seek: %s", strerror(errno));
}

/* ---- one document: normalise, hash, shingle, sign ---- */

static void analyse(const struct dedup *d, struct scratch *s, const char *text, size_t len,
		    uint8_t dg[DIGEST_LEN], uint32_t *sig)
{
	size_t need = lmt_textnorm_bound(len);
	if (need > s->normcap) {
		char *p = realloc(s->norm, need);
		if (!p) {
			s->oom = 1;
			return;
		}
		s->norm = p;
		s->normcap = need;
	}
	size_t m = lmt_textnorm_apply(d->o->norm, text, len, s->norm);
	uint8_t full[LMT_SHA256_LEN];
	lmt_sha256(s->norm, m, full);
	memcpy(dg, full, DIGEST_LEN);
	s->nw = 0;
	if (lmt_word_hashes(s->norm, m, &s->w, &s->wcap, &s->nw) ||
	    LMT_GROW(s->sh, s->shcap, s->nw + 1)) {
		s->oom = 1;
		return;
	}
	s->nsh = lmt_shingles(s->w, s->nw, d->o->shingle, s->sh);
	if (sig)
		lmt_minhash_sign(&d->mh, s->sh, s->nsh, sig, s->mins);
}

/* The sorted shingle set of a text, malloc'd (NULL with *n == 0 when empty). */
static uint64_t *shingle_set(const struct dedup *d, struct scratch *s, const char *text, size_t len,
			     size_t *n)
{
	uint8_t dg[DIGEST_LEN];
	analyse(d, s, text, len, dg, NULL);
	*n = 0;
	if (s->oom || s->nsh == 0)
		return NULL;
	uint64_t *v = malloc(s->nsh * sizeof *v);
	if (!v) {
		s->oom = 1;
		return NULL;
	}
	memcpy(v, s->sh, s->nsh * sizeof *v);
	*n = s->nsh;
	lmt_u64_sort_unique(v, n);
	return v;
}

/* ---- evaluation documents ---- */

static void read_eval(struct dedup *d)
{
	const struct opts *o = d->o;
	struct evalset *e = &d->ev;
	struct lmt_err err = { 0 };
	if (lmt_corpus_open(&e->c, o->against, o->nagainst, &o->corpus, &err))
		die_err(&err);
	if (lmt_lsh_table_init(&e->lsh, d->bands, d->rows))
		oom();
	size_t capsig = 0, capd = 0, caps = 0, capo = 0;
	const size_t np = (size_t)o->num_perm;
	struct scratch *s = &d->W[0];
	struct lmt_doc doc;
	int rc;
	while ((rc = lmt_corpus_next(e->c, &doc, &err)) > 0) {
		if (e->n >= UINT32_MAX - 1)
			die("'%s': more than %u evaluation documents", o->against[0], UINT32_MAX - 1);
		size_t i = e->n;
		if (LMT_GROW(e->src, caps, i + 1) || LMT_GROW(e->ord, capo, i + 1) ||
		    LMT_GROW(e->digest, capd, i + 1) || LMT_GROW(e->sigs, capsig, (i + 1) * np))
			oom();
		e->src[i] = doc.source;
		e->ord[i] = doc.ordinal;
		analyse(d, s, doc.text, doc.len, e->digest[i], e->sigs + i * np);
		if (s->oom)
			oom();
		e->n++;
		if (s->nw == 0)
			continue; /* nothing left after normalisation: matches nothing */
		if (lmt_u64map_put(&e->exact, lmt_load_u64(e->digest[i]), (uint32_t)i) ||
		    lmt_lsh_table_add(&e->lsh, e->sigs + i * np, (uint32_t)i))
			oom();
		size_t g = (size_t)o->ngram;
		if (s->nw >= g) {
			for (size_t k = 0; k + g <= s->nw; k++)
				if (lmt_u64map_put(&e->grams, lmt_ngram_hash(s->w + k, g), (uint32_t)i))
					oom();
		} else if (s->nw >= (size_t)o->ngram_min) {
			if (lmt_u64map_put(&e->grams, lmt_ngram_hash(s->w, s->nw), (uint32_t)i))
				oom();
			e->short_lens |= 1ULL << s->nw;
		}
	}
	if (rc < 0)
		die_err(&err);
	if (o->verify) {
		/* --verify needs the shingle sets too: read the files again for them */
		e->sets = calloc(e->n + 1, sizeof *e->sets);
		e->nsets = calloc(e->n + 1, sizeof *e->nsets);
		if (!e->sets || !e->nsets)
			oom();
		lmt_corpus_close(e->c);
		if (lmt_corpus_open(&e->c, o->against, o->nagainst, &o->corpus, &err))
			die_err(&err);
		for (size_t i = 0; i < e->n; i++) {
			if ((rc = lmt_corpus_next(e->c, &doc, &err)) <= 0) {
				if (rc < 0)
					die_err(&err);
				die("'%s': evaluation input changed while it was read", o->against[0]);
			}
			e->sets[i] = shingle_set(d, s, doc.text, doc.len, &e->nsets[i]);
			if (s->oom)
				oom();
		}
	}
	info("%zu evaluation documents, %zu distinct n-grams", e->n, e->grams.n);
}

/* Which evaluation document, if any, does this document match, and how? */
static int contaminated(const struct dedup *d, const struct scratch *s, const uint8_t *dg,
			const uint32_t *sig, uint32_t *eval)
{
	const struct evalset *e = &d->ev;
	if (s->nw == 0)
		return M_NONE;
	uint32_t v = lmt_u64map_get(&e->exact, lmt_load_u64(dg));
	if (v != UINT32_MAX && !memcmp(e->digest[v], dg, DIGEST_LEN)) {
		*eval = v;
		return M_EXACT;
	}
	size_t g = (size_t)d->o->ngram;
	for (size_t k = 0; k + g <= s->nw; k++) {
		if ((v = lmt_u64map_get(&e->grams, lmt_ngram_hash(s->w + k, g))) != UINT32_MAX) {
			*eval = v;
			return M_NGRAM;
		}
	}
	for (size_t l = 1; l < g && l <= s->nw; l++) {
		if (!(e->short_lens & (1ULL << l)))
			continue;
		for (size_t k = 0; k + l <= s->nw; k++) {
			if ((v = lmt_u64map_get(&e->grams, lmt_ngram_hash(s->w + k, l))) != UINT32_MAX) {
				*eval = v;
				return M_NGRAM;
			}
		}
	}
	if ((v = lmt_lsh_table_query(&e->lsh, sig)) != UINT32_MAX) {
		*eval = v;
		return M_MINHASH;
	}
	return M_NONE;
}

/* ---- pass 1: sign, find exact duplicates and contamination ---- */

struct p1res {
	uint8_t dg[DIGEST_LEN];
	uint64_t rawhash;
	uint32_t eval;
	uint8_t method, empty;
};

static uint32_t *exact_slot(struct dedup *d, const uint8_t *dg)
{
	size_t mask = d->tcap - 1, s = lmt_load_u64(dg) & mask;
	while (d->table[s] != UINT32_MAX && memcmp(d->digest[d->table[s]], dg, DIGEST_LEN))
		s = (s + 1) & mask;
	return &d->table[s];
}

static void exact_grow(struct dedup *d)
{
	if (2 * (d->tn + 1) <= d->tcap)
		return;
	size_t nc = d->tcap ? 2 * d->tcap : 1024;
	uint32_t *old = d->table;
	size_t oc = d->tcap;
	if (!(d->table = malloc(nc * sizeof *d->table)))
		oom();
	memset(d->table, 0xff, nc * sizeof *d->table);
	d->tcap = nc;
	for (size_t i = 0; i < oc; i++)
		if (old[i] != UINT32_MAX)
			*exact_slot(d, d->digest[old[i]]) = old[i];
	free(old);
}

static void grow_docs(struct dedup *d, size_t need)
{
	if (need > UINT32_MAX - 1)
		die("more than %u documents; this build indexes documents with 32 bits", UINT32_MAX - 1);
	if (need > d->cap) {
		size_t c = d->cap;
		size_t c1 = c, c2 = c, c3 = c, c4 = c;
		if (LMT_GROW(d->digest, c, need) || LMT_GROW(d->parent, c1, need) ||
		    LMT_GROW(d->src, c2, need) || LMT_GROW(d->ord, c3, need) || LMT_GROW(d->flags, c4, need))
			oom();
		/* the same growth rule from the same capacity: all five agree */
		LMT_ASSERT(c == c1 && c == c2 && c == c3 && c == c4);
		d->cap = c;
	}
	if (lmt_sigstore_reserve(&d->sigs, need))
		oom();
}

static void pass1(struct dedup *d, const char *const *inputs, int ninputs)
{
	const struct opts *o = d->o;
	struct lmt_err err = { 0 };
	struct lmt_corpus *c;
	if (lmt_corpus_open(&c, inputs, ninputs, &o->corpus, &err))
		die_err(&err);
	struct lmt_progress bar;
	uint64_t done, total;
	lmt_corpus_progress(c, &done, &total);
	lmt_progress_init(&bar, "signing", "B", total, tool_quiet);
	struct lmt_batchq *q = lmt_batchq_start(c, 8u << 20, 1u << 15, NULL, NULL);
	if (!q)
		die("cannot start the reader thread");
	struct lmt_docbatch *b;
	struct p1res *res = NULL;
	size_t rescap = 0;
	int rc;
	while ((rc = lmt_batchq_get(q, &b, &err)) > 0) {
		const int nd = (int)b->n;
		const size_t base = d->n;
		if (LMT_GROW(res, rescap, (size_t)nd))
			oom();
		grow_docs(d, base + (size_t)nd);
		int failed = 0;
#pragma omp parallel for num_threads(d->nt) schedule(dynamic, 16) reduction(| : failed)
		for (int i = 0; i < nd; i++) {
			struct scratch *s = &d->W[omp_get_thread_num()];
			struct p1res *r = &res[i];
			uint32_t *sig = lmt_sigstore_at(&d->sigs, base + (size_t)i);
			r->rawhash = lmt_hash_bytes(b->docs[i].text, b->docs[i].len, 0);
			analyse(d, s, b->docs[i].text, b->docs[i].len, r->dg, sig);
			r->empty = s->nw == 0;
			r->method = d->o->nagainst && !s->oom ? (uint8_t)contaminated(d, s, r->dg, sig, &r->eval) : M_NONE;
			failed |= s->oom;
		}
		if (failed)
			oom();
		for (int i = 0; i < nd; i++) {
			const struct p1res *r = &res[i];
			size_t x = base + (size_t)i;
			d->src[x] = b->docs[i].source;
			d->ord[x] = b->docs[i].ordinal;
			memcpy(d->digest[x], r->dg, DIGEST_LEN);
			d->parent[x] = (uint32_t)x;
			d->flags[x] = r->empty ? F_EMPTY : 0;
			d->inhash = lmt_mix64(d->inhash + r->rawhash);
			if (r->method != M_NONE) {
				d->flags[x] |= F_CONTAM;
				if (LMT_GROW(d->contam, d->capcontam, d->ncontam + 1))
					oom();
				d->contam[d->ncontam++] = (struct contam){ (uint32_t)x, r->eval, r->method };
				continue;
			}
			exact_grow(d);
			uint32_t *slot = exact_slot(d, r->dg);
			if (*slot == UINT32_MAX) {
				*slot = (uint32_t)x;
				d->tn++;
			} else {
				d->parent[x] = *slot;
				d->flags[x] |= F_EXACTDUP;
			}
		}
		d->n += (size_t)nd;
		lmt_batchq_put(q, b);
		lmt_corpus_progress(c, &done, &total);
		lmt_progress_update(&bar, done);
	}
	lmt_batchq_stop(q);
	if (rc < 0)
		die_err(&err);
	lmt_progress_done(&bar);
	lmt_corpus_close(c);
	free(res);
}

/* Union LSH collisions, then point every document at its representative. */
static void cluster(struct dedup *d)
{
	struct lmt_err err = { 0 };
	if (lmt_lsh_cluster(&d->sigs, d->n, d->bands, d->rows, d->flags, F_CONTAM | F_EMPTY | F_EXACTDUP,
			    d->parent, &err))
		die_err(&err);
	/* parent[i] <= i always (unions link the larger root under the smaller), so in
	 * ascending order each parent is final when it is needed */
	for (size_t i = 0; i < d->n; i++) {
		uint32_t r = d->parent[d->parent[i]];
		d->parent[i] = r;
		if (d->flags[i] & F_CONTAM)
			continue;
		if (r == i) {
			d->kept++;
		} else {
			if (!(d->flags[r] & F_HASMEM))
				d->clusters++;
			d->flags[r] |= F_HASMEM;
			if (!memcmp(d->digest[i], d->digest[r], DIGEST_LEN))
				d->exact++;
			else
				d->near++;
		}
	}
}

/* ---- pass 2: write ---- */

static const char *doc_id(char **buf, size_t *cap, const char *source, uint64_t ord)
{
	size_t need = strlen(source) + 24;
	if (LMT_GROW(*buf, *cap, need))
		oom();
	snprintf(*buf, *cap, "%s:%llu", source, (unsigned long long)ord);
	return *buf;
}

/* --verify: the shingle sets of representatives, held from the representative
 * to its cluster's last member */
struct repset {
	uint64_t *v;
	size_t n;
	uint32_t last;
};

struct p2res {
	uint64_t rawhash;
	uint64_t *set;           /* --verify: shingle set, when needed */
	size_t nset;
};

static void write_line(struct lmt_json *j, FILE *fp, const char *what)
{
	lmt_json_end(j);
	if (j->out.oom)
		oom();
	/* no flush per line: the caller flushes stdout once a batch */
	if (fwrite(j->out.buf, 1, j->out.len, fp) != j->out.len || putc('\n', fp) == EOF)
		die("'%s': write error", what);
}

static void pass2(struct dedup *d, const char *const *inputs, int ninputs, struct lmt_atomicfile *removed)
{
	const struct opts *o = d->o;
	struct lmt_err err = { 0 };
	struct lmt_corpus *c;
	rewind_stdin();
	if (lmt_corpus_open(&c, inputs, ninputs, &o->corpus, &err))
		die_err(&err);
	const int np = o->num_perm;
	struct lmt_u64map repidx = { 0 };   /* representative -> index in reps */
	struct repset *reps = NULL;
	size_t nreps = 0, capreps = 0;
	if (o->verify) {
		for (size_t i = 0; i < d->n; i++) {
			if ((d->flags[i] & F_HASMEM) && !(d->flags[i] & F_CONTAM)) {
				if (LMT_GROW(reps, capreps, nreps + 1) ||
				    lmt_u64map_put(&repidx, i, (uint32_t)nreps))
					oom();
				reps[nreps++] = (struct repset){ NULL, 0, 0 };
			} else if (!(d->flags[i] & F_CONTAM) && d->parent[i] != i) {
				reps[lmt_u64map_get(&repidx, d->parent[i])].last = (uint32_t)i;
			}
		}
	}
	struct lmt_progress bar;
	lmt_progress_init(&bar, "writing", "docs", d->n, tool_quiet);
	struct lmt_batchq *q = lmt_batchq_start(c, 8u << 20, 1u << 15, NULL, NULL);
	if (!q)
		die("cannot start the reader thread");
	struct lmt_docbatch *b;
	struct p2res *res = NULL;
	size_t rescap = 0, x = 0, ci = 0;
	uint64_t inhash = 0;
	struct lmt_json *j = &d->j;
	FILE *rfp = removed->fp;
	int rc;
	while ((rc = lmt_batchq_get(q, &b, &err)) > 0) {
		const int nd = (int)b->n;
		if (LMT_GROW(res, rescap, (size_t)nd))
			oom();
		if (x + (size_t)nd > d->n)
			die("'%s': input changed between the two passes (more documents)",
			    lmt_corpus_source_name(c, b->docs[0].source));
		const size_t base = x;
		int failed = 0;
#pragma omp parallel for num_threads(d->nt) schedule(dynamic, 16) reduction(| : failed)
		for (int i = 0; i < nd; i++) {
			struct scratch *s = &d->W[omp_get_thread_num()];
			size_t k = base + (size_t)i;
			res[i].rawhash = lmt_hash_bytes(b->docs[i].text, b->docs[i].len, 0);
			res[i].set = NULL;
			res[i].nset = 0;
			int need = o->verify && ((d->flags[k] & F_CONTAM) || d->parent[k] != k ||
						 (d->flags[k] & F_HASMEM));
			if (need)
				res[i].set = shingle_set(d, s, b->docs[i].text, b->docs[i].len, &res[i].nset);
			failed |= s->oom;
		}
		if (failed)
			oom();
		for (int i = 0; i < nd; i++, x++) {
			const struct lmt_doc *doc = &b->docs[i];
			const char *srcname = lmt_corpus_source_name(c, doc->source);
			if (doc->source != d->src[x] || doc->ordinal != d->ord[x])
				die("'%s': input changed between the two passes (document %llu)", srcname,
				    (unsigned long long)doc->ordinal);
			inhash = lmt_mix64(inhash + res[i].rawhash);
			const char *id = doc_id(&d->idbuf, &d->idcap, srcname, doc->ordinal);
			const uint32_t *sig = lmt_sigstore_at(&d->sigs, x);
			uint32_t r = d->parent[x];
			if (d->flags[x] & F_CONTAM) {
				LMT_ASSERT(ci < d->ncontam && d->contam[ci].doc == x);
				const struct contam *ct = &d->contam[ci++];
				const struct evalset *e = &d->ev;
				if (rfp) {
					lmt_json_begin(j);
					lmt_json_str(j, "id", id);
					lmt_json_str(j, "reason", "contamination");
					lmt_json_str(j, "method", method_name[ct->method]);
					lmt_json_str(j, "eval_id", doc_id(&d->idbuf2, &d->idcap2,
						     lmt_corpus_source_name(e->c, e->src[ct->eval]), e->ord[ct->eval]));
					lmt_json_num(j, "estimated_jaccard",
						     lmt_minhash_similarity(sig, e->sigs + (size_t)ct->eval * np, np));
					if (o->verify)
						lmt_json_num(j, "jaccard", lmt_jaccard_sorted(res[i].set, res[i].nset,
							     e->sets[ct->eval], e->nsets[ct->eval]));
					write_line(j, rfp, removed->path);
				}
			} else if (r == x) {
				lmt_json_begin(j);
				lmt_json_strn(j, "text", doc->text, doc->len);
				lmt_json_str(j, "source", srcname);
				lmt_json_str(j, "id", id);
				write_line(j, stdout, "<stdout>");
				if (o->verify && (d->flags[x] & F_HASMEM)) {
					struct repset *rs = &reps[lmt_u64map_get(&repidx, x)];
					rs->v = res[i].set;
					rs->n = res[i].nset;
					res[i].set = NULL;
				}
			} else if (rfp || o->verify) {
				struct repset *rs = o->verify ? &reps[lmt_u64map_get(&repidx, r)] : NULL;
				if (rfp) {
					int exact = !memcmp(d->digest[x], d->digest[r], DIGEST_LEN);
					lmt_json_begin(j);
					lmt_json_str(j, "id", id);
					lmt_json_str(j, "reason", exact ? "exact" : "near");
					lmt_json_str(j, "duplicate_of", doc_id(&d->idbuf2, &d->idcap2,
						     lmt_corpus_source_name(c, d->src[r]), d->ord[r]));
					lmt_json_num(j, "estimated_jaccard",
						     lmt_minhash_similarity(sig, lmt_sigstore_at(&d->sigs, r), np));
					if (rs)
						lmt_json_num(j, "jaccard", lmt_jaccard_sorted(res[i].set, res[i].nset,
												rs->v, rs->n));
					write_line(j, rfp, removed->path);
				}
				if (rs && rs->last == x) {
					free(rs->v);
					rs->v = NULL;
				}
			}
			free(res[i].set);
		}
		if (fflush(stdout) || ferror(stdout))
			die("'<stdout>': write error");
		lmt_batchq_put(q, b);
		lmt_progress_update(&bar, x);
	}
	lmt_batchq_stop(q);
	if (rc < 0)
		die_err(&err);
	lmt_progress_done(&bar);
	if (x != d->n || inhash != d->inhash)
		die("'%s': input changed between the two passes (%s)", inputs[0],
		    x != d->n ? "fewer documents" : "different text");
	lmt_corpus_close(c);
	for (size_t i = 0; i < nreps; i++)
		free(reps[i].v);
	free(reps);
	lmt_u64map_release(&repidx);
	free(res);
}

/* ---- main ---- */

static void write_summary(const struct dedup *d, double secs, struct lmt_atomicfile *af)
{
	const struct opts *o = d->o;
	struct lmt_err err = { 0 };
	struct lmt_json j;
	lmt_json_init(&j);
	uint64_t removed_c = d->ncontam;
	double per_doc = 4.0 * o->num_perm + DIGEST_LEN + 4 + 4 + 8 + 1 +
			 (d->n ? 4.0 * (double)d->tcap / (double)d->n : 0);
	char norm[64];
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "summary");
	lmt_json_u64(&j, "documents", d->n);
	lmt_json_u64(&j, "kept", d->kept);
	lmt_json_obj(&j, "removed");
	lmt_json_u64(&j, "exact", d->exact);
	lmt_json_u64(&j, "near", d->near);
	lmt_json_u64(&j, "contamination", removed_c);
	lmt_json_obj_end(&j);
	lmt_json_u64(&j, "clusters", d->clusters);
	lmt_json_u64(&j, "bands", (uint64_t)d->bands);
	lmt_json_u64(&j, "rows", (uint64_t)d->rows);
	lmt_json_u64(&j, "num_perm", (uint64_t)o->num_perm);
	lmt_json_num(&j, "threshold", o->threshold);
	lmt_json_u64(&j, "shingle", (uint64_t)o->shingle);
	lmt_json_str(&j, "normalize", lmt_textnorm_format(o->norm, norm));
	lmt_json_u64(&j, "seed", o->seed);
	if (o->nagainst) {
		lmt_json_u64(&j, "evaluation_documents", d->ev.n);
		lmt_json_u64(&j, "ngram", (uint64_t)o->ngram);
	}
	lmt_json_num(&j, "bytes_per_doc", per_doc);
	lmt_json_u64(&j, "peak_rss", lmt_peak_rss());
	lmt_json_num(&j, "seconds", secs);
	if (o->nagainst)
		lmt_json_num(&j, "eval_seconds", d->t_eval);
	lmt_json_num(&j, "pass1_seconds", d->t_pass1);
	lmt_json_num(&j, "cluster_seconds", d->t_cluster);
	lmt_json_num(&j, "pass2_seconds", d->t_pass2);
	lmt_json_num(&j, "docs_per_s", secs > 0 ? (double)d->n / secs : 0);
	lmt_json_u64(&j, "threads", (uint64_t)d->nt);
	lmt_json_str(&j, "kernel", lmt_minhash_kernel(&d->mh));
	lmt_json_end(&j);
	if (j.out.oom)
		oom();
	fprintf(af->fp, "%s\n", j.out.buf);
	if (lmt_atomicfile_commit(af, &err))
		die_err(&err);
	lmt_json_release(&j);
}

int main(int argc, char **argv)
{
	struct opts o;
	memset(&o, 0, sizeof o);
	o.threshold = 0.8;
	o.num_perm = 128;
	o.shingle = 5;
	o.ngram = 13;
	o.ngram_min = 8;
	o.seed = 1;
	o.norm = LMT_TEXTNORM_ALL;
	tool_init("dedup-minhash");
	int c;
	const char *bad;
	while ((c = getopt_long(argc, argv, "hVt:j:q", longopts, NULL)) != -1) {
		if (corpus_opt(c, optarg, &o.corpus))
			continue;
		switch (c) {
		case 'h': usage(); return 0;
		case 'V': print_version(); return 0;
		case 't': o.threshold = opt_double("threshold", optarg, 0.01, 1); break;
		case OPT_NUM_PERM: o.num_perm = (int)opt_int("num-perm", optarg, 1, LMT_MINHASH_MAX_PERM); break;
		case OPT_SHINGLE: o.shingle = (int)opt_int("shingle", optarg, 1, 64); break;
		case OPT_SEED: o.seed = (uint64_t)opt_int("seed", optarg, 0, INT64_MAX); break;
		case OPT_NORMALIZE:
			if (lmt_textnorm_parse(optarg, &o.norm, &bad))
				usage_error("option '--normalize': unknown step '%.*s' (lower, digits, punct, "
					    "space, accents; all or none)", (int)strcspn(bad, ","), bad);
			break;
		case OPT_REMOVED: o.removed = optarg; break;
		case OPT_SUMMARY: o.summary = optarg; break;
		case OPT_VERIFY: o.verify = 1; break;
		case OPT_AGAINST:
			if (o.nagainst == MAX_AGAINST)
				usage_error("too many --against options (at most %d)", MAX_AGAINST);
			if (!strcmp(optarg, "-"))
				usage_error("option '--against': evaluation sets are read from files, not stdin");
			o.against[o.nagainst++] = optarg;
			break;
		case OPT_NGRAM: o.ngram = (int)opt_int("ngram", optarg, 1, MAX_NGRAM); break;
		case OPT_NGRAM_MIN: o.ngram_min = (int)opt_int("ngram-min", optarg, 1, MAX_NGRAM); break;
		case 'j': o.threads = (int)opt_int("threads", optarg, 1, 1024); break;
		case 'q': tool_quiet = 1; break;
		default: bad_option(argv);
		}
	}
	const char *const *inputs = (const char *const *)argv + optind;
	int ninputs = argc - optind;
	if (ninputs == 0)
		usage_error("no input: give files, directories or '-' for stdin");
	int nstdin = 0;
	for (int i = 0; i < ninputs; i++)
		nstdin += !strcmp(inputs[i], "-");
	if (nstdin > 1)
		usage_error("stdin ('-') given more than once");
	if (o.verify && !o.removed)
		usage_error("--verify computes similarities for --removed; give --removed FILE");
	if (o.removed && o.summary && !strcmp(o.removed, o.summary))
		usage_error("--removed and --summary name the same file '%s'", o.removed);

	struct dedup d;
	memset(&d, 0, sizeof d);
	d.o = &o;
	struct lmt_err err = { 0 };
	double t0 = lmt_now();
	/* open the output files first: a bad path fails before any work */
	struct lmt_atomicfile removed, summary;
	memset(&removed, 0, sizeof removed);
	memset(&summary, 0, sizeof summary);
	removed.slot = summary.slot = -1;
	if (o.removed && lmt_atomicfile_open(&removed, o.removed, &err))
		die_err(&err);
	if (o.summary && lmt_atomicfile_open(&summary, o.summary, &err))
		die_err(&err);
	if (nstdin)
		spool_stdin();
	if (lmt_minhash_init(&d.mh, o.num_perm, o.shingle, o.seed, &err))
		die_err(&err);
	if (lmt_lsh_params(o.threshold, o.num_perm, 0.5, 0.5, &d.bands, &d.rows))
		oom();
	d.sigs.num_perm = o.num_perm;
	d.nt = tool_threads(o.threads);
	d.W = aligned_alloc(64, (size_t)d.nt * sizeof *d.W);
	if (!d.W)
		oom();
	memset(d.W, 0, (size_t)d.nt * sizeof *d.W);
	for (int i = 0; i < d.nt; i++)
		if (!(d.W[i].mins = malloc((size_t)d.mh.npad * sizeof *d.W[i].mins)))
			oom();
	lmt_json_init(&d.j);
	setvbuf(stdout, NULL, _IOFBF, 1 << 20);

	double t = lmt_now();
	if (o.nagainst)
		read_eval(&d);
	d.t_eval = lmt_now() - t;
	t = lmt_now();
	pass1(&d, inputs, ninputs);
	d.t_pass1 = lmt_now() - t;
	t = lmt_now();
	cluster(&d);
	d.t_cluster = lmt_now() - t;
	t = lmt_now();
	pass2(&d, inputs, ninputs, &removed);
	d.t_pass2 = lmt_now() - t;
	if (o.removed && lmt_atomicfile_commit(&removed, &err))
		die_err(&err);
	double secs = lmt_now() - t0;
	if (o.summary)
		write_summary(&d, secs, &summary);
	info("%zu documents, %llu kept; removed %llu exact, %llu near, %zu contaminated; "
	     "%llu clusters; %d bands x %d rows; %.2f s (%.0f docs/s)",
	     d.n, (unsigned long long)d.kept, (unsigned long long)d.exact, (unsigned long long)d.near,
	     d.ncontam, (unsigned long long)d.clusters, d.bands, d.rows, secs,
	     secs > 0 ? (double)d.n / secs : 0.0);

	for (int i = 0; i < d.nt; i++) {
		free(d.W[i].norm);
		free(d.W[i].w);
		free(d.W[i].sh);
		free(d.W[i].mins);
	}
	free(d.W);
	lmt_sigstore_release(&d.sigs);
	free(d.digest);
	free(d.parent);
	free(d.src);
	free(d.ord);
	free(d.flags);
	free(d.table);
	free(d.contam);
	free(d.idbuf);
	free(d.idbuf2);
	if (d.ev.c) {
		lmt_corpus_close(d.ev.c);
		for (size_t i = 0; d.ev.sets && i < d.ev.n; i++)
			free(d.ev.sets[i]);
		free(d.ev.sets);
		free(d.ev.nsets);
		free(d.ev.src);
		free(d.ev.ord);
		free(d.ev.digest);
		free(d.ev.sigs);
		lmt_u64map_release(&d.ev.exact);
		lmt_u64map_release(&d.ev.grams);
		lmt_lsh_table_release(&d.ev.lsh);
	}
	lmt_json_release(&d.j);
	lmt_minhash_release(&d.mh);
	return 0;
}
