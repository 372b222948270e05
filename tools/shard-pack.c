/*
 * shard-pack: token stream in, a dataset directory out: fixed-length packed
 * sequences in checksummed shards, split by document into train/val/test, and a
 * manifest (written last) that accounts for every token.
 *
 *	shard-pack -L 1024 --split val=0.01,test=0.01 -o data/ corpus.lmtoks
 *	shard-pack --verify data/
 *
 * The dataset is built in a temporary directory next to the output and renamed into
 * place when complete, so a directory named by -o is either absent, the previous
 * dataset, or the new one whole. stdout: JSONL; stderr: human messages.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomicfile.h"
#include "data/dataset.h"
#include "core/json.h"
#include "progress.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "data/tokstream.h"
#include "tool.h"
#include "core/util.h"
#include "core/version.h"

enum {
	OPT_MODE = OPT_TOOL_BASE,
	OPT_TAIL,
	OPT_SPLIT,
	OPT_SEED,
	OPT_EOS,
	OPT_SHARD_TOKENS,
	OPT_PAD_ID,
	OPT_FORCE,
	OPT_VERIFY,
};

static const struct option longopts[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ "output", required_argument, NULL, 'o' },
	{ "seq-len", required_argument, NULL, 'L' },
	{ "mode", required_argument, NULL, OPT_MODE },
	{ "tail", required_argument, NULL, OPT_TAIL },
	{ "split", required_argument, NULL, OPT_SPLIT },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "eos", required_argument, NULL, OPT_EOS },
	{ "shard-tokens", required_argument, NULL, OPT_SHARD_TOKENS },
	{ "tokenizer", required_argument, NULL, 't' },
	{ "pad-id", required_argument, NULL, OPT_PAD_ID },
	{ "force", no_argument, NULL, OPT_FORCE },
	{ "verify", required_argument, NULL, OPT_VERIFY },
	{ "threads", required_argument, NULL, 'j' },
	{ "quiet", no_argument, NULL, 'q' },
	{ NULL, 0, NULL, 0 },
};

static void usage(void)
{
	printf("usage: shard-pack [options] -o DIR [STREAM]\n"
	       "       shard-pack --verify DIR\n"
	       "\n"
	       "Pack a token stream (tok-encode's output; stdin if STREAM is absent or '-')\n"
	       "into fixed-length sequences in checksummed shards, split by document.\n"
	       "\n"
	       "  -o, --output DIR        the dataset directory (must not exist, or --force)\n"
	       "  -L, --seq-len N         tokens a model reads per sequence (1024); a\n"
	       "                          sequence holds N + 1 (inputs and shifted targets)\n"
	       "      --mode M            pack (default): documents run on across sequences;\n"
	       "                          pad: each document starts a sequence, padded\n"
	       "      --tail T            pack mode, the last partial sequence of each split:\n"
	       "                          drop (default, counted in the manifest) or pad\n"
	       "      --split SPEC        val=F,test=F fractions of documents (val=0.01); a\n"
	       "                          split not named gets none; the rest is train\n"
	       "      --seed N            seed of the split (0)\n"
	       "      --eos E             add: end every document with EOS (default; the\n"
	       "                          stream's own EOS counts), none: as they are\n"
	       "      --shard-tokens N    at most N tokens per shard (64Mi)\n"
	       "  -t, --tokenizer FILE    check that the stream was made with this tokenizer\n"
	       "                          and take its PAD token\n"
	       "      --pad-id N          the token written at padding positions (default:\n"
	       "                          the tokenizer's PAD, else EOS, else 0)\n"
	       "      --force             replace an existing dataset at -o\n"
	       "      --verify DIR        re-hash every shard against the manifest\n"
	       "  -j, --threads N         verify threads (OMP_NUM_THREADS, else all cores)\n"
	       "  -q, --quiet             no progress on stderr\n"
	       "  -h, --help              this help\n"
	       "  -V, --version           version and backends\n"
	       "\n"
	       "Exit status: 0 success, 1 error, 2 usage error. See shard-pack(1).\n");
}

struct opts {
	const char *out, *tokenizer, *verify;
	uint32_t seq_len;
	int pad_mode, tail_pad, tail_given, eos_none, force, threads, pack_opt;
	double frac[3];
	uint64_t seed, shard_tokens;
	int64_t pad_id;
};

static void parse_split(struct opts *o, const char *spec)
{
	char *s = strdup(spec), *save = NULL;
	if (!s)
		die("out of memory");
	o->frac[LMT_SPLIT_VAL] = o->frac[LMT_SPLIT_TEST] = 0;
	for (char *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq)
			usage_error("option '--split': '%s' is not NAME=FRACTION", tok);
		*eq = 0;
		int k = !strcmp(tok, "val") ? LMT_SPLIT_VAL : !strcmp(tok, "test") ? LMT_SPLIT_TEST : -1;
		if (k < 0)
			usage_error("option '--split': unknown split '%s' (val or test; train is the rest)", tok);
		o->frac[k] = opt_double("split", eq + 1, 0, 1);
	}
	if (o->frac[LMT_SPLIT_VAL] + o->frac[LMT_SPLIT_TEST] >= 1)
		usage_error("option '--split': val + test must leave some train documents");
	o->frac[LMT_SPLIT_TRAIN] = 1 - o->frac[LMT_SPLIT_VAL] - o->frac[LMT_SPLIT_TEST];
	free(s);
}

/* ---- packing ---- */

