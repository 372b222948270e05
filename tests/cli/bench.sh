#!/bin/sh
# tests/cli/bench.sh: the benchmark scripts that train (scripts/bench/precision.py,
# scripts/bench/train_torch.py), on sizes that take seconds: what they write, not
# how fast anything ran; and the data-plane benchmarks' parts that need no peer
# (make-corpus --real, the corpus statistics, the load meter, dedup's corpus build).
. tests/cli/lib.sh
# the scripts import each other (common.py, corpus.py): no __pycache__ in the tree
export PYTHONDONTWRITEBYTECODE=1

# the real corpus: one JSONL document per file, the same twice on the same machine
scripts/bench/make-corpus --real "$T/real.jsonl" 0.3 2> "$T/mc.err" \
	&& scripts/bench/make-corpus --real "$T/real2.jsonl" 0.3 2>> "$T/mc.err" \
	&& ok "make-corpus --real runs" || notok "make-corpus --real" "$(tail -c 600 "$T/mc.err")"
same "make-corpus --real: the same documents from the same files" "$T/real.jsonl" "$T/real2.jsonl"
python3 - "$T/real.jsonl" > "$T/mc.chk" 2>&1 <<'PY' && ok "make-corpus --real: a document a file, each a readable file's text, 0.3 MB of text ending at the document that reaches it" || notok "make-corpus --real output" "$(cat "$T/mc.chk")"
import gzip, json, sys
sys.path.insert(0, 'scripts/bench')
import corpus
docs = [json.loads(l) for l in open(sys.argv[1], encoding='utf-8')]
assert docs, 'no documents'
src = [d['source'] for d in docs]
assert len(set(src)) == len(src), 'a file twice'
n = 0
for d in docs:
    assert d['text'].strip(), d['source']
    assert corpus.read_doc(d['source']) == d['text'], d['source']
    n += len(d['text'].encode())
last = len(docs[-1]['text'].encode())
assert n >= 300000 and n - last < 300000, (n, last)
PY

# the statistics every benchmark prints about its corpus
printf '%s\n' '{"text": "abc\n"}' '{"text": "\u00e9"}' > "$T/st.jsonl"
printf 'abc\n\n\303\251\n' > "$T/st.txt"
python3 scripts/bench/corpus.py stats "$T/st.jsonl" "$T/st.txt" > "$T/st.out" 2> "$T/st.err"
python3 - "$T/st.out" > "$T/st.chk" 2>&1 <<'PY' && ok "corpus.py stats: documents, bytes, mean size and non-ASCII share of JSONL and of a line-per-document text" || notok "corpus.py stats" "$(cat "$T/st.chk" "$T/st.out")"
import json, sys
j, t = [json.loads(l) for l in open(sys.argv[1])]
assert (j['docs'], j['bytes'], j['mean_bytes'], j['non_ascii']) == (2, 6, 3.0, 2 / 6), j
assert (t['docs'], t['bytes'], t['mean_bytes'], t['non_ascii']) == (2, 5, 2.5, 2 / 5), t
PY
grep -q '2 documents, 0.0 MB, mean 0.00 kB a document, 33.3% of bytes non-ASCII' "$T/st.err" \
	&& ok "... and says them in words" || notok "corpus.py stats on stderr" "$(cat "$T/st.err")"

