#!/bin/sh
# tests/cli/runcard.sh: runcard on a real (tiny) run that was stopped and resumed.
#
#   - usage errors exit 2 with one line and the hint;
#   - runcard.yaml: every scalar carries its provenance, and every value whose
#     provenance is a reference (LABEL#POINTER, LABEL:LINE#POINTER, expressions of
#     them, sha256(LABEL), bytes(LABEL)) equals what a reader of that file computes
#     here (Python's json and hashlib, no YAML library: runcard's YAML puts one
#     scalar on a line); nulls only where the comment says why; the same run gives
#     the same bytes;
#   - a removed or moved source file makes runcard exit 1 naming the field it
#     cannot fill and the file, and write nothing; --allow-missing leaves those
#     fields null and lists them; a tokenizer that is not the run's is refused;
#   - the SVG plots are well-formed XML (xml.etree) with the plotted series: one
#     polyline point per update (or eval) record, whose coordinates map back to the
#     records' values;
#   - RUNCARD.md has the model card's sections and links the plots;
#   - --release: the archive holds exactly the promised files under one top
#     directory, the weights are ckpt-reshard's export, the tokenizer.json
#     tok-train's, sha256sum -c accepts SHA256SUMS, and the same run gives the same
#     archive bytes; --verify accepts it and names a modified, a removed and an
#     added member.
. tests/cli/lib.sh
RC=$BIN/runcard

"$BIN/gen-corpus" -q --docs 400 --seed 7 -o "$T/c.jsonl" > "$T/corpus.summary.jsonl"
"$BIN/dedup-minhash" -q --summary "$T/dedup.json" "$T/c.jsonl" > "$T/kept.jsonl"
"$BIN/tok-train" -q -v 300 -o "$T/t.lmtok" --export-hf "$T/tokenizer.json" "$T/kept.jsonl" > /dev/null
"$BIN/tok-train" -q -v 310 -o "$T/t2.lmtok" "$T/kept.jsonl" > /dev/null
"$BIN/tok-encode" -q -t "$T/t.lmtok" --eos -o "$T/s.lmtoks" "$T/kept.jsonl" > /dev/null
"$BIN/shard-pack" -q -L 32 --split val=0.1 -t "$T/t.lmtok" -o "$T/d" "$T/s.lmtoks" > /dev/null
M="--data $T/d -t $T/t.lmtok --layers 1 --heads 2 --channels 32 --micro-batch 4 --threads 1 --eval-every 5 --updates 20 --ckpt-every 5"
"$BIN/train" $M --stop-at 10 -o "$T/run" > /dev/null 2> "$T/train.err" \
	&& "$BIN/train" $M --resume auto -o "$T/run" > /dev/null 2>> "$T/train.err" \
	|| notok "the fixture run trains, stops at 10 and resumes" "$(head -c 600 "$T/train.err")"
mkdir "$T/rel" "$T/run/eval"
"$BIN/ckpt-reshard" -q --export safetensors -t "$T/t.lmtok" "$T/run/ckpt/step-00000020" "$T/rel" > /dev/null
cp tests/data/runcard/eval.jsonl "$T/run/eval/ppl.jsonl"
OPTS="--dedup $T/dedup.json --corpus $T/corpus.summary.jsonl"

# ---- the command line ----

check "--help exits 0" $RC --help
grep -q "^usage: runcard" "$T/.out" && ok "--help prints the usage on stdout" || notok "--help output"
check "--version exits 0" $RC --version
grep -q "^runcard (lmt)" "$T/.out" && ok "--version names the tool" || notok "--version output"
check_fail "no RUN is a usage error" 2 "give one RUN directory" $RC
check_fail "two RUNs" 2 "nothing more" $RC "$T/run" "$T/run"
check_fail "--dtype without --release" 2 "--dtype applies to --release" $RC --dtype bf16 "$T/run"
check_fail "a release not named .tar.zst" 2 "name it .tar.zst" $RC --release "$T/x.tar.gz" "$T/run"
check_fail "--verify with a RUN" 2 "--verify takes the archive alone" $RC --verify "$T/x.tar.zst" "$T/run"
check_fail "--release with --allow-missing" 2 "needs a complete card" $RC --allow-missing --release "$T/x.tar.zst" "$T/run"
check_fail "an unknown option" 2 "unknown option or missing argument: '--weights'" $RC --weights "$T/rel" "$T/run"
grep -q "Try 'runcard --help'" "$T/.err" && ok "usage errors point to --help" || notok "usage hint"
check_fail "RUN that is not a directory" 1 "is not a run directory" $RC "$T/nonexistent"

# ---- the record ----

check "runcard on the run" $RC $OPTS -o "$T/card" "$T/run"
jq -e '.event == "runcard" and .missing == 0 and (.files | length) == 7' "$T/.out" > /dev/null \
	&& ok "a JSONL runcard record: 7 files, nothing missing" || notok "runcard record" "$(cat "$T/.out")"
[ -f "$T/card/runcard.yaml" ] && [ -f "$T/card/RUNCARD.md" ] && [ "$(ls "$T/card/plots" | tr '\n' ' ')" = \
	"grad_norm.svg loss.svg lr.svg memory.svg throughput.svg " ] \
	&& ok "runcard.yaml, RUNCARD.md and five plots" || notok "outputs" "$(ls -R "$T/card")"

