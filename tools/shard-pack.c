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
 * dataset, or the new one whole. The pipeline (split, packing, shards, manifest,
 * staging and commit) is lib/data/pack.c and the --verify walk lib/data/dataset.c;
 * this tool checks the input and options, and prints. stdout: JSONL; stderr:
 * human messages.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/atomicfile.h"
#include "data/dataset.h"
#include "data/pack.h"
#include "core/json.h"
#include "progress.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "data/tokstream.h"
#include "tool.h"
#include "core/util.h"

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
	OPT_CHUNK_BYTES,
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
	{ "chunk-bytes", required_argument, NULL, OPT_CHUNK_BYTES },
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
	       "      --chunk-bytes N     list the SHA-256 of every N bytes of each shard in\n"
	       "                          the manifest, so --verify splits a shard among its\n"
	       "                          threads (4Mi; 0: the whole-shard SHA-256 alone)\n"
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
	uint64_t seed, shard_tokens, chunk_bytes;
	int64_t pad_id;
};

static void parse_split(struct opts *o, const char *spec)
{
	char *s = strdup(spec), *rest = s, *tok;
	if (!s)
		die("out of memory");
	o->frac[LMT_SPLIT_VAL] = o->frac[LMT_SPLIT_TEST] = 0;
	int named[LMT_SPLIT_TEST + 1] = { 0 };
	while ((tok = strsep(&rest, ","))) {
		char *eq = strchr(tok, '=');
		if (!*tok)
			usage_error("option '--split': an empty item in '%s' (NAME=FRACTION,...; val=0 for none)", spec);
		if (!eq)
			usage_error("option '--split': '%s' is not NAME=FRACTION", tok);
		*eq = 0;
		int k = !strcmp(tok, "val") ? LMT_SPLIT_VAL : !strcmp(tok, "test") ? LMT_SPLIT_TEST : -1;
		if (k < 0)
			usage_error("option '--split': unknown split '%s' (val or test; train is the rest)", tok);
		if (named[k]++)
			usage_error("option '--split': '%s' is named twice", tok);
		o->frac[k] = opt_double("split", eq + 1, 0, 1);
	}
	if (o->frac[LMT_SPLIT_VAL] + o->frac[LMT_SPLIT_TEST] >= 1)
		usage_error("option '--split': val + test must leave some train documents");
	o->frac[LMT_SPLIT_TRAIN] = 1 - o->frac[LMT_SPLIT_VAL] - o->frac[LMT_SPLIT_TEST];
	free(s);
}

/* ---- packing ---- */

static char staging[PATH_MAX];

static void cleanup_staging(void)
{
	if (staging[0])
		lmt_remove_dir(staging);
}

