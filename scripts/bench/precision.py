#!/usr/bin/env python3
"""train in fp32, bf16 and fp16 on the built-in corpus: losses, speed, memory.

    scripts/bench/run precision [-o build/bench/precision] [--updates 400]
                                [--eval-every 50] [-j 2]

The mixed-precision experiment: the same model, data, seed and schedule trained
three times, once per --precision (master weights, gradients and AdamW moments stay
fp32 in all three; fp16 adds the dynamic loss scale). The data: gen-corpus ->
tok-train (-v 2048) -> tok-encode -> shard-pack -L 128; the model L4 H4 C128 at
T=128, B=8, one micro-batch per update. Each run is `train --no-save --jsonl`, its
update and eval records read from stdout.

Written to -o: table.md (final train loss: the mean of the last 10 updates; final
validation loss and its difference from fp32's; max_dloss, the largest difference
between a run's training loss and fp32's at the same update; median tokens/s and s/update over the updates after the first 5;
activation bytes and total bytes of lmt's memory record (its by_dtype sum); skipped
updates; overflows; the loss scale at the end; the 1-minute load average before and
after each run), loss.svg (training loss per update, a line per precision, and the
validation losses as dashed lines with markers) and results.json (every figure and
the curves). The table is printed too. The default run takes 2-3 minutes on 2 cores.
"""
import argparse
import json
import math
import os
import statistics
import subprocess

from common import BIN, machine, run, table

PRECISIONS = ('fp32', 'bf16', 'fp16')
COLORS = {'fp32': '#1f77b4', 'bf16': '#d62728', 'fp16': '#2ca02c'}


def build_data(work, a):
    """gen-corpus -> tok-train -> tok-encode -> shard-pack, in work (relative names,
    so the train/val split, which hashes the source name, is the same every run)."""
    bin_ = os.path.abspath(BIN)
    cwd = os.getcwd()
    os.chdir(work)
    try:
        if not os.path.exists('corpus.jsonl'):
            run([f'{bin_}/gen-corpus', '-q', '--docs', str(a.docs), '-o', 'corpus.jsonl'])
        run([f'{bin_}/tok-train', '-q', '-v', str(a.vocab), '-p', 'gpt2', '-o', 'tok.lmtok', 'corpus.jsonl'])
        run([f'{bin_}/tok-encode', '-q', '-t', 'tok.lmtok', '-o', 'corpus.lmtoks', 'corpus.jsonl'])
        run([f'{bin_}/shard-pack', '-q', '--force', '-L', str(a.seq_len), '-o', 'data', 'corpus.lmtoks'])
    finally:
        os.chdir(cwd)
    return os.path.join(work, 'data')


def train(data, prec, a):
    cmd = [f'{BIN}/train', '-q', '--no-save', '--jsonl', '--data', data, '--precision', prec,
           '--layers', str(a.layers), '--heads', str(a.heads), '--channels', str(a.channels),
           '--micro-batch', str(a.batch), '--updates', str(a.updates), '--eval-every', str(a.eval_every),
           '--eval-seqs', str(a.eval_seqs), '--on-nonfinite', 'skip', '-j', str(a.threads)]
    l0 = os.getloadavg()[0]
    wall, rss, out = run(cmd, stdout=subprocess.PIPE)
    l1 = os.getloadavg()[0]
    recs = [json.loads(l) for l in out.splitlines() if l.startswith('{')]
    par = [r for r in recs if r['event'] == 'parameters'][0]
    ups = [r for r in recs if r['event'] == 'update']
    evs = [r for r in recs if r['event'] == 'eval']
    timed = ups[5:] or ups
    step = statistics.median(r['time']['step'] for r in timed)
    mem = ups[-1]['memory']
    return dict(cmd=cmd, wall=wall, rss=rss, load_before=l0, load_after=l1, precision=par['precision'],
                gemm_kernel=par['gemm_kernel'], params=par['total'],
                train_loss=[r['loss'] for r in ups], val=[(r['update'], r['loss']) for r in evs],
                final_train=statistics.mean(r['loss'] for r in ups[-10:] if finite(r['loss'])),
                final_val=evs[-1]['loss'] if evs else None, s_per_update=step,
                tokens_per_s=statistics.median(r['tokens'] / r['time']['step'] for r in timed),
                activations=mem['activations'], total=sum(mem['by_dtype'].values()), memory=mem,
                skipped=sum(1 for r in ups if r['skipped']), overflows=sum(1 for r in ups if r['overflow']),
                loss_scale=ups[-1]['loss_scale'])


