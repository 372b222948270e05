#!/usr/bin/env python3
"""check-safetensors-hf: does ckpt-reshard's GPT-2 export compute what train's model does?

    scripts/check-safetensors-hf.py DIR/model.safetensors DIR/config.json MODEL.bin

Loads the export with the safetensors reference implementation (its numpy
loader, which checks the header and that the tensors tile the file), runs GPT-2's
forward pass in numpy the way transformers' GPT2LMHeadModel does (Conv1D
y = x W + b with W (in, out), gelu_new, LayerNorm with config.json's epsilon,
causal attention, the head tied to wte unless lm_head.weight is present), and
compares its logits with the same forward pass written for llm.c's model file
(train --export-llmc MODEL.bin: weights (out, in), applied as x W^T) on random
tokens. llm.c's file has no untied head, so this covers tied models (the C
unit test covers both). Prints one JSON line; exits 0 when the two agree within the tolerance of
the export's dtype, 1 otherwise, 2 on bad usage.

Not part of `make check` (it needs numpy and safetensors: scripts/install-deps
--bench); tests/unit/test-safetensors.c checks the same in C against the
library's own logits.
"""
import json
import struct
import sys

import numpy as np


def load_safetensors(path):
    """Tensors as float64 arrays. numpy has no bfloat16, so BF16 is widened by hand."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    dtypes = {v["dtype"] for k, v in header.items() if k != "__metadata__"}
    if dtypes <= {"F32", "F16"}:
        from safetensors.numpy import load_file  # the reference reader, with its checks
        return {k: v.astype(np.float64) for k, v in load_file(path).items()}, header
    from safetensors import safe_open  # still validates the header
    with safe_open(path, framework="numpy") as f:
        names = list(f.keys())
    buf = data[8 + n:]
    out = {}
    for k in names:
        info = header[k]
        b, e = info["data_offsets"]
        raw = np.frombuffer(buf[b:e], dtype="<u2").astype(np.uint32) << 16
        out[k] = raw.view(np.float32).reshape(info["shape"]).astype(np.float64)
    return out, header


def load_llmc(path):
    with open(path, "rb") as f:
        hdr = np.frombuffer(f.read(1024), dtype="<i4")
        if hdr[0] != 20240326 or hdr[1] != 3:
            sys.exit(f"'{path}': not an llm.c fp32 model file (magic {hdr[0]}, version {hdr[1]})")
        maxT, V, L, NH, C, Vp = (int(x) for x in hdr[2:8])
        p = np.frombuffer(f.read(), dtype="<f4").astype(np.float64)
    shapes = [("wte", (Vp, C)), ("wpe", (maxT, C)), ("ln1w", (L, C)), ("ln1b", (L, C)),
              ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)), ("attprojw", (L, C, C)), ("attprojb", (L, C)),
              ("ln2w", (L, C)), ("ln2b", (L, C)), ("fcw", (L, 4 * C, C)), ("fcb", (L, 4 * C)),
              ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)), ("lnfw", (C,)), ("lnfb", (C,))]
    t, at = {}, 0
    for name, shape in shapes:
        size = int(np.prod(shape))
        t[name] = p[at:at + size].reshape(shape)
        at += size
    return t, dict(maxT=maxT, V=V, L=L, NH=NH, C=C)


def layernorm(x, w, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


def gelu_new(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def attention(qkv, NH):
    B, T, C3 = qkv.shape
    C = C3 // 3
    q, k, v = (a.reshape(B, T, NH, C // NH).transpose(0, 2, 1, 3) for a in np.split(qkv, 3, axis=-1))
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(C // NH)
    s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -np.inf)
    s = np.exp(s - s.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    return (s @ v).transpose(0, 2, 1, 3).reshape(B, T, C)


def forward_hf(t, cfg, tok):
    eps = cfg["layer_norm_epsilon"]
    x = t["transformer.wte.weight"][tok] + t["transformer.wpe.weight"][: tok.shape[1]]
    for l in range(cfg["n_layer"]):
        h = lambda s: t[f"transformer.h.{l}.{s}"]  # noqa: E731
        a = layernorm(x, h("ln_1.weight"), h("ln_1.bias"), eps) @ h("attn.c_attn.weight") + h("attn.c_attn.bias")
        x = x + attention(a, cfg["n_head"]) @ h("attn.c_proj.weight") + h("attn.c_proj.bias")
        f = gelu_new(layernorm(x, h("ln_2.weight"), h("ln_2.bias"), eps) @ h("mlp.c_fc.weight") + h("mlp.c_fc.bias"))
        x = x + f @ h("mlp.c_proj.weight") + h("mlp.c_proj.bias")
    x = layernorm(x, t["transformer.ln_f.weight"], t["transformer.ln_f.bias"], eps)
    head = t.get("lm_head.weight", t["transformer.wte.weight"])
    return x @ head.T


def forward_llmc(t, m, tok):
    V = m["V"]
    x = t["wte"][tok] + t["wpe"][: tok.shape[1]]
    for l in range(m["L"]):
        a = layernorm(x, t["ln1w"][l], t["ln1b"][l], 1e-5) @ t["qkvw"][l].T + t["qkvb"][l]
        x = x + attention(a, m["NH"]) @ t["attprojw"][l].T + t["attprojb"][l]
        f = gelu_new(layernorm(x, t["ln2w"][l], t["ln2b"][l], 1e-5) @ t["fcw"][l].T + t["fcb"][l])
        x = x + f @ t["fcprojw"][l].T + t["fcprojb"][l]
    x = layernorm(x, t["lnfw"], t["lnfb"], 1e-5)
    return x @ t["wte"][:V].T


def main():
    if len(sys.argv) != 4:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        sys.exit(2)
    st, header = load_safetensors(sys.argv[1])
    with open(sys.argv[2]) as f:
        cfg = json.load(f)
    ref, m = load_llmc(sys.argv[3])
    if cfg["model_type"] != "gpt2" or cfg["activation_function"] != "gelu_new" or cfg["vocab_size"] != m["V"]:
        sys.exit(f"'{sys.argv[2]}': not the GPT-2 config of this model")
    rng = np.random.default_rng(1)
    T = min(16, m["maxT"])
    tok = rng.integers(0, m["V"], size=(2, T))
    a, b = forward_hf(st, cfg, tok), forward_llmc(ref, m, tok)
    dtype = {v["dtype"] for k, v in header.items() if k != "__metadata__"}.pop()
    # fp32: the same numbers in another order; bf16/fp16: weights rounded to 8/11 bits
    tol = {"F32": 1e-9, "BF16": 3e-2, "F16": 5e-3}[dtype]
    scale = float(np.abs(b).max())
    diff = float(np.abs(a - b).max())
    ok = diff <= tol * scale
    print(json.dumps({"event": "check", "dtype": dtype, "tensors": len(st), "max_abs_diff": diff,
                      "logit_scale": scale, "tolerance": tol, "ok": ok}))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