static void print_results(const struct opts *o, const struct lmt_pack *pk, const struct lmt_tokstream_reader *r,
			  double t0)
{
	struct lmt_err err = { 0 };
	struct lmt_json j;
	char hex[LMT_SHA256_HEX], path[PATH_MAX];
	lmt_json_init(&j);
	for (size_t i = 0; i < pk->nshards; i++) {
		const struct lmt_pack_shard *sh = &pk->shards[i];
		lmt_json_begin(&j);
		lmt_json_str(&j, "event", "shard");
		lmt_json_str(&j, "split", lmt_split_name(sh->split));
		path_fmt(path, sizeof path, "%s/%s", o->out, sh->name);
		lmt_json_str(&j, "path", path);
		lmt_json_u64(&j, "sequences", sh->seqs);
		lmt_json_u64(&j, "bytes", sh->bytes);
		lmt_json_str(&j, "payload_sha256", lmt_sha256_hex(sh->sha, hex));
		if (lmt_json_end_line(&j, stdout))
			die_write("<stdout>");
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
	lmt_json_u64(&j, "documents", r->info.n_docs);
	lmt_json_u64(&j, "input_tokens", r->info.n_tokens);
	for (int s = 0; s < 3; s++) {
		lmt_json_obj(&j, lmt_split_name(s));
		lmt_json_u64(&j, "documents", pk->S[s].docs);
		lmt_json_u64(&j, "sequences", pk->S[s].sequences);
		lmt_json_u64(&j, "pad_tokens", pk->S[s].pad_tokens);
		lmt_json_u64(&j, "tail_dropped", pk->S[s].tail_dropped);
		lmt_json_obj_end(&j);
	}
	lmt_json_u64(&j, "shards", pk->nshards);
	lmt_json_num(&j, "seconds", secs);
	lmt_json_num(&j, "mb_per_s", secs > 0 ? (double)r->f.payload_size / secs / 1e6 : 0);
	if (lmt_json_end_line(&j, stdout))
		die_write("<stdout>");
	lmt_json_release(&j);
	info("packed %llu documents into %llu train, %llu val, %llu test sequences of %u tokens (%zu shards) in %.2f s",
	     (unsigned long long)r->info.n_docs, (unsigned long long)pk->S[0].sequences,
	     (unsigned long long)pk->S[1].sequences, (unsigned long long)pk->S[2].sequences, o->seq_len + 1,
	     pk->nshards, secs);
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
	if (lmt_pack_stage(o->out, o->force, staging, sizeof staging, &err))
		die_err(&err);
	atexit(cleanup_staging);
	tool_defer_signals(); /* a signal now stops at the next document, removing the staging directory */

	struct lmt_pack_params pp = { 0 };
	pp.seq_len = o->seq_len;
	pp.pad_mode = o->pad_mode;
	pp.tail_pad = o->tail_pad;
	pp.eos_none = o->eos_none;
	pp.eos = eos;
	pp.eos_in_stream = eos_in_stream;
	pp.pad_id = pad;
	memcpy(pp.frac, o->frac, sizeof pp.frac);
	pp.seed = o->seed;
	pp.shard_tokens = o->shard_tokens;
	pp.chunk_bytes = o->chunk_bytes;
	struct lmt_pack pk;
	if (lmt_pack_init(&pk, &pp, staging, &r, &err))
		die_err(&err);
	struct lmt_progress bar;
	lmt_progress_init(&bar, "packing", "docs", r.info.n_docs, tool_quiet);
	for (uint64_t i = 0; i < r.info.n_docs; i++) {
		if (lmt_pack_doc(&pk, &r, i, &err))
			die_err(&err);
		if ((i & 1023) == 0) {
			tool_check_interrupt();
			lmt_progress_update(&bar, i);
		}
	}
	if (lmt_pack_finish(&pk, &err))
		die_err(&err);
	lmt_progress_done(&bar);
	const struct lmt_pack_split *S = pk.S;
	if (S[LMT_SPLIT_TRAIN].sequences == 0)
		die("'%s': %llu train tokens make no sequence of %u tokens (--seq-len %u); use a shorter "
		    "--seq-len, --tail pad, or more text", in_name, (unsigned long long)S[LMT_SPLIT_TRAIN].doc_tokens,
		    o->seq_len + 1, o->seq_len);
	for (int s = 1; s < 3; s++)
		if (o->frac[s] > 0 && S[s].sequences == 0)
			warn("the %s split has no sequence (%llu documents, %llu tokens)", lmt_split_name(s),
			     (unsigned long long)S[s].docs, (unsigned long long)S[s].doc_tokens);
	struct lmt_pack_input pin = { in_name, in_sha, "shard-pack" };
	if (lmt_pack_write_manifest(&pk, &r, &pin, &err) || lmt_fsync_dir(staging, &err))
		die_err(&err);
	tool_check_interrupt();

	/* into place: the old dataset (with --force) moves aside first */
	if (lmt_pack_commit(staging, o->out, &err))
		die_err(&err);
	staging[0] = 0;
	print_results(o, &pk, &r, t0);
	lmt_pack_release(&pk);
	lmt_tokstream_reader_close(&r);
	return 0;
}

static int report_file(void *ctx, const char *path, const struct lmt_err *problem)
{
	struct lmt_json *j = ctx;
	lmt_json_begin(j);
	lmt_json_str(j, "event", "verify");
	lmt_json_str(j, "path", path);
	lmt_json_bool(j, "ok", !problem);
	if (problem) {
		lmt_json_str(j, "error", problem->msg);
		fprintf(stderr, "%s: %s\n", tool_name, problem->msg);
	}
	if (lmt_json_end_line(j, stdout))
		die_write("<stdout>");
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
	size_t nfiles = d.nshards + (d.docs_path != NULL);
	struct lmt_json j;
	lmt_json_init(&j);
	int nbad = lmt_dataset_verify(&d, nt, report_file, &j, &err);
	if (nbad < 0)
		die_err(&err);
	/* the documents table's size is the manifest's, or the one verify read */
	uint64_t bytes = d.docs_path && d.docs_bytes != UINT64_MAX ? d.docs_bytes : 0;
	for (size_t i = 0; i < d.nshards; i++)
		bytes += d.shards[i].bytes;
	double secs = lmt_now() - t0;
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "verify-summary");
	lmt_json_str(&j, "dataset", o->verify);
	lmt_json_u64(&j, "shards", d.nshards);
	lmt_json_u64(&j, "files", nfiles);
	lmt_json_u64(&j, "bad", (uint64_t)nbad);
	lmt_json_u64(&j, "bytes", bytes);
	lmt_json_num(&j, "seconds", secs);
	lmt_json_num(&j, "mb_per_s", secs > 0 ? bytes / secs / 1e6 : 0);
	lmt_json_u64(&j, "threads", (uint64_t)nt);
	if (lmt_json_end_line(&j, stdout))
		die_write("<stdout>");
	lmt_json_release(&j);
	if (nbad)
		die("'%s': %d of %zu files failed verification", o->verify, nbad, nfiles);
	info("'%s': %zu shards%s, %.1f MB verified in %.2f s", o->verify, d.nshards,
	     d.docs_path ? " and the documents table" : "", bytes / 1e6, secs);
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
	o.chunk_bytes = 4ull << 20;
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
		case OPT_CHUNK_BYTES:
			o.chunk_bytes = opt_size("chunk-bytes", optarg);
			if (o.chunk_bytes && o.chunk_bytes < 4096)
				usage_error("option '--chunk-bytes': %llu is below 4Ki (0 lists no chunks)",
					    (unsigned long long)o.chunk_bytes);
			o.pack_opt = 1;
			break;
		case 't': o.tokenizer = optarg; o.pack_opt = 1; break;
		case OPT_PAD_ID: o.pad_id = opt_int("pad-id", optarg, 0, UINT32_MAX - 1); o.pack_opt = 1; break;
		case OPT_FORCE: o.force = 1; o.pack_opt = 1; break;
		case OPT_VERIFY:
			if (o.verify)
				usage_error("--verify checks one dataset: '%s' and '%s' given (run it once for each)", o.verify,
					    optarg);
			o.verify = optarg;
			break;
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
	{
		const char *ins[] = { optind < argc ? argv[optind] : NULL, o.tokenizer };
		check_outputs(&o.out, (const char *const[]){ "-o" }, 1, ins, 2);
	}
	return pack(&o, optind < argc ? argv[optind] : NULL);
}
