/*
 * runview.c: a run directory read back (runview.h).
 */
#include "report/runview.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/resumecfg.h"
#include "core/atomicfile.h"
#include "core/jsonptr.h"
#include "core/util.h"
#include "model/ledger.h"
#include "plan/runread.h"

double lmt_jnum(json_t *o, const char *ptr, double dflt)
{
	json_t *x = o ? lmt_jsonptr_get(o, ptr) : NULL;
	return json_is_number(x) ? json_number_value(x) : dflt;
}

/* Parse a JSONL file into objects. A missing file is LMT_ENOTFOUND. A last line
 * without its newline that is not yet an object (being written, or cut short when
 * the writer was killed) is left out with partial_ok, its number in *cut, and is
 * an error without. */
static int read_jsonl(const char *path, int partial_ok, json_t ***out, size_t *n, size_t *cut, struct lmt_err *err)
{
	char *buf;
	size_t len;
	*out = NULL;
	*n = 0;
	int rc = lmt_read_file(path, &buf, &len, err);
	if (rc) {
		if (errno == ENOENT)
			return lmt_err_set(err, LMT_ENOTFOUND, "'%s': no such file", path);
		return rc;
	}
	size_t cap = 0, line = 0;
	for (char *p = buf; p < buf + len;) {
		char *nl = memchr(p, '\n', (size_t)(buf + len - p));
		line++;
		size_t ll = nl ? (size_t)(nl - p) : (size_t)(buf + len - p);
		if (ll == 0) {
			p += 1;
			continue;
		}
		json_error_t je;
		json_t *o = json_loadb(p, ll, 0, &je);
		if (!json_is_object(o) && !nl && partial_ok) {
			json_decref(o);
			*cut = line;
			break;
		}
		if (!json_is_object(o)) {
			json_decref(o);
			if (!nl)
				rc = lmt_err_set(err, LMT_EFORMAT, "'%s': line %zu is cut short (the file ends inside it: the "
						 "run stopped while writing it)", path, line);
			else
				rc = lmt_err_set(err, LMT_EFORMAT, "'%s': line %zu: %s", path, line,
						 o ? "not a JSON object" : je.text);
			break;
		}
		if (*n == cap) {
			cap = cap ? 2 * cap : 1024;
			json_t **t = realloc(*out, cap * sizeof *t);
			if (!t) {
				json_decref(o);
				rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
				break;
			}
			*out = t;
		}
		(*out)[(*n)++] = o;
		p = nl ? nl + 1 : buf + len;
	}
	free(buf);
	return rc;
}

static int is_event(json_t *o, const char *name)
{
	const char *e = json_string_value(json_object_get(o, "event"));
	return e && !strcmp(e, name);
}

/* memledger's total for the run's configuration (0 when it cannot be built) */
static double ledger_total(const char *config_path)
{
	struct lmt_ledger_cfg lc;
	struct lmt_ledger l;
	struct lmt_err e = { 0 };
	if (lmt_run_config_read(config_path, &lc, &e) || lmt_ledger_build(&lc, &l, &e))
		return 0;
	return (double)l.total;
}

