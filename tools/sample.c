/*
 * sample: text from a run or a checkpoint, in one short command.
 *
 *	sample RUN 'Once upon a time'
 *	echo 'The cat' | sample -n 40 -t 0.8 -k 50 RUN/ckpt/step-00001000
 *	lmt sample --num 3 --jsonl RUN 'x' | jq -r .text
 *
 * The checkpoint (of a run: the newest that verifies), its model and the tokenizer its
 * run recorded are found as evalppl finds them (lib/model/evalinput.c); the tokens are
 * drawn by the key/value-cache sampler (lib/model/generate.c), with evalppl's random
 * stream, so the same seed gives evalppl's samples. stdout is text, not JSONL, even
 * when piped: the text is the point of this tool, and `sample ... | less` or `> f.txt`
 * should hold it; --jsonl gives one record per sample instead. On a terminal each
 * token is written as it is drawn.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "core/json.h"
#include "core/strbuf.h"
#include "data/tokenizer.h"
#include "model/evalinput.h"
#include "model/evalrun.h"
#include "model/generate.h"
#include "model/model.h"
#include "report/evalrec.h"
#include "tool.h"

enum {
	OPT_TOKENIZER = OPT_TOOL_BASE,
	OPT_NUM,
	OPT_NO_PROMPT,
	OPT_JSONL,
};

static const struct option longopts[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ "max-tokens", required_argument, NULL, 'n' },
	{ "temperature", required_argument, NULL, 't' },
	{ "top-k", required_argument, NULL, 'k' },
	{ "top-p", required_argument, NULL, 'p' },
	{ "seed", required_argument, NULL, 's' },
	{ "num", required_argument, NULL, OPT_NUM },
	{ "tokenizer", required_argument, NULL, OPT_TOKENIZER },
	{ "no-prompt", no_argument, NULL, OPT_NO_PROMPT },
	{ "jsonl", no_argument, NULL, OPT_JSONL },
	{ "threads", required_argument, NULL, 'j' },
	{ "quiet", no_argument, NULL, 'q' },
	{ NULL, 0, NULL, 0 },
};

static void usage(void)
{
	printf("usage: sample [options] RUN|CHECKPOINT [PROMPT|-]\n"
	       "\n"
	       "Sample text from a checkpoint (RUN/ckpt/step-N) or from the newest valid\n"
	       "checkpoint of a run. The prompt is the second argument, or stdin when it is\n"
	       "absent or '-' (one final newline dropped). stdout: the prompt, then the sampled\n"
	       "text, written token by token on a terminal; a newline ends each sample.\n"
	       "\n"
	       "  -n, --max-tokens N      tokens to draw at most (100); a sample also ends at\n"
	       "                          the end-of-text token\n"
	       "  -t, --temperature X     softmax temperature (1.0; 0: greedy, the seed unused)\n"
	       "  -k, --top-k N           draw from the N most likely tokens only (0: all)\n"
	       "  -p, --top-p X           then from the fewest whose probabilities sum to X\n"
	       "                          (nucleus sampling; 1.0: all of them)\n"
	       "  -s, --seed N            random seed (1); sample i of --num uses N + i\n"
	       "      --num N             samples (1)\n"
	       "      --tokenizer FILE    the checkpoint's tokenizer (default: the one its run\n"
	       "                          recorded, found by its SHA-256)\n"
	       "      --no-prompt         write the sampled text only\n"
	       "      --jsonl             one JSON record per sample (ids and text) instead\n"
	       "  -j, --threads N         CPU threads (OMP_NUM_THREADS, else all cores)\n"
	       "  -q, --quiet             no messages on stderr but errors\n"
	       "  -h, --help  -V, --version\n"
	       "\n"
	       "Exit status: 0 success, 1 error, 2 usage error. See sample(1).\n");
}

struct opts {
	const char *target, *prompt, *tokenizer;
	struct lmt_sampler sp;
	int max_tokens, num, no_prompt, jsonl, threads;
};

static void parse_args(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof *o);
	o->max_tokens = 100;
	o->num = 1;
	o->sp.temperature = 1.0;
	o->sp.top_p = 1.0;
	o->sp.seed = 1;
	int c;
	while ((c = getopt_long(argc, argv, ":hVn:t:k:p:s:j:q", longopts, NULL)) != -1) {
		switch (c) {
		case 'h': usage(); exit(0);
		case 'V': print_version(); exit(0);
		case 'n': o->max_tokens = (int)opt_int("max-tokens", optarg, 1, 1 << 24); break;
		case 't': o->sp.temperature = opt_double("temperature", optarg, 0, 1e6); break;
		case 'k': o->sp.top_k = (int)opt_int("top-k", optarg, 0, INT_MAX); break;
		case 'p': o->sp.top_p = opt_double_above("top-p", optarg, 0, 1); break;
		case 's': o->sp.seed = (uint64_t)opt_int("seed", optarg, 0, LLONG_MAX); break;
		case OPT_NUM: o->num = (int)opt_int("num", optarg, 1, 1 << 20); break;
		case OPT_TOKENIZER: o->tokenizer = optarg; break;
		case OPT_NO_PROMPT: o->no_prompt = 1; break;
		case OPT_JSONL: o->jsonl = 1; break;
		case 'j': o->threads = (int)opt_int("threads", optarg, 1, 4096); break;
		case 'q': tool_quiet = 1; break;
		default: bad_option(argv);
		}
	}
	if (o->sp.seed > (uint64_t)LLONG_MAX - (uint64_t)(o->num - 1))
		usage_error("--seed %llu with --num %d: sample i uses the seed + i, past %lld, which --seed cannot "
			    "give back", (unsigned long long)o->sp.seed, o->num, LLONG_MAX);
	if (optind >= argc)
		usage_error("give a run directory or a checkpoint");
	o->target = argv[optind++];
	if (optind < argc)
		o->prompt = argv[optind++];
	if (optind < argc)
		usage_error("unexpected argument '%s' (quote a prompt of several words)", argv[optind]);
}

/* The prompt from stdin, its one final newline dropped (as `echo` adds it). */
static char *read_prompt(void)
{
	struct lmt_strbuf b = { 0 };
	char chunk[65536];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0)
		lmt_strbuf_put(&b, chunk, n);
	if (ferror(stdin))
		die("'<stdin>': read: %s", strerror(errno));
	if (b.len && b.buf[b.len - 1] == '\n')
		b.buf[--b.len] = 0;
	if (b.len && b.buf[b.len - 1] == '\r')
		b.buf[--b.len] = 0;
	char *s = b.len ? lmt_strbuf_detach(&b) : strdup("");
	if (!s)
		die("out of memory");
	return s;
}