struct shard_rec {
	int split;
	char name[64];
	uint64_t bytes, tokens, seqs, segments;
	uint8_t sha[32];
};

struct src_count {
	uint64_t docs[3], tokens[3];
};

struct packer {
	const struct opts *o;
	const char *dir;
	int split;
	uint32_t token_bytes, pad_id;
	uint32_t *buf;             /* the sequence being filled: seq_len + 1 tokens */
	uint32_t fill;
	struct lmt_segment *segs;
	uint32_t nseg, segcap;
	struct lmt_shardw w;
	int open;
	uint32_t shard_no;
	uint64_t seqs_per_shard;
	/* accounting */
	uint64_t docs, doc_tokens, eos_added, pad_tokens, tail_dropped, sequences;
	struct shard_rec **recs;
	size_t *nrecs, *caprecs;
};

static void emit(struct packer *p)
{
	struct lmt_err err = { 0 };
	uint32_t n = p->o->seq_len + 1;
	if (!p->open) {
		struct lmt_shard_info info = { 0 };
		info.token_bytes = p->token_bytes;
		info.seq_len = p->o->seq_len;
		info.split = (uint32_t)p->split;
		info.shard_index = p->shard_no;
		info.pad_id = p->pad_id;
		info.flags = p->o->pad_mode ? LMT_SHARD_PADDED : LMT_SHARD_PACKED;
		char path[PATH_MAX];
		path_fmt(path, sizeof path, "%s/%s-%05u.lmshard", p->dir, lmt_split_name(p->split), p->shard_no);
		if (lmt_shardw_open(&p->w, path, &info, &err))
			die_err(&err);
		p->open = 1;
	}
	for (uint32_t i = p->fill; i < n; i++)
		p->buf[i] = p->pad_id;
	p->pad_tokens += n - p->fill;
	if (lmt_shardw_add(&p->w, p->buf, p->segs, p->nseg, &err))
		die_err(&err);
	p->sequences++;
	p->fill = 0;
	p->nseg = 0;
}

static void close_shard(struct packer *p)
{
	struct lmt_err err = { 0 };
	if (!p->open)
		return;
	if (LMT_GROW(*p->recs, *p->caprecs, *p->nrecs + 1))
		die("out of memory");
	struct shard_rec *r = &(*p->recs)[(*p->nrecs)++];
	memset(r, 0, sizeof *r);
	r->split = p->split;
	snprintf(r->name, sizeof r->name, "%s-%05u.lmshard", lmt_split_name(p->split), p->shard_no);
	r->seqs = p->w.info.n_seqs;
	r->segments = p->w.info.n_segments;
	r->tokens = r->seqs * (p->o->seq_len + 1);
	if (lmt_shardw_finish(&p->w, r->sha, &r->bytes, &err))
		die_err(&err);
	p->open = 0;
	p->shard_no++;
}

static void emit_seq(struct packer *p)
{
	emit(p);
	if (p->w.info.n_seqs >= p->seqs_per_shard)
		close_shard(p);
}

