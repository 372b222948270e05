/*
 * test-dataset: shard-pack's output accounts for every token, and the loader's order
 * is disjoint across ranks, complete, reproducible and resumable.
 *
 * Datasets are made by the real tools (gen-corpus, tok-train, tok-encode, shard-pack
 * from $LMT_BIN, default build/bin) in a temporary directory; this program then reads
 * them through the library and checks:
 *   - reconstruction: concatenating each document's segments, in shard and sequence
 *     order, gives back exactly its tokens from the stream (plus the EOS shard-pack
 *     adds), except the tail the manifest says was dropped; no document is in two
 *     splits; positions outside segments are padding and hold the pad id;
 *   - the manifest's counts agree with what the shards hold;
 *   - the loader: ranks of worlds 2 and 3 never share a position in an epoch and
 *     together cover the split; the same (seed, epoch, world) gives the same order,
 *     another epoch another; positions move at most one window; resuming from a
 *     cursor saved at random points (with and without read-ahead) gives the samples
 *     an uninterrupted loader gives; a world size change continues without repeats;
 *   - corruption of a shard's payload stops the loader with the file named.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/dataset.h"
#include "data/loader.h"
#include "tap.h"
#include "data/tokstream.h"
#include "core/util.h"

static char dir[] = "/tmp/lmt-test-dataset.XXXXXX";
static const char *bin;

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	int rc = system(cmd);
	if (rc)
		tap_diag("command failed (%d): %s", rc, cmd);
	return rc;
}

/* ---- reconstruction ---- */

struct docacc {
	uint32_t *t;
	size_t n, cap;
	int split;
};

static void check_reconstruction(const char *name, const char *stream, int eos_added, int tail_pad)
{
	char path[512];
	struct lmt_err err = { 0 };
	struct lmt_tokstream_reader r;
	struct lmt_dataset d;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (!tap_ok(lmt_tokstream_reader_open(&r, stream, 1, &err) == 0 && lmt_dataset_open(&d, path, &err) == 0,
		    "%s: open stream and dataset (%s)", name, err.msg))
		return;
	struct docacc *acc = calloc(r.info.n_docs, sizeof *acc);
	for (uint64_t i = 0; i < r.info.n_docs; i++)
		acc[i].split = -1;
	uint32_t n = d.seq_len + 1;
	uint32_t *toks = malloc(n * 4);
	struct lmt_segment *segs = malloc(n * sizeof *segs);
	uint64_t pad_seen = 0, pad_wrong = 0, two_splits = 0, seqs[3] = { 0 };
	for (size_t s = 0; s < d.nshards; s++) {
		const struct lmt_shard *shp;
		if (lmt_dataset_shard(&d, s, &shp, &err)) {
			tap_ok(0, "%s: map shard %zu: %s", name, s, err.msg);
			continue;
		}
		seqs[d.shards[s].split] += shp->info.n_seqs;
		for (uint64_t q = 0; q < shp->info.n_seqs; q++) {
			lmt_shard_tokens(shp, q, toks);
			uint32_t ns = lmt_shard_segments(shp, q, segs, n), covered = 0;
			for (uint32_t k = 0; k < ns; k++) {
				struct docacc *a = &acc[segs[k].doc];
				if (a->split >= 0 && a->split != d.shards[s].split)
					two_splits++;
				a->split = d.shards[s].split;
				LMT_GROW(a->t, a->cap, a->n + segs[k].len);
				memcpy(a->t + a->n, toks + segs[k].start, segs[k].len * 4);
				a->n += segs[k].len;
				covered += segs[k].len;
			}
			/* positions after the last segment are padding */
			uint32_t end = ns ? segs[ns - 1].start + segs[ns - 1].len : 0;
			for (uint32_t i = end; i < n; i++) {
				pad_seen++;
				pad_wrong += toks[i] != d.pad_id;
			}
			if (covered + (n - end) != n)
				tap_diag("%s: sequence %llu of shard %zu has gaps between segments", name,
					 (unsigned long long)q, s);
		}
	}
	uint64_t exact = 0, prefix = 0, missing_tokens = 0, absent = 0, bad = 0;
	for (uint64_t i = 0; i < r.info.n_docs; i++) {
		struct lmt_tokstream_doc doc;
		lmt_tokstream_reader_doc(&r, i, &doc);
		size_t want = doc.n_tok + (eos_added ? 1 : 0);
		struct docacc *a = &acc[i];
		int ok = a->n <= want;
		for (size_t k = 0; ok && k < a->n; k++) {
			uint32_t t = k < doc.n_tok ? lmt_tokstream_reader_token(&r, doc.tok_off + k) : r.info.eos;
			ok = a->t[k] == t;
		}
		if (!ok)
			bad++;
		else if (a->n == want)
			exact++;
		else if (a->n == 0)
			absent++, missing_tokens += want;
		else
			prefix++, missing_tokens += want - a->n;
		free(a->t);
	}
	tap_ok(bad == 0, "%s: every document's segments are its own tokens, in order (%llu bad)", name,
	       (unsigned long long)bad);
	tap_ok(two_splits == 0, "%s: no document is in two splits", name);
	tap_ok(pad_wrong == 0, "%s: %llu padding positions hold the pad id", name, (unsigned long long)pad_seen);
	/* the manifest: dropped tail and counts */
	char mpath[600], *m;
	size_t ml;
	snprintf(mpath, sizeof mpath, "%s/manifest.json", path);
	FILE *f = fopen(mpath, "rb");
	m = calloc(1, 1 << 20);
	ml = fread(m, 1, (1 << 20) - 1, f);
	fclose(f);
	(void)ml;
	uint64_t dropped = 0;
	for (const char *p = m; (p = strstr(p, "\"tail_dropped\":")); p++)
		dropped += strtoull(p + 15, NULL, 10);
	if (tail_pad)
		tap_ok(missing_tokens == 0 && dropped == 0 && prefix + absent == 0,
		       "%s: with padding nothing is dropped: %llu documents whole", name, (unsigned long long)exact);
	else
		/* a split's tail (fewer than seq_len + 1 tokens) can hold several short
		 * documents whole, but only its first one in part */
		tap_ok(missing_tokens == dropped && prefix <= 3,
		       "%s: tokens not in any sequence (%llu: %llu documents cut, %llu short ones whole, in 3 split "
		       "tails) are the manifest's tail_dropped (%llu)",
		       name, (unsigned long long)missing_tokens, (unsigned long long)prefix, (unsigned long long)absent,
		       (unsigned long long)dropped);
	tap_ok(seqs[0] == d.split_seqs[0] && seqs[1] == d.split_seqs[1] && seqs[2] == d.split_seqs[2] &&
	       seqs[0] > 0 && seqs[1] > 0,
	       "%s: shard headers agree with the manifest (%llu/%llu/%llu sequences)", name,
	       (unsigned long long)seqs[0], (unsigned long long)seqs[1], (unsigned long long)seqs[2]);
	free(m);
	free(acc);
	free(toks);
	free(segs);
	lmt_dataset_close(&d);
	lmt_tokstream_reader_close(&r);
}

