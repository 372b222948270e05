"""ZeRO stages on CPU ranks: memory per rank and time per update, 2 ranks under mpirun.

    scripts/bench/run zero [--layers 12 --channels 768 --heads 12 --updates 4]

One dataset (gen-corpus; tok-train asked for 4096 tokens stops where no pair repeats,
about 1.6k; T=64), one model,
the same global batch: one rank with micro-batch 8 and two threads (the peer in the
same run), then two ranks of one thread with micro-batch 4 each under --zero 0, 1, 2,
3 and 3 with --prefetch. For each: seconds per update and exposed communication (the
median over the updates after the first), this rank's bytes of each state from the
update record (rank 0's), and rank 0's peak RSS. When memledger is built, its
prediction of the state bytes is printed beside them.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from common import BIN, machine, run, table  # noqa: E402


def mpirun():
    m = ['mpirun', '--oversubscribe', '--bind-to', 'none']
    if os.geteuid() == 0:
        m.append('--allow-run-as-root')
    return m


def train(cmd):
    _, _, out = run(cmd, stdout=subprocess.PIPE)
    recs = [json.loads(l) for l in out.splitlines() if l.startswith('{')]
    ups = [r for r in recs if r.get('event') == 'update'][1:]
    return dict(step=statistics.median(r['time']['step'] for r in ups),
                comm=statistics.median(r['time'].get('comm', 0) for r in ups), memory=ups[-1]['memory'])


def predicted(a, z, vocab):
    ml = os.path.join(BIN, 'memledger')
    if not os.path.exists(ml):
        return None
    try:
        _, _, out = run([ml, '--layers', str(a.layers), '--channels', str(a.channels), '--heads', str(a.heads),
                         '--vocab', str(vocab), '--context', '64', '-B', '4', '-T', '64', '--precision', 'fp32',
                         '--world', '2', '--zero', str(z)], stdout=subprocess.PIPE)
    except SystemExit:
        return None
    recs = [json.loads(l) for l in out.splitlines() if l.startswith('{')]
    return {r['name']: r['bytes'] for r in recs if r.get('event') == 'term'}


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--layers', type=int, default=12)
    p.add_argument('--channels', type=int, default=768)
    p.add_argument('--heads', type=int, default=12)
    p.add_argument('--updates', type=int, default=4)
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix='lmt-zero-')
    try:
        cwd = os.getcwd()
        os.chdir(tmp)
        run([f'{BIN}/gen-corpus', '-q', '--docs', '3000', '-o', 'c.jsonl'])
        run([f'{BIN}/tok-train', '-q', '-v', '4096', '-o', 't.lmtok', 'c.jsonl'])
        run([f'{BIN}/tok-encode', '-q', '-t', 't.lmtok', '--eos', '-o', 's.lmtoks', 'c.jsonl'])
        run([f'{BIN}/shard-pack', '-q', '-L', '64', '-o', 'd', 's.lmtoks'])
        with open('d/manifest.json') as f:
            vocab = json.load(f)['vocab_size']
        os.chdir(cwd)
        base = [f'{BIN}/train', '-q', '--no-save', '--jsonl', '--data', f'{tmp}/d', '--layers', str(a.layers),
                '--channels', str(a.channels), '--heads', str(a.heads), '--updates', str(a.updates),
                '--eval-every', '0', '--precision', 'fp32']
        print(f'# vocabulary {vocab}; {machine()}; load average {os.getloadavg()[0]:.2f} at the start')
        rows = []
        r = train(base + ['--micro-batch', '8', '-j', '2'])
        rows.append(dict(run='1 rank, micro-batch 8, 2 threads', zero='', **fmt(r, None)))
        ref = r['step']
        for z, extra in ((0, []), (1, []), (2, []), (3, []), (3, ['--prefetch'])):
            r = train(mpirun() + ['-n', '2'] + base + ['--micro-batch', '4', '--threads', '1', '--zero', str(z)]
                      + extra)
            row = dict(run='2 ranks, micro-batch 4, 1 thread' + (' --prefetch' if extra else ''), zero=z,
                       **fmt(r, predicted(a, z, vocab)))
            row['vs 1 rank'] = f'{ref / r["step"]:.2f}x'
            rows.append(row)
        print(f'# load average {os.getloadavg()[0]:.2f} at the end')
        table(rows, ['run', 'zero', 's/update', 'exposed comm s', 'vs 1 rank', 'params MB', 'grads MB',
                     'optimizer MB', 'staging MB', 'state MB', 'ledger MB', 'peak RSS MB'])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fmt(r, pred):
    m = r['memory']
    state = m['params'] + m.get('weights_working', 0) + m['grads'] + m['optimizer'] + m.get('staging', 0)
    led = ''
    if pred:
        led = f'{sum(pred.get(k, 0) for k in ("params", "weights_working", "grads", "optimizer", "staging")) / 1e6:.1f}'
    return {'s/update': f'{r["step"]:.3f}', 'exposed comm s': f'{r["comm"]:.3f}',
            'params MB': f'{m["params"] / 1e6:.1f}', 'grads MB': f'{m["grads"] / 1e6:.1f}',
            'optimizer MB': f'{m["optimizer"] / 1e6:.1f}', 'staging MB': f'{m.get("staging", 0) / 1e6:.1f}',
            'state MB': f'{state / 1e6:.1f}', 'ledger MB': led,
            'peak RSS MB': f'{m.get("peak_rss", 0) / 1e6:.0f}'}


if __name__ == '__main__':
    main()
