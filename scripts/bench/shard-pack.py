#!/usr/bin/env python3
"""shard-pack and shard-pack --verify against cat and sha256sum on the same bytes.

    scripts/bench/run shard-pack [--corpus synthetic|real|both] [--seq-len 1024] [--repeat 3]

The input is a benchmark corpus (scripts/bench/corpus.py; synthetic: a document a
line, real: a document a file) encoded with OpenAI's cl100k_base ranks (32-bit
tokens, so the stream is about as large as the text). Every command reads files
that are already in the page cache (each is read once before timing), so the
figures compare the work done per byte, not the disk. Each figure is best/median
of --repeat runs, the commands taking turns.

  pack:    shard-pack -o DIR STREAM      vs  cat STREAM > /dev/null, sha256sum STREAM
           (and with --chunk-bytes 0: the cost of the chunk digests the manifest lists)
  verify:  shard-pack --verify DIR (-j1 and all cores)  vs  cat / sha256sum of the files it
           checks (the shards and the documents table),
           and all cores against one (vs_j1), beside the machine's own ceiling for
           all cores against one, before and after the runs (common.Ceiling)
"""
import argparse
import glob
import json
import os
import shutil
import tempfile

import corpus as corpora
from common import (BIN, SHARED, Ceiling, Load, add_corpus_args, bm, best_median, corpus_file, header, kinds,
                    machine, rate, ratio, run, save, table)


def bench(a, kind, tmp, tok):
    path = corpus_file(kind, a)
    if kind == 'synthetic':
        texts = [l for l in open(path, encoding='utf-8').read().split('\n') if l]
        opts = ['--txt-docs', 'line']
    else:
        texts = corpora.read_jsonl(path)
        opts = []
    st = corpora.stats(texts)
    del texts
    stream, out = f'{tmp}/s.lmtoks', f'{tmp}/d'
    run([f'{BIN}/tok-encode', '-q', '-t', tok] + opts + ['-o', stream, path])
    size = os.path.getsize(stream)
    header(kind, path, st, f', encoded with cl100k: a {size / 1e6:.1f} MB token stream')
    n = os.cpu_count()
    sh = ['sh', '-c']

    def pack(extra=(), where=out):
        shutil.rmtree(where, ignore_errors=True)
        return run([f'{BIN}/shard-pack', '-q', '-L', str(a.seq_len), *extra, '-o', where, stream])[0]
    run(sh + [f'cat {stream} > /dev/null'])
    pack()
    # what --verify reads: the shards and the documents table
    shards = sorted(glob.glob(f'{out}/*.lmshard')) + [f'{out}/documents.jsonl']
    dsize = sum(os.path.getsize(f) for f in shards)
    files = ' '.join(shards)
    cmds = {
        'cat stream': lambda: run(sh + [f'cat {stream} > /dev/null'])[0],
        'sha256sum stream': lambda: run(['sha256sum', stream])[0],
        'pack': pack,
        'pack0': lambda: pack(['--chunk-bytes', '0'], f'{tmp}/d0'),
        'cat shards': lambda: run(sh + [f'cat {files} > /dev/null'])[0],
        'sha256sum shards': lambda: run(['sha256sum'] + shards)[0],
        'verify1': lambda: run([f'{BIN}/shard-pack', '-q', '-j1', '--verify', out])[0],
        'verifyn': lambda: run([f'{BIN}/shard-pack', '-q', f'-j{n}', '--verify', out])[0],
    }
    ceil = Ceiling(n)
    load = Load()
    t = {k: [] for k in cmds}
    for _ in range(a.repeat):          # the contenders take turns
        for k, f in cmds.items():
            t[k].append(f())
    load.stop()
    ceil.stop()
    T = {k: best_median(v) for k, v in t.items()}
    mb = lambda b, k: bm(rate(b / 1e6, T[k]), 0)
    vs = lambda peer, k: bm(ratio(T[peer], T[k]))
    print(f'# dataset {dsize / 1e6:.1f} MB in {len(shards) - 1} shards and the documents table; '
          f'sequences of {a.seq_len + 1} tokens; '
          f'MB/s and vs_ (peer seconds / lmt seconds): best/median of {a.repeat}')
    rows = [
        dict(command='cat stream', mb_s=mb(size, 'cat stream')),
        dict(command='sha256sum stream', mb_s=mb(size, 'sha256sum stream')),
        dict(command='shard-pack (pack)', mb_s=mb(size, 'pack'), vs_cat=vs('cat stream', 'pack'),
             vs_sha256sum=vs('sha256sum stream', 'pack')),
        dict(command='shard-pack --chunk-bytes 0 (pack)', mb_s=mb(size, 'pack0'), vs_cat=vs('cat stream', 'pack0'),
             vs_sha256sum=vs('sha256sum stream', 'pack0')),
        dict(command='cat shards', mb_s=mb(dsize, 'cat shards')),
        dict(command='sha256sum shards', mb_s=mb(dsize, 'sha256sum shards')),
        dict(command='shard-pack --verify -j1', mb_s=mb(dsize, 'verify1'), vs_cat=vs('cat shards', 'verify1'),
             vs_sha256sum=vs('sha256sum shards', 'verify1')),
        dict(command=f'shard-pack --verify -j{n}', mb_s=mb(dsize, 'verifyn'), vs_cat=vs('cat shards', 'verifyn'),
             vs_sha256sum=vs('sha256sum shards', 'verifyn'), vs_j1=vs('verify1', 'verifyn')),
    ]
    table(rows, ['command', 'mb_s', 'vs_cat', 'vs_sha256sum', 'vs_j1'])
    print(load.line())
    print(ceil.line())
    print()
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(f'{tmp}/d0', ignore_errors=True)
    return dict(corpus=kind, file=path, stats=st, stream_mb=size / 1e6, dataset_mb=dsize / 1e6, load=load.result,
                ceiling=ceil.result, rows=rows, seconds_all={k: [round(x, 4) for x in v] for k, v in t.items()})


def main():
    ap = argparse.ArgumentParser()
    add_corpus_args(ap)
    ap.add_argument('--seq-len', type=int, default=1024)
    ap.add_argument('--json')
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix='lmt-bench-')
    try:
        tok = f'{tmp}/cl100k.lmtok'
        meta = json.load(open(f'{SHARED}/cl100k_base.json'))
        cmd = [f'{BIN}/tok-train', '-q', '--import', f'tiktoken:{SHARED}/cl100k_base.tiktoken', '--pattern',
               'cl100k', '-o', tok]
        for s, i in meta['special_tokens'].items():
            cmd += ['--special', f'{s}={i}']
        run(cmd)
        print(f'# {machine()}')
        results = [bench(a, k, tmp, tok) for k in kinds(a)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    save(a.json, dict(machine=machine(), repeat=a.repeat, corpora=results))


if __name__ == '__main__':
    main()
