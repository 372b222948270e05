#!/usr/bin/env python3
"""tok-train's counting and tok-encode on one long document: -j1 against all cores.

    scripts/bench/run long-doc [--corpus synthetic|real|both] [--mb 64] [--vocab 32768]
                               [--repeat 5] [--json FILE]

A text file is one document by default (--txt-docs file), and a corpus often comes
as one: the threads then share the document, cut into parts only where the
pre-tokenizer splits the same with the rest of the text or without it (after a
letter, before a character that is not a letter, a mark or an apostrophe;
tok-train(1), tok-encode(1)). Each corpus (scripts/bench/corpus.py) is written as
one text file of up to --mb MB, its documents joined by newlines; with the real
corpus comes a third file, real-scripts: the lines of the real corpus's first --mb MB
that hold no ASCII letter and are at least half bytes beyond ASCII (translations into
Cyrillic, Greek, Arabic, CJK and other scripts), joined by newlines and written again
and again up to --mb MB, where every cut comes after a letter beyond ASCII. Each tool
runs on each file at -j1 and on all cores (at least 2), taking turns --repeat times:
tok-train's counting as its `counted` record gives it (reading and counting the
words, the threads' tables merged included), and tok-encode's encoding as its
summary gives it (reading, encoding and writing the stream), with the GPT-2 pattern
and a tokenizer tok-train made of the same file; then both again with a custom
pattern, Qwen2's (cl100k's with single digits), which has no cut rule: the document
is cut where a piece probably starts and settled where the parts' pieces meet
(tok-encode(1), tok-train(1)), tok-encode with a tokenizer tok-train made of the
file with that pattern.
The outputs of -j1 and of all cores must be the same bytes. Figures are best/median;
the speedup is -j1 seconds / all cores' seconds. Before and after the runs, the
machine's own ceiling for all cores against one (common.Ceiling), and the load.
"""
import argparse
import filecmp
import json
import os
import re
import shutil
import subprocess
import tempfile

import corpus as corpora
from common import BIN, Ceiling, Load, add_corpus_args, corpus_file, header, kinds, machine, run, save, \
    speedup_row, table


# Qwen2's pre-tokenizer (its tokenizer.json): cl100k's but for single digits
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
         r"\s*[\r\n]+|\s+(?!\S)|\s+")


