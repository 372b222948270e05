/*
 * loader.c: the deterministic sample order and its read-ahead thread (loader.h).
 */
#include "data/loader.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/util.h"
#include "core/workpool.h"

#define DEFAULT_WINDOW 8192

/* ---- the keyed permutation ---- */

uint64_t lmt_permute(uint64_t x, uint64_t n, uint64_t key)
{
	if (n <= 1)
		return 0;
	int bits = 64 - __builtin_clzll(n - 1);
	if (bits < 2)
		bits = 2;
	bits += bits & 1;
	int half = bits / 2;
	uint64_t mask = half >= 64 ? ~0ULL : ((1ULL << half) - 1);
	uint64_t k[4];
	for (int r = 0; r < 4; r++)
		k[r] = lmt_mix64(key + 0x9e3779b97f4a7c15ULL * (uint64_t)(r + 1));
	/* cycle walking: a permutation of [0, 2^bits) restricted to [0, n) stays one */
	do {
		uint64_t L = x >> half, R = x & mask;
		for (int r = 0; r < 4; r++) {
			uint64_t t = L ^ (lmt_mix64(R ^ k[r]) & mask);
			L = R;
			R = t;
		}
		x = L << half | R;
	} while (x >= n);
	return x;
}

static uint64_t epoch_key(uint64_t seed, uint64_t epoch)
{
	return lmt_mix64(lmt_mix64(seed ^ 0x10ad0000ULL) ^ (epoch + 1) * 0xbf58476d1ce4e5b9ULL);
}

/* ---- epoch maps ---- */

static int map_build(const struct lmt_loader *l, struct lmt_epoch_map *m, uint64_t epoch)
{
	if (m->valid && m->epoch == epoch)
		return 0;
	if (!m->order) {
		m->order = malloc((l->nshards ? l->nshards : 1) * sizeof *m->order);
		m->prefix = malloc((l->nshards + 1) * sizeof *m->prefix);
		if (!m->order || !m->prefix)
			return LMT_ENOMEM;
	}
	for (uint32_t i = 0; i < l->nshards; i++)
		m->order[i] = i;
	if (l->cfg.shuffle) {
		/* Fisher-Yates with a counter-based generator keyed by (seed, epoch) */
		uint64_t key = epoch_key(l->cfg.seed, epoch) ^ 0x5a4d;
		for (uint32_t i = l->nshards; i > 1; i--) {
			uint64_t r = lmt_mix64(key + i) % i;
			uint32_t t = m->order[i - 1];
			m->order[i - 1] = m->order[r];
			m->order[r] = t;
		}
	}
	m->prefix[0] = 0;
	for (uint32_t i = 0; i < l->nshards; i++)
		m->prefix[i + 1] = m->prefix[i] + l->d->shards[l->shards[m->order[i]]].seqs;
	m->epoch = epoch;
	m->valid = 1;
	return 0;
}

static int locate(const struct lmt_loader *l, struct lmt_epoch_map *m, uint64_t k, uint32_t *shard,
		  uint64_t *index)
{
	uint64_t e = k / l->N, p = k % l->N;
	if (map_build(l, m, e))
		return LMT_ENOMEM;
	uint64_t q = p;
	if (l->cfg.shuffle) {
		uint64_t W = l->cfg.window ? l->cfg.window : DEFAULT_WINDOW, w = p / W, base = w * W;
		uint64_t size = LMT_MIN(W, l->N - base);
		q = base + lmt_permute(p - base, size, epoch_key(l->cfg.seed, e) ^ lmt_mix64(w + 0x77));
	}
	/* binary search: the last i with prefix[i] <= q */
	uint32_t lo = 0, hi = l->nshards;
	while (hi - lo > 1) {
		uint32_t mid = (lo + hi) / 2;
		if (m->prefix[mid] <= q)
			lo = mid;
		else
			hi = mid;
	}
	*shard = l->shards[m->order[lo]];
	*index = q - m->prefix[lo];
	return 0;
}

int lmt_loader_locate(struct lmt_loader *l, uint64_t k, uint32_t *shard, uint64_t *index, struct lmt_err *err)
{
	if (locate(l, &l->map_main, k, shard, index))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	return 0;
}

