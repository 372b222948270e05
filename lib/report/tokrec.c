/*
 * tokrec.c: tok-train's JSONL records (see tokrec.h). Ratios of empty counts are
 * 0, so a record of an empty source still has every key.
 */
#include "report/tokrec.h"

#include "core/digest.h"
#include "core/util.h"

void lmt_tokrec_counted(struct lmt_json *j, const struct lmt_toktrain *t, int threads)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "counted");
	lmt_json_u64(j, "documents", t->docs);
	lmt_json_u64(j, "bytes", t->bytes);
	lmt_json_u64(j, "words", t->wc->total);
	lmt_json_u64(j, "distinct_words", t->wc->n);
	lmt_json_u64(j, "table_bytes", lmt_wordcount_bytes(t->wc));
	lmt_json_u64(j, "threads", (uint64_t)threads);
	lmt_json_num(j, "seconds", t->count_seconds);
}

void lmt_tokrec_progress(struct lmt_json *j, uint32_t merges, uint32_t tokens, uint64_t best, double seconds)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "progress");
	lmt_json_u64(j, "merges", merges);
	lmt_json_u64(j, "tokens", tokens);
	lmt_json_u64(j, "best_count", best);
	lmt_json_num(j, "seconds", seconds);
}

void lmt_tokrec_trained(struct lmt_json *j, const struct lmt_toktrain *t, int chars)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "trained");
	if (chars)
		lmt_json_str(j, "kind", "chars");
	lmt_json_u64(j, "merges", t->merges);
	lmt_json_u64(j, "tokens", t->tokens);
	if (chars)
		lmt_json_u64(j, "characters_seen", t->wc->n);
	lmt_json_num(j, "count_seconds", t->count_seconds);
	lmt_json_num(j, "merge_seconds", t->merge_seconds);
	if (!chars) {
		/* the rule that ordered pairs of equal count: with the merges, it
		 * says which trainer's vocabulary this one should equal */
		lmt_json_str(j, "ties", t->p.ties == LMT_BPE_TIES_HF ? "hf" : "id");
		lmt_json_u64(j, "word_table_bytes", lmt_wordcount_bytes(t->wc));
		lmt_json_u64(j, "trainer_peak_bytes", t->trainer_peak_bytes);
		/* merge_seconds in parts: how much of it one thread did alone */
		lmt_json_u64(j, "steps", t->res.n_steps);
		lmt_json_num(j, "setup_seconds", t->res.setup_seconds);
		lmt_json_num(j, "step_seconds", t->res.step_seconds);
		lmt_json_num(j, "pick_seconds", t->res.pick_seconds);
	}
}

void lmt_tokrec_summary(struct lmt_json *j, const struct lmt_tokenizer *tok, const char *path, const char *export_hf,
			const struct lmt_tokrec_input *in, double seconds)
{
	char hex[LMT_SHA256_HEX];
	lmt_json_begin(j);
	lmt_json_str(j, "event", "summary");
	lmt_json_str(j, "tokenizer", path);
	lmt_json_str(j, "sha256", lmt_sha256_hex(tok->sha256, hex));
	lmt_json_u64(j, "vocab_size", tok->n_vocab);
	lmt_json_u64(j, "merges", tok->n_merges);
	lmt_json_u64(j, "specials", tok->n_special);
	lmt_json_str(j, "pattern", tok->pt.name);
	lmt_json_u64(j, "max_token_len", tok->max_token_len);
	if (tok->eos != LMT_NO_TOKEN)
		lmt_json_u64(j, "eos_id", tok->eos);
	if (tok->bos != LMT_NO_TOKEN)
		lmt_json_u64(j, "bos_id", tok->bos);
	if (tok->pad != LMT_NO_TOKEN)
		lmt_json_u64(j, "pad_id", tok->pad);
	if (export_hf)
		lmt_json_str(j, "export_hf", export_hf);
	if (in->trained) {
		lmt_json_u64(j, "documents", in->docs);
		lmt_json_u64(j, "input_bytes", in->bytes);
		lmt_json_u64(j, "words", in->words);
		lmt_json_u64(j, "distinct_words", in->distinct_words);
	}
	lmt_json_num(j, "seconds", seconds);
	lmt_json_u64(j, "peak_rss", lmt_peak_rss());
}

void lmt_tokrec_fertility(struct lmt_json *j, const char *source, const char *label, const struct lmt_fertility *f)
{
	lmt_json_begin(j);
	lmt_json_str(j, "event", "fertility");
	lmt_json_str(j, "source", source);
	if (label)
		lmt_json_str(j, "label", label);
	lmt_json_u64(j, "documents", f->docs);
	lmt_json_u64(j, "bytes", f->bytes);
	lmt_json_u64(j, "words", f->words);
	lmt_json_u64(j, "tokens", f->tokens);
	lmt_json_num(j, "tokens_per_byte", f->bytes ? (double)f->tokens / f->bytes : 0);
	lmt_json_num(j, "bytes_per_token", f->tokens ? (double)f->bytes / f->tokens : 0);
	lmt_json_num(j, "tokens_per_word", f->words ? (double)f->tokens / f->words : 0);
}
