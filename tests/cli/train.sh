#!/bin/sh
# tests/cli/train.sh: train as a user runs it (the man page's pipeline on a tiny
# model), its run directory, determinism, the non-finite policies, and the bad
# inputs the issue names: a tokenizer that did not make the dataset, sequences
# longer than the model's context, an unknown config key, a batch without valid
# targets. (tests/unit/test-model.c checks gradients, masking and accumulation.)
. tests/cli/lib.sh
TR=$BIN/train

"$BIN/gen-corpus" -q --docs 400 --seed 7 -o "$T/c.jsonl" > /dev/null
"$BIN/tok-train" -q -v 300 -o "$T/t.lmtok" "$T/c.jsonl" > /dev/null
"$BIN/tok-train" -q -v 310 -o "$T/other.lmtok" "$T/c.jsonl" > /dev/null
"$BIN/tok-encode" -q -t "$T/t.lmtok" -o "$T/s.lmtoks" "$T/c.jsonl" > /dev/null
"$BIN/shard-pack" -q -L 32 --split val=0.1 -o "$T/d" "$T/s.lmtoks" > /dev/null
TINY="--layers 1 --heads 2 --channels 32 --micro-batch 4 --threads 1"

check "train --help exits 0" $TR --help
check_fail "no dataset is a usage error" 2 "no dataset" $TR --layers 1
check_fail "a bad value is a usage error naming the option" 2 "'--lr'" $TR --data "$T/d" --lr fast
check_fail "an integer past 2^63 is out of range, not 'not an integer'" 2 "9223372036854775808 is out of range" \
	$TR --data "$T/d" --seed 9223372036854775808
check_fail "a number below what a double holds says so" 2 "1e-400 is beyond what a double holds" \
	$TR --data "$T/d" --eps 1e-400
check_fail "nan is not a finite number" 2 "'nan' is not a finite number" $TR --data "$T/d" --lr nan
check_fail "--prefetch without --zero 3 is a usage error (it did nothing)" 2 "it goes with --zero 3" \
	$TR --data "$T/d" --prefetch
for o in "--keep 3" --ckpt-sync "--mtbf 3600"; do
	check_fail "$o with --no-save is a usage error (it was accepted and did nothing)" 2 "--no-save has none" \
		$TR --data "$T/d" --no-save $o
done
check_fail "--mem-limit takes Ti, and lists the units it takes" 2 "use k, M, G, T, powers of 1000, or Ki, Mi, Gi, Ti" \
	$TR --data "$T/d" --mem-limit 1X

check "a tiny model trains, with evaluation and samples" \
	$TR --data "$T/d" -t "$T/t.lmtok" $TINY --updates 20 --lr 1e-2 --eval-every 10 --sample-every 20 \
	--sample-tokens 8 --prompt "The" -o "$T/run"
