/*
 * inspecttext.c: ckpt-inspect's table lines (inspecttext.h). JSON values are
 * shown in the manifest's shortest number form (lmt_json_jansson_text); an
 * allocation that fails marks the buffer out of memory (b->oom), as every write
 * into it does.
 */
#include "ckpt/inspecttext.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char *pl(long n)
{
	return n == 1 ? "" : "s";
}

void lmt_ckpt_text_explanation(struct lmt_strbuf *b, const char *dir, const struct lmt_ckpt_explanation *x)
{
	lmt_strbuf_printf(b, "%s\n", x->reason);
	lmt_strbuf_printf(b, "%s holds:\n", dir);
	for (int i = 0; i < x->nents; i++) {
		const struct lmt_ckpt_dirent *e = &x->ents[i];
		if (e->missing)
			lmt_strbuf_printf(b, "  %-28s %12s  %s\n", e->name, "-", e->status);
		else
			lmt_strbuf_printf(b, "  %-28s %12llu  %s\n", e->name, (unsigned long long)e->bytes, e->status);
	}
	if (!x->nents)
		lmt_strbuf_puts(b, "  nothing\n");
}

/* scalars on one line, then one line per object or array */
static void state_table(struct lmt_strbuf *b, json_t *state)
{
	const char *key;
	json_t *v;
	char line[4096];
	size_t n = 0;
	line[0] = 0;
	json_object_foreach(state, key, v) {
		if (json_is_object(v) || json_is_array(v))
			continue;
		char *s = json_is_string(v) ? strdup(json_string_value(v)) : lmt_json_jansson_text(v);
		if (!s) {
			b->oom = 1;
			continue;
		}
		if (n < sizeof line)
			n += (size_t)snprintf(line + n, sizeof line - n, "%s%s=%s", n ? " " : "", key, s);
		free(s);
	}
	lmt_strbuf_printf(b, "state:    %s\n", line);
	json_object_foreach(state, key, v) {
		if (!json_is_object(v) && !json_is_array(v))
			continue;
		char *s = lmt_json_jansson_text(v);
		if (!s) {
			b->oom = 1;
			continue;
		}
		if (strlen(s) > 100)
			lmt_strbuf_printf(b, "  %-16s %.96s ...\n", key, s);
		else
			lmt_strbuf_printf(b, "  %-16s %s\n", key, s);
		free(s);
	}
}

void lmt_ckpt_text_checkpoint(struct lmt_strbuf *b, const struct lmt_ckpt_target *k)
{
	const struct lmt_ckpt *c = &k->c;
	lmt_strbuf_printf(b, "checkpoint '%s': update %llu, world %d, schema %d%s\n", k->path,
			  (unsigned long long)c->update, c->world, LMT_CKPT_SCHEMA,
			  k->uncommitted ? " (an interrupted save: never renamed into place)" : "");
	for (int i = 0; i < c->nfiles; i++)
		lmt_strbuf_printf(b, "file:     %s  rank %d  %llu bytes  %s\n", c->files[i].name, c->files[i].rank,
				  (unsigned long long)c->files[i].bytes, k->f[i].problem[0] ? k->f[i].problem : "ok");
	state_table(b, json_object_get(c->manifest, "state"));
}

void lmt_ckpt_text_tensor_head(struct lmt_strbuf *b, int w, int stats)
{
	if (!stats)
		lmt_strbuf_printf(b, "%-*s %-5s %-14s %6s %12s %-8s\n", w, "tensor", "dtype", "shape", "chunks", "bytes",
				  "crc32c");
	else
		lmt_strbuf_printf(b, "%-*s %-5s %-14s %6s %12s %-8s %11s %11s %11s %11s %9s\n", w, "tensor", "dtype",
				  "shape", "chunks", "bytes", "crc32c", "min", "max", "mean", "rms", "nonfinite");
}