static void add_segment(struct packer *p, uint32_t start, uint32_t len, uint64_t doc)
{
	if (p->nseg == p->segcap) {
		p->segcap = p->segcap ? p->segcap * 2 : 16;
		p->segs = realloc(p->segs, p->segcap * sizeof *p->segs);
		if (!p->segs)
			die("out of memory");
	}
	p->segs[p->nseg++] = (struct lmt_segment){ start, len, doc };
}

/* Append one document's tokens (with a trailing EOS if add_eos). */
static void pack_doc(struct packer *p, const struct lmt_tokstream_reader *r, const struct lmt_tokstream_doc *d, uint64_t docno,
		     uint32_t add_eos, uint32_t eos)
{
	uint32_t n = p->o->seq_len + 1;
	uint64_t total = d->n_tok + (add_eos ? 1 : 0), done = 0;
	if (p->o->pad_mode && p->fill > 0)
		emit_seq(p);
	while (done < total) {
		uint32_t room = n - p->fill;
		uint64_t take = LMT_MIN((uint64_t)room, total - done);
		for (uint64_t k = 0; k < take; k++) {
			uint64_t t = done + k;
			p->buf[p->fill + k] = t < d->n_tok ? lmt_tokstream_reader_token(r, d->tok_off + t) : eos;
		}
		add_segment(p, p->fill, (uint32_t)take, docno);
		p->fill += (uint32_t)take;
		done += take;
		if (p->fill == n)
			emit_seq(p);
	}
	p->docs++;
	p->doc_tokens += total;
	p->eos_added += add_eos ? 1 : 0;
}

static void finish_split(struct packer *p)
{
	if (p->fill > 0) {
		if (p->o->pad_mode || p->o->tail_pad) {
			emit_seq(p);
		} else {
			p->tail_dropped += p->fill;
			p->fill = 0;
			p->nseg = 0;
		}
	}
	close_shard(p);
}

/* Where a document goes: a hash of its tokens and the seed. The document alone
 * decides: not its path, its place in its source, nor the other documents, and
 * copies of one text land in one split. */
static int split_of(const struct opts *o, const struct lmt_tokstream_reader *r, const struct lmt_tokstream_doc *d)
{
	uint64_t h = lmt_mix64(o->seed ^ 0x5b117ULL) ^ d->n_tok;
	for (uint64_t t = 0; t < d->n_tok; t++)
		h = lmt_mix64(h ^ ((uint64_t)lmt_tokstream_reader_token(r, d->tok_off + t) + 0x9e3779b97f4a7c15ULL));
	double u = (double)(lmt_mix64(h) >> 11) * 0x1.0p-53;
	if (u < o->frac[LMT_SPLIT_TEST])
		return LMT_SPLIT_TEST;
	if (u < o->frac[LMT_SPLIT_TEST] + o->frac[LMT_SPLIT_VAL])
		return LMT_SPLIT_VAL;
	return LMT_SPLIT_TRAIN;
}

static char staging[PATH_MAX];

static void cleanup_staging(void)
{
	if (staging[0])
		lmt_remove_dir(staging);
}