# the load meter: a busy child's CPU is ours (however busy the machine is otherwise),
# and ours and the others' together fit in the machine's cores
(cd scripts/bench && python3 -c '
import common
L = common.Load()
common.run(["sh", "-c", "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done"])
r = L.stop()
assert set(r) == {"load_start", "load_end", "wall_s", "own_cores", "other_cores", "steal_cores"}, r
import os
assert r["own_cores"] * r["wall_s"] > 0.05 and r["other_cores"] >= 0, r
assert r["own_cores"] + r["other_cores"] <= os.cpu_count() + 0.2, r
assert L.line().startswith("# load: 1-minute load average "), L.line()
print(L.line())') > "$T/load.out" 2>&1 \
	&& ok "common.Load: load average, our cores and other processes' cores" || notok "common.Load" "$(cat "$T/load.out")"

# the ceiling the speedup benchmarks print beside theirs: two loops, each speedup
# the threads times one thread's time over theirs (times printed to 0.1 ms of some
# 20-50 ms, hence 1% slack)
C=$(dirname "$BIN")/bench/ceiling
"$C" -j 2 -r 2 > "$T/ceil.out" 2> "$T/ceil.err"
python3 - "$T/ceil.out" > "$T/ceil.chk" 2>&1 <<'PY' && ok "bench/ceiling -j 2 -r 2: an arithmetic and a memory loop, 2 rounds, speedups 2 x one thread's time / two threads' time, best and median" || notok "bench/ceiling" "$(cat "$T/ceil.chk" "$T/ceil.err" | tail -c 600)"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
assert [x['loop'] for x in r] == ['alu', 'memory'], r
for x in r:
    assert x['threads'] == 2 and x['rounds'] == 2, x
    assert 0 < x['one_s_best'] <= x['one_s_median'] and 0 < x['all_s_best'] <= x['all_s_median'], x
    for k in ('best', 'median'):
        want = 2 * x[f'one_s_{k}'] / x[f'all_s_{k}']
        assert abs(x[f'speedup_{k}'] / want - 1) < 0.01, (k, want, x)
PY
check_fail "bench/ceiling -j 0: exit 2, says what -j takes" 2 "-j '0': expected a whole number from 1 to 1024" "$C" -j 0
[ ! -s "$T/.out" ] && ok "... and prints nothing on stdout" || notok "bench/ceiling -j 0 printed" "$(head -c 300 "$T/.out")"
check_fail "bench/ceiling --threads: exit 2, unknown argument" 2 "'--threads': unknown argument" "$C" --threads

# every data-plane benchmark takes --corpus and --repeat (its --help needs no peer)
for b in tok-train tok-encode dedup shard-pack long-doc; do
	scripts/bench/run $b --help > "$T/help.out" 2>&1 && grep -q -- '--corpus {synthetic,real,both}' "$T/help.out" \
		&& grep -q -- '--repeat REPEAT' "$T/help.out" && grep -q -- '--real-file' "$T/help.out" \
		|| notok "bench $b --help: --corpus synthetic|real|both, --real-file, --repeat" "$(cat "$T/help.out")"
done
ok "bench tok-train, tok-encode, dedup, shard-pack, long-doc: --corpus synthetic|real|both, --real-file, --repeat"

# tok-train's phases, lmt alone (no peer): -j1 against all cores, turn by turn
LMT_BIN="$BIN" python3 scripts/bench/tok-train.py --phases 2 --corpus real --real-file "$T/real.jsonl" \
	--vocab 400 --json "$T/ph.json" > "$T/ph.out" 2> "$T/ph.err"
python3 - "$T/ph.json" > "$T/ph.chk" 2>&1 <<'PY' && ok "bench tok-train --phases: counting, merging and merging's parts at -j1 and on all cores, 2 turns each, and the speedups" || notok "bench tok-train --phases" "$(cat "$T/ph.chk" "$T/ph.err" | tail -c 600)"
import json, sys
r = json.load(open(sys.argv[1]))
assert r['phases'] == 2, r
(c,) = r['corpora']
parts = ['merging: set-up', 'merging: steps', 'merging: picking']
assert [p['phase'] for p in c['phases']] == ['counting', 'merging'] + parts, c
for p in c['phases']:
    many = [k for k in p if k.startswith('all_j') and k != 'all_j1']
    assert len(many) == 1, p
    for k in ('all_j1', many[0]):
        assert len(p[k]) == 2 and all(x > 0 for x in p[k]), p
    b, m = map(float, p['speedup'].split('/'))
    assert abs(b - min(p['all_j1']) / min(p[many[0]])) < 0.01 and m > 0, p
# the machine's own ceiling, before the runs and after, at the threads they used
n = int(many[0][len('all_j'):])
cl = c['ceiling']
assert (cl['threads'], cl['rounds']) == (n, 5), cl
for when in ('before', 'after'):
    assert sorted(cl[when]) == ['alu', 'memory'] and all(len(v) == 2 and min(v) > 0 for v in cl[when].values()), cl
out = open(sys.argv[1][:-len('ph.json')] + 'ph.out').read()
assert '# ceiling: %d threads each running a loop against one running it' % n in out, out
# each run's parts add up to no more than its merging (each rounded to 1 ns)
ph = {p['phase']: p for p in c['phases']}
for k in ('all_j1', many[0]):
    for i in range(2):
        assert sum(ph[part][k][i] for part in parts) <= ph['merging'][k][i] + 5e-9, (k, i, ph)
PY

# one long document (lmt alone): tok-train's counting and tok-encode, -j1 against all
# cores, on the corpus joined into one text file, and on its lines in other scripts
# than Latin written again up to --mb; the outputs the same bytes
LMT_BIN="$BIN" python3 scripts/bench/long-doc.py --corpus real --real-file "$T/real.jsonl" --repeat 2 --vocab 400 \
	--mb 0.3 --json "$T/ld.json" > "$T/ld.out" 2> "$T/ld.err"
python3 - "$T/ld.json" > "$T/ld.chk" 2>&1 <<'PY' && ok "bench long-doc: counting and encoding one document at -j1 and on all cores (with gpt2's pattern and with Qwen2's regex), 2 turns each, the speedups, the same outputs; the real corpus and its lines without ASCII letters" || notok "bench long-doc" "$(cat "$T/ld.chk" "$T/ld.err" | tail -c 600)"
import json, sys
r = json.load(open(sys.argv[1]))
assert [c['corpus'] for c in r['corpora']] == ['real', 'real-scripts'], r['corpora']
for c in r['corpora']:
    assert c['stats']['docs'] == 1 and c['stats']['joined_docs'] > 1, c['stats']
    assert c['same'] == {'tokenizer': True, 'custom_tokenizer': True, 'stream': True, 'custom_stream': True}, c
    assert [p['phase'] for p in c['phases']] == ['tok-train: counting', 'tok-encode', 'tok-train: counting, Qwen2 regex',
                                                 'tok-encode: Qwen2 regex'], c
    for p in c['phases']:
        many = [k for k in p if k.startswith('all_j') and k != 'all_j1']
        assert len(many) == 1 and len(p['all_j1']) == 2 and len(p[many[0]]) == 2, p
        b, m = map(float, p['speedup'].split('/'))
        assert abs(b - min(p['all_j1']) / min(p[many[0]])) < 0.01 and m > 0, p
    assert sorted(c['ceiling']['before']) == ['alu', 'memory'], c['ceiling']
st = r['corpora'][1]['stats']
assert st['non_ascii'] >= 0.5 and 0 < st['bytes'] <= 0.31e6, st
PY

# dedup's corpus on the real documents: planted near-copies after their originals
python3 scripts/bench/dedup.py --corpus real --real-file "$T/real.jsonl" --real-pairs 3 \
	--build-only "$T/dd.jsonl" "$T/dd.labels" > "$T/dd.out" 2> "$T/dd.err" \
	&& ok "bench dedup --build-only --corpus real runs" || notok "bench dedup --build-only" "$(tail -c 600 "$T/dd.err")"
python3 - "$T" > "$T/dd.chk" 2>&1 <<'PY' && ok "... every real document once, 3 copies each after its original, their Jaccard similarity in [0, 1], the statistics of all" || notok "dedup's real corpus" "$(cat "$T/dd.chk")"
import json, sys
t = sys.argv[1]
real = [json.loads(l)['text'] for l in open(f'{t}/real.jsonl', encoding='utf-8')]
docs = [json.loads(l)['text'] for l in open(f'{t}/dd.jsonl', encoding='utf-8')]
labels = [json.loads(l) for l in open(f'{t}/dd.labels')]
st = json.loads(open(f'{t}/dd.out').read())
assert len(labels) == 3 and len(docs) == len(real) + 3 == st['docs'], (len(labels), len(docs), len(real), st)
copies = {p['copy'] for p in labels}
assert [d for i, d in enumerate(docs) if i not in copies] == real
for p in labels:
    assert p['orig'] < p['copy'] and docs[p['orig']] in real and 0 <= p['jaccard'] <= 1, p
PY

P=$T/prec
scripts/bench/run precision -o "$P" --updates 6 --eval-every 3 --eval-seqs 4 --docs 300 --vocab 300 \
	--layers 1 --heads 2 --channels 32 --seq-len 32 --batch 2 > "$T/prec.out" 2> "$T/prec.err" \
	&& ok "bench precision runs" || notok "bench precision" "$(tail -c 600 "$T/prec.err")"
n=$(grep -c '^| fp32 \|^| bf16 \|^| fp16 ' "$P/table.md")
[ "$n" = 3 ] && ok "table.md has a row per precision" || notok "table.md rows: $n" "$(cat "$P/table.md")"
python3 - "$P" > "$T/prec.chk" 2>&1 <<'PY' && ok "results.json: 6 losses and evals at 3 and 6 per precision; loss.svg: a train and a validation line for each, and a legend" || notok "results and plot" "$(cat "$T/prec.chk")"
import json, sys, xml.dom.minidom as md
d = sys.argv[1]
r = json.load(open(f'{d}/results.json'))['runs']
assert sorted(r) == ['bf16', 'fp16', 'fp32'], sorted(r)
for p, v in r.items():
    assert len(v['train_loss']) == 6, (p, v['train_loss'])
    assert [u for u, _ in v['val']] == [3, 6], (p, v['val'])
svg = md.parse(f'{d}/loss.svg')
lines = svg.getElementsByTagName('polyline')
assert len(lines) == 6, len(lines)
assert all(len(l.getAttribute('points').split()) in (6, 2) for l in lines)
text = ' '.join(t.firstChild.data for t in svg.getElementsByTagName('text'))
for p in r:
    assert f'{p} train' in text and f'{p} val' in text, text
PY
scripts/bench/run precision -o "$P" --updates 2 --eval-every 1 --eval-seqs 4 --docs 300 --vocab 300 \
	--layers 1 --heads 2 --channels 32 --seq-len 32 --batch 2 --precision fp32 > /dev/null 2> "$T/prec.err" \
	&& ok "... and runs again into the same -o" || notok "bench precision into the same -o" "$(tail -c 600 "$T/prec.err")"

if /usr/bin/python3 -c 'import torch' 2> /dev/null; then
	D=$P/work/data
	for ac in none bf16; do
		/usr/bin/python3 scripts/bench/train_torch.py --data "$D" --layers 1 --heads 2 --channels 32 \
			--micro-batch 2 --steps 2 --warmup-steps 1 --threads 1 --autocast $ac --kernels > "$T/torch-$ac.json" \
			2> "$T/torch.err" || notok "train_torch.py --autocast $ac" "$(tail -c 600 "$T/torch.err")"
	done
	python3 - "$T" > "$T/torch.chk" 2>&1 <<'PY' && ok "train_torch.py: --autocast bf16 runs its GEMMs in oneDNN (fp32 in none), losses within 0.05 of fp32's" || notok "train_torch.py --autocast" "$(cat "$T/torch.chk")"
import json, sys
f = json.loads(open(f'{sys.argv[1]}/torch-none.json').read().splitlines()[-1])
b = json.loads(open(f'{sys.argv[1]}/torch-bf16.json').read().splitlines()[-1])
assert f['autocast'] == 'none' and b['autocast'] == 'bf16'
assert f['onednn_gemms'] == {}, f['onednn_gemms']
assert b['onednn_gemms'] and all(k.startswith('matmul ') or k.startswith('inner_product ') for k in b['onednn_gemms'])
d = [abs(x - y) for x, y in zip(f['losses'], b['losses'])]
assert max(d) < 0.05, (f['losses'], b['losses'])
PY
else
	ok "# SKIP train_torch.py: /usr/bin/python3 has no torch"
fi

finish