/* ---- samples ---- */

int lmt_sample_alloc(struct lmt_sample *s, const struct lmt_dataset *d)
{
	memset(s, 0, sizeof *s);
	size_t n = (size_t)d->seq_len + 1;
	s->tokens = malloc(n * sizeof *s->tokens);
	s->segs = malloc(n * sizeof *s->segs); /* a segment has at least one token */
	if (!s->tokens || !s->segs) {
		lmt_sample_free(s);
		return LMT_ENOMEM;
	}
	return 0;
}

void lmt_sample_free(struct lmt_sample *s)
{
	free(s->tokens);
	free(s->segs);
	s->tokens = NULL;
	s->segs = NULL;
}

/* Test hook: LMT_TEST_SLOW_LOADER=S (or R:S, rank R alone) makes every sample of
 * the training loader's fetch take S seconds more, a loader too slow for the
 * trainer, for the starvation alert. */
static void test_slow_loader(const struct lmt_loader *l)
{
	const char *v = getenv("LMT_TEST_SLOW_LOADER");
	unsigned r = l->cfg.rank;
	double sec;
	if (!v || !l->cfg.shuffle || (strchr(v, ':') ? sscanf(v, "%u:%lf", &r, &sec) != 2 : sscanf(v, "%lf", &sec) != 1))
		return;
	if (r == l->cfg.rank && sec > 0)
		usleep((useconds_t)(sec * 1e6));
}

static int read_sample(struct lmt_loader *l, struct lmt_epoch_map *m, uint64_t k, struct lmt_sample *s,
		       struct lmt_err *err)
{
	test_slow_loader(l);
	uint32_t shard;
	uint64_t index;
	if (locate(l, m, k, &shard, &index))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	const struct lmt_shard *sh;
	int rc = lmt_dataset_shard(l->d, shard, &sh, err);
	if (rc)
		return rc;
	s->global = k;
	s->epoch = k / l->N;
	s->pos = k % l->N;
	s->shard = shard;
	s->index = index;
	lmt_shard_tokens(sh, index, s->tokens);
	s->nseg = lmt_shard_segments(sh, index, s->segs, l->d->seq_len + 1);
	return 0;
}

static void copy_sample(struct lmt_sample *dst, const struct lmt_sample *src, uint32_t n)
{
	uint32_t *t = dst->tokens;
	struct lmt_segment *g = dst->segs;
	memcpy(t, src->tokens, n * sizeof *t);
	memcpy(g, src->segs, src->nseg * sizeof *g);
	*dst = *src;
	dst->tokens = t;
	dst->segs = g;
}

/* ---- read-ahead ---- */

static void *ahead_main(void *arg)
{
	struct lmt_loader *l = arg;
	uint32_t P = l->cfg.prefetch;
	for (;;) {
		pthread_mutex_lock(&l->mu);
		while (!l->stop && l->count == P)
			pthread_cond_wait(&l->cv, &l->mu);
		if (l->stop) {
			pthread_mutex_unlock(&l->mu);
			break;
		}
		uint32_t slot = (l->head + l->count) % P;
		uint64_t k = l->fill_k;
		pthread_mutex_unlock(&l->mu);
		struct lmt_err err = { 0 };
		int rc = read_sample(l, &l->map_thread, k, &l->ring[slot], &err);
		pthread_mutex_lock(&l->mu);
		if (rc) {
			l->failed = 1;
			l->err = err;
		} else {
			l->count++;
			l->fill_k += l->cfg.world;
		}
		pthread_cond_broadcast(&l->cv);
		pthread_mutex_unlock(&l->mu);
		if (rc)
			break;
	}
	return NULL;
}

