#!/usr/bin/python3
"""GPT-2 training steps in PyTorch, the same model and step as lmt's train, for speed.

    /usr/bin/python3 scripts/bench/train_torch.py --data DIR --layers 6 --heads 6 \\
        --channels 384 --seq-len 256 --micro-batch 8 --steps 6 --warmup-steps 2 --threads 2

The peer that scripts/bench/train.py runs next to lmt. It is written for Debian's
python3-torch (PyTorch 1.13, CPU), which has no scaled_dot_product_attention, so
attention is spelled out. What it matches in lmt (lib/model/model.c, lib/model/trainer.c):

  model    GPT-2: learned token and position embeddings; pre-LayerNorm blocks
           (LayerNorm eps 1e-5, causal multi-head attention, residual; LayerNorm,
           MLP 4C with tanh-GELU, residual); final LayerNorm; output head tied to
           wte. wte has Vp = V rounded up to 128 rows (zero padding rows, counted
           as parameters as lmt counts them); the loss's softmax sees logits[..., :V].
           Weights are (out, in) as in llm.c; wpe has seq-len rows (lmt's context
           defaults to the dataset's sequence length). GPT-2 initialisation.
  step     loss = sum of token cross-entropies / valid targets; backward; global
           gradient norm clipped to 1.0; AdamW (betas 0.9/0.95, eps 1e-8, weight
           decay 0.1 on the four per-block weight matrices only, not on wte, wpe,
           biases or LayerNorm); one micro-batch per update. fp32 throughout, or
           with --autocast bf16 the forward pass and the loss inside
           torch.autocast("cpu", dtype=torch.bfloat16) (PyTorch's CPU mixed
           precision: GEMMs in bf16, reductions and master parameters in fp32);
           backward, clipping and AdamW outside it as usual.
  data     with --data, the dataset's first train shard read in manifest order, as
           lmt's train reads it with --shuffle-window 1 (so both see the same
           sequences); a target is valid where both positions are covered by a
           segment (lmt's default, --doc-targets keep). Without --data, uniform
           random tokens of the same shape, all targets valid.

The learning rate is constant (lmt's schedule changes no arithmetic). Each step is
timed whole (batch, forward, backward, clipping, optimizer) and in parts; the first
--warmup-steps are not timed. With --kernels one more step runs after the timed
ones under oneDNN's verbose mode, and the JSON line names the GEMM implementations
it used: oneDNN's (matmul/inner_product implementation strings, e.g.
brg:avx512_core_bf16) and, for the GEMMs oneDNN did not see, the BLAS library this
process mapped (Debian's torch calls libblas.so.3, OpenBLAS by default, for fp32)
and that OpenBLAS's kernel core. One JSON line goes to stdout.
"""
import argparse
import collections
import contextlib
import ctypes
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def padded_vocab(v):
    return (v + 127) // 128 * 128


# ---- the dataset (lib/data/shard.h, lib/core/binformat.h) ----

def read_shard(path, nseq):
    """The first nseq sequences of a shard: tokens (nseq, T+1) and a coverage mask."""
    with open(path, 'rb') as f:
        data = f.read()
    if data[:8] != b'\x89LMTSHD\n':
        raise SystemExit(f"train_torch: '{path}': not an lmt shard (magic {data[:8]!r})")
    major, = struct.unpack_from('<H', data, 8)
    if major != 1:
        raise SystemExit(f"train_torch: '{path}': shard version {major}.x, this script reads 1.x")
    header_size, = struct.unpack_from('<I', data, 12)
    tb, seq_len, n_seqs, n_segs = struct.unpack_from('<IIQQ', data, 64)
    si_off, seg_off = struct.unpack_from('<QQ', data, 104)
    pay = memoryview(data)[header_size:]
    n = min(nseq, n_seqs)
    dt = np.dtype('<u2') if tb == 2 else np.dtype('<u4')
    toks = np.frombuffer(pay, dtype=dt, count=n * (seq_len + 1)).reshape(n, seq_len + 1).astype(np.int64)
    si = np.frombuffer(pay, dtype='<u8', count=n + 1, offset=si_off)
    segs = np.frombuffer(pay, dtype='<u4', count=4 * n_segs, offset=seg_off).reshape(-1, 4)[:, :2] \
        if n_segs else np.zeros((0, 2), np.uint32)
    cover = np.zeros((n, seq_len + 1), dtype=bool)
    for i in range(n):
        for start, length in segs[int(si[i]):int(si[i + 1])]:
            cover[i, start:start + length] = True
    return toks, cover, seq_len