# The provenance check: for each scalar line "KEY: VALUE  # COMMENT" (or
# "- VALUE  # COMMENT"), a COMMENT that is not in parentheses is evaluated from the
# files the inputs: list names and must equal VALUE exactly (runcard copies the
# JSON number or divides as written, in the same IEEE double arithmetic).
cat > "$T/prov.py" << 'EOF'
import hashlib, json, os, re, sys
yaml_path, run = sys.argv[1], sys.argv[2]
lines = open(yaml_path, encoding="utf-8").read().split("\n")
dec = json.JSONDecoder()

def scalar(text):
    """(value, rest) of the scalar at the start of text"""
    if text[:1] in '"[':
        v, end = dec.raw_decode(text)
        return v, text[end:]
    m = re.match(r"(\S+)", text)
    tok = m.group(1)
    rest = text[m.end():]
    if tok in ("true", "false"):
        return tok == "true", rest
    if tok == "null":
        return None, rest
    if re.fullmatch(r"-?[0-9]+", tok):
        return int(tok), rest
    if re.fullmatch(r"-?[0-9.]+(e[-+][0-9]+)?", tok):
        return float(tok), rest
    return tok, rest

items = []  # (line number, key, value, comment)
for n, l in enumerate(lines, 1):
    s = l.strip()
    if not s or s.startswith("#"):
        continue
    if s.startswith("- "):
        s = s[2:]
    m = re.match(r"([A-Za-z0-9_]+):( |$)", s)
    key = None
    if m:
        key, s = m.group(1), s[m.end():]
    if s == "" or s.startswith("# "):
        continue  # a mapping or sequence follows
    v, rest = scalar(s)
    c = re.match(r"  # (.*)$", rest)
    items.append((n, key, v, c.group(1) if c else None))

# the inputs: label -> path
paths, label = {}, None
for n, key, v, c in items:
    if key == "label":
        label = v
    elif key == "path" and label is not None:
        paths[label] = v
        label = None
cache = {}
def doc(label):
    if label not in cache:
        p = paths[label]
        raw = open(p if os.path.isabs(p) or os.path.exists(p) else os.path.join(run, p), "rb").read()
        cache[label] = raw
    return cache[label]
def deref(tok):
    m = re.fullmatch(r"(sha256|bytes)\(([a-z0-9]+)\)", tok)
    if m:
        raw = doc(m.group(2))
        return hashlib.sha256(raw).hexdigest() if m.group(1) == "sha256" else len(raw)
    m = re.fullmatch(r"([a-z0-9]+)(?::([0-9]+))?#(/.*)", tok)
    raw = doc(m.group(1))
    v = json.loads(raw.split(b"\n")[int(m.group(2)) - 1]) if m.group(2) else json.loads(raw)
    for part in m.group(3).split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        v = v[int(part)] if isinstance(v, list) else v[part]
    return v
def evaluate(expr):
    toks = expr.split(" ")
    acc = deref(toks[0])
    for op, t in zip(toks[1::2], toks[2::2]):
        x = float(t) if re.fullmatch(r"[0-9.]+", t) else deref(t)
        acc = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
               "/": lambda a, b: a / b}[op](acc, x)
    return acc

bad, checked, prose = [], 0, 0
for n, key, v, c in items:
    if c is None:
        bad.append("line %d: no provenance: %s" % (n, lines[n - 1].strip()))
    elif c.startswith("("):
        prose += 1
        if v is None and len(c) < 12:
            bad.append("line %d: null without a reason" % n)
    else:
        try:
            want = evaluate(c)
        except Exception as e:
            bad.append("line %d: '%s' does not resolve: %r" % (n, c, e))
            continue
        checked += 1
        if want != v or type(want) is bool and type(v) is not bool:
            bad.append("line %d: %r, but %s is %r" % (n, v, c, want))
print("%d %d" % (checked, prose))
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
EOF
if python3 "$T/prov.py" "$T/card/runcard.yaml" "$T/run" > "$T/prov.out" 2>&1; then
	read -r nref nprose < "$T/prov.out"
	[ "$nref" -gt 200 ] && ok "every scalar of runcard.yaml has a provenance; all $nref references equal their files' values ($nprose prose)" \
		|| notok "provenance checks" "only $nref references"
else
	notok "every value of runcard.yaml equals its source" "$(head -8 "$T/prov.out")"
fi
# the check can fail: one value changed
sed 's/^  global_batch_tokens: 128 /  global_batch_tokens: 129 /' "$T/card/runcard.yaml" > "$T/edited.yaml"
if ! cmp -s "$T/edited.yaml" "$T/card/runcard.yaml" && ! python3 "$T/prov.py" "$T/edited.yaml" "$T/run" > "$T/prov.out" 2>&1 \
	&& grep -q "129, but config#/optimization/global_batch_positions is 128" "$T/prov.out"; then
	ok "the provenance check catches a changed value"
else
	notok "the provenance check catches a changed value" "$(head -3 "$T/prov.out")"
fi