int lmt_loader_init(struct lmt_loader *l, struct lmt_dataset *d, const struct lmt_loader_cfg *cfg,
		    uint64_t cursor, struct lmt_err *err)
{
	memset(l, 0, sizeof *l);
	l->d = d;
	l->cfg = *cfg;
	if (cfg->world == 0 || cfg->rank >= cfg->world)
		return lmt_err_set(err, LMT_EINVAL, "rank %u of world %u", cfg->rank, cfg->world);
	if (cfg->split < 0 || cfg->split > 2)
		return lmt_err_set(err, LMT_EINVAL, "bad split %d", cfg->split);
	if (cursor < cfg->rank)
		return lmt_err_set(err, LMT_EINVAL, "cursor %llu is before rank %u's first index",
				   (unsigned long long)cursor, cfg->rank);
	l->shards = malloc((d->nshards ? d->nshards : 1) * sizeof *l->shards);
	if (!l->shards)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	for (size_t i = 0; i < d->nshards; i++)
		if (d->shards[i].split == cfg->split && d->shards[i].seqs)
			l->shards[l->nshards++] = (uint32_t)i;
	l->N = d->split_seqs[cfg->split];
	if (l->N == 0) {
		free(l->shards);
		l->shards = NULL;
		return lmt_err_set(err, LMT_EFORMAT, "'%s': the %s split has no sequences", d->dir,
				   lmt_split_name(cfg->split));
	}
	l->next = cursor;
	if (cfg->prefetch) {
		l->ring = calloc(cfg->prefetch, sizeof *l->ring);
		if (!l->ring)
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		for (uint32_t i = 0; i < cfg->prefetch; i++)
			if (lmt_sample_alloc(&l->ring[i], d)) {
				lmt_loader_release(l);
				return lmt_err_set(err, LMT_ENOMEM, "out of memory");
			}
		l->fill_k = cursor;
		pthread_mutex_init(&l->mu, NULL);
		pthread_cond_init(&l->cv, NULL);
		if (pthread_create(&l->th, NULL, ahead_main, l)) {
			pthread_mutex_destroy(&l->mu);
			pthread_cond_destroy(&l->cv);
			lmt_loader_release(l);
			return lmt_err_set(err, LMT_ENOMEM, "cannot start the read-ahead thread");
		}
		l->running = 1;
	}
	return 0;
}

int lmt_loader_next(struct lmt_loader *l, struct lmt_sample *s, struct lmt_err *err)
{
	if (!l->running) {
		int rc = read_sample(l, &l->map_main, l->next, s, err);
		if (!rc)
			l->next += l->cfg.world;
		return rc;
	}
	double t0 = lmt_now();
	pthread_mutex_lock(&l->mu);
	while (l->count == 0 && !l->failed)
		pthread_cond_wait(&l->cv, &l->mu);
	if (l->count == 0) {
		if (err)
			*err = l->err;
		pthread_mutex_unlock(&l->mu);
		return l->err.code ? l->err.code : LMT_EIO;
	}
	l->wait_seconds += lmt_now() - t0;
	copy_sample(s, &l->ring[l->head], l->d->seq_len + 1);
	l->head = (l->head + 1) % l->cfg.prefetch;
	l->count--;
	l->next += l->cfg.world;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	return 0;
}

void lmt_loader_release(struct lmt_loader *l)
{
	if (l->running) {
		lmt_threads_stop(&l->th, 1, &l->mu, &l->cv, &l->stop);
	}
	if (l->ring)
		for (uint32_t i = 0; i < l->cfg.prefetch; i++)
			lmt_sample_free(&l->ring[i]);
	free(l->ring);
	free(l->shards);
	free(l->map_main.order);
	free(l->map_main.prefix);
	free(l->map_thread.order);
	free(l->map_thread.prefix);
	memset(l, 0, sizeof *l);
}

int lmt_loader_rebase(uint64_t old_cursor, uint32_t old_rank, uint32_t old_world, uint32_t new_rank,
		      uint32_t new_world, uint64_t *new_cursor, struct lmt_err *err)
{
	if (!old_world || old_rank >= old_world || !new_world || new_rank >= new_world)
		return lmt_err_set(err, LMT_EINVAL, "bad rank or world size");
	if (old_cursor < old_rank)
		return lmt_err_set(err, LMT_EINVAL, "cursor %llu is not rank %u's (it starts at its rank)",
				   (unsigned long long)old_cursor, old_rank);
	*new_cursor = old_cursor - old_rank + new_rank;
	return 0;
}