def load_batches(a, nseq):
    """(tokens, targets) of nseq sequences; targets -1 where lmt would have none."""
    if a.data:
        man = json.load(open(os.path.join(a.data, 'manifest.json')))
        shard = [s for s in man['shards'] if s['split'] == 'train'][0]
        toks, cover, T = read_shard(os.path.join(a.data, shard['path']), nseq)
        if T != a.seq_len:
            raise SystemExit(f"train_torch: '{a.data}': sequences of {T}, --seq-len {a.seq_len}")
        if man['vocab_size'] != a.vocab:
            raise SystemExit(f"train_torch: '{a.data}': vocabulary {man['vocab_size']}, --vocab {a.vocab}")
        reps = -(-nseq // len(toks))  # a short shard is read again from its start, as an epoch
        toks, cover = np.tile(toks, (reps, 1))[:nseq], np.tile(cover, (reps, 1))[:nseq]
        x = toks[:, :-1]
        y = np.where(cover[:, :-1] & cover[:, 1:], toks[:, 1:], -1)
        return torch.from_numpy(x.copy()), torch.from_numpy(y.copy()), 'shard'
    g = torch.Generator().manual_seed(a.seed)
    t = torch.randint(0, a.vocab, (nseq, a.seq_len + 1), generator=g)
    return t[:, :-1].contiguous(), t[:, 1:].contiguous(), 'random'


# ---- the model ----

class GPT2:
    """Parameters as plain tensors in llm.c's order and shapes (lib/model/model.h)."""

    def __init__(self, L, NH, C, V, T, seed):
        self.L, self.NH, self.C, self.V, self.Vp, self.T = L, NH, C, V, padded_vocab(V), T
        g = torch.Generator().manual_seed(seed)
        std, proj = 0.02, 0.02 / math.sqrt(2 * L)

        def normal(*shape, sd=std):
            return (torch.randn(*shape, generator=g) * sd).requires_grad_()

        def const(v, *shape):
            return torch.full(shape, float(v)).requires_grad_()
        wte = torch.randn(self.Vp, C, generator=g) * std
        wte[V:] = 0  # the padding rows stay zero (they get no gradient: never looked up or predicted)
        self.wte = wte.requires_grad_()
        self.wpe = normal(T, C)
        self.blocks = []
        for _ in range(L):
            self.blocks.append(dict(
                ln1w=const(1, C), ln1b=const(0, C),
                qkvw=normal(3 * C, C), qkvb=const(0, 3 * C),
                attprojw=normal(C, C, sd=proj), attprojb=const(0, C),
                ln2w=const(1, C), ln2b=const(0, C),
                fcw=normal(4 * C, C), fcb=const(0, 4 * C),
                fcprojw=normal(C, 4 * C, sd=proj), fcprojb=const(0, C)))
        self.lnfw, self.lnfb = const(1, C), const(0, C)
        self.mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)

    def matrices(self):
        return [b[k] for b in self.blocks for k in ('qkvw', 'attprojw', 'fcw', 'fcprojw')]

    def others(self):
        return [self.wte, self.wpe, self.lnfw, self.lnfb] + \
            [b[k] for b in self.blocks for k in b if k not in ('qkvw', 'attprojw', 'fcw', 'fcprojw')]

    def params(self):
        return self.matrices() + self.others()

    def loss(self, idx, tgt):
        B, T = idx.shape
        C, NH = self.C, self.NH
        hs = C // NH
        x = self.wte[idx] + self.wpe[:T]
        mask = self.mask[:T, :T]
        for b in self.blocks:
            h = F.layer_norm(x, (C,), b['ln1w'], b['ln1b'], 1e-5)
            q, k, v = F.linear(h, b['qkvw'], b['qkvb']).split(C, dim=2)
            q = q.view(B, T, NH, hs).transpose(1, 2)
            k = k.view(B, T, NH, hs).transpose(1, 2)
            v = v.view(B, T, NH, hs).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
            att = att.masked_fill(mask, float('-inf')).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, C)
            x = x + F.linear(y, b['attprojw'], b['attprojb'])
            h = F.layer_norm(x, (C,), b['ln2w'], b['ln2b'], 1e-5)
            h = F.gelu(F.linear(h, b['fcw'], b['fcb']), approximate='tanh')
            x = x + F.linear(h, b['fcprojw'], b['fcprojb'])
        x = F.layer_norm(x, (C,), self.lnfw, self.lnfb, 1e-5)
        logits = F.linear(x, self.wte)[..., :self.V]  # the full Vp GEMM, as lmt does; softmax over V
        valid = int((tgt >= 0).sum())
        return F.cross_entropy(logits.reshape(-1, self.V), tgt.reshape(-1), ignore_index=-1,
                               reduction='sum') / valid, valid


def blas_core():
    """The OpenBLAS this process loaded (torch's BLAS on Debian) and its kernel core."""
    try:
        for line in open('/proc/self/maps'):
            p = line.split()[-1]
            if 'openblas' in os.path.basename(p) and '.so' in os.path.basename(p):
                lib = ctypes.CDLL(p)
                lib.openblas_get_corename.restype = ctypes.c_char_p
                return p, lib.openblas_get_corename().decode()
    except (OSError, AttributeError):
        pass
    return None, None


