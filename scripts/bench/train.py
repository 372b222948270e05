#!/usr/bin/env python3
"""train against the same GPT-2 training step in PyTorch (scripts/bench/train_torch.py),
in fp32 and in bf16.

    scripts/bench/run train [--updates 6] [--warmup 2] [--only small|124m-t64|124m-t1024]
                            [-j 2] [--json FILE]

Three configurations, each with lmt's train and PyTorch on the same dataset, the same
model, the same batch and the same threads (-j, 2 by default):

  small       L=6, NH=6, C=384, T=256, B=8, with the vocabulary of a tokenizer trained
              on gen-corpus output. gen-corpus's toy English has about 1,600 distinct
              words, so asking tok-train for 8192 tokens stops at about 2,240; with
              V=2240 (Vp=2304) the model has 11.6M parameters. --small-vocab sets what
              is asked.
  124m-t64    GPT-2 124M: L=12, NH=12, C=768, V=50257 (Vp=50304), T=64, B=4, tokens
              from OpenAI's GPT-2 ranks imported from $LMT_SHARED (default
              ../shared/data/tokenizers). Without them a tokenizer is trained to 50257
              tokens on make-corpus's text, since the figure needs V=50257.
  124m-t1024  the same model at GPT-2's context, T=1024, B=1.

Each configuration runs four trainings back to back, interleaved by precision: lmt
--precision fp32, PyTorch fp32, lmt --precision bf16, PyTorch with --autocast bf16
(forward and loss under torch.autocast("cpu", dtype=torch.bfloat16), backward and
AdamW outside it, fp32 master parameters). lmt's figures come from its per-update
JSONL records (time.step, time.ops, tokens, memory); PyTorch's from its one JSON line.
Seconds per update are the median of the timed updates (the first --warmup are not
timed); tokens/s is tokens per update over that median.

MFU: FLOPs per token are lmt's (its "parameters" record: 6N + 12LCT, the same model
for both); the peak is the GEMM peak lmt measured in that run for that precision
(oneDNN, 1024^3, all threads), and PyTorch's figure in the same precision uses the
same peak. lmt measures it afresh in each run (a cache of this run's own) unless
--cached-peak. The kernels: lmt's "gemm_kernel" (oneDNN's implementation string);
PyTorch's from one more step under oneDNN's verbose mode (train_torch.py --kernels):
the oneDNN implementations it called, and for GEMMs oneDNN did not see, the BLAS it
mapped and the OpenBLAS kernel core. Debian's OpenBLAS picks its core from the CPU;
OPENBLAS_CORETYPE forces one. This script unsets it for PyTorch (the peer gets the
kernels OpenBLAS itself picks) unless --openblas-coretype names one.

The machine's cores are shared: each run records the 1-minute load average before
and after it, and the load other processes put on the cores meanwhile (other_load:
busy CPU time of the machine less this child's, over the wall time).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile

from common import BIN, SHARED, TOP, machine, run, table, save

CONFIGS = {
    'small': dict(layers=6, heads=6, channels=384, seq_len=256, batch=8, tok='small'),
    '124m-t64': dict(layers=12, heads=12, channels=768, seq_len=64, batch=4, tok='gpt2'),
    '124m-t1024': dict(layers=12, heads=12, channels=768, seq_len=1024, batch=1, tok='gpt2'),
}
OPS = ('gemm', 'attention', 'norm', 'optimizer', 'other')


def busy_jiffies():
    with open('/proc/stat') as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]  # all but idle and iowait


def measured(cmd, **kw):
    """common.run, plus the load: the 1-minute load average before and after, and the
    cores other processes kept busy meanwhile (average)."""
    hz = os.sysconf('SC_CLK_TCK')
    l0 = os.getloadavg()[0]
    j0, c0 = busy_jiffies(), os.times()
    wall, rss, out = run(cmd, **kw)
    j1, c1 = busy_jiffies(), os.times()
    l1 = os.getloadavg()[0]
    child = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
    return wall, rss, out, dict(load_before=l0, load_after=l1, other=max(0.0, ((j1 - j0) / hz - child) / wall))


def records(out):
    return [json.loads(l) for l in out.splitlines() if l.startswith('{')]


def build_data(tmp, which, a):
    """The dataset directory for a configuration; returns (dir, tokenizer description).

    tok-encode runs in tmp on the relative name corpus.jsonl: shard-pack's
    train/val split hashes each document's source name as tok-encode recorded it,
    so an absolute path under a fresh temporary directory would draw another split,
    and other training sequences, on every run."""
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        return build_data_here(tmp, which, a, 'corpus.jsonl')
    finally:
        os.chdir(cwd)


def tokenizer(tmp, kind, a, corpus):
    bin_ = os.path.abspath(BIN)
    tok = f'{tmp}/{kind}.lmtok'
    if kind == 'small':
        desc = f'trained on gen-corpus, {a.small_vocab} asked'
        if not os.path.exists(tok):
            run([f'{bin_}/tok-train', '-q', '-v', str(a.small_vocab), '-p', 'gpt2', '-o', tok, corpus])
    elif os.path.exists(f'{SHARED}/gpt2.tiktoken'):
        desc = 'GPT-2 ranks (tiktoken import)'
        if not os.path.exists(tok):
            run([f'{bin_}/tok-train', '-q', '--import', f'tiktoken:{SHARED}/gpt2.tiktoken', '--pattern', 'gpt2',
                 '--special', '<|endoftext|>=50256', '-o', tok])
    else:
        text = a.corpus
        desc = f'trained to 50257 on {text} ({SHARED} absent)'
        if not os.path.exists(text):
            os.makedirs(os.path.dirname(text), exist_ok=True)
            run([os.path.join(TOP, 'scripts/bench/make-corpus'), text, '64'])
        if not os.path.exists(tok):
            run([f'{bin_}/tok-train', '-q', '--txt-docs', 'line', '-p', 'gpt2', '-v', '50257', '-o', tok, text])
    return tok, desc


def build_data_here(tmp, which, a, corpus):
    bin_ = os.path.abspath(BIN)
    if not os.path.exists(corpus):
        run([f'{bin_}/gen-corpus', '-q', '--docs', str(a.docs), '-o', corpus])
    cfg = CONFIGS[which]
    tok, desc = tokenizer(tmp, cfg['tok'], a, corpus)
    stream, data = f'{tmp}/{cfg["tok"]}.lmtoks', f'{tmp}/{which}-data'
    if not os.path.exists(stream):
        run([f'{bin_}/tok-encode', '-q', '-t', tok, '-o', stream, corpus])
    run([f'{bin_}/shard-pack', '-q', '-L', str(cfg['seq_len']), '-o', data, stream])
    return data, desc


def lmt_train(data, cfg, prec, a, tmp):
    cmd = [f'{BIN}/train', '-q', '--no-save', '--jsonl', '--data', data, '--layers', str(cfg['layers']),
           '--heads', str(cfg['heads']), '--channels', str(cfg['channels']), '--micro-batch', str(cfg['batch']),
           '--updates', str(a.updates), '--eval-every', '0', '--shuffle-window', '1', '-j', str(a.threads),
           '--precision', prec]
    # lmt caches its GEMM peak under $XDG_CACHE_HOME/lmt and keeps the first figure:
    # one measured while the host was busy stays low for every later run. A cache of
    # this run's own makes lmt measure the peak afresh.
    env = None if a.cached_peak else dict(XDG_CACHE_HOME=os.path.join(tmp, 'cache-' + prec))
    wall, rss, out, load = measured(cmd, env=env, stdout=subprocess.PIPE)
    recs = records(out)
    par = [r for r in recs if r['event'] == 'parameters'][0]
    ups = [r for r in recs if r['event'] == 'update']
    timed = ups[a.warmup:]
    step = statistics.median(r['time']['step'] for r in timed)
    n = len(timed)
    ops = {k: sum(r['time']['ops'][k] for r in timed) / n for k in OPS}
    mean_step = sum(r['time']['step'] for r in timed) / n
    return dict(cmd=cmd, wall=wall, rss=rss, load=load, params=par['total'], peak=par['peak_flops'],
                peak_source=par['peak_source'], fpt=par['flops_per_token'], precision=par['precision'],
                kernel=par['gemm_kernel'], tokens=timed[-1]['tokens'], s_per_step=step,
                tokens_per_s=timed[-1]['tokens'] / step, mean_step=mean_step, ops=ops,
                not_gemm=1 - ops['gemm'] / mean_step, memory=timed[-1]['memory'],
                skipped=sum(1 for r in ups if r['skipped']),
                steps=[round(r['time']['step'], 3) for r in ups], losses=[round(r['loss'], 4) for r in ups])


def torch_train(data, cfg, vocab, prec, a):
    cmd = [a.torch_python, os.path.join(TOP, 'scripts/bench/train_torch.py'), '--data', data,
           '--layers', str(cfg['layers']), '--heads', str(cfg['heads']), '--channels', str(cfg['channels']),
           '--vocab', str(vocab), '--seq-len', str(cfg['seq_len']), '--micro-batch', str(cfg['batch']),
           '--steps', str(a.updates), '--warmup-steps', str(a.warmup), '--threads', str(a.threads),
           '--autocast', 'bf16' if prec == 'bf16' else 'none', '--kernels']
    # env(1) execs the trainer, so wait4's peak RSS is still PyTorch's
    cmd = ['env', '-u', 'OPENBLAS_CORETYPE'] + ([f'OPENBLAS_CORETYPE={a.openblas_coretype}']
                                                 if a.openblas_coretype else []) + cmd
    wall, rss, out, load = measured(cmd, stdout=subprocess.PIPE)
    r = records(out)[-1]
    timed = r['step_s'][a.warmup:]
    step = statistics.median(timed)
    tokens = cfg['batch'] * cfg['seq_len']
    r.update(cmd=cmd, wall=wall, rss=rss, load=load, s_per_step=step, tokens_per_s=tokens / step)
    gemms = r.get('onednn_gemms') or {}
    parts = [f'oneDNN {k} x{v}' for k, v in sorted(gemms.items())]
    if prec == 'fp32' or not gemms:
        parts.append(f'{os.path.basename(r["blas"] or "?")} core {r["openblas_core"]}'
                     if r['blas'] else 'no OpenBLAS mapped')
    r['kernel'] = '; '.join(parts)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--updates', type=int, default=6, help='updates per run, warm-up included (6)')
    ap.add_argument('--warmup', type=int, default=2, help='first updates not timed (2)')
    ap.add_argument('--only', choices=list(CONFIGS), action='append', help='run only this configuration')
    ap.add_argument('--precision', choices=['fp32', 'bf16'], action='append',
                    help='run only this precision (default both)')
    ap.add_argument('-j', '--threads', type=int, default=2, help='threads for each trainer (2)')
    ap.add_argument('--docs', type=int, default=32000, help='gen-corpus documents (32000, about 10 MB)')
    ap.add_argument('--small-vocab', type=int, default=8192, help='vocabulary asked of tok-train (8192)')
    ap.add_argument('--corpus', default='/tmp/lmt-bench/corpus.txt',
                    help='make-corpus text, used only without the shared GPT-2 tokenizer')
    ap.add_argument('--torch-python', default='/usr/bin/python3', help="a Python with Debian's python3-torch")
    ap.add_argument('--openblas-coretype', help="OPENBLAS_CORETYPE for PyTorch (default: unset, OpenBLAS's own pick)")
    ap.add_argument('--cached-peak', action='store_true',
                    help="let lmt use its cached GEMM peak instead of measuring it in this run")
    ap.add_argument('--keep', action='store_true', help='keep the work directory')
    ap.add_argument('--json')
    a = ap.parse_args()
    if a.updates <= a.warmup:
        ap.error('--updates must be more than --warmup')
    a.corpus = os.path.abspath(a.corpus)
    precs = a.precision or ['fp32', 'bf16']
    tv = subprocess.run([a.torch_python, '-c', 'import torch; print(torch.__version__)'], capture_output=True,
                        text=True).stdout.strip()
    print(f'# {machine()}')
    print(f'# torch {tv} ({a.torch_python}); {a.threads} threads each; {a.updates} updates, '
          f'the first {a.warmup} not timed; OPENBLAS_CORETYPE for PyTorch: {a.openblas_coretype or "(unset)"}')
    tmp = tempfile.mkdtemp(prefix='lmt-bench-train-')
    rows, ops_rows, mem, kern, results = [], [], [], [], []
    for which in a.only or list(CONFIGS):
        cfg = CONFIGS[which]
        data, desc = build_data(tmp, which, a)
        V = json.load(open(f'{data}/manifest.json'))['vocab_size']
        if which.startswith('124m') and V != 50257:
            raise SystemExit(f'train.py: the 124M figure needs a vocabulary of 50257; the tokenizer ({desc}) has {V}')
        shape = f"L{cfg['layers']} H{cfg['heads']} C{cfg['channels']} V{V} T{cfg['seq_len']} B{cfg['batch']}"
        print(f'# {which}: {shape}; tokenizer {desc}', flush=True)
        for prec in precs:
            lm = lmt_train(data, cfg, prec, a, tmp)
            pt = torch_train(data, cfg, V, prec, a)
            peer = 'pytorch fp32' if prec == 'fp32' else 'pytorch autocast bf16'
            print(f'#   lmt {prec}: params {lm["params"]:,}, peak {lm["peak"] / 1e9:.1f} GFLOP/s '
                  f'({lm["peak_source"]}, {lm["kernel"]}); seconds per update {lm["steps"]}, loss {lm["losses"]}')
            print(f'#   {peer}: params {pt["params"]:,}; seconds per update {pt["step_s"]}, loss {pt["losses"]}',
                  flush=True)
            for name, r in ((f'lmt {prec}', lm), (peer, pt)):
                rows.append(dict(config=which, impl=name, s_update=round(r['s_per_step'], 3),
                                 tok_s=round(r['tokens_per_s'], 1),
                                 lmt_vs_torch=round(lm['tokens_per_s'] / pt['tokens_per_s'], 2),
                                 gflop_s=round(lm['fpt'] * r['tokens_per_s'] / 1e9, 1),
                                 mfu=f'{lm["fpt"] * r["tokens_per_s"] / lm["peak"]:.1%}',
                                 not_gemm=f'{lm["not_gemm"]:.0%}' if r is lm else '',
                                 peak_rss_mb=round(r['rss'] / 1e6),
                                 load=f'{r["load"]["load_before"]:.2f}->{r["load"]["load_after"]:.2f}',
                                 other_load=round(r['load']['other'], 2)))
            kern.append(dict(config=which, precision=prec, peak_gflop_s=round(lm['peak'] / 1e9, 1),
                             lmt=lm['kernel'], pytorch=pt['kernel']))
            o = dict(config=which, precision=prec, step=round(lm['mean_step'], 4))
            o.update({k: f'{lm["ops"][k]:.4f} ({lm["ops"][k] / lm["mean_step"]:.0%})' for k in OPS})
            rest = lm['mean_step'] - sum(lm['ops'].values())
            o['remainder'] = f'{rest:.4f} ({rest / lm["mean_step"]:.0%})'
            ops_rows.append(o)
            m = lm['memory']
            mem.append(dict(config=which, precision=prec, params_mb=round(m['params'] / 1e6),
                            working_mb=round(m['weights_working'] / 1e6), grads_mb=round(m['grads'] / 1e6),
                            adamw_mb=round(m['optimizer'] / 1e6), acts_mb=round(m['activations'] / 1e6),
                            lmt_rss_mb=round(lm['rss'] / 1e6), torch_rss_mb=round(pt['rss'] / 1e6)))
            results.append(dict(config=which, precision=prec, shape=cfg, vocab=V, tokenizer=desc, lmt=lm, torch=pt))
    print()
    table(rows, ['config', 'impl', 's_update', 'tok_s', 'lmt_vs_torch', 'gflop_s', 'mfu', 'not_gemm',
                 'peak_rss_mb', 'load', 'other_load'])
    print('# s_update: median of the timed updates; lmt_vs_torch: tokens/s, lmt over PyTorch in the same precision;')
    print('# mfu: against the GEMM peak lmt measured in that run for that precision; not_gemm: 1 - time.ops.gemm /'
          ' time.step (lmt)')
    print('# load: 1-minute load average before->after; other_load: cores busy with other processes meanwhile')
    print()
    table(kern, ['config', 'precision', 'peak_gflop_s', 'lmt', 'pytorch'])
    print()
    table(ops_rows, ['config', 'precision', 'step'] + list(OPS) + ['remainder'])
    print('# lmt seconds per update by op kind (the backend\'s own time, mean of the timed updates); remainder:'
          ' step - sum(ops)')
    print()
    table(mem, ['config', 'precision', 'params_mb', 'working_mb', 'grads_mb', 'adamw_mb', 'acts_mb', 'lmt_rss_mb',
                'torch_rss_mb'])
    print('# lmt memory record (working: the low-precision copy of the weights); RSS is the wait4 peak')
    save(a.json, dict(machine=machine(), torch=tv, threads=a.threads, updates=a.updates, warmup=a.warmup,
                      openblas_coretype=a.openblas_coretype, rows=rows, kernels=kern, ops=ops_rows, memory=mem,
                      results=results))
    if not a.keep:
        shutil.rmtree(tmp)


if __name__ == '__main__':
    main()
