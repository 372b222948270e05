#!/usr/bin/env python3
"""tok-train against sentencepiece's BPE trainer and HuggingFace's BpeTrainer.

    scripts/bench/tok-train.py [--corpus FILE] [--vocab 32768] [--skip-spm]

Same corpus (scripts/bench/make-corpus: at least 50 MB of documentation, manual
pages and Python sources, one sentence per line as sentencepiece wants), same
vocabulary size, all cores for everyone. lmt and HF use the GPT-2 pre-tokenizer
pattern (HF's ByteLevel pre-tokenizer is exactly that pattern); sentencepiece has
no regex pre-tokenizer and splits at whitespace, so it is compared on time and
memory only. Minimum pair count 2 for lmt and HF. Each trainer runs as its own
process; wall time and peak RSS come from wait4(2) on that process.
"""
import argparse
import os
import sys
import tempfile

from common import BIN, TOP, machine, run, table, save

HF_SCRIPT = r'''
import sys
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
corpus, vocab, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tr = trainers.BpeTrainer(vocab_size=vocab, min_frequency=2, show_progress=False,
                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
tok.train([corpus], tr)
tok.save(out)
print(tok.get_vocab_size())
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--corpus', default='/tmp/lmt-bench/corpus.txt')
    ap.add_argument('--vocab', type=int, default=32768)
    ap.add_argument('--skip-spm', action='store_true')
    ap.add_argument('--json')
    a = ap.parse_args()
    if not os.path.exists(a.corpus):
        os.makedirs(os.path.dirname(a.corpus), exist_ok=True)
        run([os.path.join(TOP, 'scripts/bench/make-corpus'), a.corpus, '64'])
    size = os.path.getsize(a.corpus)
    n = os.cpu_count()
    tmp = tempfile.mkdtemp(prefix='lmt-bench-')
    import tokenizers
    print(f'# {machine()}')
    print(f'# corpus {a.corpus}: {size / 1e6:.1f} MB; vocab {a.vocab}; tokenizers {tokenizers.__version__}')
    rows = []
    w, rss, out = run([f'{BIN}/tok-train', '-q', '-j', str(n), '--txt-docs', 'line', '-p', 'gpt2',
                       '--no-special', '-v', str(a.vocab), '-o', f'{tmp}/lmt.lmtok', a.corpus],
                      stdout=__import__('subprocess').PIPE)
    vocab = [l for l in out.splitlines() if '"summary"' in l][0].split('"vocab_size":')[1].split(',')[0]
    rows.append(dict(trainer='lmt tok-train', seconds=round(w, 2), peak_rss_mb=round(rss / 1e6), vocab=vocab))
    w, rss, out = run([sys.executable, '-c', HF_SCRIPT, a.corpus, str(a.vocab), f'{tmp}/hf.json'],
                      stdout=__import__('subprocess').PIPE)
    rows.append(dict(trainer='HF BpeTrainer', seconds=round(w, 2), peak_rss_mb=round(rss / 1e6),
                     vocab=out.strip()))
    if not a.skip_spm:
        w, rss, _ = run(['spm_train', f'--input={a.corpus}', f'--model_prefix={tmp}/spm',
                         f'--vocab_size={a.vocab}', '--model_type=bpe', f'--num_threads={n}',
                         '--minloglevel=2', '--max_sentence_length=100000'])
        rows.append(dict(trainer='spm_train bpe', seconds=round(w, 2), peak_rss_mb=round(rss / 1e6),
                         vocab=a.vocab))
    # the same work? compare the two byte-level tokenizers: shared vocabulary and
    # bytes per token on the first 5 MB of the corpus
    import tokenizers as tk
    run([f'{BIN}/tok-train', '-q', '-t', f'{tmp}/lmt.lmtok', '--export-hf', f'{tmp}/lmt.json'])
    ours, theirs = tk.Tokenizer.from_file(f'{tmp}/lmt.json'), tk.Tokenizer.from_file(f'{tmp}/hf.json')
    sample = open(a.corpus, encoding='utf-8').read(5_000_000)
    vo, vt = set(ours.get_vocab()), set(theirs.get_vocab())
    for r, t in ((rows[0], ours), (rows[1], theirs)):
        r['bytes_per_token'] = round(len(sample.encode()) / len(t.encode(sample).ids), 3)
    rows[0]['vocab_shared_with_hf'] = f'{len(vo & vt) / len(vt):.1%}'
    base = rows[0]
    for r in rows:
        r['lmt_speedup'] = round(r['seconds'] / base['seconds'], 2)
        r['rss_vs_lmt'] = round(r['peak_rss_mb'] / max(1, base['peak_rss_mb']), 2)
    table(rows, ['trainer', 'seconds', 'peak_rss_mb', 'vocab', 'lmt_speedup', 'rss_vs_lmt', 'bytes_per_token',
                 'vocab_shared_with_hf'])
    save(a.json, dict(machine=machine(), corpus_mb=size / 1e6, vocab=a.vocab, rows=rows))


if __name__ == '__main__':
    main()
