/*
 * tok-encode: documents in, token stream out (and back with --decode).
 *
 *	tok-encode -t tok.lmtok -o corpus.lmtoks --eos corpus/
 *	tok-encode -t tok.lmtok --decode corpus.lmtoks > corpus.txt
 *	tok-encode -t gpt2.lmtok --format llmc -o train.bin data.jsonl
 *
 * Documents are encoded in parallel, in batches (data/batchenc.h); the output order is the input
 * order whatever the thread count. stdout: the binary stream when redirected and no
 * -o is given, otherwise a JSONL summary; stderr: human messages.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/atomicfile.h"
#include "data/corpus.h"
#include "core/json.h"
#include "progress.h"
#include "data/batchenc.h"
#include "data/llmctokens.h"
#include "data/tokenizer.h"
#include "data/tokstream.h"
#include "tool.h"
#include "core/util.h"

enum {
	OPT_FORMAT = OPT_TOOL_BASE,
	OPT_BOS,
	OPT_EOS,
	OPT_NO_EOS,
	OPT_ALLOW_SPECIAL,
	OPT_DECODE,
	OPT_SKIP_SPECIAL,
};

static const struct option longopts[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ "tokenizer", required_argument, NULL, 't' },
	{ "output", required_argument, NULL, 'o' },
	{ "format", required_argument, NULL, OPT_FORMAT },
	{ "bos", no_argument, NULL, OPT_BOS },
	{ "eos", no_argument, NULL, OPT_EOS },
	{ "no-eos", no_argument, NULL, OPT_NO_EOS },
	{ "allow-special", no_argument, NULL, OPT_ALLOW_SPECIAL },
	{ "decode", no_argument, NULL, OPT_DECODE },
	{ "skip-special", no_argument, NULL, OPT_SKIP_SPECIAL },
	{ "threads", required_argument, NULL, 'j' },
	{ "quiet", no_argument, NULL, 'q' },
	CORPUS_LONGOPTS,
	{ "strict", no_argument, NULL, OPT_STRICT },
	{ NULL, 0, NULL, 0 },
};

static void usage(void)
{
	printf("usage: tok-encode -t TOKENIZER [options] [-o OUT] [INPUT...]\n"
	       "       tok-encode -t TOKENIZER --decode [-o OUT] STREAM\n"
	       "\n"
	       "Encode documents (files, directories, JSONL, compressed files, archives, or\n"
	       "'-' for stdin; stdin if none) into a token stream with a document index.\n"
	       "\n"
	       "  -t, --tokenizer FILE    the lmt tokenizer (required)\n"
	       "  -o, --output FILE       the token stream (default: stdout, if redirected)\n"
	       "      --format F          lmt (default), llmc (llm.c's token file: uint16, or\n"
	       "                          version 2's uint32 for vocabularies over 65536), or\n"
	       "                          ids (text: one line of space-separated ids per document)\n"
	       "      --bos               start each document with the tokenizer's BOS token\n"
	       "      --eos               end each document with the tokenizer's EOS token\n"
	       "      --no-eos            llmc: no EOS before each document (llm.c puts one)\n"
	       "      --allow-special     special token strings in the text become those tokens\n"
	       "                          (default: they are ordinary text)\n"
	       "  -j, --threads N         encoding threads (all cores)\n"
	       "      --decode            turn a token stream back into text\n"
	       "      --skip-special      with --decode, leave special tokens out\n"
	       "\n"
	       "Input:\n"
	       CORPUS_HELP_FORMAT
	       "      --doc-sep STR       split text documents at STR (with --decode: put STR\n"
	       "                          between documents)\n"
	       CORPUS_HELP_REST
	       "\n"
	       "  -q, --quiet             no progress on stderr\n"
	       "  -h, --help              this help\n"
	       "  -V, --version           version and backends\n"
	       "\n"
	       "Exit status: 0 success, 1 error, 2 usage error. See tok-encode(1).\n");
}

struct opts {
	const char *tokenizer, *out;
	int llmc, ids, format_given, threads_given, bos, eos, no_eos, allow_special, decode, skip_special, threads;
	struct lmt_corpus_opts corpus;
};

/* ---- ids: one text line per document ---- */

/* 0, or errno after a failed write */
static int ids_write(FILE *f, const uint32_t *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, i ? " %u" : "%u", t[i]);
	return fputc('\n', f) == EOF ? (errno ? errno : EIO) : 0;
}

/* ---- writing a batch, while the threads encode the next ---- */

