#!/usr/bin/env python3
"""tok-encode against tiktoken and HuggingFace tokenizers, same tokenizer, same text.

    scripts/bench/run tok-encode [--corpus synthetic|real|both] [--mb 20]
                                 [--encodings gpt2,cl100k,o200k] [--repeat 3] [--json FILE]

The tokenizers are OpenAI's published rank files from ../shared/data/tokenizers,
imported into lmt with tok-train --import and exported to tokenizer.json for HF.
The documents, up to --mb MB of each corpus (scripts/bench/corpus.py): synthetic,
make-corpus's lines cut into documents of about 4 kB at line ends; real, one file
each. The peers get them as Python strings, lmt as one file with a separator
between them (--doc-sep; a document holding it is left out for everyone). Every
contender encodes every document; the outputs are compared id for id, and the MB/s
of each is reported single-threaded and on all cores, with lmt's ratio to each peer.
Timing: the peers' encode calls (tokenizer loading excluded; HF single-threaded on
the first quarter of the bytes, scaled); lmt's wall time of the whole tok-encode
process minus the time it takes to load the tokenizer (measured separately), so
reading, encoding and writing the stream are all counted for lmt. Every figure is
best/median of --repeat runs (default 3), the contenders taking turns. Before and
after the runs, the machine's own ceiling for all cores against one (common.Ceiling).
"""
import argparse
import json
import os
import shutil
import struct
import sys
import tempfile
import time

import corpus as corpora
from common import (BIN, SHARED, Ceiling, Load, add_corpus_args, bm, best_median, corpus_file, header, kinds,
                    machine, rate, ratio, run, save, table)

SEP = '\n\x1e\n'   # a document separator that never occurs in the corpus


def read_stream_ids(path):
    b = open(path, 'rb').read()
    hs = struct.unpack_from('<I', b, 12)[0]
    width, flags, ntok, ndoc = struct.unpack_from('<IIQQ', b, 64)
    index_off = struct.unpack_from('<Q', b, 64 + 64)[0]
    fmt = 'H' if width == 2 else 'I'
    toks = struct.unpack_from('<%d%s' % (ntok, fmt), b, hs)
    docs = []
    for i in range(ndoc):
        off, n = struct.unpack_from('<QQ', b, hs + index_off + 40 * i)
        docs.append(list(toks[off:off + n]))
    return docs


def documents(kind, path, mb):
    """The documents every contender encodes: synthetic, make-corpus's lines cut into
    documents of about 4 kB at line ends; real, the corpus's files, up to mb MB. A
    document holding the separator lmt splits its input at is left out."""
    limit = int(mb * 1e6)
    if kind == 'synthetic':
        raw = open(path, 'rb').read()[:limit]
        text = raw.decode('utf-8', errors='replace')
        docs, cur, n = [], [], 0
        for l in text.split('\n'):
            cur.append(l)
            n += len(l) + 1
            if n >= 4000:
                docs.append('\n'.join(cur))
                cur, n = [], 0
        if cur:
            docs.append('\n'.join(cur))
    else:
        docs = corpora.read_jsonl(path, limit=limit)
    return [d for d in docs if SEP not in d]


