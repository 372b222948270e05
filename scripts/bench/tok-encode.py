#!/usr/bin/env python3
"""tok-encode against tiktoken and HuggingFace tokenizers, same tokenizer, same text.

    scripts/bench/tok-encode.py [--corpus FILE] [--mb 20] [--encodings gpt2,cl100k,o200k]

The tokenizers are OpenAI's published rank files from ../shared/data/tokenizers,
imported into lmt with tok-train --import and exported to tokenizer.json for HF. The
text is the benchmark corpus (scripts/bench/make-corpus) made valid UTF-8 (tiktoken
takes Python strings), cut into documents of about 4 kB at line ends. Every peer
encodes every document; the outputs are compared id for id, and the MB/s of each
is reported single-threaded and on all cores, with lmt's ratio to each peer.
Timing: the peers' encode calls (tokenizer loading excluded); lmt's wall time of the
whole tok-encode process minus the time it takes to load the tokenizer (measured
separately), so reading, encoding and writing the stream are all counted for lmt.
Every figure is the best of --repeat runs (default 3), each contender alike.
"""
import argparse
import os
import struct
import sys
import tempfile
import time

from common import BIN, SHARED, TOP, machine, run, table, save

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--corpus', default='/tmp/lmt-bench/corpus.txt')
    ap.add_argument('--mb', type=float, default=20)
    ap.add_argument('--encodings', default='gpt2,cl100k,o200k')
    ap.add_argument('--json', help='write the results here')
    ap.add_argument('--repeat', type=int, default=3)
    a = ap.parse_args()
    import tiktoken
    import tokenizers
    from tiktoken.load import load_tiktoken_bpe

    if not os.path.exists(a.corpus):
        os.makedirs(os.path.dirname(a.corpus), exist_ok=True)
        run([os.path.join(TOP, 'scripts/bench/make-corpus'), a.corpus, '64'])
    raw = open(a.corpus, 'rb').read()[:int(a.mb * 1e6)]
    text = raw.decode('utf-8', errors='replace')
    lines = text.split('\n')
    docs, cur, n = [], [], 0
    for l in lines:
        cur.append(l)
        n += len(l) + 1
        if n >= 4000:
            docs.append('\n'.join(cur))
            cur, n = [], 0
    if cur:
        docs.append('\n'.join(cur))
    tmp = tempfile.mkdtemp(prefix='lmt-bench-')
    src = os.path.join(tmp, 'docs.txt')
    with open(src, 'w', encoding='utf-8', newline='') as f:
        f.write(SEP.join(docs))
    nbytes = sum(len(d.encode()) for d in docs)
    ncores = os.cpu_count()
    print(f'# {machine()}')
    print(f'# {len(docs)} documents, {nbytes / 1e6:.1f} MB; tiktoken {tiktoken.__version__}, '
          f'tokenizers {tokenizers.__version__}')
    rows, results = [], []
    names = {'gpt2': 'gpt2', 'cl100k': 'cl100k_base', 'o200k': 'o200k_base'}
    for short in a.encodings.split(','):
        name = names[short]
        import json
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
        R = a.repeat

        def best(f):
            ts = []
            for _ in range(R):
                t0 = time.perf_counter()
                f()
                ts.append(time.perf_counter() - t0)
            return min(ts)
        ref = [enc.encode_ordinary(d) for d in docs]
        tk1 = best(lambda: [enc.encode_ordinary(d) for d in docs])
        tkn = best(lambda: enc.encode_ordinary_batch(docs, num_threads=ncores))
        hout = htok.encode_batch(docs, add_special_tokens=False)
        hf_same = all(h.ids == r for h, r in zip(hout, ref))
        hfn = best(lambda: htok.encode_batch(docs, add_special_tokens=False))
        quarter = docs[:len(docs) // 4]
        hf1 = best(lambda: [htok.encode(d, add_special_tokens=False) for d in quarter]) * len(docs) / len(quarter)
        # lmt: load time alone (an empty input), then the whole run
        empty = os.path.join(tmp, 'empty.txt')
        open(empty, 'w').close()
        load = min(run([f'{BIN}/tok-encode', '-q', '-t', tok, '-o', os.path.join(tmp, 'e.lmtoks'), empty])[0]
                   for _ in range(3))
        out = os.path.join(tmp, 'out.lmtoks')
        cmd1 = [f'{BIN}/tok-encode', '-q', '-j1', '-t', tok, '--doc-sep', SEP, '-o', out, src]
        cmdn = [f'{BIN}/tok-encode', '-q', f'-j{ncores}', '-t', tok, '--doc-sep', SEP, '-o', out, src]
        l1 = min(run(cmd1)[0] for _ in range(R))
        same = read_stream_ids(out) == ref
        runs = [run(cmdn) for _ in range(R)]
        ln, rssn = min(r[0] for r in runs), max(r[1] for r in runs)
        same_n = read_stream_ids(out) == ref
        l1 -= load
        ln -= load
        if short == 'gpt2':
            # GPT-2's original files (encoder.json, vocab.bpe) must encode the same
            orig = os.path.join(tmp, 'gpt2orig.lmtok')
            run([f'{BIN}/tok-train', '-q', '--import', f'gpt2:{SHARED}/encoder.json,{SHARED}/vocab.bpe',
                 '-o', orig])
            run([f'{BIN}/tok-encode', '-q', '-t', orig, '--doc-sep', SEP, '-o', out, src])
            print(f'# GPT-2 encoder.json + vocab.bpe import: {"identical" if read_stream_ids(out) == ref else "DIFFERENT"} '
                  f'to tiktoken gpt2')
        mb = nbytes / 1e6
        r = dict(encoding=short, identical=same and same_n, hf_identical=hf_same,
                 lmt_1=round(mb / l1, 1), tiktoken_1=round(mb / tk1, 1), hf_1=round(mb / hf1, 1),
                 lmt_n=round(mb / ln, 1), tiktoken_n=round(mb / tkn, 1), hf_n=round(mb / hfn, 1),
                 load_s=round(load, 3), lmt_rss_mb=round(rssn / 1e6))
        r['x_tiktoken_1'] = round(r['lmt_1'] / r['tiktoken_1'], 2)
        r['x_hf_1'] = round(r['lmt_1'] / r['hf_1'], 2)
        r['x_tiktoken_n'] = round(r['lmt_n'] / r['tiktoken_n'], 2)
        r['x_hf_n'] = round(r['lmt_n'] / r['hf_n'], 2)
        rows.append(r)
        results.append(r)
    print(f'# MB/s single-threaded (_1) and on {ncores} threads (_n); x_ = lmt / peer')
    table(rows, ['encoding', 'identical', 'hf_identical', 'lmt_1', 'tiktoken_1', 'hf_1', 'x_tiktoken_1',
                 'x_hf_1', 'lmt_n', 'tiktoken_n', 'hf_n', 'x_tiktoken_n', 'x_hf_n', 'load_s'])
    save(a.json, dict(machine=machine(), mb=nbytes / 1e6, docs=len(docs), results=results))
    if not all(r['identical'] for r in rows):
        sys.exit('lmt output differs from tiktoken')


if __name__ == '__main__':
    main()