static void write_manifest(const struct opts *o, const char *dir, const struct lmt_tokstream_reader *r, const char *in_name,
			   const uint8_t *in_sha, const struct packer *P, const struct shard_rec *recs, size_t nrecs,
			   const struct src_count *sc, uint32_t eos, int eos_in_stream)
{
	struct lmt_json j;
	struct lmt_err err = { 0 };
	char hex[LMT_SHA256_HEX];
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "schema", "lmt-dataset");
	lmt_json_u64(&j, "schema_version", LMT_DATASET_SCHEMA);
	lmt_json_str(&j, "tool", "shard-pack");
	lmt_json_str(&j, "tool_version", LMT_VERSION);
	lmt_json_str(&j, "revision", lmt_revision());
	lmt_json_obj(&j, "input");
	lmt_json_str(&j, "path", in_name);
	lmt_json_str(&j, "sha256", lmt_sha256_hex(in_sha, hex));
	lmt_json_u64(&j, "documents", r->info.n_docs);
	lmt_json_u64(&j, "tokens", r->info.n_tokens);
	lmt_json_u64(&j, "text_bytes", r->info.text_bytes);
	lmt_json_bool(&j, "eos_in_stream", eos_in_stream);
	lmt_json_obj_end(&j);
	lmt_json_str(&j, "tokenizer_sha256", lmt_sha256_hex(r->info.tokenizer_sha256, hex));
	lmt_json_u64(&j, "vocab_size", r->info.vocab_size);
	lmt_json_u64(&j, "token_bytes", r->info.token_bytes);
	lmt_json_u64(&j, "seq_len", o->seq_len);
	lmt_json_obj(&j, "packing");
	lmt_json_str(&j, "mode", o->pad_mode ? "pad" : "pack");
	lmt_json_str(&j, "tail", o->pad_mode ? "pad" : o->tail_pad ? "pad" : "drop");
	lmt_json_str(&j, "eos", o->eos_none ? "none" : "add");
	if (eos != LMT_NO_TOKEN)
		lmt_json_u64(&j, "eos_id", eos);
	else
		lmt_json_null(&j, "eos_id");
	lmt_json_u64(&j, "pad_id", P[0].pad_id);
	lmt_json_u64(&j, "sequence_tokens", (uint64_t)o->seq_len + 1);
	lmt_json_str(&j, "overlap", "none");
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "split");
	lmt_json_str(&j, "rule", "hash(tokens, seed) < fraction, by document");
	lmt_json_u64(&j, "seed", o->seed);
	lmt_json_num(&j, "val", o->frac[LMT_SPLIT_VAL]);
	lmt_json_num(&j, "test", o->frac[LMT_SPLIT_TEST]);
	lmt_json_obj_end(&j);
	lmt_json_obj(&j, "splits");
	for (int s = 0; s < 3; s++) {
		const struct packer *p = &P[s];
		lmt_json_obj(&j, lmt_split_name(s));
		lmt_json_u64(&j, "documents", p->docs);
		lmt_json_u64(&j, "sequences", p->sequences);
		lmt_json_u64(&j, "tokens", p->sequences * ((uint64_t)o->seq_len + 1));
		lmt_json_u64(&j, "document_tokens", p->doc_tokens);
		lmt_json_u64(&j, "eos_added", p->eos_added);
		lmt_json_u64(&j, "pad_tokens", p->pad_tokens);
		lmt_json_u64(&j, "tail_dropped", p->tail_dropped);
		lmt_json_u64(&j, "shards", p->shard_no);
		lmt_json_obj_end(&j);
	}
	lmt_json_obj_end(&j);
	lmt_json_arr(&j, "shards");
	for (size_t i = 0; i < nrecs; i++) {
		lmt_json_obj(&j, NULL);
		lmt_json_str(&j, "split", lmt_split_name(recs[i].split));
		lmt_json_str(&j, "path", recs[i].name);
		lmt_json_u64(&j, "bytes", recs[i].bytes);
		lmt_json_u64(&j, "tokens", recs[i].tokens);
		lmt_json_u64(&j, "sequences", recs[i].seqs);
		lmt_json_u64(&j, "segments", recs[i].segments);
		lmt_json_str(&j, "payload_sha256", lmt_sha256_hex(recs[i].sha, hex));
		lmt_json_obj_end(&j);
	}
	lmt_json_arr_end(&j);
	lmt_json_arr(&j, "sources");
	for (uint32_t i = 0; i < r->info.n_sources; i++) {
		lmt_json_obj(&j, NULL);
		lmt_json_str(&j, "name", r->sources[i]);
		for (int s = 0; s < 3; s++) {
			lmt_json_obj(&j, lmt_split_name(s));
			lmt_json_u64(&j, "documents", sc[i].docs[s]);
			lmt_json_u64(&j, "tokens", sc[i].tokens[s]);
			lmt_json_obj_end(&j);
		}
		lmt_json_obj_end(&j);
	}
	lmt_json_arr_end(&j);
	lmt_json_end(&j);
	if (j.out.oom)
		die("out of memory writing the manifest");
	char path[PATH_MAX];
	path_fmt(path, sizeof path, "%s/manifest.json", dir);
	if (LMT_GROW(j.out.buf, j.out.cap, j.out.len + 2))
		die("out of memory");
	j.out.buf[j.out.len++] = '\n';
	if (lmt_write_file_atomic(path, j.out.buf, j.out.len, &err))
		die_err(&err);
	lmt_json_release(&j);
}