def onednn_kernels(run_step):
    """Run one step under oneDNN's verbose mode; return {implementation: calls} of its
    GEMM primitives. oneDNN prints from C to fd 1, so fd 1 goes to a temporary file
    meanwhile and stdio is flushed before it comes back."""
    import tempfile
    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 1)
        try:
            with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                run_step()
        finally:
            libc.fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
        f.seek(0)
        lines = f.read().decode(errors='replace').splitlines()
    seen = collections.Counter()
    for line in lines:
        v = line.split(',')
        # onednn_verbose,exec,cpu,PRIMITIVE,IMPLEMENTATION,...
        if len(v) > 4 and v[0] in ('onednn_verbose', 'dnnl_verbose') and v[1] == 'exec' \
                and v[3] in ('matmul', 'inner_product'):
            seen[f'{v[3]} {v[4]}'] += 1
    return dict(seen)


def main():
    ap = argparse.ArgumentParser(description='GPT-2 training steps in PyTorch (lmt train\'s peer)')
    ap.add_argument('--layers', type=int, default=6)
    ap.add_argument('--heads', type=int, default=6)
    ap.add_argument('--channels', type=int, default=384)
    ap.add_argument('--vocab', type=int, default=None, help='real vocabulary (default: the dataset\'s)')
    ap.add_argument('--seq-len', type=int, default=None, help='T (default: the dataset\'s)')
    ap.add_argument('--micro-batch', type=int, default=8)
    ap.add_argument('--steps', type=int, default=6, help='updates in all, warm-up included')
    ap.add_argument('--warmup-steps', type=int, default=2, help='first updates, not timed')
    ap.add_argument('--threads', type=int, default=os.cpu_count())
    ap.add_argument('--data', help='a shard-pack dataset (default: random tokens)')
    ap.add_argument('--lr', type=float, default=6e-4)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--autocast', choices=['none', 'bf16'], default='none',
                    help='forward and loss under torch.autocast("cpu", dtype=torch.bfloat16)')
    ap.add_argument('--kernels', action='store_true',
                    help='one more step under oneDNN verbose mode; report the GEMM implementations')
    a = ap.parse_args()
    if a.data:
        man = json.load(open(os.path.join(a.data, 'manifest.json')))
        a.vocab = a.vocab or man['vocab_size']
        a.seq_len = a.seq_len or man['seq_len']
    if not a.vocab or not a.seq_len:
        ap.error('--vocab and --seq-len are needed without --data')
    if a.steps <= a.warmup_steps:
        ap.error('--steps must be more than --warmup-steps')
    if a.channels % a.heads:
        ap.error('--channels must be a multiple of --heads')
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    B, T = a.micro_batch, a.seq_len
    xs, ys, source = load_batches(a, B * a.steps)
    m = GPT2(a.layers, a.heads, a.channels, a.vocab, T, a.seed)
    opt = torch.optim.AdamW([dict(params=m.matrices(), weight_decay=0.1), dict(params=m.others(), weight_decay=0.0)],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    params = m.params()
    nparams = sum(p.numel() for p in params)
    rows, losses = [], []

    def autocast():
        if a.autocast == 'bf16':
            return torch.autocast('cpu', dtype=torch.bfloat16)
        return contextlib.nullcontext()
    for s in range(a.steps):
        t0 = time.perf_counter()
        x, y = xs[s * B:(s + 1) * B], ys[s * B:(s + 1) * B]
        opt.zero_grad(set_to_none=False)
        t1 = time.perf_counter()
        with autocast():
            loss, valid = m.loss(x, y)
        loss = loss.float()
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        norm = float(torch.nn.utils.clip_grad_norm_(params, 1.0))
        opt.step()
        t4 = time.perf_counter()
        losses.append(float(loss))
        rows.append(dict(valid=valid, data=t1 - t0, forward=t2 - t1, backward=t3 - t2, optimizer=t4 - t3,
                         step=t4 - t0, grad_norm=norm))
    timed = rows[a.warmup_steps:]
    secs = sum(r['step'] for r in timed)
    kernels = None
    if a.kernels:
        def one_step():
            opt.zero_grad(set_to_none=False)
            with autocast():
                loss, _ = m.loss(xs[:B], ys[:B])
            loss.float().backward()
        kernels = onednn_kernels(one_step)
    lib, core = blas_core()
    print(json.dumps(dict(
        impl='pytorch', torch=torch.__version__, autocast=a.autocast, onednn_gemms=kernels, threads=torch.get_num_threads(), blas=lib, openblas_core=core,
        openblas_coretype_env=os.environ.get('OPENBLAS_CORETYPE'), data=source,
        layers=a.layers, heads=a.heads, channels=a.channels, vocab=a.vocab, vocab_padded=m.Vp, seq_len=T,
        micro_batch=B, steps=a.steps, warmup_steps=a.warmup_steps, params=nparams,
        tokens_per_s=sum(r['valid'] for r in timed) / secs, s_per_step=secs / len(timed),
        time={k: sum(r[k] for r in timed) / len(timed) for k in ('data', 'forward', 'backward', 'optimizer', 'step')},
        step_s=[round(r['step'], 4) for r in rows], losses=[round(v, 4) for v in losses],
        grad_norms=[round(r['grad_norm'], 4) for r in rows])), flush=True)


if __name__ == '__main__':
    main()