Y=$T/card/runcard.yaml
grep -q '^  device_hours: .*  # metrics:[0-9]*#/clocks/device_s / 3600$' "$Y" \
	&& ok "cost in device-hours: the last update's device seconds / 3600" || notok "device_hours" "$(grep device_hours "$Y")"
grep -q '^  global_batch_tokens: 128  # config#/optimization/global_batch_positions$' "$Y" \
	&& ok "the global batch in tokens" || notok "global batch" "$(grep global_batch "$Y")"
[ "$(grep -c '^  - update: ' "$Y")" = 4 ] && grep -q '^    retained: false  # (.*step-00000005/manifest.json does not exist)' "$Y" \
	&& ok "four checkpoints, update 5 removed by retention" || notok "checkpoints" "$(grep -A3 '^  - update' "$Y")"
grep -A12 '^  processes:' "$Y" | grep -q 'ended: stop' && grep -q '^  interruptions: 1 ' "$Y" && grep -q '^  resumes: 1 ' "$Y" \
	&& grep -q 'detail: "--stop-at 10' "$Y" \
	&& ok "the history: one stop (--stop-at 10), one resume" || notok "history" "$(sed -n '/^history/,/^final:/p' "$Y")"
! grep -q '^    bytes: null' "$Y" && [ "$(grep -c '^    bytes: [0-9]' "$Y")" -ge 3 ] \
	&& ok "every retained checkpoint has its record (the resumed-from one survives the rewind)" \
	|| notok "checkpoint records" "$(grep -A6 '^  - update' "$Y")"
grep -q '^      loss_ci: \[5.481524013806797, 5.48980170918912\]  # eval1:2#/loss_ci$' "$Y" && grep -q '^  - label: eval1' "$Y" \
	&& grep -q '^        level: 0.95  # eval1:1#/bootstrap/level$' "$Y" \
	&& ok "evalppl's results from RUN/eval/*.jsonl, with intervals" || notok "evaluation" "$(grep -n eval1 "$Y" | head -3)"