/* ---- one sample ---- */

struct writer {
	const struct lmt_tokenizer *tok;
	int text, tty;          /* write text as the tokens come; flush each */
	struct lmt_strbuf out;  /* the sampled text, for --jsonl */
};

static void put_token(struct writer *w, int32_t id)
{
	uint8_t small[256], *p = small;
	uint32_t u = (uint32_t)id;
	size_t need = lmt_tok_decode(w->tok, &u, 1, 0, small, sizeof small);
	if (need > sizeof small) {
		if (!(p = malloc(need)))
			die("out of memory");
		lmt_tok_decode(w->tok, &u, 1, 0, p, need);
	}
	if (w->text) {
		if (fwrite(p, 1, need, stdout) != need || (w->tty && fflush(stdout)))
			die_write("<stdout>");
	} else {
		lmt_strbuf_put(&w->out, (const char *)p, need);
	}
	if (p != small)
		free(p);
}

/* Each token as it is drawn; the end-of-text token ends the sample unwritten. */
static int on_token(void *ctx, int32_t id, int k)
{
	struct writer *w = ctx;
	(void)k;
	if (w->tok->eos != LMT_NO_TOKEN && (uint32_t)id == w->tok->eos)
		return 1;
	put_token(w, id);
	return 0;
}

static void sample_record(const struct opts *o, const char *path, const struct lmt_eval_ckinfo *ci,
			  const int32_t *p, int np, const int32_t *ids, int n, int eos, uint64_t seed,
			  const struct lmt_strbuf *text)
{
	struct lmt_json j;
	lmt_json_init(&j);
	lmt_json_begin(&j);
	lmt_json_str(&j, "event", "sample");
	lmt_evalrec_ckpt(&j, path, ci);
	lmt_json_str(&j, "prompt", o->prompt);
	lmt_json_arr(&j, "prompt_ids");
	for (int i = 0; i < np; i++)
		lmt_json_u64(&j, NULL, (uint64_t)p[i]);
	lmt_json_arr_end(&j);
	lmt_json_arr(&j, "ids");
	for (int i = 0; i < n; i++)
		lmt_json_u64(&j, NULL, (uint64_t)ids[i]);
	lmt_json_arr_end(&j);
	lmt_json_strn(&j, "text", text->len ? text->buf : "", text->len);
	lmt_json_str(&j, "stop", eos ? "eos" : "length");
	lmt_json_num(&j, "temperature", o->sp.temperature);
	lmt_json_u64(&j, "top_k", (uint64_t)o->sp.top_k);
	lmt_json_num(&j, "top_p", o->sp.top_p);
	lmt_json_u64(&j, "seed", seed);
	if (j.out.oom || text->oom)
		die("out of memory");
	if (lmt_json_end_line(&j, stdout))
		die_write("<stdout>");
	lmt_json_release(&j);
}

