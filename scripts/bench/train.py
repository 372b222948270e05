#!/usr/bin/env python3
"""train against the same GPT-2 training step in PyTorch (scripts/bench/train_torch.py).

    scripts/bench/run train [--updates 6] [--warmup 2] [--only small|124m] [--json FILE]

Two configurations, each with lmt's train and PyTorch on the same dataset, the same
model, the same batch and all cores:

  small  L=6, NH=6, C=384, T=256, B=8, with the vocabulary of a tokenizer trained
         on gen-corpus output. gen-corpus's toy English has about 1,600 distinct
         words, so asking tok-train for 8192 tokens stops at about 2,240 (no pair
         occurs twice more); with V=2240 (Vp=2304) the model has 11.6M parameters
         (10.6M of them in the block matrices). --small-vocab sets what is asked.
  124m   GPT-2 124M: L=12, NH=12, C=768, V=50257 (Vp=50304), T=64, B=4, tokens from
         OpenAI's GPT-2 ranks imported from ../shared/data/tokenizers. Without that
         directory a tokenizer is trained to 50257 tokens on make-corpus's text
         (gen-corpus cannot reach that vocabulary), since the figure needs V=50257.

The data: gen-corpus -> tok-train -> tok-encode -> shard-pack -L T. lmt's train
reads it with --shuffle-window 1 (manifest order) and PyTorch reads the first
sequences of the train shard, so both train on the same sequences. Each runs
--updates updates of one micro-batch; the first --warmup are not timed. lmt's figures
come from its per-update JSONL records (time.step, tokens, flops_per_s, time split,
memory); PyTorch's from its one JSON line. Peak RSS of each process comes from
wait4(2). MFU is against the sgemm peak lmt measured on this machine (its
"parameters" record: OpenBLAS sgemm 1024^3 on all threads), measured afresh in each
lmt run unless --cached-peak; PyTorch's FLOP/s uses lmt's FLOPs per token (PaLM's
6N + 12LCT, the same model). Both lmt and Debian's torch use the system OpenBLAS,
so the kernel core it picked (printed first; OPENBLAS_CORETYPE, if set, forces it)
bounds both. The machine's cores are shared: each run reports the load other
processes put on them meanwhile (other_load).
"""
import argparse
import ctypes
import ctypes.util
import json
import os
import shutil
import subprocess
import tempfile

from common import BIN, SHARED, TOP, machine, run, table, save

CONFIGS = {
    'small': dict(layers=6, heads=6, channels=384, seq_len=256, batch=8),
    '124m': dict(layers=12, heads=12, channels=768, seq_len=64, batch=4),
}


def openblas_core():
    name = ctypes.util.find_library('openblas')
    if not name:
        return None, None
    try:
        lib = ctypes.CDLL(name)
        lib.openblas_get_corename.restype = ctypes.c_char_p
        lib.openblas_get_config.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode(), lib.openblas_get_config().decode()
    except (OSError, AttributeError):
        return name, None


def busy_jiffies():
    with open('/proc/stat') as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]  # all but idle and iowait


def measured(cmd, **kw):
    """common.run, plus the load others put on the machine meanwhile (cores, average):
    the machine's busy CPU time less this child's, over the wall time. Runs here
    share their cores with whatever else the host runs, so the figure says how much
    to trust the others."""
    hz = os.sysconf('SC_CLK_TCK')
    j0, c0 = busy_jiffies(), os.times()
    wall, rss, out = run(cmd, **kw)
    j1, c1 = busy_jiffies(), os.times()
    child = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
    return wall, rss, out, max(0.0, ((j1 - j0) / hz - child) / wall)


def summary_of(out):
    return [json.loads(l) for l in out.splitlines() if l.startswith('{')]


def build_data(tmp, which, a):
    """The dataset directory for a configuration; returns (dir, tokenizer description).

    tok-encode runs in tmp on the relative name corpus.jsonl: shard-pack's
    train/val split hashes each document's source name as tok-encode recorded it,
    so an absolute path under a fresh temporary directory would draw another split,
    and other training sequences, on every run."""
    corpus = 'corpus.jsonl'
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        return build_data_here(tmp, which, a, corpus)
    finally:
        os.chdir(cwd)