static int pack(const struct opts *o, const char *in)
{
	struct lmt_err err = { 0 };
	struct lmt_tokstream_reader r;
	double t0 = lmt_now();
	const char *in_name = in && strcmp(in, "-") ? in : "<stdin>";
	if (!in || !strcmp(in, "-")) {
		if (isatty(STDIN_FILENO))
			usage_error("no input: give a token stream file, or pipe one in");
		in = "-";
	}
	if (lmt_tokstream_reader_open(&r, in, 1, &err))
		die_err(&err);
	uint8_t in_sha[32];
	if (strcmp(in, "-")) {
		if (lmt_sha256_file(in, in_sha, &err))
			die_err(&err);
	} else {
		lmt_sha256(r.f.map, r.f.hdr.header_size + r.f.payload_size, in_sha);
	}
	uint32_t eos = r.info.eos, pad = 0;
	int eos_in_stream = (r.info.flags & LMT_TS_EOS) != 0;
	if (o->tokenizer) {
		struct lmt_tokenizer tok;
		if (lmt_tok_load(&tok, o->tokenizer, &err))
			die_err(&err);
		if (memcmp(tok.sha256, r.info.tokenizer_sha256, 32)) {
			char a[LMT_SHA256_HEX], b[LMT_SHA256_HEX];
			die("'%s' was encoded with tokenizer %.16s..., not '%s' (%.16s...)", in_name,
			    lmt_sha256_hex(r.info.tokenizer_sha256, a), o->tokenizer, lmt_sha256_hex(tok.sha256, b));
		}
		if (tok.pad != LMT_NO_TOKEN)
			pad = tok.pad;
		else if (tok.eos != LMT_NO_TOKEN)
			pad = tok.eos;
		lmt_tok_release(&tok);
	} else if (eos != LMT_NO_TOKEN) {
		pad = eos;
	}
	if (o->pad_id >= 0) {
		if ((uint64_t)o->pad_id >= r.info.vocab_size)
			usage_error("option '--pad-id': %lld is not below the vocabulary size %u", (long long)o->pad_id,
				    r.info.vocab_size);
		pad = (uint32_t)o->pad_id;
	}
	int add_eos = !o->eos_none && !eos_in_stream;
	if (add_eos && eos == LMT_NO_TOKEN)
		die("'%s': the tokenizer has no EOS token to end documents with; use --eos none", in_name);

	/* staging directory next to the output, renamed into place at the end */
	struct stat st;
	if (stat(o->out, &st) == 0) {
		if (!o->force)
			die("'%s' exists; use --force to replace it", o->out);
		char mf[PATH_MAX];
		path_fmt(mf, sizeof mf, "%s/manifest.json", o->out);
		DIR *dd = S_ISDIR(st.st_mode) ? opendir(o->out) : NULL;
		int entries = 0;
		struct dirent *de;
		while (dd && (de = readdir(dd)))
			entries += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
		if (dd)
			closedir(dd);
		if (!S_ISDIR(st.st_mode) || (entries && access(mf, F_OK)))
			die("'%s' is not a dataset (no manifest.json) nor an empty directory; --force replaces only those",
			    o->out);
	}
	path_fmt(staging, sizeof staging, "%s.partial-XXXXXX", o->out);
	size_t ol = strlen(o->out);
	while (ol > 1 && o->out[ol - 1] == '/')
		ol--;
	path_fmt(staging, sizeof staging, "%.*s.partial-XXXXXX", (int)ol, o->out);
	if (!mkdtemp(staging)) {
		staging[0] = 0;
		die("'%s': cannot create a staging directory: %s", o->out, strerror(errno));
	}
	atexit(cleanup_staging);
	tool_defer_signals(); /* a signal now stops at the next document, removing the staging directory */

	uint64_t per = LMT_MAX(1, o->shard_tokens / ((uint64_t)o->seq_len + 1));
	struct shard_rec *recs = NULL;
	size_t nrecs = 0, caprecs = 0;
	struct packer P[3];
	for (int s = 0; s < 3; s++) {
		memset(&P[s], 0, sizeof P[s]);
		P[s].o = o;
		P[s].dir = staging;
		P[s].split = s;
		P[s].token_bytes = r.info.token_bytes;
		P[s].pad_id = pad;
		P[s].seqs_per_shard = per;
		P[s].buf = malloc(((size_t)o->seq_len + 1) * sizeof *P[s].buf);
		P[s].recs = &recs;
		P[s].nrecs = &nrecs;
		P[s].caprecs = &caprecs;
		if (!P[s].buf)
			die("out of memory for sequences of %u tokens", o->seq_len + 1);
	}
	struct src_count *sc = calloc(r.info.n_sources ? r.info.n_sources : 1, sizeof *sc);
	if (!sc)
		die("out of memory");
	struct lmt_progress bar;
	lmt_progress_init(&bar, "packing", "docs", r.info.n_docs, tool_quiet);
	for (uint64_t i = 0; i < r.info.n_docs; i++) {
		struct lmt_tokstream_doc d;
		lmt_tokstream_reader_doc(&r, i, &d);
		int s = split_of(o, &r, &d);
		pack_doc(&P[s], &r, &d, i, add_eos, eos);
		sc[d.source].docs[s]++;
		sc[d.source].tokens[s] += d.n_tok + (add_eos ? 1 : 0);
		if ((i & 1023) == 0) {
			tool_check_interrupt();
			lmt_progress_update(&bar, i);
		}
	}
	for (int s = 0; s < 3; s++)
		finish_split(&P[s]);
	lmt_progress_done(&bar);
	if (P[LMT_SPLIT_TRAIN].sequences == 0)
		die("'%s': %llu train tokens make no sequence of %u tokens (--seq-len %u); use a shorter "
		    "--seq-len, --tail pad, or more text", in_name, (unsigned long long)P[LMT_SPLIT_TRAIN].doc_tokens,
		    o->seq_len + 1, o->seq_len);
	for (int s = 1; s < 3; s++)
		if (o->frac[s] > 0 && P[s].sequences == 0)
			warn("the %s split has no sequence (%llu documents, %llu tokens)", lmt_split_name(s),
			     (unsigned long long)P[s].docs, (unsigned long long)P[s].doc_tokens);
	/* shards sorted: train, val, test, each by index */
	struct shard_rec *sorted = malloc((nrecs ? nrecs : 1) * sizeof *sorted);
	size_t k = 0;
	for (int s = 0; s < 3; s++)
		for (size_t i = 0; i < nrecs; i++)
			if (recs[i].split == s)
				sorted[k++] = recs[i];
	write_manifest(o, staging, &r, in_name, in_sha, P, sorted, nrecs, sc, add_eos || eos_in_stream ? eos : LMT_NO_TOKEN,
		       eos_in_stream);
	if (lmt_fsync_dir(staging, &err))
		die_err(&err);
	tool_check_interrupt();

	/* into place: the old dataset (with --force) moves aside first */
	char old[PATH_MAX] = "";
	if (stat(o->out, &st) == 0) {
		path_fmt(old, sizeof old, "%.*s.old-XXXXXX", (int)ol, o->out);
		if (!mkdtemp(old))
			die("'%s': cannot move the old dataset aside: %s", o->out, strerror(errno));
		rmdir(old);
		if (rename(o->out, old))
			die("'%s': cannot move the old dataset aside: %s", o->out, strerror(errno));
	}
	if (rename(staging, o->out)) {
		int e = errno;
		if (old[0])
			rename(old, o->out);
		die("'%s': cannot rename the new dataset into place: %s", o->out, strerror(e));
	}
	staging[0] = 0;
	if (old[0])
		lmt_remove_dir(old);
	if (lmt_fsync_dir(o->out, &err) == 0) {
		char parent[PATH_MAX];
		path_fmt(parent, sizeof parent, "%.*s", (int)ol, o->out);
		lmt_fsync_dir(parent, &err); /* the directory holding -o: fsync_dir takes its dirname */
	}

	struct lmt_json j;
	char hex[LMT_SHA256_HEX], path[PATH_MAX];
	lmt_json_init(&j);
	for (size_t i = 0; i < nrecs; i++) {
		lmt_json_begin(&j);
		lmt_json_str(&j, "event", "shard");
		lmt_json_str(&j, "split", lmt_split_name(sorted[i].split));
		path_fmt(path, sizeof path, "%s/%s", o->out, sorted[i].name);
		lmt_json_str(&j, "path", path);
		lmt_json_u64(&j, "sequences", sorted[i].seqs);
		lmt_json_u64(&j, "bytes", sorted[i].bytes);
		lmt_json_str(&j, "payload_sha256", lmt_sha256_hex(sorted[i].sha, hex));
		if (lmt_json_end_line(&j, stdout))
			die("'<stdout>': write error");
	}
	double secs = lmt_now() - t0;
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "summary");
	lmt_json_str(&j, "output", o->out);
	path_fmt(path, sizeof path, "%s/manifest.json", o->out);
	uint8_t msha[32];
	if (lmt_sha256_file(path, msha, &err))
		die_err(&err);
	lmt_json_str(&j, "manifest_sha256", lmt_sha256_hex(msha, hex));
	lmt_json_u64(&j, "documents", r.info.n_docs);
	lmt_json_u64(&j, "input_tokens", r.info.n_tokens);
	for (int s = 0; s < 3; s++) {
		lmt_json_obj(&j, lmt_split_name(s));
		lmt_json_u64(&j, "documents", P[s].docs);
		lmt_json_u64(&j, "sequences", P[s].sequences);
		lmt_json_u64(&j, "pad_tokens", P[s].pad_tokens);
		lmt_json_u64(&j, "tail_dropped", P[s].tail_dropped);
		lmt_json_obj_end(&j);
	}
	lmt_json_u64(&j, "shards", nrecs);
	lmt_json_num(&j, "seconds", secs);
	lmt_json_num(&j, "mb_per_s", secs > 0 ? (double)r.f.payload_size / secs / 1e6 : 0);
	if (lmt_json_end_line(&j, stdout))
		die("'<stdout>': write error");
	lmt_json_release(&j);
	info("packed %llu documents into %llu train, %llu val, %llu test sequences of %u tokens (%zu shards) in %.2f s",
	     (unsigned long long)r.info.n_docs, (unsigned long long)P[0].sequences, (unsigned long long)P[1].sequences,
	     (unsigned long long)P[2].sequences, o->seq_len + 1, nrecs, secs);
	for (int s = 0; s < 3; s++) {
		free(P[s].buf);
		free(P[s].segs);
	}
	free(sc);
	free(recs);
	free(sorted);
	lmt_tokstream_reader_close(&r);
	return 0;
}