int lmt_runview_load(struct lmt_runview **out, const char *run, const char *data, int partial_ok,
		     struct lmt_err *err)
{
	struct stat st;
	*out = NULL;
	if (stat(run, &st) || !S_ISDIR(st.st_mode))
		return lmt_err_set(err, LMT_ENOTFOUND, "'%s': not a run directory (%s)", run,
				   errno == ENOENT ? "no such directory" : "not a directory");
	struct lmt_runview *v = calloc(1, sizeof *v);
	if (!v)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	v->unigram = NAN;
	v->world = 1;
	int rc = lmt_path_fmt(v->run, sizeof v->run, err, "%s", run);
	if (!rc)
		rc = lmt_path_fmt(v->metrics_path, sizeof v->metrics_path, err, "%s/metrics.jsonl", run);
	if (!rc)
		rc = lmt_path_fmt(v->events_path, sizeof v->events_path, err, "%s/events.jsonl", run);
	if (!rc)
		rc = lmt_path_fmt(v->config_path, sizeof v->config_path, err, "%s/config.json", run);
	if (!rc)
		rc = read_jsonl(v->metrics_path, partial_ok, &v->rec, &v->nrec, &v->metrics_cut, err);
	if (!rc) {
		rc = read_jsonl(v->events_path, partial_ok, &v->ev, &v->nev, &v->events_cut, err);
		if (rc == LMT_ENOTFOUND)
			rc = 0;
	}
	if (rc) {
		lmt_runview_free(v);
		return rc;
	}
	json_error_t je;
	v->config = json_load_file(v->config_path, 0, &je);
	if (v->config) {
		v->clip = lmt_jnum(v->config, "/optimization/clip", 0);
		v->world = (int)lmt_jnum(v->config, "/topology/world", 1);
		v->ledger_total = ledger_total(v->config_path);
		const char *dd = json_string_value(lmt_jsonptr_get(v->config, "/data/dir"));
		if (!data) /* relative to where train ran, not to here */
			data = lmt_recorded_path(v->config, dd, 0, v->data_dir, sizeof v->data_dir);
	}
	if (data && data != v->data_dir && lmt_path_fmt(v->data_dir, sizeof v->data_dir, err, "%s", data)) {
		lmt_runview_free(v);
		return LMT_EINVAL;
	}
	if (v->data_dir[0]) {
		char mp[PATH_MAX + 16];
		snprintf(mp, sizeof mp, "%s/manifest.json", v->data_dir);
		json_t *m = json_load_file(mp, 0, &je);
		v->unigram = lmt_jnum(m, "/splits/train/unigram_nats_per_token", NAN);
		json_decref(m);
	}
	v->upd = malloc((v->nrec ? v->nrec : 1) * sizeof *v->upd);
	v->upd_n = malloc((v->nrec ? v->nrec : 1) * sizeof *v->upd_n);
	if (!v->upd || !v->upd_n) {
		lmt_runview_free(v);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < v->nrec; i++)
		if (is_event(v->rec[i], "update")) {
			json_t *u = json_object_get(v->rec[i], "update");
			if (!json_is_integer(u)) {
				lmt_runview_free(v);
				return lmt_err_set(err, LMT_EFORMAT, "'%s': an update record without an update number",
						   v->metrics_path);
			}
			v->upd_n[v->nupd] = (uint64_t)json_integer_value(u);
			v->upd[v->nupd++] = v->rec[i];
		}
	/* the run has ended when its last process has: a summary is the last record
	 * of metrics.jsonl, or an end, stop or failed event the last of events.jsonl */
	if (v->nrec && is_event(v->rec[v->nrec - 1], "summary"))
		v->done = 1;
	if (v->nev) {
		json_t *e = v->ev[v->nev - 1];
		if (is_event(e, "end") || is_event(e, "stop") || is_event(e, "failed"))
			v->done = 1;
	}
	*out = v;
	return 0;
}

void lmt_runview_free(struct lmt_runview *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->nrec; i++)
		json_decref(v->rec[i]);
	for (size_t i = 0; i < v->nev; i++)
		json_decref(v->ev[i]);
	free(v->rec);
	free(v->ev);
	free(v->upd);
	free(v->upd_n);
	json_decref(v->config);
	if (v->ds_state == 1)
		lmt_dataset_close(&v->ds);
	free(v->doc_source);
	for (uint32_t i = 0; i < v->nsources; i++)
		free(v->source[i]);
	free(v->source);
	free(v->logp);
	free(v);
}

long lmt_runview_update_index(const struct lmt_runview *v, uint64_t n)
{
	/* update numbers grow along the file (a resume cuts the metrics back first) */
	size_t lo = 0, hi = v->nupd;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (v->upd_n[mid] < n)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < v->nupd && v->upd_n[lo] == n ? (long)lo : -1;
}

json_t *lmt_runview_update(const struct lmt_runview *v, uint64_t n)
{
	long i = lmt_runview_update_index(v, n);
	return i < 0 ? NULL : v->upd[i];
}

/* ---- the dataset, for explanations ---- */

/* The train split's unigram distribution: counts over the documents' tokens (not
 * padding) of at most CAP tokens, add-half smoothed so that a token the sample
 * never saw has a finite surprisal. */
#define UNIGRAM_CAP (64u << 20)

