#!/usr/bin/env python3
"""shard-pack and shard-pack --verify against cat and sha256sum on the same bytes.

    scripts/bench/run shard-pack [--corpus FILE] [--seq-len 1024]

The input is the benchmark corpus (scripts/bench/make-corpus) encoded with OpenAI's
cl100k_base ranks (32-bit tokens, so the stream is about as large as the text).
Every command reads files that are already in the page cache (each is read once
before timing), so the figures compare the work done per byte, not the disk. Each
figure is the best of --repeat runs.

  pack:    shard-pack -o DIR STREAM      vs  cat STREAM > /dev/null, sha256sum STREAM
  verify:  shard-pack --verify DIR (-j1 and all cores)  vs  cat / sha256sum of the shards
"""
import argparse
import glob
import os
import shutil
import tempfile

from common import BIN, SHARED, TOP, machine, run, table, save


def best(cmd, repeat, **kw):
    return min(run(cmd, **kw)[0] for _ in range(repeat))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--corpus', default='/tmp/lmt-bench/corpus.txt')
    ap.add_argument('--seq-len', type=int, default=1024)
    ap.add_argument('--repeat', type=int, default=3)
    ap.add_argument('--json')
    a = ap.parse_args()
    if not os.path.exists(a.corpus):
        os.makedirs(os.path.dirname(a.corpus), exist_ok=True)
        run([os.path.join(TOP, 'scripts/bench/make-corpus'), a.corpus, '64'])
    tmp = tempfile.mkdtemp(prefix='lmt-bench-')
    tok, stream, out = f'{tmp}/cl100k.lmtok', f'{tmp}/s.lmtoks', f'{tmp}/d'
    import json
    meta = json.load(open(f'{SHARED}/cl100k_base.json'))
    cmd = [f'{BIN}/tok-train', '-q', '--import', f'tiktoken:{SHARED}/cl100k_base.tiktoken', '--pattern', 'cl100k',
           '-o', tok]
    for s, i in meta['special_tokens'].items():
        cmd += ['--special', f'{s}={i}']
    run(cmd)
    run([f'{BIN}/tok-encode', '-q', '-t', tok, '--txt-docs', 'line', '-o', stream, a.corpus])
    size = os.path.getsize(stream)
    n = os.cpu_count()
    R = a.repeat
    sh = ['sh', '-c']
    run(sh + [f'cat {stream} > /dev/null'])
    t_cat = best(sh + [f'cat {stream} > /dev/null'], R)
    t_sha = best(['sha256sum', stream], R)

    def pack():
        shutil.rmtree(out, ignore_errors=True)
        return run([f'{BIN}/shard-pack', '-q', '-L', str(a.seq_len), '-o', out, stream])[0]
    t_pack = min(pack() for _ in range(R))
    shards = sorted(glob.glob(f'{out}/*.lmshard'))
    dsize = sum(os.path.getsize(f) for f in shards)
    files = ' '.join(shards)
    t_dcat = best(sh + [f'cat {files} > /dev/null'], R)
    t_dsha = best(['sha256sum'] + shards, R)
    t_v1 = best([f'{BIN}/shard-pack', '-q', '-j1', '--verify', out], R)
    t_vn = best([f'{BIN}/shard-pack', '-q', f'-j{n}', '--verify', out], R)
    mb = lambda b, t: round(b / t / 1e6)
    print(f'# {machine()}')
    print(f'# stream {size / 1e6:.1f} MB ({stream}); dataset {dsize / 1e6:.1f} MB in {len(shards)} shards; '
          f'sequences of {a.seq_len + 1} tokens; best of {R}')
    rows = [
        dict(command='cat stream', mb_s=mb(size, t_cat)),
        dict(command='sha256sum stream', mb_s=mb(size, t_sha)),
        dict(command='shard-pack (pack)', mb_s=mb(size, t_pack), vs_cat=round(t_cat / t_pack, 2),
             vs_sha256sum=round(t_sha / t_pack, 2)),
        dict(command='cat shards', mb_s=mb(dsize, t_dcat)),
        dict(command='sha256sum shards', mb_s=mb(dsize, t_dsha)),
        dict(command='shard-pack --verify -j1', mb_s=mb(dsize, t_v1), vs_cat=round(t_dcat / t_v1, 2),
             vs_sha256sum=round(t_dsha / t_v1, 2)),
        dict(command=f'shard-pack --verify -j{n}', mb_s=mb(dsize, t_vn), vs_cat=round(t_dcat / t_vn, 2),
             vs_sha256sum=round(t_dsha / t_vn, 2)),
    ]
    table(rows, ['command', 'mb_s', 'vs_cat', 'vs_sha256sum'])
    save(a.json, dict(machine=machine(), stream_mb=size / 1e6, dataset_mb=dsize / 1e6, rows=rows))
    shutil.rmtree(tmp)


if __name__ == '__main__':
    main()