def build_data_here(tmp, which, a, corpus):
    bin_ = os.path.abspath(BIN)
    if not os.path.exists(corpus):
        run([f'{bin_}/gen-corpus', '-q', '--docs', str(a.docs), '-o', corpus])
    cfg = CONFIGS[which]
    tok = f'{tmp}/{which}.lmtok'
    if which == 'small':
        run([f'{bin_}/tok-train', '-q', '-v', str(a.small_vocab), '-p', 'gpt2', '-o', tok, corpus])
        desc = f'trained on gen-corpus, {a.small_vocab} asked'
    elif os.path.exists(f'{SHARED}/gpt2.tiktoken'):
        run([f'{bin_}/tok-train', '-q', '--import', f'tiktoken:{SHARED}/gpt2.tiktoken', '--pattern', 'gpt2',
             '--special', '<|endoftext|>=50256', '-o', tok])
        desc = 'GPT-2 ranks (tiktoken import)'
    else:
        text = a.corpus
        if not os.path.exists(text):
            os.makedirs(os.path.dirname(text), exist_ok=True)
            run([os.path.join(TOP, 'scripts/bench/make-corpus'), text, '64'])
        run([f'{bin_}/tok-train', '-q', '--txt-docs', 'line', '-p', 'gpt2', '-v', '50257', '-o', tok, text])
        desc = f'trained to 50257 on {text} ({SHARED} absent)'
    stream, data = f'{tmp}/{which}.lmtoks', f'{tmp}/{which}-data'
    run([f'{bin_}/tok-encode', '-q', '-t', tok, '-o', stream, corpus])
    run([f'{bin_}/shard-pack', '-q', '-L', str(cfg['seq_len']), '-o', data, stream])
    return data, desc


def lmt_train(data, cfg, a, tmp):
    cmd = [f'{BIN}/train', '-q', '--no-save', '--data', data, '--layers', str(cfg['layers']), '--heads', str(cfg['heads']),
           '--channels', str(cfg['channels']), '--micro-batch', str(cfg['batch']), '--updates', str(a.updates),
           '--eval-every', '0', '--shuffle-window', '1', '-j', str(a.threads)]
    # lmt caches its sgemm peak under $XDG_CACHE_HOME/lmt, keyed by CPU, threads and
    # OpenBLAS core, and keeps the first figure for good: one measured while the host
    # was busy stays low for every later run (here, half the quiet figure, and MFU
    # above 100%). A cache of this run's own makes lmt measure the peak afresh.
    env = None if a.cached_peak else dict(XDG_CACHE_HOME=os.path.join(tmp, 'cache'))
    wall, rss, out, other = measured(cmd, env=env, stdout=subprocess.PIPE)
    recs = summary_of(out)
    par = [r for r in recs if r['event'] == 'parameters'][0]
    ups = [r for r in recs if r['event'] == 'update']
    timed = ups[a.warmup:]
    secs = sum(r['time']['step'] for r in timed)
    split = {k: sum(r['time'][k] for r in timed) / len(timed) for k in ('data', 'forward', 'backward', 'optimizer')}
    return dict(cmd=cmd, wall=wall, rss=rss, other=other, params=par['total'], peak=par['peak_flops'],
                peak_source=par['peak_source'], fpt=par['flops_per_token'],
                tokens_per_s=sum(r['tokens'] for r in timed) / secs, s_per_step=secs / len(timed),
                flops_per_s=sum(r['flops_per_s'] * r['time']['step'] for r in timed) / secs,
                split=split, memory=timed[-1]['memory'], steps=[round(r['time']['step'], 3) for r in ups],
                losses=[round(r['loss'], 4) for r in ups])


