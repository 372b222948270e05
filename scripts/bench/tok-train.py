#!/usr/bin/env python3
"""tok-train against sentencepiece's BPE trainer and HuggingFace's BpeTrainer.

    scripts/bench/run tok-train [--corpus synthetic|real|both] [--vocab 32768]
                                [--repeat 3] [--skip-spm] [--json FILE]
    scripts/bench/run tok-train --phases N [--corpus ...] [--json FILE]

Every trainer gets the same documents, byte for byte. They are written once as a
JSONL file: lmt's tok-train reads it, and HF's trainer runs in its own process that
reads the same file line by line (json.loads) and trains with train_from_iterator
over the decoded texts, so both parse the same JSON and see each document whole,
newlines included. (HF's train([file]) on a text file would instead take each line
with its newline, and learn tokens such as "Ġ\\n" that a line-per-document reader
never sees.) The documents: synthetic, one line of make-corpus's text each; real,
one file each (scripts/bench/corpus.py).

sentencepiece reads sentences, one per line, and cannot take a document with
newlines in it: it gets the same documents' lines (the synthetic corpus's lines are
its documents, so there it is the same input; the real corpus's documents are split
at newlines, empty lines dropped, so spm never sees a newline). It has no regex
pre-tokenizer and splits at whitespace, so it is compared on time and memory only.

Same vocabulary size, all cores for everyone. lmt and HF use the GPT-2 pre-tokenizer
pattern (HF's ByteLevel pre-tokenizer is exactly that pattern), minimum pair count
2, no special tokens. Each trainer runs as its own process; wall time and peak RSS
come from wait4(2) on that process. Each time is printed as best/median of --repeat
runs, the trainers taking turns; the ratios are lmt's speedup over each peer.
Whether they did the same work: the share of HF's vocabulary that lmt's holds, and
bytes per token of each on the first 5 MB of documents.

--phases N measures lmt alone instead: tok-train -j1 and -j<all cores, at least 2>
take turns N times on each corpus's JSONL, and each of its two phases is timed as its
`trained` record gives it (count_seconds: reading and counting the words, the
per-thread tables merged included; merge_seconds: the BPE merges, set-up and freeing
included), best and median of each, and the speedup of all cores over one. Merging is
also given in the parts its record splits it into: set-up (the threads started and the
tables made before the first merge), steps (applying each batch of merges, every thread) and picking (choosing
each batch, which one thread does alone). Before and after the runs, the machine's own
ceiling for all cores against one (common.Ceiling).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import corpus as corpora
from common import (BIN, Ceiling, Load, add_corpus_args, bm, best_median, corpus_file, header, kinds, machine,
                    ratio, run, save, speedup_row, table)

HF_SCRIPT = r'''
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
corpus, vocab, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def docs():
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)["text"]

tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tr = trainers.BpeTrainer(vocab_size=vocab, min_frequency=2, show_progress=False,
                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
tok.train_from_iterator(docs(), tr)
tok.save(out)
print(tok.get_vocab_size())
'''


def documents(kind, path):
    if kind == 'synthetic':
        return [l for l in open(path, encoding='utf-8').read().split('\n') if l]
    return corpora.read_jsonl(path)


def prepare(kind, path, tmp):
    """Write the documents for lmt and HF (JSONL) and for spm (lines); return their statistics."""
    texts = documents(kind, path)
    corpora.write_jsonl(f'{tmp}/{kind}.jsonl', texts)
    lines = 0
    with open(f'{tmp}/{kind}.spm.txt', 'w', encoding='utf-8') as f:
        for t in texts:
            for l in t.split('\n'):
                if l.strip():
                    f.write(l + '\n')
                    lines += 1
    return dict(corpora.stats(texts), spm_lines=lines)


def compare(docs, tmp):
    """Shared vocabulary and bytes per token of lmt's and HF's tokenizers (the same work?)."""
    import tokenizers as tk
    ours, theirs = tk.Tokenizer.from_file(f'{tmp}/lmt.json'), tk.Tokenizer.from_file(f'{tmp}/hf.json')
    sample, nb = [], 0
    for t in corpora.read_jsonl(docs, limit=5_000_000):
        sample.append(t)
        nb += len(t.encode())
    vo, vt = set(ours.get_vocab()), set(theirs.get_vocab())
    bpt = {name: round(nb / sum(len(e.ids) for e in t.encode_batch(sample, add_special_tokens=False)), 3)
           for name, t in (('lmt', ours), ('hf', theirs))}
    return dict(bytes_per_token=bpt, sample_docs=len(sample), sample_bytes=nb,
                shared=len(vo & vt) / len(vt), version=tk.__version__)


def child(*args):
    """Run a step of this script in a child process; its JSON result. The corpus and
    the tokenizers module stay out of this process, whose size each trainer's peak
    RSS would otherwise start from (wait4's ru_maxrss counts the forked image)."""
    return json.loads(run([sys.executable, os.path.abspath(__file__), '--child'] + list(args),
                          stdout=subprocess.PIPE)[2])


def bench(a, kind, tmp):
    path = corpus_file(kind, a)
    docs, spm_in = f'{tmp}/{kind}.jsonl', f'{tmp}/{kind}.spm.txt'
    st = child('prepare', kind, path, tmp)
    header(kind, path, st, ' as JSONL, one document each for lmt and HF')
    if not a.skip_spm:
        same = 'the same lines' if kind == 'synthetic' else 'the documents split at newlines, without them'
        print(f'# spm_train reads a sentence a line: {st["spm_lines"]} lines, {same} (empty lines dropped)')
    n = os.cpu_count()
    load = Load()
    times = {}
    rss = {}
    vocab = {}
    for rep in range(a.repeat):
        w, r, out = run([f'{BIN}/tok-train', '-q', '-j', str(n), '-p', 'gpt2', '--no-special',
                         '-v', str(a.vocab), '-o', f'{tmp}/lmt.lmtok', docs], stdout=subprocess.PIPE)
        times.setdefault('lmt', []).append(w)
        rss['lmt'] = max(rss.get('lmt', 0), r)
        vocab['lmt'] = [l for l in out.splitlines() if '"summary"' in l][0] \
            .split('"vocab_size":')[1].split(',')[0]
        w, r, out = run([sys.executable, '-c', HF_SCRIPT, docs, str(a.vocab), f'{tmp}/hf.json'],
                        stdout=subprocess.PIPE)
        times.setdefault('hf', []).append(w)
        rss['hf'] = max(rss.get('hf', 0), r)
        vocab['hf'] = out.strip()
        if not a.skip_spm:
            w, r, _ = run(['spm_train', f'--input={spm_in}', f'--model_prefix={tmp}/spm',
                           f'--vocab_size={a.vocab}', '--model_type=bpe', f'--num_threads={n}',
                           '--minloglevel=2', '--max_sentence_length=100000'])
            times.setdefault('spm', []).append(w)
            rss['spm'] = max(rss.get('spm', 0), r)
            vocab['spm'] = a.vocab
    load.stop()
    run([f'{BIN}/tok-train', '-q', '-t', f'{tmp}/lmt.lmtok', '--export-hf', f'{tmp}/lmt.json'])
    cmp = child('compare', docs, tmp)
    bpt = cmp['bytes_per_token']
    names = {'lmt': 'lmt tok-train', 'hf': 'HF BpeTrainer (train_from_iterator)',
             'spm': 'spm_train bpe (lines)'}
    base = best_median(times['lmt'])
    rows = []
    for k in times:
        s = best_median(times[k])
        rows.append(dict(trainer=names[k], seconds=bm(s), peak_rss_mb=round(rss[k] / 1e6), vocab=vocab[k],
                         lmt_speedup=bm(ratio(s, base)), rss_vs_lmt=round(rss[k] / max(1, rss['lmt']), 2),
                         bytes_per_token=bpt.get(k, ''), seconds_all=[round(x, 3) for x in times[k]]))
    rows[0]['vocab_shared_with_hf'] = f'{cmp["shared"]:.1%}'
    print(f'# seconds and lmt_speedup (peer seconds / lmt seconds): best/median of {a.repeat}; '
          f'bytes_per_token on the first {cmp["sample_docs"]} documents ({cmp["sample_bytes"] / 1e6:.1f} MB)')
    table(rows, ['trainer', 'seconds', 'lmt_speedup', 'peak_rss_mb', 'rss_vs_lmt', 'vocab', 'bytes_per_token',
                 'vocab_shared_with_hf'])
    print(load.line())
    print()
    return dict(corpus=kind, file=path, stats=st, load=load.result, rows=rows)


def phases(a, kind, tmp):
    """tok-train -j1 against -j<cores>, phase by phase (the module's --phases)."""
    path = corpus_file(kind, a)
    docs = f'{tmp}/{kind}.jsonl'
    st = child('prepare', kind, path, tmp)
    header(kind, path, st, ' as JSONL')
    n = max(2, os.cpu_count())
    ceil = Ceiling(n)
    load = Load()
    t = {}
    for _ in range(a.phases):
        for j in (1, n):
            _, _, out = run([f'{BIN}/tok-train', '-q', '-j', str(j), '-p', 'gpt2', '--no-special', '-v',
                             str(a.vocab), '-o', f'{tmp}/lmt.lmtok', docs], stdout=subprocess.PIPE)
            rec = [json.loads(l) for l in out.splitlines() if '"trained"' in l][0]
            for ph in ('count', 'merge', 'setup', 'step', 'pick'):
                t.setdefault((ph, j), []).append(rec[f'{ph}_seconds'])
    load.stop()
    ceil.stop()
    rows = [speedup_row(name, t[(ph, 1)], t[(ph, n)], n, 3 if ph in ('count', 'merge') else 4)
            for ph, name in (('count', 'counting'), ('merge', 'merging'), ('setup', 'merging: set-up'),
                             ('step', 'merging: steps'), ('pick', 'merging: picking'))]
    print(f'# seconds: best/median of {a.phases} runs each, -j1 and -j{n} taking turns; '
          f'speedup: -j1 seconds / -j{n} seconds; merging\'s parts as its trained record gives them '
          f'(picking: choosing each batch of merges, one thread alone; the rest is progress records, '
          f'freeing, stopping the threads)')
    table(rows, ['phase', 'seconds_j1', f'seconds_j{n}', 'speedup'])
    print(load.line())
    print(ceil.line())
    print()
    return dict(corpus=kind, file=path, stats=st, load=load.result, ceiling=ceil.result, phases=rows)


def main():
    ap = argparse.ArgumentParser()
    add_corpus_args(ap)
    ap.add_argument('--vocab', type=int, default=32768)
    ap.add_argument('--skip-spm', action='store_true')
    ap.add_argument('--json')
    ap.add_argument('--phases', type=int, default=0, metavar='N',
                    help='lmt alone: -j1 against all cores, each phase, N turns each')
    ap.add_argument('--child', nargs='+', help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        step = {'prepare': prepare, 'compare': compare}[a.child[0]]
        print(json.dumps(step(*a.child[1:])))
        return
    print(f'# {machine()}')
    if a.phases > 0:
        print(f'# lmt tok-train phases, vocab {a.vocab}, GPT-2 pattern')
        step, extra = phases, dict(phases=a.phases)
    else:
        _, _, v = run([sys.executable, '-c', 'import tokenizers; print(tokenizers.__version__)'],
                      stdout=subprocess.PIPE)
        print(f'# vocab {a.vocab}; tokenizers {v.strip()}; {os.cpu_count()} threads each')
        step, extra = bench, dict(repeat=a.repeat)
    tmp = tempfile.mkdtemp(prefix='lmt-bench-')
    results = [step(a, k, tmp) for k in kinds(a)]
    save(a.json, dict(machine=machine(), vocab=a.vocab, corpora=results, **extra))
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    main()
