#!/bin/sh
# tests/cli/bench.sh: the benchmark scripts that train (scripts/bench/precision.py,
# scripts/bench/train_torch.py), on sizes that take seconds: what they write, not
# how fast anything ran.
. tests/cli/lib.sh

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