/* ---- loader ---- */

static uint64_t key_of(uint32_t shard, uint64_t index)
{
	return (uint64_t)shard << 40 | index;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void check_loader(const char *name)
{
	char path[512];
	struct lmt_err err = { 0 };
	struct lmt_dataset d;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (lmt_dataset_open(&d, path, &err)) {
		tap_ok(0, "open %s: %s", name, err.msg);
		return;
	}
	uint64_t N = d.split_seqs[LMT_SPLIT_TRAIN];
	struct lmt_loader_cfg cfg = { LMT_SPLIT_TRAIN, 42, 0, 1, 1, 50, 0 };
	struct lmt_sample s;
	lmt_sample_alloc(&s, &d);

	/* worlds of 2 and 3: disjoint within the epoch, covering it */
	for (uint32_t world = 2; world <= 3; world++) {
		uint64_t *seen = malloc(N * sizeof *seen), k = 0;
		int ok = 1;
		for (uint32_t r = 0; r < world; r++) {
			struct lmt_loader l;
			cfg.rank = r;
			cfg.world = world;
			lmt_loader_init(&l, &d, &cfg, lmt_loader_start(&cfg), &err);
			for (uint64_t i = r; i < N; i += world) {
				if (lmt_loader_next(&l, &s, &err) || s.epoch != 0) {
					ok = 0;
					break;
				}
				seen[k++] = key_of(s.shard, s.index);
			}
			lmt_loader_release(&l);
		}
		qsort(seen, k, sizeof *seen, cmp_u64);
		uint64_t dup = 0;
		for (uint64_t i = 1; i < k; i++)
			dup += seen[i] == seen[i - 1];
		tap_ok(ok && k == N && dup == 0, "%s: world %u: ranks share no sample in an epoch and cover all %llu",
		       name, world, (unsigned long long)N);
		free(seen);
	}

	/* the same order from the same (seed, epoch, world); another epoch differs */
	struct lmt_loader a, b;
	cfg.rank = 0;
	cfg.world = 1;
	lmt_loader_init(&a, &d, &cfg, 0, &err);
	uint64_t *e0 = malloc(2 * N * sizeof *e0);
	for (uint64_t i = 0; i < 2 * N; i++) {
		lmt_loader_next(&a, &s, &err);
		e0[i] = key_of(s.shard, s.index);
	}
	lmt_loader_release(&a);
	cfg.prefetch = 7;
	lmt_loader_init(&b, &d, &cfg, 0, &err);
	int same = 1, far = 0;
	uint64_t moved = 0;
	for (uint64_t i = 0; i < 2 * N; i++) {
		lmt_loader_next(&b, &s, &err);
		same &= e0[i] == key_of(s.shard, s.index);
	}
	lmt_loader_release(&b);
	tap_ok(same, "%s: a second loader (with read-ahead) gives the same order over two epochs", name);
	uint64_t diff = 0;
	for (uint64_t i = 0; i < N; i++)
		diff += e0[i] != e0[N + i];
	tap_ok(diff > N / 2, "%s: epoch 1's order differs from epoch 0's (%llu of %llu places)", name,
	       (unsigned long long)diff, (unsigned long long)N);
	/* bounded shuffle: without shard reordering a position moves less than a window;
	 * with it, check the window property on the manifest order of shard 0 alone */
	cfg.shuffle = 0;
	cfg.prefetch = 0;
	lmt_loader_init(&a, &d, &cfg, 0, &err);
	uint64_t *plain = malloc(N * sizeof *plain);
	for (uint64_t i = 0; i < N; i++) {
		lmt_loader_next(&a, &s, &err);
		plain[i] = key_of(s.shard, s.index);
	}
	lmt_loader_release(&a);
	for (uint64_t i = 1; i < N; i++)
		far += plain[i] <= plain[i - 1] && (plain[i] >> 40) == (plain[i - 1] >> 40);
	tap_ok(far == 0, "%s: without shuffling the order is the manifest's", name);
	(void)moved;
	int perm_ok = 1;
	for (uint64_t n = 1; n <= 300 && perm_ok; n += 37) {
		char *hit = calloc(n, 1);
		for (uint64_t x = 0; x < n; x++) {
			uint64_t y = lmt_permute(x, n, 12345 + n);
			if (y >= n || hit[y])
				perm_ok = 0;
			else
				hit[y] = 1;
		}
		free(hit);
	}
	tap_ok(perm_ok, "the window permutation is a bijection of [0, n) for n = 1, 38, ..., 297");

	/* resume from cursors saved at random points */
	cfg.shuffle = 1;
	int resume_ok = 1;
	uint64_t seedr = 7;
	for (int trial = 0; trial < 12 && resume_ok; trial++) {
		seedr = lmt_mix64(seedr + 1);
		uint64_t stop = seedr % (2 * N);
		cfg.prefetch = trial % 2 ? 5 : 0;
		cfg.world = 1 + trial % 3;
		cfg.rank = (uint32_t)(seedr >> 40) % cfg.world;
		struct lmt_loader u, v;
		lmt_loader_init(&u, &d, &cfg, lmt_loader_start(&cfg), &err);
		for (uint64_t i = 0; i < stop / cfg.world; i++)
			lmt_loader_next(&u, &s, &err);
		uint64_t cur = lmt_loader_cursor(&u);
		lmt_loader_init(&v, &d, &cfg, cur, &err);
		struct lmt_sample s2;
		lmt_sample_alloc(&s2, &d);
		for (int i = 0; i < 40; i++) {
			lmt_loader_next(&u, &s, &err);
			lmt_loader_next(&v, &s2, &err);
			if (s.global != s2.global || s.shard != s2.shard || s.index != s2.index ||
			    memcmp(s.tokens, s2.tokens, (d.seq_len + 1) * 4)) {
				tap_diag("trial %d: after %llu samples, sample %d differs", trial,
					 (unsigned long long)stop, i);
				resume_ok = 0;
				break;
			}
		}
		lmt_sample_free(&s2);
		lmt_loader_release(&u);
		lmt_loader_release(&v);
	}
	tap_ok(resume_ok, "%s: restoring a cursor saved at 12 random points gives the same next 40 samples", name);

	/* world 2 for S steps, then world 3 from the rebased cursors: no repeats in epoch 0 */
	uint64_t S = N / 5;
	uint64_t *seen = malloc((N + 8) * sizeof *seen), k = 0;
	uint64_t cursors[2];
	cfg.prefetch = 0;
	for (uint32_t r = 0; r < 2; r++) {
		struct lmt_loader l;
		cfg.rank = r;
		cfg.world = 2;
		lmt_loader_init(&l, &d, &cfg, r, &err);
		for (uint64_t i = 0; i < S; i++) {
			lmt_loader_next(&l, &s, &err);
			seen[k++] = key_of(s.shard, s.index);
		}
		cursors[r] = lmt_loader_cursor(&l);
		lmt_loader_release(&l);
	}
	int rebase_ok = 1;
	for (uint32_t r = 0; r < 3; r++) {
		uint64_t c;
		struct lmt_loader l;
		rebase_ok &= lmt_loader_rebase(cursors[r % 2], r % 2, 2, r, 3, &c, &err) == 0;
		cfg.rank = r;
		cfg.world = 3;
		lmt_loader_init(&l, &d, &cfg, c, &err);
		for (;;) {
			lmt_loader_next(&l, &s, &err);
			if (s.epoch != 0)
				break;
			seen[k++] = key_of(s.shard, s.index);
		}
		lmt_loader_release(&l);
	}
	qsort(seen, k, sizeof *seen, cmp_u64);
	uint64_t dup = 0;
	for (uint64_t i = 1; i < k; i++)
		dup += seen[i] == seen[i - 1];
	tap_ok(rebase_ok && k == N && dup == 0,
	       "%s: 2 ranks for %llu steps, then 3 ranks: epoch 0 is covered once (%llu samples, %llu repeats)", name,
	       (unsigned long long)S, (unsigned long long)k, (unsigned long long)dup);
	uint64_t bogus;
	tap_ok(lmt_loader_rebase(1, 2, 3, 0, 2, &bogus, &err) != 0, "a cursor below its rank is refused: %s", err.msg);
	tap_ok(lmt_loader_rebase(10, 1, 3, 1, 2, &bogus, &err) == 0 && bogus == 10,
	       "a base that the old world does not divide (10 - 1 = 9, then 1 -> 2 ranks) carries over");
	free(seen);
	free(e0);
	free(plain);
	lmt_sample_free(&s);
	lmt_dataset_close(&d);
}

/* one shard: a shuffled position stays within its window of 50 */
static void check_window(void)
{
	char path[512];
	struct lmt_err err = { 0 };
	struct lmt_dataset d;
	snprintf(path, sizeof path, "%s/D", dir);
	lmt_dataset_open(&d, path, &err);
	struct lmt_loader l;
	struct lmt_loader_cfg cfg = { LMT_SPLIT_TRAIN, 5, 0, 1, 1, 50, 0 };
	lmt_loader_init(&l, &d, &cfg, 0, &err);
	uint64_t N = l.N, worst = 0, moved = 0;
	struct lmt_sample s;
	lmt_sample_alloc(&s, &d);
	for (uint64_t k = 0; k < N; k++) {
		lmt_loader_next(&l, &s, &err);
		uint64_t dist = s.index > k ? s.index - k : k - s.index;
		worst = LMT_MAX(worst, dist);
		moved += dist > 0;
		if (s.index / 50 != k / 50)
			worst = 1000000;
	}
	tap_ok(d.nshards == 1 && worst < 50 && moved > N / 2,
	       "one shard of %llu: every sample stays in its window of 50 (farthest move %llu, %llu moved)",
	       (unsigned long long)N, (unsigned long long)worst, (unsigned long long)moved);
	lmt_sample_free(&s);
	lmt_loader_release(&l);
	lmt_dataset_close(&d);
}

/* A copy of dataset A in dir/name (path, n bytes) with bit 'bit' of the byte at
 * off in its shard file flipped (off < 0: from the end); 0, or -1. */
static int corrupt_copy(const char *name, const char *file, long off, int bit, char *path, size_t n)
{
	char shard[600];
	snprintf(path, n, "%s/%s", dir, name);
	if (sh("cp -r '%s/A' '%s'", dir, path))
		return -1;
	snprintf(shard, sizeof shard, "%s/%s", path, file);
	FILE *f = fopen(shard, "r+b");
	if (!f)
		return -1;
	fseek(f, off, off < 0 ? SEEK_END : SEEK_SET);
	int c = fgetc(f);
	fseek(f, off, off < 0 ? SEEK_END : SEEK_SET);
	fputc(c ^ (1 << bit), f);
	return fclose(f) ? -1 : 0;
}

static void check_corruption(void)
{
	char path[512];
	struct lmt_err err = { 0 };
	if (!tap_ok(corrupt_copy("bad", "train-00000.lmshard", 200, 0, path, sizeof path) == 0,
		    "a copy of A with its first shard corrupted"))
		return;
	struct lmt_dataset d;
	lmt_dataset_open(&d, path, &err);
	struct lmt_loader l;
	struct lmt_loader_cfg cfg = { LMT_SPLIT_TRAIN, 1, 0, 1, 0, 0, 3 };
	lmt_loader_init(&l, &d, &cfg, 0, &err);
	struct lmt_sample s;
	lmt_sample_alloc(&s, &d);
	int rc = lmt_loader_next(&l, &s, &err);
	tap_ok(rc != 0 && strstr(err.msg, "train-00000.lmshard") && strstr(err.msg, "sha256"),
	       "a corrupted shard stops the loader, naming it: %s", err.msg);
	lmt_sample_free(&s);
	lmt_loader_release(&l);
	lmt_dataset_close(&d);
}

/* lmt_dataset_verify_shard one shard at a time: every shard of a copy of A with
 * its second training shard corrupted passes but that one, which is named. */
static void check_verify_shard(void)
{
	char path[512];
	struct lmt_err err = { 0 };
	if (!tap_ok(corrupt_copy("bad2", "train-00001.lmshard", -9, 2, path, sizeof path) == 0,
		    "a copy of A with its second training shard corrupted"))
		return;
	struct lmt_dataset d;
	if (!tap_ok(lmt_dataset_open(&d, path, &err) == 0, "open the copy: %s", err.msg))
		return;
	size_t good = 0, bad = 0, named = 0;
	for (size_t i = 0; i < d.nshards; i++) {
		int rc = lmt_dataset_verify_shard(&d, i, &err);
		int corrupt = strstr(d.shards[i].path, "train-00001.lmshard") != NULL;
		if (!corrupt && rc == 0)
			good++;
		if (corrupt && rc == LMT_ECHECKSUM) {
			bad++;
			named += strstr(err.msg, "train-00001.lmshard") != NULL;
		}
	}
	tap_ok(d.nshards > 2 && good == d.nshards - 1 && bad == 1 && named == 1,
	       "verifying each of %zu shards alone: %zu pass, the corrupted one fails, named (%s)", d.nshards, good,
	       err.msg);
	lmt_dataset_close(&d);
}

int main(void)
{
	bin = getenv("LMT_BIN") ? getenv("LMT_BIN") : "build/bin";
	if (!mkdtemp(dir))
		return 1;
	int rc = sh("%s/gen-corpus -q --docs 400 --seed 3 -o %s/c.jsonl > /dev/null", bin, dir) ||
		 sh("%s/tok-train -q -v 300 -o %s/t.lmtok %s/c.jsonl > /dev/null", bin, dir, dir) ||
		 sh("%s/tok-encode -q -t %s/t.lmtok -o %s/s.lmtoks %s/c.jsonl > /dev/null", bin, dir, dir, dir) ||
		 sh("%s/tok-encode -q --eos -t %s/t.lmtok -o %s/e.lmtoks %s/c.jsonl > /dev/null", bin, dir, dir, dir) ||
		 sh("%s/shard-pack -q -L 64 --split val=0.1,test=0.05 --shard-tokens 3000 -o %s/A %s/s.lmtoks > /dev/null",
		    bin, dir, dir) ||
		 sh("%s/shard-pack -q -L 64 --mode pad --split val=0.1 -o %s/B %s/e.lmtoks > /dev/null", bin, dir, dir) ||
		 sh("%s/shard-pack -q -L 100 --tail pad --split val=0.2 --seed 9 -o %s/C %s/s.lmtoks > /dev/null", bin, dir,
		    dir) ||
		 sh("%s/shard-pack -q -L 64 --split val=0 -o %s/D %s/s.lmtoks > /dev/null", bin, dir, dir);
	if (!tap_ok(rc == 0, "made datasets with the tools in %s", bin))
		return tap_done();
	char s[512], e[512];
	snprintf(s, sizeof s, "%s/s.lmtoks", dir);
	snprintf(e, sizeof e, "%s/e.lmtoks", dir);
	check_reconstruction("A", s, 1, 0);
	check_reconstruction("B", e, 0, 1);
	check_reconstruction("C", s, 1, 1);
	check_loader("A");
	check_loader("C");
	check_window();
	check_corruption();
	check_verify_shard();
	sh("rm -rf '%s'", dir);
	return tap_done();
}