def finite(v):
    return isinstance(v, (int, float)) and math.isfinite(v)


def svg_plot(res, path, title):
    """Loss against update: a polyline per precision (training), dashed with markers
    (validation), axes with ticks, a legend. Plain SVG, no plotting library."""
    W, H, L, R, T, B = 720, 440, 64, 150, 36, 48
    pw, ph = W - L - R, H - T - B
    xs = [len(r['train_loss']) for r in res.values()]
    xmax = max(xs)
    ys = [v for r in res.values() for v in r['train_loss'] + [l for _, l in r['val']] if finite(v)]
    ylo, yhi = min(ys), max(ys)
    pad = (yhi - ylo) * 0.04 or 0.5
    ylo, yhi = ylo - pad, yhi + pad

    def px(u):
        return L + pw * (u - 1) / max(1, xmax - 1)

    def py(v):
        return T + ph * (yhi - v) / (yhi - ylo)
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
         f'font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{L + pw / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
         f'<rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>']
    for i in range(6):
        v = ylo + (yhi - ylo) * i / 5
        y = py(v)
        o.append(f'<line x1="{L - 4}" y1="{y:.1f}" x2="{L + pw}" y2="{y:.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{L - 8}" y="{y + 4:.1f}" text-anchor="end">{v:.2f}</text>')
    step = max(1, xmax // 5)
    for u in list(range(step, xmax + 1, step)) + [1]:
        x = px(u)
        o.append(f'<line x1="{x:.1f}" y1="{T + ph}" x2="{x:.1f}" y2="{T + ph + 4}" stroke="#444"/>')
        o.append(f'<text x="{x:.1f}" y="{T + ph + 18}" text-anchor="middle">{u}</text>')
    o.append(f'<text x="{L + pw / 2}" y="{H - 10}" text-anchor="middle">update</text>')
    o.append(f'<text x="16" y="{T + ph / 2}" text-anchor="middle" transform="rotate(-90 16 {T + ph / 2})">'
             f'loss (nats/token)</text>')
    for n, (prec, r) in enumerate(res.items()):
        c = COLORS.get(prec, '#000')
        pts = ' '.join(f'{px(i + 1):.1f},{py(v):.1f}' for i, v in enumerate(r['train_loss']) if finite(v))
        o.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.2" stroke-opacity="0.8" points="{pts}"/>')
        if r['val']:
            pts = ' '.join(f'{px(u):.1f},{py(v):.1f}' for u, v in r['val'])
            o.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" stroke-dasharray="6 4" points="{pts}"/>')
            o += [f'<circle cx="{px(u):.1f}" cy="{py(v):.1f}" r="3" fill="{c}"/>' for u, v in r['val']]
        y = T + 14 + 36 * n
        x = L + pw + 12
        o.append(f'<line x1="{x}" y1="{y}" x2="{x + 24}" y2="{y}" stroke="{c}" stroke-width="2"/>')
        o.append(f'<text x="{x + 30}" y="{y + 4}">{prec} train</text>')
        o.append(f'<line x1="{x}" y1="{y + 16}" x2="{x + 24}" y2="{y + 16}" stroke="{c}" stroke-width="2" '
                 f'stroke-dasharray="6 4"/>')
        o.append(f'<circle cx="{x + 12}" cy="{y + 16}" r="3" fill="{c}"/>')
        o.append(f'<text x="{x + 30}" y="{y + 20}">{prec} val</text>')
    o.append('</svg>')
    with open(path + '.tmp', 'w') as f:
        f.write('\n'.join(o) + '\n')
    os.replace(path + '.tmp', path)


def max_dloss(r, ref):
    """The largest |training loss - fp32's| over the updates both ran."""
    return max((abs(x - y) for x, y in zip(r['train_loss'], ref['train_loss']) if finite(x) and finite(y)),
               default=float('nan'))


def markdown(rows, cols):
    out = ['| ' + ' | '.join(cols) + ' |', '|' + '---|' * len(cols)]
    out += ['| ' + ' | '.join(str(r[c]) for c in cols) + ' |' for r in rows]
    return '\n'.join(out) + '\n'


def main():
    ap = argparse.ArgumentParser(description='fp32 vs bf16 vs fp16 training on the built-in corpus')
    ap.add_argument('-o', '--out', default='build/bench/precision', help='output directory (build/bench/precision)')
    ap.add_argument('--updates', type=int, default=400, help='updates per run (400)')
    ap.add_argument('--eval-every', type=int, default=50, help='validation every N updates (50)')
    ap.add_argument('--eval-seqs', type=int, default=64, help='validation sequences (64)')
    ap.add_argument('--layers', type=int, default=4)
    ap.add_argument('--heads', type=int, default=4)
    ap.add_argument('--channels', type=int, default=128)
    ap.add_argument('--seq-len', type=int, default=128)
    ap.add_argument('--batch', type=int, default=8, help='micro-batch (8)')
    ap.add_argument('--vocab', type=int, default=2048, help='vocabulary asked of tok-train (2048)')
    ap.add_argument('--docs', type=int, default=16000, help='gen-corpus documents (16000)')
    ap.add_argument('--precision', choices=PRECISIONS, action='append', help='only this precision (default all)')
    ap.add_argument('-j', '--threads', type=int, default=2)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    work = os.path.join(a.out, 'work')
    os.makedirs(work, exist_ok=True)
    print(f'# {machine()}')
    data = build_data(work, a)
    res = {}
    for prec in a.precision or PRECISIONS:
        res[prec] = train(data, prec, a)
        r = res[prec]
        print(f'# {prec}: {r["gemm_kernel"]}, {r["wall"]:.1f} s, load {r["load_before"]:.2f}->{r["load_after"]:.2f}',
              flush=True)
    rows = []
    ref = res.get('fp32')
    for prec, r in res.items():
        rows.append(dict(precision=prec, gemm_kernel=r['gemm_kernel'], train_loss=f'{r["final_train"]:.4f}',
                         val_loss=f'{r["final_val"]:.4f}' if r['final_val'] is not None else '',
                         val_vs_fp32=f'{r["final_val"] - ref["final_val"]:+.4f}' if ref and ref['final_val'] is not None
                         and r['final_val'] is not None else '',
                         max_dloss=f'{max_dloss(r, ref):.5f}' if ref else '',
                         tok_s=round(r['tokens_per_s']), s_update=f'{r["s_per_update"]:.4f}',
                         activation_bytes=r['activations'], total_bytes=r['total'], skipped=r['skipped'],
                         overflows=r['overflows'], loss_scale=r['loss_scale'],
                         load=f'{r["load_before"]:.2f}->{r["load_after"]:.2f}'))
    cols = ['precision', 'gemm_kernel', 'train_loss', 'val_loss', 'val_vs_fp32', 'max_dloss', 'tok_s', 's_update',
            'activation_bytes', 'total_bytes', 'skipped', 'overflows', 'loss_scale', 'load']
    print()
    table(rows, cols)
    shape = (f'L{a.layers} H{a.heads} C{a.channels} T{a.seq_len} B{a.batch}, {a.updates} updates, '
             f'{res[next(iter(res))]["params"]:,} parameters')
    with open(os.path.join(a.out, 'table.md'), 'w') as f:
        f.write(f'{machine()}; {shape}; {a.threads} threads\n\n' + markdown(rows, cols))
    svg_plot(res, os.path.join(a.out, 'loss.svg'), f'gen-corpus, {shape}')
    with open(os.path.join(a.out, 'results.json'), 'w') as f:
        json.dump(dict(machine=machine(), args=vars(a), rows=rows, runs=res), f, indent=1)
    print(f'# wrote {a.out}/table.md, loss.svg, results.json')


if __name__ == '__main__':
    main()