static void samples(const struct opts *o, struct lmt_gpt *g, const struct lmt_tokenizer *tok, const char *path,
		    const struct lmt_eval_ckinfo *ci)
{
	struct lmt_err err = { 0 };
	int np, n;
	int32_t *p, *out = malloc((size_t)o->max_tokens * sizeof *out);
	if (!out)
		die("out of memory");
	/* documents followed an end-of-text token in training (tok-encode --eos), so
	 * a prompt starts after one, as evalppl's do */
	uint32_t ctx = tok->eos != LMT_NO_TOKEN ? tok->eos : LMT_EVAL_NO_CTX;
	if (lmt_eval_prompt_ids(tok, ctx, o->prompt, &p, &np, &err))
		die_err(&err);
	struct writer w = { tok, !o->jsonl, isatty(STDOUT_FILENO), { 0 } };
	for (int k = 0; k < o->num; k++) {
		struct lmt_sampler sp = o->sp;
		sp.seed = o->sp.seed + (uint64_t)k;
		lmt_strbuf_reset(&w.out);
		if (w.text && !o->no_prompt && (fputs(o->prompt, stdout) == EOF || (w.tty && fflush(stdout))))
			die_write("<stdout>");
		if (lmt_generate_stream(g, p, np, o->max_tokens, &sp, out, &n, on_token, &w, &err))
			die_err(&err);
		int eos = tok->eos != LMT_NO_TOKEN && n > 0 && (uint32_t)out[n - 1] == tok->eos;
		if (!w.text)
			sample_record(o, path, ci, p, np, out, n, eos, sp.seed, &w.out);
		else if (putchar('\n') == EOF || fflush(stdout))
			die_write("<stdout>");
	}
	lmt_strbuf_release(&w.out);
	free(p);
	free(out);
}

static void warn_cb(void *ctx, const char *msg)
{
	(void)ctx;
	warn("%s", msg);
}

int main(int argc, char **argv)
{
	struct opts o;
	tool_init("sample");
	tool_passive_threads(argv);
	parse_args(argc, argv, &o);
	char *stdin_prompt = NULL;
	if (!o.prompt || !strcmp(o.prompt, "-"))
		o.prompt = stdin_prompt = read_prompt();

	struct lmt_err err = { 0 };
	char run_dir[PATH_MAX], tok_path[PATH_MAX], why[1200];
	int nck;
	struct lmt_eval_ckref *cks;
	if (lmt_eval_ckpts_list(o.target, 1, &cks, &nck, run_dir, sizeof run_dir, warn_cb, NULL, &err))
		die_err(&err);
	struct lmt_ckpt ck;
	struct lmt_eval_ckinfo ci;
	if (lmt_eval_ckpt_open(&ck, &ci, cks[0].path, NULL, NULL, &err))
		die_err(&err);
	struct lmt_tokenizer tok;
	int rc = lmt_eval_tokenizer_open(&tok, o.tokenizer, &ci, cks[0].path, run_dir, tok_path, sizeof tok_path, why,
					 sizeof why, &err);
	if (rc < 0)
		die_err(&err);
	if (!rc && why[0])
		die("the run's tokenizer is not available (%s); give --tokenizer FILE", why);
	if (!rc)
		die("'%s' records no tokenizer: give --tokenizer FILE", cks[0].path);
	/* a prompt that encodes to no tokens leaves the model nothing to continue */
	if (!o.prompt[0])
		die("an empty prompt: give some text to continue");

	struct lmt_backend be;
	if (lmt_backend_open(&be, "cpu", tool_threads(o.threads), &err))
		die_err(&err);
	struct lmt_gpt g;
	int have_g = 0;
	if (lmt_eval_model_load(&g, &have_g, &be, &ck, &ci, &err))
		die_err(&err);
	info("sampling from '%s' (update %llu)", cks[0].path, (unsigned long long)ci.update);
	samples(&o, &g, &tok, cks[0].path, &ci);

	lmt_gpt_release(&g);
	be.release(&be);
	lmt_ckpt_close(&ck);
	lmt_tok_release(&tok);
	lmt_eval_ckrefs_free(cks, nck);
	free(stdin_prompt);
	return 0;
}