/* what the output needs of a document once its batch has gone back to the reader */
struct pending_doc {
	uint64_t len, ordinal;
	uint32_t source;
};

struct batch_writer {
	int llmc, ids;
	const struct lmt_batchenc *enc;       /* the batch's tokens: enc->all, enc->ntok */
	struct lmt_tokstream_writer *w;
	struct lmt_llmc_tokens *l;
	FILE *idout;
	struct pending_doc *d;                /* the batch's documents */
	size_t n, cap;
	int rc, write_errno;                  /* the first failure, for the main thread */
	struct lmt_err err;
	struct lmt_batchq *q;                 /* whose next batch the same task reads (NULL: -j1) */
};

/* Write the pending batch (bw->n documents) and empty it; on failure note it and
 * write nothing more. Runs in any thread (lmt_batchenc_run_side). */
static void write_pending(void *ctx)
{
	struct batch_writer *bw = ctx;
	const struct lmt_u32vec *all = &bw->enc->all;
	size_t n = bw->n;
	bw->n = 0;
	if (!n || bw->rc || bw->write_errno)
		return;
	if (bw->llmc) {
		bw->rc = lmt_llmc_tokens_write(bw->l, all->v, all->n, &bw->err);
	} else if (bw->ids) {
		for (size_t i = 0, at = 0; i < n && !bw->write_errno; at += bw->enc->ntok[i], i++)
			bw->write_errno = ids_write(bw->idout, all->v + at, bw->enc->ntok[i]);
	} else {
		bw->rc = lmt_tokstream_writer_tokens(bw->w, all->v, all->n, &bw->err);
		for (size_t i = 0; i < n && !bw->rc; i++)
			bw->rc = lmt_tokstream_writer_index(bw->w, bw->enc->ntok[i], bw->d[i].len, bw->d[i].source,
							   bw->d[i].ordinal, &bw->err);
	}
}

/* The pool's side task while a batch is encoded: write the one before and read the
 * one after (a reader thread of its own took turns on the cores with the encoding
 * threads, and one descheduled at the end of a batch kept the others waiting). */
static void side_task(void *ctx)
{
	struct batch_writer *bw = ctx;
	write_pending(bw);
	if (bw->q)
		lmt_batchq_fill(bw->q);
}

/* in the main thread: exit on a failure write_pending noted */
static void writer_check(const struct batch_writer *bw, const char *outname)
{
	if (bw->rc)
		die_err(&bw->err);
	if (bw->write_errno) {
		errno = bw->write_errno;
		die_write(outname);
	}
}

/* ---- encoding ---- */

/* what an encoding counted, for its summary */
struct totals {
	uint64_t docs, bytes, ntok;
	double secs;
	int threads, token_bytes;
};

/* The summary record on stdout (when the tokens went to a file). */
static void summary(const struct opts *o, const char *hex, const struct lmt_tokenizer *tok, struct lmt_corpus *c,
		    const struct totals *n)
{
	struct lmt_json j;
	char th[LMT_SHA256_HEX];
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "summary");
	lmt_json_str(&j, "output", o->out);
	lmt_json_str(&j, "format", o->llmc ? "llmc" : o->ids ? "ids" : "lmt");
	lmt_json_str(&j, "sha256", hex);
	lmt_json_str(&j, "tokenizer_sha256", lmt_sha256_hex(tok->sha256, th));
	lmt_json_u64(&j, "documents", n->docs);
	lmt_json_u64(&j, "sources", lmt_corpus_nsources(c));
	corpus_skips_json(&j, o->corpus.skips);
	lmt_json_u64(&j, "bytes", n->bytes);
	lmt_json_u64(&j, "tokens", n->ntok);
	lmt_json_u64(&j, "token_bytes", (uint64_t)n->token_bytes); /* ids: as an lmt stream would hold them */
	lmt_json_num(&j, "bytes_per_token", n->ntok ? (double)n->bytes / n->ntok : 0);
	lmt_json_u64(&j, "threads", (uint64_t)n->threads);
	lmt_json_num(&j, "seconds", n->secs);
	lmt_json_num(&j, "mb_per_s", n->secs > 0 ? n->bytes / n->secs / 1e6 : 0);
	lmt_json_u64(&j, "peak_rss", lmt_peak_rss());
	put_record(&j);
	lmt_json_release(&j);
}

