#!/usr/bin/env python3
"""dedup-minhash against datasketch's MinHash + MinHashLSH.

    scripts/bench/run dedup [--docs 100000] [--pairs 3000] [--threshold 0.8]
                            [--num-perm 128] [--repeat 3] [--json FILE]
                            [--jsonl FILE]

The corpus is built here, deterministically (random.Random(--seed)), from the
lines of scripts/bench/make-corpus output (documentation, manual pages and Python
sources already on a Debian machine): each document is 12 consecutive lines, and
--pairs of them get a planted near-duplicate: a copy in which a fraction q of the
words is replaced by words drawn from the corpus (q uniform in [0, 0.08], which
puts most pairs between J = 0.5 and 1, since a 5-gram survives with probability
(1-q)^5), inserted at a random later position. The exact Jaccard similarity of
each planted pair is computed here, on the sets of word 5-grams of
text.lower().split(). With --jsonl FILE the documents are instead the "text"
fields of FILE as they are (whole files of real text, e.g. a few kB of source,
manual page or changelog each; at most --docs of them), and the copies are
planted among them in the same way, and written as UTF-8 (not with \\u escapes):
that measures the cost per shingle, where the synthetic 12-line documents
mostly measure the cost per document.

Both tools see the same JSONL file, the same shingles (word 5-grams, lowercase,
split at white space: dedup-minhash runs with --normalize lower, which is that),
the same number of permutations and the same threshold; datasketch picks its
bands and rows with the same rule (weights 0.5/0.5). datasketch runs the usual
streaming loop: parse each line, MinHash.update_batch on the shingles, query the
index, insert. It is single-threaded; dedup-minhash runs with 1 thread and with
all cores, and once more on the same documents written as text (separated by
<|endoftext|>), which shows how much of its time goes to parsing JSONL. Times
are wall-clock, each tool in its own process, reading included; each figure is
the best of --repeat runs, the contenders taking turns so that a burst of load
on a shared machine hits them alike.

Recall and precision are measured on the planted pairs only, against their exact
Jaccard similarity: a pair counts as found when dedup-minhash puts both documents
in one cluster, or when datasketch's query for the copy returns the original.
Recall: found pairs among those with J >= threshold; precision: pairs with
J >= threshold among the found ones (so it depends on the mix of similarities
planted, which is stated). Per-bucket detection rates are printed next to the
LSH S-curve 1 - (1 - s^r)^b averaged over the bucket's pairs.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import shutil
import tempfile

from common import BIN, TOP, machine, run, table, save

DS_SCRIPT = r'''
import json, sys, time
from datasketch import MinHash, MinHashLSH
path, num_perm, threshold, ngram, labels = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
want = {}
for line in open(labels):
    p = json.loads(line)
    want[p["copy"]] = p["orig"]
lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
found = {}
t0 = time.perf_counter()
with open(path, encoding="utf-8") as f:
    for i, line in enumerate(f):
        w = json.loads(line)["text"].lower().split()
        if len(w) >= ngram:
            sh = [" ".join(w[k:k + ngram]).encode() for k in range(len(w) - ngram + 1)]
        else:
            sh = [" ".join(w).encode()] if w else []
        m = MinHash(num_perm=num_perm)
        m.update_batch(sh)
        hits = lsh.query(m)
        if i in want:
            found[i] = want[i] in hits
        lsh.insert(i, m)
secs = time.perf_counter() - t0
print(json.dumps({"seconds": secs, "docs": i + 1, "bands": lsh.b, "rows": lsh.r,
                  "found": {str(k): v for k, v in found.items()}}))
'''


SEP = '<|endoftext|>'


def shingles(text, n=5):
    w = text.lower().split()
    if len(w) < n:
        return {' '.join(w)} if w else set()
    return {' '.join(w[k:k + n]) for k in range(len(w) - n + 1)}


def jaccard(a, b):
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def build(corpus, out, labels, ndocs, npairs, seed, jsonl=None):
    rng = random.Random(seed)
    if jsonl:
        docs = [json.loads(l)['text'] for l in open(jsonl, encoding='utf-8')][:ndocs]
        docs = [d.replace(SEP, ' ') for d in docs]
    else:
        lines = open(corpus, encoding='utf-8').read().split('\n')
        docs = ['\n'.join(lines[i:i + 12]) for i in range(0, len(lines) - 12, 12)][:ndocs]
        if len(docs) < ndocs:
            raise SystemExit(f'{corpus}: only {len(docs)} documents of 12 lines; need {ndocs}')
    vocab = [w for d in docs[:2000] for w in d.split()]
    cand = [i for i, d in enumerate(docs) if len(d.split()) >= 60]
    npairs = min(npairs, len(cand))
    origs = rng.sample(cand, npairs)
    # each copy goes after its original: (position in docs, copy text, original index)
    inserts = []
    for o in origs:
        w = docs[o].split()
        q = rng.uniform(0, 0.08)
        for k in range(len(w)):
            if rng.random() < q:
                w[k] = rng.choice(vocab)
        inserts.append((rng.randint(o + 1, len(docs)), ' '.join(w), o))
    inserts.sort(key=lambda x: x[0])
    final, where, k = [], {}, 0
    pairs = []
    for i, d in enumerate(docs + [None]):
        while k < len(inserts) and inserts[k][0] == i:
            pairs.append((len(final), inserts[k][2]))
            final.append(inserts[k][1])
            k += 1
        if d is not None:
            where[i] = len(final)
            final.append(d)
    with open(out, 'w', encoding='utf-8') as f:
        for d in final:
            # --jsonl: UTF-8 as the source file has it (most corpora are stored so)
            f.write(json.dumps({'text': d}, ensure_ascii=not jsonl) + '\n')
    # the same documents as text, to show what reading JSONL costs
    assert not any(SEP in d for d in final)
    with open(out[:-len('.jsonl')] + '.txt', 'w', encoding='utf-8') as f:
        f.write(SEP.join(final))
    with open(labels, 'w') as f:
        for c, o in pairs:
            j = jaccard(shingles(final[where[o]]), shingles(final[c]))
            f.write(json.dumps({'copy': c, 'orig': where[o], 'jaccard': j}) + '\n')
    return len(final)


def lmt_clusters(removed_path, ids):
    """document index -> cluster representative index, from the --removed file"""
    rep = {}
    for line in open(removed_path):
        r = json.loads(line)
        rep[ids[r['id']]] = ids[r['duplicate_of']]
    return rep


def score(label_rows, found, threshold, b, r):
    buckets = [(0.0, 0.5), (0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.0), (1.0, 1.01)]
    rows = []
    for lo, hi in buckets:
        sel = [p for p in label_rows if lo <= p['jaccard'] < hi]
        if not sel:
            continue
        f = sum(found[p['copy']] for p in sel)
        curve = sum(1 - (1 - p['jaccard'] ** r) ** b for p in sel) / len(sel)
        name = '1.0' if lo == 1.0 else f'[{lo:.1f},{hi:.1f})'
        rows.append(dict(bucket=name, pairs=len(sel), found=f, rate=round(f / len(sel), 3),
                         s_curve=round(curve, 3)))
    pos = [p for p in label_rows if p['jaccard'] >= threshold]
    det = [p for p in label_rows if found[p['copy']]]
    recall = sum(found[p['copy']] for p in pos) / max(1, len(pos))
    precision = sum(p['jaccard'] >= threshold for p in det) / max(1, len(det))
    return rows, recall, precision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--corpus', default='/tmp/lmt-bench/corpus.txt', help='make-corpus output')
    ap.add_argument('--docs', type=int, default=100000)
    ap.add_argument('--pairs', type=int, default=3000)
    ap.add_argument('--threshold', type=float, default=0.8)
    ap.add_argument('--num-perm', type=int, default=128)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--repeat', type=int, default=3)
    ap.add_argument('--keep', action='store_true', help='keep the temporary directory')
    ap.add_argument('--json')
    ap.add_argument('--jsonl', help='documents: the "text" of each line of this JSONL file')
    ap.add_argument('--build-only', nargs=2, metavar=('OUT', 'LABELS'), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.build_only:
        print(build(a.corpus, a.build_only[0], a.build_only[1], a.docs, a.pairs, a.seed, a.jsonl))
        return
    if not a.jsonl and not os.path.exists(a.corpus):
        os.makedirs(os.path.dirname(a.corpus), exist_ok=True)
        run([os.path.join(TOP, 'scripts/bench/make-corpus'), a.corpus, '64'])
    tmp = tempfile.mkdtemp(prefix='lmt-bench-dedup-')
    try:
        bench(a, tmp)
    finally:
        if a.keep:
            print(f'# kept {tmp}')
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def bench(a, tmp):
    data, labels = f'{tmp}/corpus.jsonl', f'{tmp}/labels.jsonl'
    # built in a child process: a child's peak RSS (wait4) starts from its parent's
    # size at fork, so this process stays small while the tools run
    _, _, out = run([sys.executable, os.path.abspath(__file__), '--corpus', a.corpus, '--docs', str(a.docs),
                     '--pairs', str(a.pairs), '--seed', str(a.seed), '--build-only', data, labels] +
                    (['--jsonl', a.jsonl] if a.jsonl else []),
                    stdout=subprocess.PIPE)
    n = int(out)
    label_rows = [json.loads(l) for l in open(labels)]
    # the datasketch version from a child: importing it here (numpy, scipy) would
    # add 80 MB to every child's peak RSS
    _, _, dsv = run([sys.executable, '-c', 'import datasketch; print(datasketch.__version__)'],
                    stdout=subprocess.PIPE)
    ncpu = os.cpu_count()
    print(f'# {machine()}')
    npl = len(label_rows)
    print(f'# corpus: {n} documents ({n - npl} + {npl} planted copies{", from " + a.jsonl if a.jsonl else ""}), '
          f'{os.path.getsize(data) / 1e6:.1f} MB JSONL; num_perm {a.num_perm}, threshold {a.threshold}; '
          f'datasketch {dsv.strip()}')

    lmt_runs = [('lmt -j1 (--normalize lower)', ['-j1', '--normalize', 'lower']),
                (f'lmt -j{ncpu} (--normalize lower)', [f'-j{ncpu}', '--normalize', 'lower']),
                (f'lmt -j{ncpu} (all normalisation)', [f'-j{ncpu}']),
                (f'lmt -j{ncpu} (--normalize lower), the same as text', [f'-j{ncpu}', '--normalize', 'lower',
                                                                      '--doc-sep', SEP])]
    best = {}
    found_lmt = found_ds = ds = None
    summaries = {}
    for rep in range(a.repeat):
        for name, extra in lmt_runs:
            cmd = [f'{BIN}/dedup-minhash', '-q', '-t', str(a.threshold), '--num-perm', str(a.num_perm),
                   '--removed', f'{tmp}/removed.jsonl', '--summary', f'{tmp}/summary.json'] + extra + \
                  [data if '--doc-sep' not in extra else data[:-len('.jsonl')] + '.txt']
            w, rss, _ = run(cmd, stdout=subprocess.DEVNULL)
            best[name] = min(best.get(name, (w, rss)), (w, rss))
            summaries[name] = json.load(open(f'{tmp}/summary.json'))
            if found_lmt is None:
                ids = {f'{data}:{i}': i for i in range(n)}
                rep_of = lmt_clusters(f'{tmp}/removed.jsonl', ids)
                found_lmt = {p['copy']: rep_of.get(p['copy'], p['copy']) == rep_of.get(p['orig'], p['orig'])
                             for p in label_rows}
                lb, lr = summaries[name]['bands'], summaries[name]['rows']
                print('# lmt command: ' + ' '.join(cmd))
        w, rss, out = run([sys.executable, '-c', DS_SCRIPT, data, str(a.num_perm), str(a.threshold), '5', labels],
                          stdout=subprocess.PIPE)
        best['ds'] = min(best.get('ds', (w, rss)), (w, rss))
        if ds is None:
            ds = json.loads(out)
            found_ds = {int(k): v for k, v in ds['found'].items()}
    rows = []
    for name, _ in lmt_runs:
        w, rss = best[name]
        s = summaries[name]
        rows.append(dict(tool=name, seconds=round(w, 2), docs_per_s=round(n / w), peak_rss_mb=round(rss / 1e6),
                         removed=s['removed']['exact'] + s['removed']['near'], bands=s['bands'], rows=s['rows'],
                         bytes_per_doc=round(s['bytes_per_doc']), kernel=s.get('kernel', '')))
    w, rss = best['ds']
    rows.append(dict(tool='datasketch MinHashLSH', seconds=round(w, 2), docs_per_s=round(n / w),
                     peak_rss_mb=round(rss / 1e6), removed='', bands=ds['bands'], rows=ds['rows']))
    ds_w = w
    for r in rows:
        r['vs_datasketch'] = round(ds_w / r['seconds'], 1)
    table(rows, ['tool', 'seconds', 'docs_per_s', 'vs_datasketch', 'peak_rss_mb', 'bytes_per_doc', 'removed',
                 'bands', 'rows', 'kernel'])

    print()
    print(f'# planted pairs by exact Jaccard (5-gram sets): found by each tool, and the S-curve '
          f'1-(1-s^r)^b averaged over the bucket')
    bl, rl, pl = score(label_rows, found_lmt, a.threshold, lb, lr)
    bd, rd, pd = score(label_rows, found_ds, a.threshold, ds['bands'], ds['rows'])
    brows = []
    for x, y in zip(bl, bd):
        brows.append(dict(bucket=x['bucket'], pairs=x['pairs'], lmt_rate=x['rate'], lmt_s_curve=x['s_curve'],
                          datasketch_rate=y['rate'], datasketch_s_curve=y['s_curve']))
    table(brows, ['bucket', 'pairs', 'lmt_rate', 'lmt_s_curve', 'datasketch_rate', 'datasketch_s_curve'])
    print()
    npos = sum(p['jaccard'] >= a.threshold for p in label_rows)
    se = (rl * (1 - rl) / max(1, npos)) ** 0.5
    print(f'recall (J >= {a.threshold}, {npos} pairs):  lmt {rl:.3f}   datasketch {rd:.3f}   '
          f'(standard error of either about {se:.3f})')
    print(f'precision (J >= {a.threshold}):            lmt {pl:.3f}   datasketch {pd:.3f}')
    save(a.json, dict(machine=machine(), documents=n, pairs=a.pairs, threshold=a.threshold,
                      num_perm=a.num_perm, rows=rows, buckets=brows,
                      recall=dict(lmt=rl, datasketch=rd), precision=dict(lmt=pl, datasketch=pd)))


if __name__ == '__main__':
    main()
