"""Helpers shared by the benchmark scripts: run a command, measure it, print a table.

Every benchmark runs lmt and its peers in the same invocation, on the same input,
and reports ratios, because the machines these run on are shared and noisy. For the
same reason each figure is given as the best and the median of --repeat runs (the
contenders taking turns), and the load during the run is printed with it (Load).
Each runs on both corpora (--corpus synthetic|real|both; scripts/bench/corpus.py).

Only the standard library here: tests/cli/bench.sh imports this without the peers.
"""
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import corpus as corpora

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
BIN = os.environ.get('LMT_BIN', os.path.join(TOP, 'build', 'bin'))
SHARED = os.environ.get('LMT_SHARED', os.path.join(TOP, '..', 'shared', 'data', 'tokenizers'))
CORPUS_DIR = os.environ.get('LMT_BENCH_CORPUS', '/tmp/lmt-bench')
# scripts/bench/ceiling.c, which make builds beside the tools ($LMT_CEILING overrides)
CEILING = os.environ.get('LMT_CEILING', os.path.join(os.path.dirname(os.path.abspath(BIN)), 'bench', 'ceiling'))


def run(cmd, env=None, stdin=None, stdout=subprocess.DEVNULL):
    """Run cmd; return (wall seconds, peak RSS bytes of that process, stdout text)."""
    e = dict(os.environ)
    if env:
        e.update(env)
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=e, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE)
    out = b''
    if stdout == subprocess.PIPE:
        out = p.stdout.read()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.stderr.write(err.decode(errors='replace'))
        raise SystemExit(f'benchmark command failed ({p.returncode}): {" ".join(cmd)}')
    return wall, ru.ru_maxrss * 1024, out.decode(errors='replace')


def machine():
    model = '?'
    try:
        for line in open('/proc/cpuinfo'):
            if line.startswith('model name'):
                model = line.split(':', 1)[1].strip()
                break
    except OSError:
        pass
    return f'{model}, {os.cpu_count()} cores, {platform.platform()}'


def table(rows, cols):
    w = [max(len(str(c)), *(len(str(r.get(c, ''))) for r in rows)) for c in cols]
    print('  '.join(str(c).ljust(n) for c, n in zip(cols, w)))
    for r in rows:
        print('  '.join(str(r.get(c, '')).ljust(n) for c, n in zip(cols, w)))
    sys.stdout.flush()


def save(path, obj):
    if path:
        with open(path, 'w') as f:
            json.dump(obj, f, indent=1)


def add_corpus_args(ap, repeat=3):
    ap.add_argument('--corpus', choices=('synthetic', 'real', 'both'), default='both',
                    help='which corpus to run on (both: each, one after the other)')
    ap.add_argument('--synthetic-file', default=os.path.join(CORPUS_DIR, 'corpus.txt'),
                    help='make-corpus OUT.txt (built here when missing)')
    ap.add_argument('--real-file', default=os.path.join(CORPUS_DIR, 'real.jsonl'),
                    help='make-corpus --real OUT.jsonl (built here when missing)')
    ap.add_argument('--repeat', type=int, default=repeat, help='runs of each contender (best and median)')


def corpus_file(kind, a):
    """The file of corpus kind ('synthetic' or 'real'), built with make-corpus if missing."""
    path = a.synthetic_file if kind == 'synthetic' else a.real_file
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        mc = os.path.join(TOP, 'scripts/bench/make-corpus')
        run([mc, path, '64'] if kind == 'synthetic' else [mc, '--real', path, '64'])
    return path


def kinds(a):
    return ['synthetic', 'real'] if a.corpus == 'both' else [a.corpus]


def header(kind, path, st, what=''):
    """The line that states the corpus a benchmark ran on."""
    print(f'# corpus {kind} ({path}){what}: {corpora.describe(st)}')
    sys.stdout.flush()


def best_median(ts):
    return min(ts), statistics.median(ts)


def bm(pair, nd=2):
    """'best/median', the form every timed figure is printed in."""
    return f'{pair[0]:.{nd}f}/{pair[1]:.{nd}f}'


def ratio(a, b):
    """Element-wise ratio of two (best, median) pairs."""
    return (a[0] / b[0] if b[0] else float('inf'), a[1] / b[1] if b[1] else float('inf'))


