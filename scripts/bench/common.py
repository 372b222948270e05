"""Helpers shared by the benchmark scripts: run a command, measure it, print a table.

Every benchmark runs lmt and its peers in the same invocation, on the same input,
and reports ratios, because the machines these run on are shared and noisy.
"""
import json
import os
import platform
import subprocess
import sys
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
BIN = os.environ.get('LMT_BIN', os.path.join(TOP, 'build', 'bin'))
SHARED = os.environ.get('LMT_SHARED', os.path.join(TOP, '..', 'shared', 'data', 'tokenizers'))


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