static int encode(const struct opts *o, const char *const *inputs, int ninputs)
{
	struct lmt_err err = { 0 };
	struct lmt_tokenizer tok;
	if (lmt_tok_load(&tok, o->tokenizer, &err))
		die_err(&err);
	uint32_t bos = LMT_NO_TOKEN, eos = LMT_NO_TOKEN;
	if (o->bos && (bos = tok.bos) == LMT_NO_TOKEN)
		die("'%s': the tokenizer has no BOS token (tok-train --bos)", o->tokenizer);
	if ((o->eos || (o->llmc && !o->no_eos)) && (eos = tok.eos) == LMT_NO_TOKEN)
		die("'%s': the tokenizer has no EOS token (tok-train --eos)", o->tokenizer);
	int llmc_first = o->llmc && !o->no_eos && !o->eos; /* llm.c: EOT before each document */
	int to_stdout = !o->out || !strcmp(o->out, "-");
	if (to_stdout && isatty(STDOUT_FILENO) && !o->ids)
		usage_error("refusing to write a binary token stream to a terminal; use -o FILE or redirect");
	if (o->llmc && to_stdout)
		usage_error("--format llmc needs -o FILE");

	struct lmt_corpus *c;
	const char *stdin_only[] = { "-" };
	if (lmt_corpus_open(&c, ninputs ? inputs : stdin_only, ninputs ? ninputs : 1, &o->corpus, &err))
		die_err(&err);

	struct lmt_tokstream_writer w;
	struct lmt_llmc_tokens l;
	struct lmt_atomicfile idf = { 0 };
	FILE *idout = stdout;
	struct lmt_tokstream_info tsinfo = { 0 };
	tsinfo.token_bytes = tok.n_vocab <= 65536 ? 2 : 4;
	tsinfo.flags = (bos != LMT_NO_TOKEN ? LMT_TS_BOS : 0) | (eos != LMT_NO_TOKEN && !llmc_first ? LMT_TS_EOS : 0);
	tsinfo.vocab_size = tok.n_vocab;
	memcpy(tsinfo.tokenizer_sha256, tok.sha256, 32);
	tsinfo.bos = tok.bos;
	tsinfo.eos = tok.eos;
	if (o->llmc) {
		if (lmt_llmc_tokens_open(&l, o->out, tok.n_vocab, &err))
			die_err(&err);
	} else if (o->ids) {
		if (!to_stdout) {
			if (lmt_atomicfile_open(&idf, o->out, &err))
				die_err(&err);
			idout = idf.fp;
		}
	} else if (lmt_tokstream_writer_open(&w, to_stdout ? NULL : o->out, &tsinfo, &err))
		die_err(&err);

	int nt = tool_threads(o->threads);
	struct lmt_batchenc enc;
	struct lmt_batchenc_opts eo = { .bos = bos, .eos = eos, .eos_first = llmc_first, .allow_special = o->allow_special,
					.threads = nt };
	if (lmt_batchenc_init(&enc, &tok, &eo, &err))
		die_err(&err);
	struct lmt_progress bar;
	uint64_t done, total, docs = 0, bytes = 0, ntok = 0;
	lmt_corpus_progress(c, &done, &total);
	lmt_progress_init(&bar, "encoding", "B", total, tool_quiet);
	double t0 = lmt_now();
	/* batches of about 1 MB of text a thread, 2 to 8 MB: a batch's text, its tokens
	 * and their copy in document order then stay nearer the cores between encoding,
	 * gathering and writing. With 8 MB batches, -j1 and -j2 both ran 2-5% slower
	 * (paired medians of 21 runs, gpt2 and cl100k on 20 MB of either benchmark
	 * corpus, the 2-core Xeon VM of the README) */
	size_t batch = LMT_MIN(LMT_MAX((size_t)nt << 20, (size_t)2 << 20), (size_t)8 << 20);
	struct lmt_batchq *q = lmt_batchq_start(c, batch, 1u << 15, NULL, NULL, 0);
	struct lmt_docbatch *b;
	if (!q)
		die("out of memory");
	/* batch k is written and batch k + 2 read while batch k + 1 is encoded, by
	 * whichever thread is free first: the output's order is the input's all the same */
	struct batch_writer bw = { o->llmc, o->ids, &enc, &w, &l, idout, NULL, 0, 0, 0, 0, { 0 }, nt > 1 ? q : NULL };
	const char *outname = to_stdout ? "<stdout>" : o->out;
	int n;
	while ((n = lmt_batchq_get(q, &b, &err)) > 0) {
		size_t nd = b->n;
		if (lmt_batchenc_run_side(&enc, b, side_task, &bw, &err))
			die_err(&err);
		writer_check(&bw, outname);
		if (LMT_GROW(bw.d, bw.cap, nd))
			die("out of memory");
		for (size_t i = 0; i < nd; i++) {
			bw.d[i] = (struct pending_doc){ b->docs[i].len, b->docs[i].ordinal, b->docs[i].source };
			bytes += b->docs[i].len;
		}
		bw.n = nd;
		ntok += enc.all.n;
		docs += nd;
		lmt_batchq_put(q, b);
		lmt_corpus_progress(c, &done, &total);
		lmt_progress_update(&bar, done);
	}
	lmt_batchq_stop(q);
	if (n < 0)
		die_err(&err);
	write_pending(&bw); /* the last batch */
	free(bw.d);
	writer_check(&bw, outname);
	lmt_progress_done(&bar);
	double secs = lmt_now() - t0;

	uint8_t sha[32];
	char hex[LMT_SHA256_HEX];
	if (o->llmc) {
		if (lmt_llmc_tokens_finish(&l, &err) || lmt_sha256_file(o->out, sha, &err))
			die_err(&err);
	} else if (o->ids) {
		memset(sha, 0, sizeof sha);
		if (!to_stdout) {
			if (lmt_atomicfile_commit(&idf, &err) || lmt_sha256_file(o->out, sha, &err))
				die_err(&err);
		} else if (fflush(stdout)) {
			die_write("<stdout>");
		}
	} else {
		uint32_t ns = lmt_corpus_nsources(c);
		const char **names = malloc((ns ? ns : 1) * sizeof *names);
		if (!names)
			die("out of memory");
		for (uint32_t i = 0; i < ns; i++)
			names[i] = lmt_corpus_source_name(c, i);
		if (lmt_tokstream_writer_finish(&w, names, ns, sha, &err))
			die_err(&err);
		free(names);
	}
	lmt_sha256_hex(sha, hex);
	if (!to_stdout)
		summary(o, hex, &tok, c, &(struct totals){ docs, bytes, ntok, secs, nt,
							 o->llmc ? (l.version == 2 ? 4 : 2) : tsinfo.token_bytes });
	corpus_skips_warn(o->corpus.skips);
	info("encoded %llu documents, %llu bytes into %llu tokens in %.2f s (%.1f MB/s, %d threads)",
	     (unsigned long long)docs, (unsigned long long)bytes, (unsigned long long)ntok, secs,
	     secs > 0 ? bytes / secs / 1e6 : 0, nt);
	lmt_batchenc_release(&enc);
	lmt_corpus_close(c);
	lmt_tok_release(&tok);
	return 0;
}