void lmt_ckpt_text_tensor(struct lmt_strbuf *b, const struct lmt_ckpt_tscan *t, int w)
{
	const struct lmt_ckpt_entry *e = t->e;
	char crc[16];
	snprintf(crc, sizeof crc, "%08x", t->crc32c);
	lmt_strbuf_printf(b, "%-*s %-5s %-14s %6d %12llu %-8s", w, e->name, "f32", t->shape, e->nchunks,
			  (unsigned long long)(e->numel * 4), !t->readable || (!t->read && e->nchunks != 1) ? "-" : crc);
	if (!t->read)
		lmt_strbuf_puts(b, "\n");
	else if (!t->readable)
		lmt_strbuf_puts(b, "  unreadable\n");
	else if (!t->has_stats)
		lmt_strbuf_printf(b, " %11s %11s %11s %11s %9llu\n", "-", "-", "-", "-",
				  (unsigned long long)t->s.nonfinite);
	else
		lmt_strbuf_printf(b, " %11.4g %11.4g %11.4g %11.4g %9llu%s\n", t->s.min, t->s.max, t->mean, t->rms,
				  (unsigned long long)t->s.nonfinite, t->bad_chunks ? "  CRC MISMATCH" : "");
}

void lmt_ckpt_text_summary(struct lmt_strbuf *b, const struct lmt_ckpt_target *k, const struct lmt_ckpt_scan *s,
			   int stats)
{
	lmt_strbuf_printf(b, "%d tensor%s, %llu elements, %llu bytes in %d file%s (%llu bytes)", s->tensors,
			  pl(s->tensors), (unsigned long long)s->elements, (unsigned long long)s->bytes, k->c.nfiles,
			  pl(k->c.nfiles), (unsigned long long)s->file_bytes);
	if (stats)
		lmt_strbuf_printf(b, "; %llu non-finite; %s\n", (unsigned long long)s->nonfinite,
				  s->bad_tensors ? "SOME TENSORS ARE BAD" : "every chunk's CRC-32C matches");
	else
		lmt_strbuf_puts(b, "\n");
}

void lmt_ckpt_text_tdiff(struct lmt_strbuf *b, const struct lmt_ckpt_entry *ea, const struct lmt_ckpt_entry *eb,
			 enum lmt_ckpt_tstatus st, const struct lmt_ckpt_tdiff *t, const char *err, int w)
{
	const struct lmt_ckpt_entry *e = ea ? ea : eb;
	char sa[64] = "-", sb[64] = "-";
	if (ea)
		lmt_ckpt_shape_str(ea, sa, sizeof sa);
	if (eb)
		lmt_ckpt_shape_str(eb, sb, sizeof sb);
	if (st == LMT_CKPT_TSTATUS_SAME)
		return;
	if (st == LMT_CKPT_TSTATUS_DIFFER)
		lmt_strbuf_printf(b, "%-*s differ  max|a-b| %.4g  relative %.4g  %llu of %llu elements differ%s\n", w,
				  e->name, t->max_abs, t->rel, (unsigned long long)t->differing,
				  (unsigned long long)e->numel, t->nonfinite_mismatch ? "  (non-finite in one only)" : "");
	else if (st == LMT_CKPT_TSTATUS_SHAPE)
		lmt_strbuf_printf(b, "%-*s shape   %s vs %s\n", w, e->name, sa, sb);
	else if (st == LMT_CKPT_TSTATUS_ERROR)
		lmt_strbuf_printf(b, "%-*s error   %s\n", w, e->name, err);
	else
		lmt_strbuf_printf(b, "%-*s %s  %s\n", w, e->name, lmt_ckpt_tstatus_name(st), ea ? sa : sb);
}

void lmt_ckpt_text_state(struct lmt_strbuf *b, const char *key, const char *a, const char *bv)
{
	lmt_strbuf_printf(b, "%-40s %.60s%s -> %.60s%s\n", key, a ? a : "(absent)", a && strlen(a) > 60 ? "..." : "",
			  bv ? bv : "(absent)", bv && strlen(bv) > 60 ? "..." : "");
}

void lmt_ckpt_text_diff_summary(struct lmt_strbuf *b, const int n[LMT_CKPT_TSTATUS_COUNT], int nstate,
				int identical)
{
	lmt_strbuf_printf(b, "%d tensors the same, %d differ, %d of another shape, %d only in a, %d only in b%s; %d "
			  "state fields differ%s\n", n[LMT_CKPT_TSTATUS_SAME], n[LMT_CKPT_TSTATUS_DIFFER],
			  n[LMT_CKPT_TSTATUS_SHAPE], n[LMT_CKPT_TSTATUS_ONLY_A], n[LMT_CKPT_TSTATUS_ONLY_B],
			  n[LMT_CKPT_TSTATUS_ERROR] ? ", some unreadable" : "", nstate, identical ? ": identical" : "");
}