def speedup_row(name, one, many, n, nd=3):
    """A row of the -j1 against -j<n> tables: the phase, seconds of each as best/median
    (nd decimals), the speedup (-j1 seconds / -j<n> seconds) and every time."""
    o, m = best_median(one), best_median(many)
    return {'phase': name, 'seconds_j1': bm(o, nd), f'seconds_j{n}': bm(m, nd), 'speedup': bm(ratio(o, m)),
            'all_j1': [round(x, 9) for x in one], f'all_j{n}': [round(x, 9) for x in many]}


def rate(amount, secs):
    """(best, median) seconds -> (best, median) amount per second."""
    return (amount / secs[0], amount / secs[1])


def _proc_stat():
    """CPU seconds all processes spent busy (user, nice, system, irq, softirq) and stolen."""
    with open('/proc/stat') as f:
        v = [int(x) for x in f.readline().split()[1:]]
    hz = os.sysconf('SC_CLK_TCK')
    busy = v[0] + v[1] + v[2] + v[5] + v[6]
    return busy / hz, (v[7] if len(v) > 7 else 0) / hz


class Load:
    """The machine's load over a stretch of benchmark: the 1-minute load average at its
    start and end, and the CPU that processes other than this one and its children
    used, in cores (/proc/stat's busy time less our own and our waited-for children's
    rusage, over the wall time), with the time the hypervisor stole beside it."""

    def __init__(self):
        self.la0 = os.getloadavg()[0]
        self.t0 = time.perf_counter()
        self.busy0, self.steal0 = _proc_stat()
        t = os.times()
        self.own0 = t.user + t.system + t.children_user + t.children_system

    def stop(self):
        wall = time.perf_counter() - self.t0
        busy, steal = _proc_stat()
        t = os.times()
        own = t.user + t.system + t.children_user + t.children_system - self.own0
        other = (busy - self.busy0 - own) / wall if wall > 0 else 0.0
        self.result = dict(load_start=round(self.la0, 2), load_end=round(os.getloadavg()[0], 2),
                           wall_s=round(wall, 1), own_cores=round(own / wall, 2) if wall > 0 else 0.0,
                           other_cores=round(max(0.0, other), 2),
                           steal_cores=round((steal - self.steal0) / wall, 2) if wall > 0 else 0.0)
        return self.result

    def line(self):
        r = self.result
        return (f'# load: 1-minute load average {r["load_start"]} at the start, {r["load_end"]} at the end; '
                f'over {r["wall_s"]} s this benchmark used {r["own_cores"]} cores, other processes '
                f'{r["other_cores"]} (of {os.cpu_count()}), stolen {r["steal_cores"]}')


class Ceiling:
    """What `threads` threads can gain on this machine, measured at the start and the end
    of a benchmark's timed runs (scripts/bench/ceiling.c): for a loop of arithmetic and
    a loop of memory reads, `threads` x one thread's time over the time of `threads`
    threads each running the loop, best/best and median/median of `rounds`. Work that
    shares nothing gains about that much from the threads; a -j speedup above it comes
    from the caches more cores bring, or from chance. On a shared VM it moves with what
    the host does with the cores. When the program is not built, nothing is measured
    and the line says so."""

    def __init__(self, threads, rounds=5):
        self.threads, self.rounds = threads, rounds
        self.before = self._measure()

    def _measure(self):
        if not os.path.exists(CEILING):
            return None
        _, _, out = run([CEILING, '-j', str(self.threads), '-r', str(self.rounds)], stdout=subprocess.PIPE)
        return {r['loop']: [r['speedup_best'], r['speedup_median']] for r in map(json.loads, out.splitlines())}

    def stop(self):
        self.after = self._measure()
        self.result = dict(threads=self.threads, rounds=self.rounds, before=self.before, after=self.after)
        return self.result

    def line(self):
        if self.before is None or self.after is None:
            return f'# ceiling: not measured ({CEILING} is missing; make builds it)'
        f = lambda loop: f'{self.before[loop][0]:.2f}x/{self.before[loop][1]:.2f}x and ' \
                         f'{self.after[loop][0]:.2f}x/{self.after[loop][1]:.2f}x'
        return (f'# ceiling: {self.threads} threads each running a loop against one running it, best/median '
                f'of {self.rounds}, at the start and at the end: arithmetic {f("alu")}, memory reads '
                f'{f("memory")} (scripts/bench/ceiling.c)')