/* ---- decoding ---- */

static int decode(const struct opts *o, const char *const *inputs, int ninputs)
{
	struct lmt_err err = { 0 };
	struct lmt_tokenizer tok;
	struct lmt_tokstream_reader r;
	if (ninputs > 1)
		usage_error("--decode takes one token stream");
	const char *in = ninputs ? inputs[0] : "-";
	if (lmt_tok_load(&tok, o->tokenizer, &err))
		die_err(&err);
	if (lmt_tokstream_reader_open(&r, in, 1, &err))
		die_err(&err);
	if (memcmp(r.info.tokenizer_sha256, tok.sha256, 32)) {
		char a[LMT_SHA256_HEX], b[LMT_SHA256_HEX];
		die("'%s' was encoded with tokenizer %.16s..., not '%s' (%.16s...)", in,
		    lmt_sha256_hex(r.info.tokenizer_sha256, a), o->tokenizer, lmt_sha256_hex(tok.sha256, b));
	}
	struct lmt_atomicfile af;
	FILE *out = stdout;
	if (o->out && strcmp(o->out, "-")) {
		if (lmt_atomicfile_open(&af, o->out, &err))
			die_err(&err);
		out = af.fp;
	}
	const char *outname = out == stdout ? "<stdout>" : o->out;
	size_t cap = 1 << 20;
	uint8_t *buf = malloc(cap);
	uint32_t *ids = malloc(4096 * sizeof *ids);
	if (!buf || !ids)
		die("out of memory");
	for (uint64_t i = 0; i < r.info.n_docs; i++) {
		struct lmt_tokstream_doc d;
		lmt_tokstream_reader_doc(&r, i, &d);
		uint64_t a = d.tok_off, e = d.tok_off + d.n_tok;
		/* inserted BOS/EOS are markers, not text */
		if ((r.info.flags & LMT_TS_BOS) && a < e && lmt_tokstream_reader_token(&r, a) == r.info.bos)
			a++;
		if ((r.info.flags & LMT_TS_EOS) && e > a && lmt_tokstream_reader_token(&r, e - 1) == r.info.eos)
			e--;
		if (i && o->corpus.doc_sep && fputs(o->corpus.doc_sep, out) == EOF)
			die_write(outname);
		for (uint64_t k = a; k < e;) {
			size_t m = 0;
			while (k < e && m < 4096)
				ids[m++] = lmt_tokstream_reader_token(&r, k++);
			size_t need = lmt_tok_decode(&tok, ids, m, o->skip_special, buf, cap);
			if (need > cap) {
				free(buf);
				cap = need * 2;
				if (!(buf = malloc(cap)))
					die("out of memory");
				need = lmt_tok_decode(&tok, ids, m, o->skip_special, buf, cap);
			}
			if (need && fwrite(buf, 1, need, out) != need)
				die_write(outname);
		}
	}
	free(buf);
	free(ids);
	if (out != stdout) {
		if (lmt_atomicfile_commit(&af, &err))
			die_err(&err);
	} else if (fflush(stdout)) {
		die_write("<stdout>");
	}
	lmt_tokstream_reader_close(&r);
	lmt_tok_release(&tok);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	static struct lmt_corpus_skips skips;
	memset(&o, 0, sizeof o);
	o.corpus.skips = &skips;
	tool_init("tok-encode");
	int c;
	while ((c = getopt_long(argc, argv, "hVt:o:j:q", longopts, NULL)) != -1) {
		if (corpus_opt(c, optarg, &o.corpus))
			continue;
		switch (c) {
		case 'h': usage(); return 0;
		case 'V': print_version(); return 0;
		case 't': o.tokenizer = optarg; break;
		case 'o': o.out = optarg; break;
		case OPT_FORMAT:
			o.llmc = !strcmp(optarg, "llmc");
			o.ids = !strcmp(optarg, "ids");
			if (!o.llmc && !o.ids && strcmp(optarg, "lmt"))
				usage_error("option '--format': '%s' is not lmt, llmc or ids", optarg);
			o.format_given = 1;
			break;
		case OPT_BOS: o.bos = 1; break;
		case OPT_EOS: o.eos = 1; break;
		case OPT_NO_EOS: o.no_eos = 1; break;
		case OPT_ALLOW_SPECIAL: o.allow_special = 1; break;
		case OPT_DECODE: o.decode = 1; break;
		case OPT_SKIP_SPECIAL: o.skip_special = 1; break;
		case 'j':
			o.threads = (int)opt_int("threads", optarg, 1, 1024);
			o.threads_given = 1;
			break;
		case 'q': tool_quiet = 1; break;
		default: bad_option(argv);
		}
	}
	if (!o.tokenizer)
		usage_error("no tokenizer: give -t FILE");
	if (o.no_eos && !o.llmc)
		usage_error("--no-eos applies to --format llmc only");
	if (o.no_eos && o.eos)
		usage_error("--eos and --no-eos exclude each other");
	if (o.llmc && o.bos)
		usage_error("--format llmc has no BOS: llm.c marks documents with one EOS token before each");
	if (o.skip_special && !o.decode)
		usage_error("--skip-special applies to --decode only");
	const char *const *inputs = (const char *const *)argv + optind;
	int ninputs = argc - optind;
	if (o.decode) {
		if (o.format_given || o.bos || o.eos || o.allow_special || o.threads_given)
			usage_error("--decode takes no encoding options (--format, --bos, --eos, --allow-special, -j)");
		if (o.corpus.format || o.corpus.txt_docs || o.corpus.text_field || o.corpus.keep_empty || o.corpus.strict ||
		    o.corpus.max_doc)
			usage_error("--decode reads a token stream: of the input options only --doc-sep applies");
		check_outputs(&o.out, (const char *const[]){ "-o" }, 1, inputs, ninputs);
		check_outputs(&o.out, (const char *const[]){ "-o" }, 1, &o.tokenizer, 1);
		return decode(&o, inputs, ninputs);
	}
	check_outputs(&o.out, (const char *const[]){ "-o" }, 1, inputs, ninputs);
	check_outputs(&o.out, (const char *const[]){ "-o" }, 1, &o.tokenizer, 1);
	return encode(&o, inputs, ninputs);
}
