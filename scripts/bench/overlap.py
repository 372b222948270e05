"""How much of DDP's all-reduce the gradient buckets hide behind backward, 2 CPU ranks.

    scripts/bench/run overlap [--layers 12 --channels 768 --heads 12 --updates 8]

One dataset, one model, 2 ranks of one thread under mpirun, micro-batch 4, fp32. The
peer in the same run is the same job with one bucket holding every gradient
(--bucket-mb 1000000): it starts only after backward, so all of its reduction is
exposed. Against it: the default 25 MiB buckets and a bucket per layer (--bucket-mb 0),
each started in backward as its layers finish. The runs are interleaved --rounds times
(2) against drift in the machine's load. For each: the median over rounds of the median
over the updates after the first of the step time and of the exposed communication (time.comm: the
wait for the reductions after backward), and the share of the peer's exposed time
the buckets hide: 1 - exposed / exposed of the one bucket.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile

import sys
sys.path.insert(0, os.path.dirname(__file__))
from common import BIN, machine, run, table  # noqa: E402


def mpirun():
    m = ['mpirun', '--oversubscribe', '--bind-to', 'none']
    if os.geteuid() == 0:
        m.append('--allow-run-as-root')
    return m


def train(cmd):
    _, _, out = run(cmd, stdout=subprocess.PIPE)
    ups = [r for r in (json.loads(l) for l in out.splitlines() if l.startswith('{')) if r.get('event') == 'update']
    ups = ups[1:]
    return (statistics.median(r['time']['step'] for r in ups),
            statistics.median(r['time'].get('comm', 0) for r in ups))


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--layers', type=int, default=12)
    p.add_argument('--channels', type=int, default=768)
    p.add_argument('--heads', type=int, default=12)
    p.add_argument('--updates', type=int, default=8)
    p.add_argument('--rounds', type=int, default=2, help='each run this many times, interleaved')
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix='lmt-overlap-')
    try:
        cwd = os.getcwd()
        os.chdir(tmp)
        run([f'{BIN}/gen-corpus', '-q', '--docs', '3000', '-o', 'c.jsonl'])
        run([f'{BIN}/tok-train', '-q', '-v', '4096', '-o', 't.lmtok', 'c.jsonl'])
        run([f'{BIN}/tok-encode', '-q', '-t', 't.lmtok', '--eos', '-o', 's.lmtoks', 'c.jsonl'])
        run([f'{BIN}/shard-pack', '-q', '-L', '64', '-o', 'd', 's.lmtoks'])
        os.chdir(cwd)
        base = mpirun() + ['-n', '2', f'{BIN}/train', '-q', '--no-save', '--jsonl', '--data', f'{tmp}/d',
                           '--layers', str(a.layers), '--channels', str(a.channels), '--heads', str(a.heads),
                           '--updates', str(a.updates), '--eval-every', '0', '--precision', 'fp32',
                           '--micro-batch', '4', '--threads', '1']
        print(f'# {machine()}; load average {os.getloadavg()[0]:.2f} at the start')
        runs = (('one bucket after backward (the peer)', '1000000'), ('25 MiB buckets (default)', '25'),
                ('a bucket per layer', '0'))
        got = {mb: ([], []) for _, mb in runs}
        for _ in range(a.rounds):
            for _, mb in runs:
                step, comm = train(base + ['--bucket-mb', mb])
                got[mb][0].append(step)
                got[mb][1].append(comm)
        rows, peer = [], None
        for name, mb in runs:
            step, comm = (statistics.median(v) for v in got[mb])
            if peer is None:
                peer = comm
            rows.append({'run': name, '--bucket-mb': mb, 's/update': f'{step:.3f}', 'exposed comm s': f'{comm:.3f}',
                         'hidden': f'{100 * (1 - comm / peer):.0f}%' if peer > 0 else ''})
        print(f'# load average {os.getloadavg()[0]:.2f} at the end')
        table(rows, ['run', '--bucket-mb', 's/update', 'exposed comm s', 'hidden'])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    main()