static int unigram(struct lmt_runview *v)
{
	struct lmt_dataset *d = &v->ds;
	uint64_t *cnt = calloc(d->vocab_size ? d->vocab_size : 1, sizeof *cnt), total = 0;
	uint32_t *tok = malloc(((size_t)d->seq_len + 1) * sizeof *tok);
	struct lmt_segment *seg = malloc(((size_t)d->seq_len + 1) * sizeof *seg);
	v->logp = malloc((d->vocab_size ? d->vocab_size : 1) * sizeof *v->logp);
	int rc = !cnt || !tok || !seg || !v->logp ? -1 : 0;
	for (size_t s = 0; !rc && s < d->nshards && total < UNIGRAM_CAP; s++) {
		const struct lmt_shard *sh;
		struct lmt_err e = { 0 };
		if (d->shards[s].split != LMT_SPLIT_TRAIN)
			continue;
		if (lmt_dataset_shard(d, s, &sh, &e)) {
			snprintf(v->ds_why, sizeof v->ds_why, "%.400s", e.msg);
			rc = -1;
			break;
		}
		for (uint64_t i = 0; i < sh->info.n_seqs && total < UNIGRAM_CAP; i++) {
			lmt_shard_tokens(sh, i, tok);
			uint32_t ns = lmt_shard_segments(sh, i, seg, d->seq_len + 1);
			for (uint32_t k = 0; k < ns; k++)
				for (uint32_t p = seg[k].start; p < seg[k].start + seg[k].len && p <= d->seq_len; p++)
					if (tok[p] < d->vocab_size) {
						cnt[tok[p]]++;
						total++;
					}
		}
	}
	if (!rc) {
		double h = 0, z = (double)total + 0.5 * d->vocab_size;
		for (uint32_t t = 0; t < d->vocab_size; t++) {
			v->logp[t] = log((cnt[t] + 0.5) / z);
			if (cnt[t])
				h -= (double)cnt[t] / total * log((double)cnt[t] / total);
		}
		v->entropy = h;
	}
	free(cnt);
	free(tok);
	free(seg);
	return rc;
}

static int sources(struct lmt_runview *v)
{
	char p[PATH_MAX + 32];
	json_error_t je;
	snprintf(p, sizeof p, "%s/manifest.json", v->data_dir);
	json_t *m = json_load_file(p, 0, &je), *src = json_object_get(m, "sources");
	size_t n = json_array_size(src);
	v->source = calloc(n ? n : 1, sizeof *v->source);
	if (!v->source) {
		json_decref(m);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		const char *nm = json_string_value(json_object_get(json_array_get(src, i), "name"));
		v->source[i] = strdup(nm ? nm : "?");
		v->nsources++;
	}
	const char *dp = json_string_value(lmt_jsonptr_get(m, "/documents/path"));
	snprintf(p, sizeof p, "%s/%s", v->data_dir, dp ? dp : "documents.jsonl");
	json_decref(m);
	FILE *f = dp ? fopen(p, "r") : NULL;
	if (!f)
		return 0; /* no document index: samples are named by shard only */
	size_t cap = 0;
	char line[512];
	while (fgets(line, sizeof line, f)) {
		char *s = strstr(line, "\"source\":");
		if (v->ndocs == cap) {
			cap = cap ? 2 * cap : 4096;
			uint32_t *t = realloc(v->doc_source, cap * sizeof *t);
			if (!t) {
				fclose(f);
				return -1;
			}
			v->doc_source = t;
		}
		v->doc_source[v->ndocs++] = s ? (uint32_t)strtoul(s + 9, NULL, 10) : UINT32_MAX;
	}
	fclose(f);
	return 0;
}

int lmt_runview_dataset(struct lmt_runview *v)
{
	if (v->ds_state)
		return v->ds_state > 0 ? 0 : -1;
	struct lmt_err e = { 0 };
	if (!v->data_dir[0]) {
		snprintf(v->ds_why, sizeof v->ds_why, "no dataset: config.json has no data.dir (give --data)");
		v->ds_state = -1;
		return -1;
	}
	if (lmt_dataset_open(&v->ds, v->data_dir, &e)) {
		snprintf(v->ds_why, sizeof v->ds_why, "the dataset does not open (give --data): %.400s", e.msg);
		v->ds_state = -1;
		return -1;
	}
	v->ds_state = 1;
	if (sources(v) || unigram(v)) {
		if (!v->ds_why[0])
			snprintf(v->ds_why, sizeof v->ds_why, "out of memory reading the dataset's index");
		lmt_dataset_close(&v->ds);
		v->ds_state = -1;
		return -1;
	}
	return 0;
}