static int verify(const struct opts *o)
{
	struct lmt_err err = { 0 };
	struct lmt_dataset d;
	double t0 = lmt_now();
	if (lmt_dataset_open(&d, o->verify, &err))
		die_err(&err);
	int nt = tool_threads(o->threads);
	struct lmt_err *errs = calloc(d.nshards ? d.nshards : 1, sizeof *errs);
	int *bad = calloc(d.nshards ? d.nshards : 1, sizeof *bad);
	if (!errs || !bad)
		die("out of memory");
	uint64_t bytes = 0;
	for (size_t i = 0; i < d.nshards; i++)
		bytes += d.shards[i].bytes;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
	for (size_t i = 0; i < d.nshards; i++)
		bad[i] = lmt_dataset_verify_shard(&d, i, &errs[i]) != 0;
	int nbad = 0;
	struct lmt_json j;
	lmt_json_init(&j);
	for (size_t i = 0; i < d.nshards; i++) {
		lmt_json_begin(&j);
		lmt_json_str(&j, "event", "verify");
		lmt_json_str(&j, "path", d.shards[i].path);
		lmt_json_bool(&j, "ok", !bad[i]);
		if (bad[i]) {
			lmt_json_str(&j, "error", errs[i].msg);
			fprintf(stderr, "%s: %s\n", tool_name, errs[i].msg);
			nbad++;
		}
		if (lmt_json_end_line(&j, stdout))
			die("'<stdout>': write error");
	}
	double secs = lmt_now() - t0;
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "verify-summary");
	lmt_json_str(&j, "dataset", o->verify);
	lmt_json_u64(&j, "shards", d.nshards);
	lmt_json_u64(&j, "bad", (uint64_t)nbad);
	lmt_json_u64(&j, "bytes", bytes);
	lmt_json_num(&j, "seconds", secs);
	lmt_json_num(&j, "mb_per_s", secs > 0 ? bytes / secs / 1e6 : 0);
	lmt_json_u64(&j, "threads", (uint64_t)nt);
	if (lmt_json_end_line(&j, stdout))
		die("'<stdout>': write error");
	lmt_json_release(&j);
	if (nbad)
		die("'%s': %d of %zu shards failed verification", o->verify, nbad, d.nshards);
	info("'%s': %zu shards, %.1f MB verified in %.2f s", o->verify, d.nshards, bytes / 1e6, secs);
	free(errs);
	free(bad);
	lmt_dataset_close(&d);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	memset(&o, 0, sizeof o);
	o.seq_len = 1024;
	o.frac[LMT_SPLIT_VAL] = 0.01;
	o.frac[LMT_SPLIT_TRAIN] = 0.99;
	o.shard_tokens = 64ull << 20;
	o.pad_id = -1;
	tool_init("shard-pack");
	int c;
	while ((c = getopt_long(argc, argv, "hVo:L:t:j:q", longopts, NULL)) != -1) {
		switch (c) {
		case 'h': usage(); return 0;
		case 'V': print_version(); return 0;
		case 'o': o.out = optarg; break;
		case 'L':
			o.seq_len = (uint32_t)opt_int("seq-len", optarg, 1, 1 << 24);
			o.pack_opt = 1;
			break;
		case OPT_MODE:
			o.pack_opt = 1;
			if (!strcmp(optarg, "pad"))
				o.pad_mode = 1;
			else if (strcmp(optarg, "pack"))
				usage_error("option '--mode': '%s' is not pack or pad", optarg);
			break;
		case OPT_TAIL:
			o.tail_given = 1;
			o.pack_opt = 1;
			if (!strcmp(optarg, "pad"))
				o.tail_pad = 1;
			else if (strcmp(optarg, "drop"))
				usage_error("option '--tail': '%s' is not drop or pad", optarg);
			break;
		case OPT_SPLIT: parse_split(&o, optarg); o.pack_opt = 1; break;
		case OPT_SEED: o.seed = (uint64_t)opt_int("seed", optarg, 0, INT64_MAX); o.pack_opt = 1; break;
		case OPT_EOS:
			o.pack_opt = 1;
			if (!strcmp(optarg, "none"))
				o.eos_none = 1;
			else if (strcmp(optarg, "add"))
				usage_error("option '--eos': '%s' is not add or none", optarg);
			break;
		case OPT_SHARD_TOKENS: o.shard_tokens = opt_size("shard-tokens", optarg); o.pack_opt = 1; break;
		case 't': o.tokenizer = optarg; o.pack_opt = 1; break;
		case OPT_PAD_ID: o.pad_id = opt_int("pad-id", optarg, 0, UINT32_MAX - 1); o.pack_opt = 1; break;
		case OPT_FORCE: o.force = 1; o.pack_opt = 1; break;
		case OPT_VERIFY: o.verify = optarg; break;
		case 'j': o.threads = (int)opt_int("threads", optarg, 1, 1024); break;
		case 'q': tool_quiet = 1; break;
		default: bad_option(argv);
		}
	}
	if (o.verify) {
		if (o.out || optind < argc || o.pack_opt)
			usage_error("--verify DIR takes no other input, output or packing option");
		return verify(&o);
	}
	if (o.threads)
		usage_error("-j applies to --verify (packing is one pass in input order)");
	if (!o.out)
		usage_error("no output: give -o DIR");
	if (argc - optind > 1)
		usage_error("one token stream at a time");
	if (o.shard_tokens < (uint64_t)o.seq_len + 1)
		usage_error("--shard-tokens %llu is smaller than one sequence (%u tokens)",
			    (unsigned long long)o.shard_tokens, o.seq_len + 1);
	if (o.pad_mode && o.tail_given)
		usage_error("--tail applies to --mode pack (pad mode always pads)");
	return pack(&o, optind < argc ? argv[optind] : NULL);
}
