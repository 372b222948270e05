#!/usr/bin/env python3
"""train's checkpoints of a GPT-2 124M run against the disk and against torch.save.

    scripts/bench/run ckpt [--repeat 2] [--dir /tmp] [--json FILE]

The state of GPT-2 124M (L=12, NH=12, C=768, V=50257 padded to 50304, context
1024) under AdamW is its parameters and two moments in fp32: 3 x 124.5M x 4 bytes,
about 1.49 GB. Figures, all in the same directory (--dir, one file system):

  dd          dd if=/dev/zero bs=16M conv=fsync of the state's size: the raw
              sequential write bandwidth, the peer the issue names (target: a
              synchronous save at 70% of it or more).
  sync save   train --ckpt-sync, the checkpoint record's write_s: data files
              written with their SHA-256 and CRC-32Cs, fsynced, manifest, rename,
              fsync of the parent.
  async save  train's default: the record's pause_s (the snapshot to host memory,
              during which training stands still) against the synchronous save's
              write_s (target: under 10%), and its write_s in the background, where
              it shares the cores with training.
  torch.save  Debian's PyTorch saving the same tensors (a state_dict of the
              parameters and an AdamW state of exp_avg, exp_avg_sq) to one file,
              then fsync: what a PyTorch loop pays for a checkpoint.
  resume      train --resume: from process start to the first update record, and
              the same for a fresh start (initialisation instead of loading).

Each figure is taken --repeat times, alternating with the others, and the best
(shortest) is reported, since the disk is shared. The page cache is not dropped
(that needs root and affects the host): fsync makes every save reach the disk.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from common import BIN, TOP, machine, save, table
import train as trainbench

MODEL = ['--layers', '12', '--heads', '12', '--channels', '768', '--context', '1024']


def records(out):
    return [json.loads(l) for l in out.splitlines() if l.startswith('{')]


def train(data, run, extra, env=None):
    cmd = [f'{BIN}/train', '-q', '--data', data, *MODEL, '--micro-batch', '1', '--eval-every', '0',
           '--shuffle-window', '1', '-o', run, *extra]
    e = dict(os.environ)
    e.update(env or {})
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e, text=True)
    first_update = None
    lines = []
    for line in p.stdout:
        lines.append(line)
        if first_update is None and line.startswith('{"event":"update"'):
            first_update = time.perf_counter() - t0
    err = p.stderr.read()
    if p.wait() != 0:
        sys.stderr.write(err)
        raise SystemExit(f'ckpt.py: failed: {" ".join(cmd)}')
    return records(''.join(lines)), first_update


def dd(path, nbytes):
    count = (nbytes + (16 << 20) - 1) >> 24
    t0 = time.perf_counter()
    subprocess.run(['dd', 'if=/dev/zero', f'of={path}', 'bs=16M', f'count={count}', 'conv=fsync'], check=True,
                   stderr=subprocess.DEVNULL)
    dt = time.perf_counter() - t0
    os.unlink(path)
    return count << 24, dt


TORCH_SAVE = r'''
import os, sys, time, torch
shapes = [tuple(s) for s in eval(sys.argv[2])]
params = {f"p{i}": torch.randn(*s) for i, s in enumerate(shapes)}
state = {"model": params,
         "optimizer": {"state": {i: {"step": torch.tensor(10.), "exp_avg": torch.randn(*s),
                                     "exp_avg_sq": torch.rand(*s)} for i, s in enumerate(shapes)},
                       "param_groups": [{"lr": 6e-4, "params": list(range(len(shapes)))}]}}
t0 = time.perf_counter()
with open(sys.argv[1], "wb") as f:
    torch.save(state, f)
    f.flush()
    os.fsync(f.fileno())
dt = time.perf_counter() - t0
print(os.path.getsize(sys.argv[1]), dt)
os.unlink(sys.argv[1])
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--repeat', type=int, default=2, help='times each figure is taken; the best counts (2)')
    ap.add_argument('--dir', default=tempfile.gettempdir(), help='where runs and dd write (one file system)')
    ap.add_argument('--docs', type=int, default=4000, help='gen-corpus documents for the dataset (4000)')
    ap.add_argument('--torch-python', default='/usr/bin/python3', help="a Python with Debian's python3-torch")
    ap.add_argument('--keep', action='store_true', help='keep the work directory')
    ap.add_argument('--json')
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix='lmt-bench-ckpt-', dir=a.dir)
    print(f'# {machine()}')
    print(f'# work directory {tmp}; each figure best of {a.repeat}')
    a.small_vocab, a.corpus = 8192, os.path.join(tmp, 'corpus.txt')
    data, desc = trainbench.build_data(tmp, '124m', a)
    man = json.load(open(f'{data}/manifest.json'))
    if man['vocab_size'] != 50257:
        raise SystemExit(f'ckpt.py: GPT-2 124M needs a vocabulary of 50257; the tokenizer ({desc}) has '
                         f'{man["vocab_size"]}')
    best, spread = {}, {}

    def keep_best(k, v, key):
        spread.setdefault(k, []).append(round(key(v), 3))
        if k not in best or key(v) < key(best[k]):
            best[k] = v

    shapes = None
    # the first writes of a fresh virtual machine's memory and disk cost several
    # times the later ones (first-touch faults in the host): warm both up, untimed
    dd(os.path.join(tmp, 'dd.bin'), 2 * 3 * 124475904 * 4)
    for i in range(a.repeat):
        run = os.path.join(tmp, f'sync{i}')
        recs, _ = train(data, run, ['--updates', '1', '--ckpt-sync'])
        ck = [r for r in recs if r['event'] == 'checkpoint'][-1]
        par = [r for r in recs if r['event'] == 'parameters'][0]
        shapes = list(par['tensors'].values())
        state_bytes = ck['bytes']
        keep_best('sync', ck, lambda r: r['write_s'])

        nb, t = dd(os.path.join(tmp, 'dd.bin'), state_bytes)
        keep_best('dd', (nb, t), lambda r: r[1])

        # resume from the synchronous checkpoint: process start to the first update
        recs, first = train(data, run, ['--updates', '2', '--resume', run])
        keep_best('resume', first, lambda r: r)
        res = [r for r in recs if r['event'] == 'update'][0]
        keep_best('resume_step', res['time']['step'], lambda r: r)
        shutil.rmtree(run)

        # asynchronous saves after updates 3 and 6, spaced so that the first is
        # written before the second is due (the final one, at 7, is synchronous)
        run = os.path.join(tmp, f'async{i}')
        recs, first = train(data, run, ['--updates', '7', '--ckpt-every', '3'])
        keep_best('fresh', first, lambda r: r)
        fresh_step = [r for r in recs if r['event'] == 'update'][0]['time']['step']
        keep_best('fresh_step', fresh_step, lambda r: r)
        for ck in (r for r in recs if r['event'] == 'checkpoint' and r['async']):
            keep_best('async', ck, lambda r: r['pause_s'])
            spread.setdefault('async_write', []).append(round(ck['write_s'], 3))
        shutil.rmtree(run)

        if shutil.which(a.torch_python) or os.path.exists(a.torch_python):
            p = subprocess.run([a.torch_python, '-c', TORCH_SAVE, os.path.join(tmp, 'torch.pt'), repr(shapes)],
                               capture_output=True, text=True)
            if p.returncode == 0:
                nbytes, t = p.stdout.split()
                keep_best('torch', (int(nbytes), float(t)), lambda r: r[1])
            else:
                print(f'# torch.save skipped: {p.stderr.strip().splitlines()[-1:]}')

    dd_bytes, dd_s = best['dd']
    dd_bw = dd_bytes / dd_s / 1e6
    s, asy = best['sync'], best['async']
    rows = [
        dict(what='dd conv=fsync', bytes=dd_bytes, seconds=f'{dd_s:.2f}', MB_s=f'{dd_bw:.0f}', vs_dd='1.00'),
        dict(what='train sync save', bytes=s['bytes'], seconds=f'{s["write_s"]:.2f}',
             MB_s=f'{s["bytes"] / s["write_s"] / 1e6:.0f}', vs_dd=f'{s["bytes"] / s["write_s"] / 1e6 / dd_bw:.2f}'),
        dict(what='train async save (background)', bytes=asy['bytes'], seconds=f'{asy["write_s"]:.2f}',
             MB_s=f'{asy["bytes"] / asy["write_s"] / 1e6:.0f}',
             vs_dd=f'{asy["bytes"] / asy["write_s"] / 1e6 / dd_bw:.2f}'),
    ]
    if 'torch' in best:
        tb, ts = best['torch']
        rows.append(dict(what='torch.save + fsync', bytes=tb, seconds=f'{ts:.2f}', MB_s=f'{tb / ts / 1e6:.0f}',
                         vs_dd=f'{tb / ts / 1e6 / dd_bw:.2f}'))
    for r, k in zip(rows, ['dd', 'sync', 'async_write', 'torch']):
        r['all_runs_s'] = ' '.join(str(x) for x in spread.get(k, []))
    table(rows, ['what', 'bytes', 'seconds', 'MB_s', 'vs_dd', 'all_runs_s'])
    print()
    pause_frac = asy['pause_s'] / s['write_s']
    table([dict(what='async pause (snapshot)', seconds=f'{asy["pause_s"]:.3f}',
                of_sync_save=f'{100 * pause_frac:.1f}%', all_runs_s=' '.join(map(str, spread['async'])))],
          ['what', 'seconds', 'of_sync_save', 'all_runs_s'])
    print()
    table([dict(start='resume (load + verify)', to_first_update_s=f'{best["resume"]:.2f}',
                first_update_step_s=f'{best["resume_step"]:.2f}'),
           dict(start='fresh (initialise)', to_first_update_s=f'{best["fresh"]:.2f}',
                first_update_step_s=f'{best["fresh_step"]:.2f}')],
          ['start', 'to_first_update_s', 'first_update_step_s'])
    save(a.json, dict(machine=machine(), best=best, runs=spread, dd_mb_s=dd_bw, pause_fraction=pause_frac))
    if not a.keep:
        shutil.rmtree(tmp)


if __name__ == '__main__':
    main()
