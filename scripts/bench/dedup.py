#!/usr/bin/env python3
"""dedup-minhash against datasketch's MinHash + MinHashLSH.

    scripts/bench/run dedup [--corpus synthetic|real|both] [--docs 100000] [--pairs 3000]
                            [--real-docs 0] [--real-pairs 500] [--threshold 0.8]
                            [--num-perm 128] [--repeat 3] [--json FILE]

The corpus is built here, deterministically (random.Random(--seed)), from one of two
sources (scripts/bench/corpus.py). Synthetic: the lines of scripts/bench/make-corpus
output (documentation, manual pages and Python sources already on a Debian
machine), each document 12 consecutive lines, --docs of them. Real: one file a
document (make-corpus --real), --real-docs of them (0: all), which holds the
duplicates a machine really has (licence texts, translations of one catalogue).
--pairs (real: --real-pairs) of the documents get a planted near-duplicate: a copy,
its words joined by single spaces, in which a fraction q of the
words is replaced by words drawn from the corpus (q uniform in [0, 0.08], which
puts most pairs between J = 0.5 and 1, since a 5-gram survives with probability
(1-q)^5), inserted at a random later position. The exact Jaccard similarity of
each planted pair is computed here, on the sets of word 5-grams of
text.lower().split().

Both tools see the same JSONL file, the same shingles (word 5-grams, lowercase,
split at white space: dedup-minhash runs with --normalize lower, which is that),
the same number of permutations and the same threshold; datasketch picks its
bands and rows with the same rule (weights 0.5/0.5). datasketch runs the usual
streaming loop: parse each line, MinHash.update_batch on the shingles, query the
index, insert. It is single-threaded; dedup-minhash runs with 1 thread and with
all cores, and once more on the same documents written as text (separated by
<|endoftext|>), which shows how much of its time goes to parsing JSONL. Times
are wall-clock, each tool in its own process, reading included; each figure is
best/median of --repeat runs, the contenders taking turns so that a burst of load
on a shared machine hits them alike. "removed" counts every document a tool drops
(planted or not; datasketch's: those whose query found an earlier document).

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

import corpus as corpora
from common import (BIN, Load, add_corpus_args, bm, best_median, corpus_file, header, kinds, machine, rate,
                    ratio, run, save, table)

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
dups = 0
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
        dups += bool(hits)
        if i in want:
            found[i] = want[i] in hits
        lsh.insert(i, m)
secs = time.perf_counter() - t0
print(json.dumps({"seconds": secs, "docs": i + 1, "bands": lsh.b, "rows": lsh.r, "removed": dups,
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


def build(kind, corpus, out, labels, ndocs, npairs, seed):
    rng = random.Random(seed)
    if kind == 'synthetic':
        lines = open(corpus, encoding='utf-8').read().split('\n')
        docs = ['\n'.join(lines[i:i + 12]) for i in range(0, len(lines) - 12, 12)][:ndocs]
        if len(docs) < ndocs:
            raise SystemExit(f'{corpus}: only {len(docs)} documents of 12 lines; need {ndocs}')
    else:
        docs = corpora.read_jsonl(corpus)
        docs = docs[:ndocs] if ndocs else docs
    docs = [d for d in docs if SEP not in d]
    vocab = []
    for d in docs:
        vocab += d.split()
        if len(vocab) >= 100_000:
            break
    cand = [i for i, d in enumerate(docs) if len(d.split()) >= 60]
    if len(cand) < npairs:
        raise SystemExit(f'{corpus}: {len(cand)} documents of 60 words or more; --pairs {npairs} needs as many')
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
            f.write(json.dumps({'text': d}) + '\n')
    # the same documents as text, to show what reading JSONL costs
    assert not any(SEP in d for d in final)
    with open(out[:-len('.jsonl')] + '.txt', 'w', encoding='utf-8') as f:
        f.write(SEP.join(final))
    with open(labels, 'w') as f:
        for c, o in pairs:
            j = jaccard(shingles(final[where[o]]), shingles(final[c]))
            f.write(json.dumps({'copy': c, 'orig': where[o], 'jaccard': j}) + '\n')
    return corpora.stats(final)


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
    add_corpus_args(ap)
    ap.add_argument('--docs', type=int, default=100000, help='synthetic: documents of 12 lines')
    ap.add_argument('--pairs', type=int, default=3000, help='synthetic: planted near-copies')
    ap.add_argument('--real-docs', type=int, default=0, help='real: the first N files (0: all)')
    ap.add_argument('--real-pairs', type=int, default=500, help='real: planted near-copies')
    ap.add_argument('--threshold', type=float, default=0.8)
    ap.add_argument('--num-perm', type=int, default=128)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--keep', action='store_true', help='keep the temporary directory')
    ap.add_argument('--json')
    ap.add_argument('--build-only', nargs=2, metavar=('OUT', 'LABELS'),
                    help='only write the corpus (--corpus synthetic or real) and its planted pairs; '
                         'print its statistics')
    a = ap.parse_args()
    if a.build_only:
        if a.corpus == 'both':
            ap.error('--build-only takes --corpus synthetic or real')
        st = build(a.corpus, corpus_file(a.corpus, a), a.build_only[0], a.build_only[1],
                   a.docs if a.corpus == 'synthetic' else a.real_docs,
                   a.pairs if a.corpus == 'synthetic' else a.real_pairs, a.seed)
        print(json.dumps(st))
        return
    # the datasketch version from a child: importing it here (numpy, scipy) would
    # add 80 MB to every child's peak RSS
    _, _, dsv = run([sys.executable, '-c', 'import datasketch; print(datasketch.__version__)'],
                    stdout=subprocess.PIPE)
    print(f'# {machine()}')
    print(f'# num_perm {a.num_perm}, threshold {a.threshold}; datasketch {dsv.strip()}')
    results = []
    for kind in kinds(a):
        tmp = tempfile.mkdtemp(prefix='lmt-bench-dedup-')
        try:
            results.append(bench(a, kind, tmp))
        finally:
            if a.keep:
                print(f'# kept {tmp}')
            else:
                shutil.rmtree(tmp, ignore_errors=True)
    save(a.json, dict(machine=machine(), threshold=a.threshold, num_perm=a.num_perm, repeat=a.repeat,
                      corpora=results))


def bench(a, kind, tmp):
    data, labels = f'{tmp}/corpus.jsonl', f'{tmp}/labels.jsonl'
    path = corpus_file(kind, a)
    ndocs, npairs = (a.docs, a.pairs) if kind == 'synthetic' else (a.real_docs, a.real_pairs)
    # built in a child process: a child's peak RSS (wait4) starts from its parent's
    # size at fork, so this process stays small while the tools run
    _, _, out = run([sys.executable, os.path.abspath(__file__), '--corpus', kind, '--synthetic-file',
                     a.synthetic_file, '--real-file', a.real_file, '--docs', str(ndocs), '--real-docs', str(ndocs),
                     '--pairs', str(npairs), '--real-pairs', str(npairs), '--seed', str(a.seed),
                     '--build-only', data, labels], stdout=subprocess.PIPE)
    st = json.loads(out)
    n = st['docs']
    label_rows = [json.loads(l) for l in open(labels)]
    header(kind, path, st, f' with {npairs} planted near-copies, {os.path.getsize(data) / 1e6:.1f} MB JSONL')
    ncpu = os.cpu_count()
    lmt_runs = [('lmt -j1 (--normalize lower)', ['-j1', '--normalize', 'lower']),
                (f'lmt -j{ncpu} (--normalize lower)', [f'-j{ncpu}', '--normalize', 'lower']),
                (f'lmt -j{ncpu} (all normalisation)', [f'-j{ncpu}']),
                (f'lmt -j{ncpu} (--normalize lower), the same as text', [f'-j{ncpu}', '--normalize', 'lower',
                                                                      '--doc-sep', SEP])]
    times, rss = {}, {}
    found_lmt = found_ds = ds = None
    summaries = {}
    load = Load()
    for rep in range(a.repeat):
        for name, extra in lmt_runs:
            cmd = [f'{BIN}/dedup-minhash', '-q', '-t', str(a.threshold), '--num-perm', str(a.num_perm),
                   '--removed', f'{tmp}/removed.jsonl', '--summary', f'{tmp}/summary.json'] + extra + \
                  [data if '--doc-sep' not in extra else data[:-len('.jsonl')] + '.txt']
            w, r, _ = run(cmd, stdout=subprocess.DEVNULL)
            times.setdefault(name, []).append(w)
            rss[name] = max(rss.get(name, 0), r)
            summaries[name] = json.load(open(f'{tmp}/summary.json'))
            if found_lmt is None:
                ids = {f'{data}:{i}': i for i in range(n)}
                rep_of = lmt_clusters(f'{tmp}/removed.jsonl', ids)
                found_lmt = {p['copy']: rep_of.get(p['copy'], p['copy']) == rep_of.get(p['orig'], p['orig'])
                             for p in label_rows}
                lb, lr = summaries[name]['bands'], summaries[name]['rows']
                print('# lmt command: ' + ' '.join(cmd))
        w, r, out = run([sys.executable, '-c', DS_SCRIPT, data, str(a.num_perm), str(a.threshold), '5', labels],
                        stdout=subprocess.PIPE)
        times.setdefault('ds', []).append(w)
        rss['ds'] = max(rss.get('ds', 0), r)
        if ds is None:
            ds = json.loads(out)
            found_ds = {int(k): v for k, v in ds['found'].items()}
    load.stop()
    rows = []
    ds_t = best_median(times['ds'])
    for name, _ in lmt_runs:
        t = best_median(times[name])
        s = summaries[name]
        rows.append(dict(tool=name, seconds=bm(t), docs_per_s=bm(rate(n, t), 0), vs_datasketch=bm(ratio(ds_t, t), 1),
                         peak_rss_mb=round(rss[name] / 1e6),
                         removed=s['removed']['exact'] + s['removed']['near'], bands=s['bands'], rows=s['rows'],
                         bytes_per_doc=round(s['bytes_per_doc']), kernel=s.get('kernel', ''),
                         method=s.get('method', ''), seconds_all=[round(x, 3) for x in times[name]]))
    rows.append(dict(tool='datasketch MinHashLSH', seconds=bm(ds_t), docs_per_s=bm(rate(n, ds_t), 0),
                     vs_datasketch='1', peak_rss_mb=round(rss['ds'] / 1e6), removed=ds['removed'],
                     bands=ds['bands'], rows=ds['rows'], seconds_all=[round(x, 3) for x in times['ds']]))
    print(f'# seconds, docs_per_s, vs_datasketch (datasketch seconds / lmt seconds): best/median of {a.repeat}')
    table(rows, ['tool', 'seconds', 'docs_per_s', 'vs_datasketch', 'peak_rss_mb', 'bytes_per_doc', 'removed',
                 'bands', 'rows', 'method', 'kernel'])
    print(load.line())
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
    print()
    return dict(corpus=kind, file=path, stats=st, pairs=npairs, load=load.result, rows=rows, buckets=brows,
                recall=dict(lmt=rl, datasketch=rd), precision=dict(lmt=pl, datasketch=pd))


if __name__ == '__main__':
    main()