name=$(basename "$T/run")
id=$(python3 -c 'import hashlib, sys
c = open(sys.argv[1], "rb").read(); e = open(sys.argv[2], "rb").readline()
print(hashlib.sha256(c + e).hexdigest()[:12])' "$T/run/config.json" "$T/run/events.jsonl")
grep -q "^run_id: $name-$id  # (" "$Y" && ok "run_id: the directory's name and the hash of config.json and the first event" \
	|| notok "run_id" "want $name-$id" "$(grep run_id "$Y")"
grep -q '^  entropy_bits_per_byte: \|^    entropy_bits_per_byte: 0.48' "$Y" && grep -q '^    removed_near: 0  # dedup#/removed/near$' "$Y" \
	&& ok "the corpus floor (--corpus) and the dedup figures (--dedup)" || notok "corpus and dedup" "$(grep -n 'dedup\|entropy' "$Y")"
grep -q '^missing: \[\]' "$Y" && ok "nothing missing" || notok "missing list" "$(grep -A3 '^missing' "$Y")"

check "the same run again, into another directory" $RC $OPTS -o "$T/card2" "$T/run"
same "... gives the same runcard.yaml" "$T/card/runcard.yaml" "$T/card2/runcard.yaml"
same "... the same RUNCARD.md" "$T/card/RUNCARD.md" "$T/card2/RUNCARD.md"
same "... the same loss plot" "$T/card/plots/loss.svg" "$T/card2/plots/loss.svg"

# RUNCARD.md is for people (sizes and rates with units, thousands separated);
# runcard.yaml keeps every value exact
grep -q "peak resident size [0-9.]* [kMG]B" "$T/card/RUNCARD.md" && ! grep -q "[0-9] bytes of memory" "$T/card/RUNCARD.md" \
	&& grep -Eq "Parameters: [0-9]{1,3}(,[0-9]{3})+ " "$T/card/RUNCARD.md" \
	&& grep -Eq '^ +peak_rss: [0-9]+ ' "$Y" && ok "RUNCARD.md humanises sizes and counts, runcard.yaml keeps them exact" \
	|| notok "humanised card" "$(grep -n 'resident\|Parameters' "$T/card/RUNCARD.md")"
check "--usd-per-device-hour adds the cost in money" $RC -q --usd-per-device-hour 2.5 -o "$T/card-usd" "$T/run"
dh=$(sed -n 's/^  device_hours: \([0-9.e+-]*\).*/\1/p' "$T/card-usd/runcard.yaml")
usd=$(sed -n 's/^  usd: \([0-9.e+-]*\).*/\1/p' "$T/card-usd/runcard.yaml")
awk -v d="$dh" -v u="$usd" 'BEGIN { exit !(d > 0 && (u - 2.5 * d) < 1e-12 * (1 + u) && (2.5 * d - u) < 1e-12 * (1 + u)) }' \
	&& grep -q "^- Money: .* USD at 2.5 USD per device-hour" "$T/card-usd/RUNCARD.md" \
	&& ok "... usd = device_hours x 2.5 (to 1e-12), in the card and its Markdown" || notok "usd" "dh=$dh usd=$usd"
grep -q '^  usd: .*  # metrics:[0-9]*#/clocks/device_s / 3600 \* 2.5$' "$T/card-usd/runcard.yaml" &&
	grep -q '^  usd_per_device_hour: 2.5  # (given: --usd-per-device-hour)$' "$T/card-usd/runcard.yaml" &&
	ok "... its comments: an expression (with *, not x), and a given value in parentheses" ||
	notok "usd comments" "$(grep usd "$T/card-usd/runcard.yaml")"
check_fail "--usd-per-device-hour 0 is a usage error" 2 "'--usd-per-device-hour'" $RC --usd-per-device-hour 0 "$T/run"
grep -q "whole corpus's entropy is" "$T/card/RUNCARD.md" && ! grep -q "corpus's entropy floor of" "$T/card/RUNCARD.md" \
	&& { ! grep -q "Gap to" "$T/card/RUNCARD.md" || grep -q "evaluated documents' own entropy floor" "$T/card/RUNCARD.md"; } \
	&& ok "the whole corpus's entropy and the evaluated documents' floor have different names" \
	|| notok "one name for two floors" "$(grep -n entropy "$T/card/RUNCARD.md")"
check "without --dedup and --corpus" $RC -q -o "$T/card3" "$T/run"
grep -q '^  dedup: null  # (not given: --dedup' "$T/card3/runcard.yaml" && grep -q '^  corpus: null  # (not given: --corpus' "$T/card3/runcard.yaml" \
	&& grep -q 'No deduplication figures were given' "$T/card3/runcard.yaml" \
	&& ok "... the dedup and corpus figures say 'not given', nothing invented" || notok "not given" "$(grep -n 'dedup\|corpus' "$T/card3/runcard.yaml")"

# ---- lines that are not JSON: the card is made without them, each named ----
cp -r "$T/run" "$T/rcut"
printf '{"event":"update","upd' >> "$T/rcut/metrics.jsonl"
n=$(wc -l < "$T/rcut/metrics.jsonl")
check "a run killed while writing its metrics has a card" $RC -q -o "$T/ccut" "$T/rcut"
grep -qF "'$T/rcut/metrics.jsonl': line $((n + 1)) is cut short (the run stopped while writing it): left out" "$T/.err" \
	&& ok "... with a warning naming the cut line" || notok "cut line warning" "$(cat "$T/.err")"
sed -i '3s/.*/{"event":"upd/' "$T/rcut/metrics.jsonl"
$RC -q -o "$T/ccut2" "$T/rcut" > /dev/null 2> "$T/.err"
grep -qF "'$T/rcut/metrics.jsonl': line 3 is not JSON: left out" "$T/.err" \
	&& ok "a damaged line in the middle is named too (it was left out without a word)" || notok "damaged line warning" "$(cat "$T/.err")"

# ---- a source file missing ----

cp -r "$T/run" "$T/r2"
rm "$T/r2/params.json"
check_fail "params.json removed: names the field and the file" 1 "cannot fill model.parameters: '$T/r2/params.json' is missing" \
	$RC -o "$T/c4" "$T/r2"
[ ! -e "$T/c4" ] && ok "... and writes nothing" || notok "output after a failure" "$(ls -R "$T/c4")"
check "--allow-missing fills the rest" $RC --allow-missing -o "$T/c4" "$T/r2"
grep -q "7 fields could not be filled" "$T/.err" && grep -q '^  parameters: null  # (missing: ' "$T/c4/runcard.yaml" \
	&& grep -A1 '^  - field: model.parameters$' "$T/c4/runcard.yaml" | grep -q "params.json' is missing" \
	&& ok "... leaving them null, listed under missing: with the reason" || notok "--allow-missing" "$(cat "$T/.err")"
grep -q 'This card is incomplete: 7 field' "$T/c4/RUNCARD.md" && ok "... and RUNCARD.md says the card is incomplete" \
	|| notok "incomplete card"
rm "$T/r2/metrics.jsonl"
check_fail "metrics.jsonl removed" 1 "cannot fill status: '$T/r2/metrics.jsonl' is missing" $RC -o "$T/c5" "$T/r2"
rm -r "$T/r2"
mv "$T/d" "$T/d.moved"
check_fail "the dataset moved away" 1 "cannot fill data.seq_len: '$T/d/manifest.json' is missing" $RC -o "$T/c5" "$T/run"
check "... and found again with --data" $RC -q --data "$T/d.moved" -o "$T/c5" "$T/run"
mv "$T/d.moved" "$T/d"
check_fail "a --dedup file that is not there" 1 "cannot fill data.dedup.documents: '$T/none.json' is missing" \
	$RC --dedup "$T/none.json" -o "$T/c5" "$T/run"
check_fail "another tokenizer is refused" 1 "is not the run's tokenizer" $RC -t "$T/t2.lmtok" -o "$T/c5" "$T/run"

# evalppl's own output, every checkpoint of the run (the fixture above is one
# such file, kept so that this test does not depend on evalppl's options)
if [ -x "$BIN/evalppl" ]; then
	if "$BIN/evalppl" -q --bootstrap 20 "$T/run" > "$T/ev_all.jsonl" 2> "$T/ev.err"; then
		check "runcard --eval with evalppl's results for three checkpoints" $RC -q --eval "$T/ev_all.jsonl" -o "$T/c6" "$T/run"
		[ "$(grep -c '^  - file: eval1 ' "$T/c6/runcard.yaml")" = 3 ] && [ "$(grep -c '^### evalppl' "$T/c6/RUNCARD.md")" = 3 ] \
			&& python3 "$T/prov.py" "$T/c6/runcard.yaml" "$T/run" > "$T/prov.out" 2>&1 \
			&& ok "... one entry each, every value equal to evalppl's" || notok "evalppl's results" "$(head -5 "$T/prov.out")"
	else
		notok "evalppl evaluates the run" "$(head -c 400 "$T/ev.err")"
	fi
fi

# a process killed mid-save, and the run resumed
LMT_TEST_CKPT_KILL=data@15 "$BIN/train" $M --ckpt-sync -o "$T/k" > /dev/null 2>&1
check_fail "a run killed mid-save: no summary, so no status" 1 "cannot fill status: '$T/k/metrics.jsonl' has no \"summary\" record" \
	$RC -q -o "$T/kc" "$T/k"
"$BIN/train" $M --ckpt-sync --resume auto -o "$T/k" > /dev/null 2>&1
check "... resumed to the end, it has a card" $RC -q -o "$T/kc" "$T/k"
sed -n '/^history:/,/^final:/p' "$T/kc/runcard.yaml" > "$T/hist"
grep -q '^      ended: null  # (no end, stop or failed event before the next start: the process was killed' "$T/hist" \
	&& grep -q '^      replayed_updates: 5  # events:[0-9]*#/replayed_updates$' "$T/hist" && grep -q '^  interruptions: 1 ' "$T/hist" \
	&& grep -q 'work lost to the processes that were killed and redone is not in them' "$T/kc/runcard.yaml" \
	&& grep -q '^  lost_wall_s: [0-9.e-]*  # events:[0-9]*#/lost_wall_s$' "$T/hist" \
	&& python3 "$T/prov.py" "$T/kc/runcard.yaml" "$T/k" > "$T/prov.out" 2>&1 \
	&& ok "... which says the first process was killed and 5 updates replayed" || notok "killed run" "$(cat "$T/hist" "$T/prov.out")"

# ---- the plots ----

cat > "$T/svg.py" << 'EOF'
import json, math, sys, xml.etree.ElementTree as ET
card, metrics = sys.argv[1], sys.argv[2]
recs = [json.loads(l) for l in open(metrics) if l.startswith("{")]
up = [r for r in recs if r["event"] == "update"]
ev = [r for r in recs if r["event"] == "eval"]
ns = {"s": "http://www.w3.org/2000/svg"}
def ema(v):  # the card's smoothing: EMA 0.9, debiased
    out, m, w = [], 0.0, 0.0
    for x in v:
        m, w = 0.9 * m + 0.1 * x, 0.9 * w + 0.1
        out.append(m / w)
    return out
same = all(r["memory"]["params"] == r["memory"]["grads"] for r in up)
mem = [("parameters = gradients" if same else "parameters", "params")] + ([] if same else [("gradients", "grads")])
want = {
    "loss": {"train loss": [(r["tokens_total"], r["loss"]) for r in up],
             "train loss (smoothed: EMA 0.9)": list(zip([r["tokens_total"] for r in up], ema([r["loss"] for r in up]))),
             "val loss (train's estimate)": [(r["tokens_total"], r["loss"]) for r in ev]},
    "lr": {"learning rate": [(r["update"], r["lr"]) for r in up]},
    "grad_norm": {"gradient norm": [(r["update"], r["grad_norm"]) for r in up],
                  "clipped fraction": [(r["update"], r["clipped_fraction"]) for r in up]},
    "throughput": {"tokens per second": [(r["update"], r["tokens_per_s"]) for r in up],
                   "MFU": [(r["update"], r["mfu"]) for r in up]},
    "memory": {k: [(r["update"], r["memory"][f] / 1e6) for r in up]
               for k, f in mem + [("optimizer state", "optimizer"), ("activations", "activations"),
                                  ("peak RSS", "peak_rss")]},
}
bad, points = [], 0
for name, series in want.items():
    root = ET.parse("%s/plots/%s.svg" % (card, name)).getroot()  # raises if not well-formed
    area = root.find(".//s:g[@class='plot-area']", ns)
    def axis(attr):
        a = [float(x) for x in area.get(attr).split()]
        return a, area.get(attr + "-scale", "linear") == "log"
    (X0, X1, PX0, PX1), _ = axis("data-x")
    if name == "loss":  # the x axis ends at the data; no point sits on the bottom frame
        xmax = max(x for d in series.values() for x, _ in d)
        ymin = min(y for d in series.values() for _, y in d)
        (LY0, LY1, _, _), _ = axis("data-y")
        if abs(X1 - xmax) > 1e-9 * xmax or not LY0 < ymin:
            bad.append("loss: x axis ends at %g (data at %g), y axis starts at %g (lowest point %g)" % (X1, xmax, LY0, ymin))
    for sname, data in series.items():
        lines = [p for p in area.findall("s:polyline", ns) if p.get("data-series") == sname]
        if len(lines) != 1:
            bad.append("%s: %d polylines for %s" % (name, len(lines), sname))
            continue
        (Y0, Y1, PY0, PY1), log = axis("data-y2" if lines[0].get("data-axis") == "right" else "data-y")
        pts = [tuple(map(float, p.split(","))) for p in lines[0].get("points").split()]
        if len(pts) != len(data):
            bad.append("%s: %s has %d points, metrics.jsonl %d records" % (name, sname, len(pts), len(data)))
            continue
        # 2 decimals of a pixel: half of 0.01 px in data units, plus rounding of the doubles
        tx = 0.005 * abs(X1 - X0) / abs(PX1 - PX0) * 1.001 + 1e-12
        ty = 0.005 * abs(Y1 - Y0) / abs(PY1 - PY0) * 1.001 + 1e-12
        for (px, py), (x, y) in zip(pts, data):
            xb = X0 + (px - PX0) * (X1 - X0) / (PX1 - PX0)
            yb = Y0 + (py - PY0) * (Y1 - Y0) / (PY1 - PY0)
            yv = math.log10(y) if log else y
            if abs(xb - x) > tx or abs(yb - yv) > ty:
                bad.append("%s: %s point (%g, %g) reads back as (%g, %g)" % (name, sname, x, yv, xb, yb))
                break
        points += len(pts)
print(points)
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
EOF
if python3 "$T/svg.py" "$T/card" "$T/run/metrics.jsonl" > "$T/svg.out" 2>&1; then
	ok "the 5 SVGs are well-formed XML; each series has one point per record, and its $(head -1 "$T/svg.out") points read back as the records' values"
else
	notok "the SVG plots" "$(head -6 "$T/svg.out")"
fi

# The loss plot's reference levels and process markers. The unigram baseline is
# the dataset manifest's, the same figure in runcard.yaml, RUNCARD.md and the
# plot's legend, and its line sits at that value's pixel by the plot's own axis
# mapping (or is named at the frame edge when it lies beyond the axis); one
# marker per resume, at the tokens trained by the resumed update.
cat > "$T/ref.py" << 'EOF'
import json, re, sys, xml.etree.ElementTree as ET
card, run, nresume = sys.argv[1], sys.argv[2], int(sys.argv[3])
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(card + "/plots/loss.svg").getroot()  # raises if not well-formed
area = root.find(".//s:g[@class='plot-area']", ns)
y0, y1, py0, py1 = map(float, area.get("data-y").split())
x0, x1, px0, px1 = map(float, area.get("data-x").split())
yaml = open(card + "/runcard.yaml").read()
m = re.search(r"^  unigram_baseline_nats_per_token: (\S+)  # dataset#/splits/train/unigram_nats_per_token$", yaml, re.M)
assert m, "runcard.yaml has no data.unigram_baseline_nats_per_token from the manifest"
u = float(m.group(1))
md = open(card + "/RUNCARD.md").read()
mt = re.search(r"Unigram baseline: (\S+) nats per token", md)
assert mt, "RUNCARD.md does not give the unigram baseline"
assert abs(float(mt.group(1)) - u) <= 5e-4 * u, "RUNCARD.md says %s, runcard.yaml %r" % (mt.group(1), u)
name = "unigram baseline: %s nats/token" % mt.group(1)
legend = [t.text for t in root.findall(".//s:g[@class='legend']/s:text", ns)]
assert name in legend, "no legend entry %r in %r" % (name, legend)
els = [e for e in root.iter() if e.get("data-name") == name]
assert len(els) == 1, "%d elements for the baseline" % len(els)
e = els[0]
assert float(e.get("data-value")) == u, "the plot's baseline %s is not the card's %r" % (e.get("data-value"), u)
if e.get("class") == "hline":
    want = py0 + (u - y0) / (y1 - y0) * (py1 - py0)
    assert abs(float(e.get("y1")) - want) <= 0.005, "baseline at y %s, its value maps to %.2f" % (e.get("y1"), want)
    where = "a line at y %s" % e.get("y1")
else:
    assert e.get("class") == "hline-clipped" and (u > y1) == (e.get("data-side") == "above"), "clipped wrongly"
    where = "named %s the axis (%g..%g)" % (e.get("data-side"), y0, y1)
tok = {}
for l in open(run + "/metrics.jsonl"):
    r = json.loads(l)
    if r.get("event") == "update":
        tok[r["update"]] = r["tokens_total"]
resumes = [json.loads(l)["update"] for l in open(run + "/events.jsonl") if '"event":"resume"' in l]
vl = root.findall(".//s:line[@class='vline']", ns)
assert len(resumes) == nresume and len(vl) == nresume, "%d resume events, %d markers, expected %d" % (len(resumes), len(vl), nresume)
for v, up in zip(vl, resumes):
    assert v.get("data-name") == "resume @ %d" % up, v.get("data-name")
    want = px0 + (tok[up] - x0) / (x1 - x0) * (px1 - px0)
    assert abs(float(v.get("x1")) - want) <= 0.005, "marker at x %s, update %d maps to %.2f" % (v.get("x1"), up, want)
labels = [t.text for t in root.findall(".//s:text[@class='vline-label']", ns)]
assert labels == ["resume @ %d" % up for up in resumes], labels
print("%s; %d marker(s)" % (where, nresume))
EOF
if python3 "$T/ref.py" "$T/card" "$T/run" 1 > "$T/ref.out" 2>&1; then
	ok "loss plot: the unigram baseline of runcard.yaml and RUNCARD.md, $(cat "$T/ref.out") at the resume"
else
	notok "loss plot reference levels" "$(tail -3 "$T/ref.out")"
fi
M2="--data $T/d -t $T/t.lmtok --layers 1 --heads 2 --channels 16 --micro-batch 2 --threads 1 --eval-every 0 --updates 6 --ckpt-every 2"
"$BIN/train" $M2 --stop-at 2 -o "$T/r2" > /dev/null 2> "$T/r2.err" \
	&& "$BIN/train" $M2 --stop-at 4 --resume auto -o "$T/r2" > /dev/null 2>> "$T/r2.err" \
	&& "$BIN/train" $M2 --resume auto -o "$T/r2" > /dev/null 2>> "$T/r2.err" \
	&& "$BIN/train" $M2 --updates 4 -o "$T/r0" > /dev/null 2>> "$T/r2.err" \
	&& $RC --allow-missing -o "$T/card2r" "$T/r2" > /dev/null 2>> "$T/r2.err" \
	&& $RC --allow-missing -o "$T/card0r" "$T/r0" > /dev/null 2>> "$T/r2.err" \
	|| notok "runs resumed twice and never, and their cards" "$(head -c 600 "$T/r2.err")"
python3 "$T/ref.py" "$T/card2r" "$T/r2" 2 > "$T/ref.out" 2>&1 && ok "a run resumed twice: $(cat "$T/ref.out")" \
	|| notok "markers, resumed twice" "$(tail -3 "$T/ref.out")"
python3 "$T/ref.py" "$T/card0r" "$T/r0" 0 > "$T/ref.out" 2>&1 && ok "a run never resumed: $(cat "$T/ref.out")" \
	|| notok "markers, never resumed" "$(tail -3 "$T/ref.out")"

# ---- the model card ----

missing_sec=
for s in "## Model details" "## Intended uses" "## Out-of-scope uses" "## Training data" "## Training procedure" \
	"## Evaluation" "## Limitations" "## Technical specifications" "## Plots"; do
	grep -qx "$s" "$T/card/RUNCARD.md" || missing_sec="$missing_sec '$s'"
done
[ -z "$missing_sec" ] && ok "RUNCARD.md has the model card's sections" || notok "sections" "missing:$missing_sec"
for p in loss lr grad_norm throughput memory; do
	grep -q "](plots/$p.svg)" "$T/card/RUNCARD.md" || missing_sec="$missing_sec $p"
done
[ -z "$missing_sec" ] && ok "... links every plot" || notok "plot links" "$missing_sec"
grep -q '^| overall | 45 | 6803 | 5.485 \[5.482, 5.49\] |' "$T/card/RUNCARD.md" && grep -q '95% confidence' "$T/card/RUNCARD.md" \
	&& ok "... evaluation figures with their intervals" || notok "evaluation table" "$(grep -n overall "$T/card/RUNCARD.md")"
grep -q 'of 400 documents 400 were kept; 0 exact and 0 near duplicates' "$T/card/RUNCARD.md" \
	&& ok "... dedup figures in the training data" || notok "dedup in the card"

# ---- the release ----

REL=$T/out/model.tar.zst
mkdir "$T/out"
check "--release" $RC -q $OPTS -o "$T/card" --release "$REL" "$T/run"
top=$(jq -r 'select(.event == "release") | .top' "$T/.out")
zstd -dc "$REL" | tar -tf - > "$T/list" 2>&1
printf '%s\n' RUNCARD.md SHA256SUMS config.json model.safetensors plots/grad_norm.svg plots/loss.svg plots/lr.svg \
	plots/memory.svg plots/throughput.svg runcard.yaml tokenizer.json tokenizer.lmtok | sed "s|^|$top/|" > "$T/promised"
same "the archive lists exactly the promised files under '$top/'" "$T/promised" "$T/list"
nothing_left "no staging directory or temporary is left" "$T/out" "partial"
mkdir "$T/x"
(cd "$T/x" && tar --zstd -xf "$REL")
X=$T/x/$top
(cd "$X" && sha256sum -c --quiet SHA256SUMS) > "$T/sums.out" 2>&1 && [ "$(wc -l < "$X/SHA256SUMS")" = 11 ] \
	&& ok "sha256sum -c accepts SHA256SUMS (11 members)" || notok "sha256sum -c" "$(cat "$T/sums.out")"
same "model.safetensors is ckpt-reshard's export of the newest checkpoint" "$T/rel/model.safetensors" "$X/model.safetensors"
same "config.json is ckpt-reshard's" "$T/rel/config.json" "$X/config.json"
same "tokenizer.json is tok-train --export-hf's" "$T/tokenizer.json" "$X/tokenizer.json"
same "tokenizer.lmtok is the run's tokenizer" "$T/t.lmtok" "$X/tokenizer.lmtok"
same "runcard.yaml is the card's" "$T/card/runcard.yaml" "$X/runcard.yaml"
check "a second release of the same run, under another name" $RC -q $OPTS -o "$T/card2" --release "$T/again.tar.zst" "$T/run"
same "... is byte-identical" "$REL" "$T/again.tar.zst"
check "--verify accepts it" $RC --verify "$REL"
jq -se 'map(select(.event == "member" and .status == "ok")) | length == 11' "$T/.out" > /dev/null \
	&& jq -se 'last | .event == "verify" and .ok and .problems == 0' "$T/.out" > /dev/null \
	&& ok "... with a record per member" || notok "verify records" "$(tail -2 "$T/.out")"

# tampered copies, repacked with tar and zstd
repack() { (cd "$T/x" && tar --format=ustar -cf - "$top" | zstd -q -c > "$1"); }
printf ' ' >> "$X/runcard.yaml"
repack "$T/mod.tar.zst"
check_fail "--verify names a modified member" 1 "'$top/runcard.yaml': SHA-256" $RC --verify "$T/mod.tar.zst"
grep -q "does not verify: 1 problem" "$T/.err" && ok "... and counts one problem" || notok "problem count" "$(cat "$T/.err")"
cp "$T/card/runcard.yaml" "$X/runcard.yaml"
rm "$X/plots/lr.svg"
repack "$T/rm.tar.zst"
check_fail "--verify names a removed member" 1 "'$top/plots/lr.svg' is listed in SHA256SUMS but not in the archive" \
	$RC --verify "$T/rm.tar.zst"
cp "$T/card/plots/lr.svg" "$X/plots/lr.svg"
echo extra > "$X/extra.txt"
repack "$T/add.tar.zst"
check_fail "--verify names an added member" 1 "'$top/extra.txt' is in the archive but not in SHA256SUMS" \
	$RC --verify "$T/add.tar.zst"
rm "$X/extra.txt"
repack "$T/same.tar.zst"
check "... and accepts the repacked original" $RC --verify "$T/same.tar.zst"
check_fail "--verify of a file that is not an archive" 1 "'$T/list'" $RC --verify "$T/list"

check "--release --dtype bf16" $RC -q -o "$T/card2" --release "$T/bf16.tar.zst" --dtype bf16 "$T/run"
zstd -dc "$T/bf16.tar.zst" | tar -xOf - "$top/config.json" | grep -q '"torch_dtype":"bfloat16"' \
	&& ok "... exports bf16 weights" || notok "bf16 release"
check_fail "a release into a missing directory" 1 "$T/nodir/x.tar.zst" $RC -q -o "$T/card2" --release "$T/nodir/x.tar.zst" "$T/run"
nothing_left "... leaves nothing" "$T" "nodir"
check_fail "a release into a missing directory, with a new card" 1 "cannot write into '$T/nodir'" \
	$RC -q -o "$T/card9" --release "$T/nodir/x.tar.zst" "$T/run"
[ ! -e "$T/card9" ] && [ ! -s "$T/.out" ] && ok "... is refused before the card is written (no card, no record)" ||
	notok "card written before the release failed" "$(ls -A "$T/card9" 2>&1)"
mkdir "$T/dir.tar.zst"
check_fail "a release named as an existing directory" 1 "is a directory: give a file name" \
	$RC -q -o "$T/card9" --release "$T/dir.tar.zst" "$T/run"
[ ! -e "$T/card9" ] && ok "... is refused before the card is written" || notok "card9 written"

# ---- a write error: the card's files are committed together or not at all ----
# RLIMIT_FSIZE between RUNCARD.md's size and runcard.yaml's (the larger, written
# last): once, the plots and RUNCARD.md of a new card replaced the old ones and
# runcard.yaml stayed old; now the earlier card stays whole, and a fresh one
# leaves nothing
check "a card to replace" $RC -q $OPTS -o "$T/cardw" "$T/run"
cp -r "$T/cardw" "$T/cardw.before"
yb=$(wc -c < "$T/cardw/runcard.yaml")
lim=$(( (yb - 1) / 512 )) # sh's ulimit -f counts 512-byte blocks
big=$(find "$T/cardw" -type f ! -name runcard.yaml -size +$((lim * 512))c | head -1)
[ -z "$big" ] && ok "runcard.yaml is the largest file ($yb bytes; the limit $((lim * 512)))" || notok "sizes" "$big"
check_fail "runcard.yaml past RLIMIT_FSIZE names it and the errno" 1 "runcard.yaml': write: File too large" \
	sh -c 'trap "" XFSZ; ulimit -f '$lim'; exec "$@"' sh $RC -q $OPTS --usd-per-device-hour 3 -o "$T/cardw" "$T/run"
diff -r "$T/cardw.before" "$T/cardw" > /dev/null && ok "... and the earlier card is whole, none of its files replaced" \
	|| notok "a card half replaced" "$(diff -rq "$T/cardw.before" "$T/cardw" | head -3)"
nothing_left "... with no temporaries left" "$T/cardw" ".tmp"
check_fail "a fresh card past RLIMIT_FSIZE" 1 "runcard.yaml': write: File too large" \
	sh -c 'trap "" XFSZ; ulimit -f '$lim'; exec "$@"' sh $RC -q $OPTS -o "$T/cardf" "$T/run"
[ ! -e "$T/cardf" ] && ok "... leaves nothing, not even its directories" || notok "fresh card left" "$(ls -R "$T/cardf")"

finish