def documents(kind, path, mb):
    """The texts to join into one document, and what they are."""
    limit = int(mb * 1e6)
    if kind == 'synthetic':
        raw = open(path, 'rb').read()[:limit]
        texts = [l for l in raw.decode('utf-8', errors='replace').split('\n') if l]
        return texts, f'{len(texts)} lines'
    if kind == 'real':
        texts = corpora.read_jsonl(path, limit=limit)
        return texts, f'{len(texts)} documents'
    lines = [l for d in corpora.read_jsonl(path, limit=limit) for l in d.split('\n')
             if l and not re.search('[A-Za-z]', l) and 2 * sum(ord(c) < 128 for c in l) <= len(l.encode())]
    copies = max(1, limit // max(sum(len(l.encode()) + 1 for l in lines), 1))
    return lines * copies, (f'the {len(lines)} lines of its first {mb:g} MB that hold no ASCII letter and are '
                            f'at least half non-ASCII bytes, {copies} times')


def bench(a, kind, tmp):
    path = corpus_file('synthetic' if kind == 'synthetic' else 'real', a)
    texts, what = documents(kind, path, a.mb)
    if not texts:
        raise SystemExit(f'{path}: no text for {kind}')
    one = f'{tmp}/{kind}.txt'
    with open(one, 'w', encoding='utf-8') as f:
        f.write('\n'.join(texts))
    st = dict(corpora.stats(['\n'.join(texts)]), joined_docs=len(texts))
    header(kind, path, st, f' ({what}, joined by newlines into one text file)')
    n = max(2, os.cpu_count())
    tok = f'{tmp}/{kind}.lmtok'
    run([f'{BIN}/tok-train', '-q', '-p', 'gpt2', '--no-special', '-v', str(a.vocab), '-o', tok, one])
    ctok = f'{tmp}/{kind}-custom.lmtok'
    run([f'{BIN}/tok-train', '-q', '--regex', QWEN2, '--no-special', '-v', str(a.vocab), '-o', ctok, one])
    ceil = Ceiling(n)
    load = Load()
    t = {}
    for _ in range(a.repeat):
        for j in (1, n):
            _, _, out = run([f'{BIN}/tok-train', '-q', '-j', str(j), '-p', 'gpt2', '--no-special', '-v',
                             str(a.vocab), '-o', f'{tmp}/t{j}.lmtok', one], stdout=subprocess.PIPE)
            rec = [json.loads(l) for l in out.splitlines() if '"counted"' in l][0]
            assert rec['documents'] == 1, rec
            t.setdefault(('count', j), []).append(rec['seconds'])
            _, _, out = run([f'{BIN}/tok-train', '-q', '-j', str(j), '--regex', QWEN2, '--no-special', '-v',
                             str(a.vocab), '-o', f'{tmp}/ct{j}.lmtok', one], stdout=subprocess.PIPE)
            rec = [json.loads(l) for l in out.splitlines() if '"counted"' in l][0]
            t.setdefault(('ccount', j), []).append(rec['seconds'])
            _, _, out = run([f'{BIN}/tok-encode', '-q', '-j', str(j), '-t', tok, '-o', f'{tmp}/e{j}.lmtoks', one],
                            stdout=subprocess.PIPE)
            rec = [json.loads(l) for l in out.splitlines() if '"summary"' in l][0]
            t.setdefault(('encode', j), []).append(rec['seconds'])
            _, _, out = run([f'{BIN}/tok-encode', '-q', '-j', str(j), '-t', ctok, '-o', f'{tmp}/c{j}.lmtoks', one],
                            stdout=subprocess.PIPE)
            rec = [json.loads(l) for l in out.splitlines() if '"summary"' in l][0]
            t.setdefault(('custom', j), []).append(rec['seconds'])
    load.stop()
    ceil.stop()
    same = dict(tokenizer=filecmp.cmp(f'{tmp}/t1.lmtok', f'{tmp}/t{n}.lmtok', shallow=False),
                custom_tokenizer=filecmp.cmp(f'{tmp}/ct1.lmtok', f'{tmp}/ct{n}.lmtok', shallow=False),
                stream=filecmp.cmp(f'{tmp}/e1.lmtoks', f'{tmp}/e{n}.lmtoks', shallow=False),
                custom_stream=filecmp.cmp(f'{tmp}/c1.lmtoks', f'{tmp}/c{n}.lmtoks', shallow=False))
    if not all(same.values()):
        raise SystemExit(f'-j1 and -j{n} outputs differ: {same}')
    rows = [speedup_row(name, t[(ph, 1)], t[(ph, n)], n)
            for ph, name in (('count', 'tok-train: counting'), ('encode', 'tok-encode'),
                             ('ccount', 'tok-train: counting, Qwen2 regex'), ('custom', 'tok-encode: Qwen2 regex'))]
    print(f'# seconds: best/median of {a.repeat} runs each, -j1 and -j{n} taking turns; speedup: -j1 seconds / '
          f'-j{n} seconds; the tokenizer and the streams of -j1 and -j{n} are the same bytes')
    table(rows, ['phase', 'seconds_j1', f'seconds_j{n}', 'speedup'])
    print(load.line())
    print(ceil.line())
    print()
    return dict(corpus=kind, file=path, stats=st, load=load.result, ceiling=ceil.result, phases=rows,
                same=same)


def main():
    ap = argparse.ArgumentParser()
    add_corpus_args(ap, repeat=5)
    ap.add_argument('--mb', type=float, default=64, help='the most MB of each corpus to join into one document')
    ap.add_argument('--vocab', type=int, default=32768)
    ap.add_argument('--json')
    a = ap.parse_args()
    print(f'# {machine()}')
    print(f'# lmt on one long document, vocab {a.vocab}, GPT-2 pattern')
    tmp = tempfile.mkdtemp(prefix='lmt-bench-')
    try:
        results = [bench(a, k, tmp) for k in kinds(a) + (['real-scripts'] if a.corpus != 'synthetic' else [])]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    save(a.json, dict(machine=machine(), vocab=a.vocab, mb=a.mb, repeat=a.repeat, corpora=results))


if __name__ == '__main__':
    main()