def torch_train(data, cfg, vocab, a):
    cmd = [a.torch_python, os.path.join(TOP, 'scripts/bench/train_torch.py'), '--data', data,
           '--layers', str(cfg['layers']), '--heads', str(cfg['heads']), '--channels', str(cfg['channels']),
           '--vocab', str(vocab), '--seq-len', str(cfg['seq_len']), '--micro-batch', str(cfg['batch']),
           '--steps', str(a.updates), '--warmup-steps', str(a.warmup), '--threads', str(a.threads)]
    wall, rss, out, other = measured(cmd, stdout=subprocess.PIPE)
    r = summary_of(out)[-1]
    r.update(cmd=cmd, wall=wall, rss=rss, other=other)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--updates', type=int, default=6, help='updates per run, warm-up included (6)')
    ap.add_argument('--warmup', type=int, default=2, help='first updates not timed (2)')
    ap.add_argument('--only', choices=sorted(CONFIGS), action='append', help='run only this configuration')
    ap.add_argument('--threads', type=int, default=os.cpu_count())
    ap.add_argument('--docs', type=int, default=32000, help='gen-corpus documents (32000, about 10 MB)')
    ap.add_argument('--small-vocab', type=int, default=8192, help='vocabulary asked of tok-train (8192)')
    ap.add_argument('--corpus', default='/tmp/lmt-bench/corpus.txt',
                    help='make-corpus text, used only without the shared GPT-2 tokenizer')
    ap.add_argument('--torch-python', default='/usr/bin/python3', help="a Python with Debian's python3-torch")
    ap.add_argument('--cached-peak', action='store_true',
                    help="let lmt use its cached sgemm peak instead of measuring it in this run")
    ap.add_argument('--keep', action='store_true', help='keep the work directory')
    ap.add_argument('--json')
    a = ap.parse_args()
    if a.updates <= a.warmup:
        ap.error('--updates must be more than --warmup')
    a.corpus = os.path.abspath(a.corpus)
    core, conf = openblas_core()
    env_core = os.environ.get('OPENBLAS_CORETYPE')
    tv = subprocess.run([a.torch_python, '-c', 'import torch; print(torch.__version__)'], capture_output=True,
                        text=True).stdout.strip()
    print(f'# {machine()}')
    print(f'# OpenBLAS core {core} ({conf}); OPENBLAS_CORETYPE={env_core if env_core is not None else "(unset)"}')
    print(f'# torch {tv} ({a.torch_python}); {a.threads} threads each; {a.updates} updates, '
          f'the first {a.warmup} not timed')
    tmp = tempfile.mkdtemp(prefix='lmt-bench-train-')
    rows, mem, results, mfus = [], [], [], []
    for which in a.only or ['small', '124m']:
        cfg = CONFIGS[which]
        data, desc = build_data(tmp, which, a)
        man = json.load(open(f'{data}/manifest.json'))
        V = man['vocab_size']
        if which == '124m' and V != 50257:
            raise SystemExit(f'train.py: the 124M figure needs a vocabulary of 50257; the tokenizer ({desc}) has {V}')
        lm = lmt_train(data, cfg, a, tmp)
        pt = torch_train(data, cfg, V, a)
        pt_flops = lm['fpt'] * cfg['batch'] * cfg['seq_len'] / pt['s_per_step']
        shape = f"L{cfg['layers']} H{cfg['heads']} C{cfg['channels']} V{V} T{cfg['seq_len']} B{cfg['batch']}"
        print(f'# {which}: {shape}; tokenizer {desc}; lmt params {lm["params"]:,}, torch params {pt["params"]:,}; '
              f'peak {lm["peak"] / 1e9:.1f} GFLOP/s ({lm["peak_source"]})')
        print(f'#   lmt   seconds per update {lm["steps"]}, loss {lm["losses"]}, other load {lm["other"]:.2f} cores')
        print(f'#   torch seconds per update {pt["step_s"]}, loss {pt["losses"]}, other load {pt["other"]:.2f} cores')

        def split(t, s):
            return '/'.join(f'{100 * t[k] / s:.0f}' for k in ('data', 'forward', 'backward', 'optimizer'))
        for name, r, fl in (('lmt train', lm, lm['flops_per_s']), ('pytorch', pt, pt_flops)):
            mfus.append(fl / lm['peak'])
            rows.append(dict(config=which, impl=name, params_m=round(r['params'] / 1e6, 2),
                             tok_s=round(r['tokens_per_s'], 1), s_step=round(r['s_per_step'], 3),
                             lmt_vs_torch=round(lm['tokens_per_s'] / pt['tokens_per_s'], 2),
                             gflop_s=round(fl / 1e9, 1), mfu=f'{fl / lm["peak"]:.1%}',
                             d_f_b_o_pct=split(r['split'] if name == 'lmt train' else pt['time'], r['s_per_step']),
                             peak_rss_mb=round(r['rss'] / 1e6), other_load=round(r['other'], 2)))
        m = lm['memory']
        mem.append(dict(config=which, params_mb=round(m['params'] / 1e6), grads_mb=round(m['grads'] / 1e6),
                        adamw_mb=round(m['optimizer'] / 1e6), acts_mb=round(m['activations'] / 1e6),
                        lmt_sum_mb=round((m['params'] + m['grads'] + m['optimizer'] + m['activations']) / 1e6),
                        lmt_rss_mb=round(lm['rss'] / 1e6), torch_rss_mb=round(pt['rss'] / 1e6)))
        results.append(dict(config=which, shape=cfg, vocab=V, tokenizer=desc, lmt=lm, torch=pt))
    print()
    table(rows, ['config', 'impl', 'params_m', 'tok_s', 's_step', 'lmt_vs_torch', 'gflop_s', 'mfu',
                 'd_f_b_o_pct', 'peak_rss_mb', 'other_load'])
    print('# d_f_b_o_pct: share of the timed step in data / forward / backward / optimizer (clipping included)')
    if any(lm_mfu > 1 for lm_mfu in mfus):
        print('# MFU above 100%: the sgemm peak lmt used is below what training reached (a peak measured on a busy'
              ' machine, or a cached one: see --cached-peak)')
    print('# other_load: cores busy with other processes during the run (average); above ~0.1 the figures are noisy')
    print()
    table(mem, ['config', 'params_mb', 'grads_mb', 'adamw_mb', 'acts_mb', 'lmt_sum_mb', 'lmt_rss_mb',
                'torch_rss_mb'])
    print('# lmt reports params, grads, AdamW moments and activations (memory object); RSS is wait4 peak')
    save(a.json, dict(machine=machine(), openblas_core=core, openblas_config=conf, openblas_coretype_env=env_core,
                      torch=tv, threads=a.threads, updates=a.updates, warmup=a.warmup, rows=rows, memory=mem,
                      results=results))
    if not a.keep:
        shutil.rmtree(tmp)


if __name__ == '__main__':
    main()
