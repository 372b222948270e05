/*
 * ledger.c: the byte ledger (ledger.h). Every exact figure is asked of the code
 * that allocates it (lmt_gpt_layout, lmt_state_bytes, lmt_gpt_act_size); this file
 * only names the terms, adds them up and, for tensor, pipeline and context degrees,
 * scales them.
 */
#include "model/stats.h"
#include "model/ledger.h"

#include <string.h>

#include "core/util.h"

const char *const lmt_ledger_group_names[] = { "state", "activations", "temporaries", "comm", "reserve", "info" };

int lmt_ledger_check(const struct lmt_ledger_cfg *c, struct lmt_err *err)
{
	const struct lmt_gpt_config *m = &c->model;
	if (c->dtype != LMT_DTYPE_F32 && c->dtype != LMT_DTYPE_BF16 && c->dtype != LMT_DTYPE_F16)
		return lmt_err_set(err, LMT_EINVAL, "precision '%s': the model computes in fp32, bf16 or fp16",
				   lmt_dtype_name(c->dtype));
	if (c->B <= 0 || c->T <= 0 || c->T > m->max_T)
		return lmt_err_set(err, LMT_EINVAL, "micro-batch %d of %d positions: both positive, positions at most "
				   "the context (%d)", c->B, c->T, m->max_T);
	if (c->world < 1 || c->tp < 1 || c->pp < 1 || c->cp < 1)
		return lmt_err_set(err, LMT_EINVAL, "degrees %d (data) %d (tensor) %d (pipeline) %d (context): each at "
				   "least 1", c->world, c->tp, c->pp, c->cp);
	if (c->zero < 0 || c->zero > 3)
		return lmt_err_set(err, LMT_EINVAL, "ZeRO stage %d: 0, 1, 2 or 3", c->zero);
	if (c->recompute_every < 0)
		return lmt_err_set(err, LMT_EINVAL, "recompute every %d blocks: 0 (none) or more", c->recompute_every);
	if (m->NH > 0 && m->NH % c->tp)
		return lmt_err_set(err, LMT_EINVAL, "tensor parallel %d does not divide the %d heads", c->tp, m->NH);
	if (m->L > 0 && m->L % c->pp)
		return lmt_err_set(err, LMT_EINVAL, "pipeline parallel %d does not divide the %d layers", c->pp, m->L);
	if (c->T % c->cp)
		return lmt_err_set(err, LMT_EINVAL, "context parallel %d does not divide the %d positions", c->cp, c->T);
	/* the figures are size_t sums of products: past 2^64 they would wrap and print
	 * a small number for a model no device holds. A bound over every term, in
	 * double: 8 bytes for each activation element (slot_parts and act_parts in
	 * model.c: under 20C + NH + 8 per position and layer, 20C + 3Vp + 16 per
	 * position for the rest) and 32 for each parameter (weights, gradients, two
	 * moments, a master copy and a bucket); 2^62 leaves room for what is added
	 * on top (comm buffers, reserve) */
	double C = m->C, L = m->L, NH = m->NH, N = (double)c->B * c->T;
	double Vp = m->Vp ? m->Vp : m->V + 128.0;
	double params = Vp * C + (double)m->max_T * C + L * (12 * C * C + 13 * C) + 2 * C;
	double bound = 8 * N * (L * (20 * C + NH + 8) + 20 * C + 3 * Vp + 16) + 32 * params;
	if (bound > 0x1p62)
		return lmt_err_set(err, LMT_ERANGE, "a model of %d layers, %d channels and %d positions in micro-batches "
				   "of %d needs more than 2^62 bytes (about %.3g): past what the ledger counts",
				   m->L, m->C, m->max_T, c->B, bound);
	return 0;
}

/* The model laid out as the trainer lays it out, at c's dtype and recompute. */
static int model_of(const struct lmt_ledger_cfg *c, struct lmt_gpt *g, struct lmt_err *err)
{
	struct lmt_gpt_config m = c->model;
	if (!m.Vp && m.V > 0)
		m.Vp = lmt_gpt_padded_vocab(m.V);
	int rc = lmt_gpt_layout(g, &m, err);
	if (rc)
		return rc;
	g->dtype = c->dtype;
	return lmt_gpt_set_recompute(g, c->recompute_every, err);
}

static void term(struct lmt_ledger *l, const char *name, int group, int dtype, size_t bytes, const char *note)
{
	l->t[l->n++] = (struct lmt_ledger_term){ name, group, dtype, bytes, note };
}

static size_t scaled(size_t b, size_t by)
{
	return (b + by - 1) / by;
}

/* Megatron-LM's sharding (Shoeybi et al. 2019; Korthikanti et al. 2022), applied to
 * the exact data-parallel figures: tensor parallel splits the weight matrices (and
 * their gradients and moments) and the blocks' activations tp ways; pipeline parallel
 * gives each stage L/pp layers, and its first stage holds pp micro-batches in
 * flight under 1F1B, so the activations per device stay about one micro-batch of L
 * layers; context parallel splits the positions cp ways. */
static void scale_terms(const struct lmt_ledger_cfg *c, struct lmt_ledger *l)
{
	size_t tp = (size_t)c->tp, pp = (size_t)c->pp, cp = (size_t)c->cp;
	l->estimate = tp * pp * cp > 1;
	if (!l->estimate)
		return;
	for (int i = 0; i < l->n; i++) {
		struct lmt_ledger_term *t = &l->t[i];
		if (t->group == LMT_LEDGER_STATE)
			t->bytes = scaled(t->bytes, tp * pp);
		else if (t->group == LMT_LEDGER_ACTS || t->group == LMT_LEDGER_TEMP)
			t->bytes = scaled(t->bytes, (strncmp(t->name, "act_block", 9) ? 1 : tp) * cp);
	}
}