def bench(a, kind, tmp, peers):
    import tiktoken
    import tokenizers
    from tiktoken.load import load_tiktoken_bpe
    path = corpus_file(kind, a)
    docs = documents(kind, path, a.mb)
    src = os.path.join(tmp, 'docs.txt')
    with open(src, 'w', encoding='utf-8', newline='') as f:
        f.write(SEP.join(docs))
    st = corpora.stats(docs)
    nbytes = st['bytes']
    header(kind, path, st)
    ncores = os.cpu_count()
    R = a.repeat
    ceil = Ceiling(ncores)
    load = Load()
    rows = []
    names = {'gpt2': 'gpt2', 'cl100k': 'cl100k_base', 'o200k': 'o200k_base'}
    # a quarter of the bytes for HF single-threaded, which is slow
    quarter, qb = [], 0
    for d in docs:
        if qb >= nbytes / 4:
            break
        quarter.append(d)
        qb += len(d.encode())
    for short in a.encodings.split(','):
        name = names[short]
        meta = json.load(open(f'{SHARED}/{name}.json'))
        specials = meta['special_tokens']
        tok = os.path.join(tmp, f'{short}.lmtok')
        hf = os.path.join(tmp, f'{short}.json')
        cmd = [f'{BIN}/tok-train', '-q', '--import', f'tiktoken:{SHARED}/{name}.tiktoken',
               '--pattern', short, '-o', tok, '--export-hf', hf]
        for s, i in specials.items():
            cmd += ['--special', f'{s}={i}']
        run(cmd)
        enc = tiktoken.Encoding(name, pat_str=meta['pat_str'],
                                mergeable_ranks=load_tiktoken_bpe(f'{SHARED}/{name}.tiktoken'),
                                special_tokens=specials)
        htok = tokenizers.Tokenizer.from_file(hf)

        def timed(f):
            t0 = time.perf_counter()
            f()
            return time.perf_counter() - t0
        ref = [enc.encode_ordinary(d) for d in docs]
        hout = htok.encode_batch(docs, add_special_tokens=False)
        hf_diff = sum(h.ids != r for h, r in zip(hout, ref))
        del hout
        # lmt: load time alone (an empty input), then the whole run
        empty = os.path.join(tmp, 'empty.txt')
        open(empty, 'w').close()
        load_s = min(run([f'{BIN}/tok-encode', '-q', '-t', tok, '-o', os.path.join(tmp, 'e.lmtoks'), empty])[0]
                     for _ in range(3))
        out = os.path.join(tmp, 'out.lmtoks')
        cmd1 = [f'{BIN}/tok-encode', '-q', '-j1', '-t', tok, '--doc-sep', SEP, '-o', out, src]
        cmdn = [f'{BIN}/tok-encode', '-q', f'-j{ncores}', '-t', tok, '--doc-sep', SEP, '-o', out, src]
        t = {k: [] for k in ('tk1', 'tkn', 'hf1', 'hfn', 'l1', 'ln')}
        diff1 = diffn = None
        # the contenders take turns, so that a burst of load hits them alike
        for _ in range(R):
            t['tk1'].append(timed(lambda: [enc.encode_ordinary(d) for d in docs]))
            t['tkn'].append(timed(lambda: enc.encode_ordinary_batch(docs, num_threads=ncores)))
            t['hf1'].append(timed(lambda: [htok.encode(d, add_special_tokens=False) for d in quarter])
                            * nbytes / qb)
            t['hfn'].append(timed(lambda: htok.encode_batch(docs, add_special_tokens=False)))
            t['l1'].append(run(cmd1)[0] - load_s)
            if diff1 is None:
                diff1 = stream_diff(out, ref)
            t['ln'].append(run(cmdn)[0] - load_s)
            if diffn is None:
                diffn = stream_diff(out, ref)
        if short == 'gpt2':
            # GPT-2's original files (encoder.json, vocab.bpe) must encode the same
            orig = os.path.join(tmp, 'gpt2orig.lmtok')
            run([f'{BIN}/tok-train', '-q', '--import', f'gpt2:{SHARED}/encoder.json,{SHARED}/vocab.bpe',
                 '-o', orig])
            run([f'{BIN}/tok-encode', '-q', '-t', orig, '--doc-sep', SEP, '-o', out, src])
            print(f'# GPT-2 encoder.json + vocab.bpe import: '
                  f'{"identical" if stream_diff(out, ref) == 0 else "DIFFERENT"} to tiktoken gpt2')
        mb = nbytes / 1e6
        v = {k: rate(mb, best_median(x)) for k, x in t.items()}
        r = dict(encoding=short, identical='yes' if diff1 == 0 and diffn == 0 else f'{max(diff1, diffn)} docs differ',
                 hf_identical='yes' if hf_diff == 0 else f'{hf_diff} docs differ',
                 lmt_1=bm(v['l1'], 1), tiktoken_1=bm(v['tk1'], 1), hf_1=bm(v['hf1'], 1),
                 x_tiktoken_1=bm(ratio(v['l1'], v['tk1'])), x_hf_1=bm(ratio(v['l1'], v['hf1'])),
                 lmt_n=bm(v['ln'], 1), tiktoken_n=bm(v['tkn'], 1), hf_n=bm(v['hfn'], 1),
                 x_tiktoken_n=bm(ratio(v['ln'], v['tkn'])), x_hf_n=bm(ratio(v['ln'], v['hfn'])),
                 load_s=round(load_s, 3), ok=diff1 == 0 and diffn == 0,
                 seconds_all={k: [round(y, 4) for y in x] for k, x in t.items()})
        rows.append(r)
    load.stop()
    ceil.stop()
    print(f'# MB/s single-threaded (_1) and on {ncores} threads (_n), best/median of {R}; '
          f'x_ = lmt / peer, best/best and median/median')
    table(rows, ['encoding', 'identical', 'hf_identical', 'lmt_1', 'tiktoken_1', 'hf_1', 'x_tiktoken_1',
                 'x_hf_1', 'lmt_n', 'tiktoken_n', 'hf_n', 'x_tiktoken_n', 'x_hf_n', 'load_s'])
    print(load.line())
    print(ceil.line())
    print()
    return dict(corpus=kind, file=path, stats=st, load=load.result, ceiling=ceil.result, results=rows)


def stream_diff(path, ref):
    """How many documents of the stream at path differ from ref's ids (or all, if the count does)."""
    got = read_stream_ids(path)
    if len(got) != len(ref):
        return max(len(got), len(ref))
    return sum(g != r for g, r in zip(got, ref))


def main():
    ap = argparse.ArgumentParser()
    add_corpus_args(ap)
    ap.add_argument('--mb', type=float, default=20)
    ap.add_argument('--encodings', default='gpt2,cl100k,o200k')
    ap.add_argument('--json', help='write the results here')
    a = ap.parse_args()
    import tiktoken
    import tokenizers
    print(f'# {machine()}')
    print(f'# tiktoken {tiktoken.__version__}, tokenizers {tokenizers.__version__}; up to {a.mb} MB of each corpus')
    tmp = tempfile.mkdtemp(prefix='lmt-bench-')
    try:
        results = [bench(a, k, tmp, None) for k in kinds(a)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    save(a.json, dict(machine=machine(), repeat=a.repeat, corpora=results))
    bad = [f'{c["corpus"]} {r["encoding"]}' for c in results for r in c['results'] if not r['ok']]
    if bad:
        sys.exit('lmt output differs from tiktoken: ' + ', '.join(bad))


if __name__ == '__main__':
    main()