cp "$T/.out" "$T/out.jsonl"
n=$(grep -c '"event":"update"' "$T/out.jsonl")
[ "$n" = 20 ] && ok "one update record per update" || notok "update records: $n"
first=$(grep '"event":"update"' "$T/out.jsonl" | head -1 | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/')
last=$(grep '"event":"update"' "$T/out.jsonl" | tail -1 | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }' && ok "the loss falls ($first -> $last)" \
	|| notok "loss did not fall" "$first -> $last"
[ "$(grep -c '"event":"eval"' "$T/out.jsonl")" = 2 ] && ok "evaluations at updates 10 and 20" || notok "eval records"
grep -q '"event":"sample".*"text":' "$T/out.jsonl" && ok "a sample, with its text" || notok "sample"
grep -q '"event":"summary".*"status":"done"' "$T/out.jsonl" && ok "summary says done" || notok "summary"
cmp -s "$T/out.jsonl" "$T/run/metrics.jsonl" && ok "metrics.jsonl holds exactly the stdout records" \
	|| notok "metrics.jsonl differs from stdout"
for f in config.json params.json events.jsonl; do
	[ -s "$T/run/$f" ] && ok "run directory has $f" || notok "run directory lacks $f"
done
grep -q '"event":"start"' "$T/run/events.jsonl" && tail -1 "$T/run/events.jsonl" | grep -q '"event":"end"' \
	&& ok "events: start ... end" || notok "events" "$(cat "$T/run/events.jsonl")"
grep -q '"global_batch_positions":128' "$T/run/config.json" && ok "config.json records the resolved batch" \
	|| notok "config.json" "$(cat "$T/run/config.json")"
check_fail "a run directory is not reused" 1 "holds a previous run" $TR --data "$T/d" $TINY --updates 1 -o "$T/run"
check_fail "... and is refused before the data is read (a missing dataset is not what it names)" 1 \
	"holds a previous run" $TR --data "$T/nodata" $TINY --updates 1 -o "$T/run"
mkdir -p "$T/ckonly/ckpt" && cp -r "$T/run/ckpt/"* "$T/ckonly/ckpt/"
check_fail "a directory holding checkpoints without metrics is not a new run's (retention would delete some)" 1 \
	"holds checkpoints (ckpt/) of another run" $TR --data "$T/d" $TINY --updates 1 -o "$T/ckonly"
check_fail "a missing dataset is refused" 1 "cannot open the dataset directory" \
	$TR --data "$T/nodata" $TINY --updates 1 -o "$T/refused"
[ ! -e "$T/refused" ] && ok "... leaving no run directory (it made one for its lock)" || notok "refused run" "$(ls -A "$T/refused")"
mkdir "$T/empty"
check_fail "the same into an empty directory of the user's" 1 "cannot open the dataset directory" \
	$TR --data "$T/nodata" $TINY --updates 1 -o "$T/empty"
[ -d "$T/empty" ] && [ -z "$(ls -A "$T/empty")" ] && ok "... which stays, empty (no lock file left in it)" ||
	notok "empty dir" "$(ls -A "$T/empty")"

# learning real structure: the validation loss falls well below the unigram entropy
# of the training tokens (what a model that ignores context achieves)
"$BIN/tok-encode" -q -t "$T/t.lmtok" --eos --format ids "$T/c.jsonl" > "$T/ids.txt"
H=$(tr ' ' '\n' < "$T/ids.txt" | awk 'NF { c[$1]++; n++ } END { for (k in c) { p = c[k] / n; h -= p * log(p) } printf "%.4f", h }')
check "train a small model for 300 updates" $TR --no-save --data "$T/d" --layers 2 --heads 2 --channels 64 --micro-batch 8 \
	--threads 2 --updates 300 --lr 3e-3 --eval-every 300 --eval-seqs 64
vl=$(grep '"event":"eval"' "$T/.out" | tail -1 | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/')
awk -v v="$vl" -v h="$H" 'BEGIN { exit !(v < h - 1.0) }' \
	&& ok "validation loss $vl nats is well below the unigram entropy $H (by more than 1 nat)" \
	|| notok "validation vs unigram" "val $vl, unigram $H"

# determinism: same seed, same threads, same losses to the last digit
$TR --no-save --data "$T/d" $TINY --updates 6 --eval-every 0 > "$T/a.jsonl" 2>/dev/null
$TR --no-save --data "$T/d" $TINY --updates 6 --eval-every 0 > "$T/b.jsonl" 2>/dev/null
grep -o '"loss":[^,]*' "$T/a.jsonl" > "$T/a.loss"
grep -o '"loss":[^,]*' "$T/b.jsonl" > "$T/b.loss"
[ -s "$T/a.loss" ] && cmp -s "$T/a.loss" "$T/b.loss" && ok "two runs with the same seed give identical losses" \
	|| notok "runs differ"

# config files: keys are long options; errors name file and line
printf '# a tiny run\nlayers = 1\nheads = 2\nchannels = 32\nmicro-batch = 4\nupdates = 2\nsegment-mask\n' > "$T/run.cfg"
check "a config file" $TR --no-save --data "$T/d" --config "$T/run.cfg" --threads 1 --eval-every 0
grep -c '"event":"update"' "$T/.out" | grep -qx 2 && ok "the config file's updates = 2 applies" || notok "config applied"
check "options after --config override it" $TR --no-save --data "$T/d" --config "$T/run.cfg" --updates 3 --threads 1 --eval-every 0
grep -c '"event":"update"' "$T/.out" | grep -qx 3 && ok "the later --updates 3 wins" || notok "override"
printf 'layers = 1\nflux = 3\n' > "$T/bad.cfg"
check_fail "an unknown config key is a usage error naming file and line" 2 "bad.cfg': line 2: unknown key 'flux'" \
	$TR --data "$T/d" --config "$T/bad.cfg"
printf 'layers = many\n' > "$T/bad2.cfg"
check_fail "a bad config value names file and line" 2 "bad2.cfg': line 1: option '--layers'" \
	$TR --data "$T/d" --config "$T/bad2.cfg"
# a config file is UTF-8 text: bytes it cannot hold are refused (exit 1) before any
# line applies; a NUL once ended the file there, silently
printf 'layers = 1\nheads = 2\000\nupdates = 1\n' > "$T/nul.cfg"
check_fail "a config file with a NUL byte is refused naming file and line" 1 "nul.cfg': line 2: a NUL byte" \
	$TR --data "$T/d" --config "$T/nul.cfg"
# the same in the JSON form (a run's config.json), where a NUL once ended the text
# for the JSON parser; and JSON that is no run's config.json set nothing, silently
printf '{"tool": "train", "model": {"layers": 1},\n"optimization": {"lr": 0.1}\000}' > "$T/nul.json"
check_fail "a JSON config file with a NUL byte is refused naming file and line" 1 "nul.json': line 2: a NUL byte" \
	$TR --data "$T/d" --config "$T/nul.json"
echo '{"layers": 1, "heads": 2}' > "$T/notrun.json"
check_fail "a JSON config that is not a run's config.json is refused" 2 \
	"notrun.json': JSON, but not a run's config.json" $TR --data "$T/nodata" --config "$T/notrun.json"
printf 'layers = 1\n# caf\351\nupdates = 1\n' > "$T/latin1.cfg"
check_fail "a config file with invalid UTF-8 is refused naming file and line" 1 \
	"latin1.cfg': line 2: byte 0xe9 is not UTF-8" $TR --data "$T/d" --config "$T/latin1.cfg"
printf 'layers = 1\rheads = 2\n' > "$T/cr.cfg"
check_fail "a carriage return inside a line is refused" 1 "cr.cfg': line 1: a carriage return" \
	$TR --data "$T/d" --config "$T/cr.cfg"
printf 'layers = 1\r\nheads = 2\r\nchannels = 32\r\nmicro-batch = 4\r\nupdates = 2\r\nsegment-mask\r\n' > "$T/crlf.cfg"
check "a config file with CR LF line ends" $TR --no-save --data "$T/d" --config "$T/crlf.cfg" --threads 1 --eval-every 0
grep -c '"event":"update"' "$T/.out" | grep -qx 2 && ok "its updates = 2 applies" || notok "CR LF config applied"

# bad inputs
check_fail "a tokenizer that did not make the dataset is refused" 1 "but the dataset" \
	$TR --data "$T/d" -t "$T/other.lmtok" $TINY --updates 1
check_fail "sequences longer than the model's context are refused" 1 "longer than the model's context of 16" \
	$TR --data "$T/d" $TINY --context 16 --updates 1
check_fail "channels not a multiple of heads is a usage error" 2 "not a multiple of --heads" \
	$TR --data "$T/d" --layers 1 --heads 3 --channels 32
check_fail "--prompt without a tokenizer is a usage error" 2 "give the tokenizer" $TR --data "$T/d" --prompt hi
printf '{"text": ""}\n{"text": ""}\n{"text": ""}\n{"text": ""}\n' > "$T/empty.jsonl"
"$BIN/tok-encode" -q --keep-empty --eos -t "$T/t.lmtok" -o "$T/e.lmtoks" "$T/empty.jsonl" > /dev/null
"$BIN/shard-pack" -q --mode pad -L 8 --split val=0 -o "$T/de" "$T/e.lmtoks" > /dev/null
check_fail "a batch without valid targets stops the run" 1 "no valid target tokens" \
	$TR --data "$T/de" $TINY --micro-batch 2 --updates 1 -o "$T/run0"
tail -1 "$T/run0/events.jsonl" | grep -q '"event":"failed"' && ok "the events file ends with failed" \
	|| notok "events after failure" "$(cat "$T/run0/events.jsonl")"

# non-finite values: a NaN planted in the position embedding of an llm.c checkpoint
check "export an llm.c checkpoint" $TR --no-save --data "$T/d" $TINY --updates 1 --eval-every 0 --export-llmc "$T/m.bin"
hdr=$(od -An -t d4 -N 32 "$T/m.bin" | tr '\n' ' ' | tr -s ' ')
C=$(echo "$hdr" | cut -d' ' -f8)
Vp=$(echo "$hdr" | cut -d' ' -f9)
off=$((1024 + Vp * C * 4))
[ "$C" = 32 ] && [ "$Vp" = 384 ] && ok "the llm.c header read: C=$C, Vp=$Vp (the NaN goes to wpe[0][0])" \
	|| notok "llm.c header" "$hdr"
cp "$T/m.bin" "$T/nan.bin"
printf '\000\000\300\177' | dd of="$T/nan.bin" bs=1 seek=$off conv=notrunc 2>/dev/null
check_fail "a non-finite loss stops the run (default policy)" 1 "non-finite loss" \
	$TR --data "$T/d" --init-llmc "$T/nan.bin" --micro-batch 4 --threads 1 --updates 3 -o "$T/run1"
grep -q '"event":"nonfinite"' "$T/run1/events.jsonl" && ok "a nonfinite event is recorded" || notok "nonfinite event"
check "--on-nonfinite skip goes on" $TR --no-save --data "$T/d" --init-llmc "$T/nan.bin" --micro-batch 4 --threads 1 \
	--updates 3 --eval-every 0 --on-nonfinite skip
[ "$(grep -c '"skipped":true' "$T/.out")" = 3 ] && ok "every poisoned update is skipped, and reported" \
	|| notok "skips" "$(grep -c '"skipped":true' "$T/.out")"
check_fail "--init-llmc with a shape option is a usage error" 2 "sets the model's shape" \
	$TR --data "$T/d" --init-llmc "$T/m.bin" --layers 2
# a write error on metrics.jsonl names it and the errno; the failed event carries
# the update the run had reached (RLIMIT_FSIZE of 4 KiB: metrics.jsonl outgrows it
# after a few updates, events.jsonl does not)
sh -c 'trap "" XFSZ; ulimit -f 8; exec "$@"' sh $TR --data "$T/d" $TINY --updates 50 --eval-every 0 -o "$T/fsz" \
	> /dev/null 2> "$T/.err"
rc=$?
[ "$rc" = 1 ] && grep -qF "fsz/metrics.jsonl': write: File too large" "$T/.err" \
	&& ok "a metrics.jsonl write error names the file and the errno" || notok "metrics write error" "status $rc" "$(cat "$T/.err")"
tail -1 "$T/fsz/events.jsonl" | grep -q '"event":"failed","update":[1-9]' \
	&& ok "the failed event carries the update reached" || notok "failed event" "$(cat "$T/fsz/events.jsonl")"
check_fail "stdout full names it and the errno" 1 "'<stdout>': write: No space left on device" \
	sh -c '"$@" > /dev/full' sh $TR --no-save --data "$T/d" $TINY --updates 1 --eval-every 0

# the edges of every documented numeric range: each end is accepted (the run then
# stops at the missing dataset, exit 1), just outside it is a usage error (exit 2);
# the last column holds the options an end needs beside it
while read -r opt lo hi below above with; do
	for v in $lo $hi; do
		$TR --data "$T/nodata" --$opt "$v" $with > /dev/null 2> "$T/.err"
		rc=$?
		[ "$rc" = 1 ] && ok "--$opt $v is accepted" || notok "--$opt $v" "status $rc" "$(cat "$T/.err")"
	done
	for v in $below $above; do
		[ "$v" = - ] && continue
		check_fail "--$opt $v is out of range" 2 "option '--$opt'" $TR --data "$T/nodata" --$opt "$v" $with
	done
done <<RANGES
layers 1 1024 0 1025
heads 1 1024 0 1025 --channels 1024
channels 1 65536 0 65537 --heads 1
context 1 1048576 0 1048577
micro-batch 1 1048576 0 1048577
accum 1 1048576 0 1048577
updates 1 9223372036854775807 0 -
lr 0 10 -1e-9 10.000001
min-lr 0 1 -1e-9 1.000001
warmup 0 9223372036854775807 -1 - --updates 9223372036854775807
beta1 0 0.999999 -1e-9 0.9999995
beta2 0 0.999999999 -1e-9 0.9999999995
eps 1e-300 1 0 1.000001
weight-decay 0 10 -1e-9 10.000001
clip 0 1e30 -1e-9 1.1e30
seed 0 9223372036854775807 -1 -
init-seed 0 9223372036854775807 -1 -
eval-every 0 9223372036854775807 -1 -
eval-seqs 1 9223372036854775807 0 -
sample-every 0 9223372036854775807 -1 -
sample-tokens 1 1048576 0 1048577
temperature 0 100 -1e-9 100.000001
top-k 0 1073741824 -1 1073741825
keep 2 1048576 1 1048577
ckpt-minutes 0 1e9 -1e-9 1.000001e9 -o $T/norun
mtbf 1 1e12 0.999999 1.000001e12
stop-at 1 9223372036854775807 0 - -o $T/norun
threads 1 4096 0 4097
RANGES
check_fail "--eps 0 is refused, naming the range" 2 "option '--eps': 0 is out of range (0, 1]" $TR --data "$T/d" --eps 0
# ---- on a terminal: a line per update for people; JSONL when piped or --jsonl ----
if command -v script > /dev/null 2>&1; then
	rm -rf "$T/tty"
	script -qec "$TR --data '$T/d' $TINY --updates 4 --eval-every 2 -o '$T/tty'" /dev/null > "$T/tty.txt" 2>&1
	grep -Eq '^update +1/4 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| norm +[0-9.]+\*? \| +[0-9]+ tok/s \| mfu +[0-9.]+% \| [0-9:]+, eta [0-9:]+' "$T/tty.txt" \
		&& ok "a terminal gets one compact line per update" || notok "tty update line" "$(head -c 400 "$T/tty.txt")"
	grep -q "^update     2: val loss [0-9.]* (train's estimate" "$T/tty.txt" && ! grep -q '^{"event"' "$T/tty.txt" \
		&& ok "... the validation estimate named as such, and no JSONL" || notok "tty eval" "$(head -c 400 "$T/tty.txt")"
	[ "$(jq -c 'select(.event == "update")' "$T/tty/metrics.jsonl" | wc -l)" = 4 ] \
		&& ok "... while metrics.jsonl still holds the JSONL" || notok "tty metrics"
	rm -rf "$T/tty"
	script -qec "$TR --data '$T/d' $TINY --updates 2 --jsonl -o '$T/tty'" /dev/null > "$T/tty.txt" 2>&1
	grep -q '^{"event":"update"' "$T/tty.txt" && ok "--jsonl forces JSONL on a terminal" || notok "--jsonl" "$(head -c 300 "$T/tty.txt")"
else
	ok "# skip the terminal display: no script(1)"
fi
# a resume with nothing left to do says so (it once claimed millions of tokens a second)
$TR --data "$T/d" $TINY --updates 2 --resume auto -o "$T/tty" > "$T/noop.out" 2> "$T/noop.err"
grep -q "nothing to do: the run was already at update 2" "$T/noop.err" &&
	jq -e 'select(.event == "summary") | .tokens_per_s == null and .updates_done == 0' "$T/noop.out" > /dev/null &&
	ok "a resume with nothing to do says so, with no rate" || notok "no-op resume" "$(cat "$T/noop.err")" "$(tail -1 "$T/noop.out")"

finish