int lmt_ledger_build(const struct lmt_ledger_cfg *c, struct lmt_ledger *l, struct lmt_err *err)
{
	struct lmt_gpt g;
	int rc = lmt_ledger_check(c, err);
	if (!rc)
		rc = model_of(c, &g, err);
	memset(l, 0, sizeof *l);
	if (rc || (rc = lmt_gpt_act_size(&g, c->B, c->T, &l->acts, err)))
		return rc;
	struct lmt_gpt none = g;
	lmt_gpt_set_recompute(&none, 0, NULL);
	if ((rc = lmt_gpt_act_size(&none, c->B, c->T, &l->acts_none, err)))
		return rc;
	lmt_gpt_count(&g, &l->counts);
	l->nparams = g.nparams;
	lmt_state_bytes(&g, c->zero, c->world, &l->state);
	const struct lmt_state_bytes *s = &l->state;
	const size_t *ag = l->acts.group;
	size_t N = (size_t)c->B * c->T, NC4 = N * (size_t)g.cfg.C * 4; /* a block's output */
	int dt = c->dtype;
	term(l, "params", LMT_LEDGER_STATE, LMT_DTYPE_F32, s->params, "fp32 master weights");
	term(l, "weights_working", LMT_LEDGER_STATE, dt, s->working, "the GEMMs' copy in the compute dtype");
	term(l, "grads", LMT_LEDGER_STATE, LMT_DTYPE_F32, s->grads, "fp32, accumulated over micro-batches");
	term(l, "optimizer", LMT_LEDGER_STATE, LMT_DTYPE_F32, s->optimizer, "AdamW's m and v, fp32");
	term(l, "staging", LMT_LEDGER_STATE, -1, s->staging, "ZeRO-2/3: outer units and two layer slots");
	term(l, "act_block_inputs", LMT_LEDGER_ACTS, LMT_DTYPE_F32, ag[LMT_ACT_INPUTS],
	     "every block's input, kept under any recompute");
	term(l, "act_blocks", LMT_LEDGER_ACTS, -1, ag[LMT_ACT_BLOCKS], "the slots of the blocks kept");
	term(l, "act_block_recompute", LMT_LEDGER_ACTS, -1, ag[LMT_ACT_RECOMPUTE],
	     "one slot shared by the recomputed blocks");
	term(l, "act_final_norm", LMT_LEDGER_ACTS, -1, ag[LMT_ACT_HEAD], NULL);
	term(l, "act_logits", LMT_LEDGER_ACTS, LMT_DTYPE_F32, ag[LMT_ACT_LOGITS],
	     "logits (N, Vp) fp32 and per-position losses");
	term(l, "act_backward_scratch", LMT_LEDGER_ACTS, -1, ag[LMT_ACT_SCRATCH], NULL);
	term(l, "act_scalars", LMT_LEDGER_ACTS, LMT_DTYPE_F64, ag[LMT_ACT_SCALARS], NULL);
	term(l, "inputs", LMT_LEDGER_TEMP, LMT_DTYPE_I32, 3 * N * sizeof(int32_t), "tokens, targets, segment ids");
	/* the optimizer's shard is its moments' half: the statistics copy that many */
	term(l, "stats", LMT_LEDGER_TEMP, LMT_DTYPE_F32, c->stats_every ? lmt_stats_bytes(&g, s->optimizer / 8) : 0,
	     "--stats-every: the shard's parameters before the step, device sums");
	term(l, "comm_buckets", LMT_LEDGER_COMM, LMT_DTYPE_F32, 0,
	     "data parallel reduces in place on the gradients: no copy");
	term(l, "allocator_reserve", LMT_LEDGER_RESERVE, -1, 0,
	     "cpu: one malloc per buffer, 64-byte aligned, nothing cached");
	term(l, "attention_scores", LMT_LEDGER_INFO, LMT_DTYPE_F32,
	     (size_t)(l->acts.kept + (l->acts.kept < g.cfg.L)) * (size_t)c->B * (size_t)g.cfg.NH * (size_t)c->T * (size_t)c->T * 4,
	     "0 here: the cpu kernel keeps only the log-sum-exp (B, NH, T); a kernel storing the T x T "
	     "scores would add this");
	term(l, "act_no_recompute", LMT_LEDGER_INFO, -1, l->acts_none.total, "the activations without recompute");
	l->per_block = l->acts.slot + NC4;
	scale_terms(c, l);
	for (int i = 0; i < l->n; i++) {
		const struct lmt_ledger_term *t = &l->t[i];
		if (t->group == LMT_LEDGER_INFO)
			continue;
		l->total += t->bytes;
		if (t->group == LMT_LEDGER_STATE)
			l->state_total += t->bytes;
		if (t->group == LMT_LEDGER_ACTS)
			l->acts_total += t->bytes;
	}
	/* by dtype as train's memory.by_dtype counts it: model state (staging under
	 * fp32) and activations, not the inputs */
	for (int d = 0; d < LMT_DTYPE_COUNT; d++)
		l->by_dtype[d] = l->estimate ? 0 : l->acts.by_dtype[d];
	if (!l->estimate) {
		l->by_dtype[LMT_DTYPE_F32] += s->params + s->grads + s->optimizer + s->staging;
		l->by_dtype[dt] += s->working;
	}
	return 0;
}

size_t lmt_ledger_total_at(const struct lmt_ledger_cfg *c, int B)
{
	struct lmt_ledger_cfg x = *c;
	struct lmt_ledger l;
	x.B = B;
	return lmt_ledger_build(&x, &l, NULL) ? 0 : l.total;
}

size_t lmt_ledger_bytes(const struct lmt_ledger *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->t[i].name, name))
			return l->t[i].bytes;
	return 0;
}
