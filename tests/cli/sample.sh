#!/bin/sh
# tests/cli/sample.sh: sample on a tiny run trained here.
#
#   - text on stdout starts with the prompt; --no-prompt leaves it out, the rest the same;
#   - the same seed gives the same text, another seed other text; temperature 0 gives
#     the same text whatever the seed;
#   - -n bounds the tokens drawn (the ids of --jsonl), and --jsonl's text is the text;
#   - the prompt from stdin (its final newline dropped) equals the prompt as argument;
#   - --top-p 1 equals no --top-p; a small top-p differs from none over a few seeds;
#   - on a terminal (script(1), where installed) the text is the same; the tokens
#     are those evalppl samples with the same seed and top-k (up to an early EOS);
#   - `lmt sample RUN PROMPT` runs it; the checkpoint directory works as the run does;
#   - refusals: no checkpoint in the run, another tokenizer, an empty prompt (exit 1,
#     naming the problem); bad options (exit 2).
. tests/cli/lib.sh
S="$BIN/sample -q -j 1"

"$BIN/gen-corpus" -q --docs 120 --seed 7 -o "$T/c.jsonl" > /dev/null
"$BIN/tok-train" -q -v 300 -o "$T/t.lmtok" "$T/c.jsonl" > /dev/null
"$BIN/tok-train" -q -v 280 -o "$T/t2.lmtok" "$T/c.jsonl" > /dev/null
"$BIN/tok-encode" -q -t "$T/t.lmtok" --eos -o "$T/s.lmtoks" "$T/c.jsonl" > /dev/null
"$BIN/shard-pack" -q -L 32 --split val=0.1 -o "$T/d" "$T/s.lmtoks" > /dev/null
check "train: a tiny run" "$BIN/train" -q -j 1 --data "$T/d" -t "$T/t.lmtok" --layers 1 --heads 2 \
	--channels 32 --micro-batch 8 --updates 60 --lr 3e-3 --eval-every 0 --ckpt-every 60 -o "$T/run"
R=$T/run

# --- text ---
$S -n 30 "$R" 'Once upon a time' > "$T/a" 2> "$T/a.err"
case $(head -c 16 "$T/a") in
'Once upon a time') ok "text on stdout starts with the prompt" ;;
*) notok "text on stdout starts with the prompt" "$(cat "$T/a" "$T/a.err")" ;;
esac
[ "$(tail -c 1 "$T/a" | od -An -c | tr -d ' ')" = '\n' ] && ok "a newline ends the sample" || notok "a newline ends the sample"
$S -n 30 --no-prompt "$R" 'Once upon a time' > "$T/np"
{ printf 'Once upon a time'; cat "$T/np"; } > "$T/np2"
same "--no-prompt: the same text without the prompt" "$T/a" "$T/np2"
$S -n 30 "$R" 'Once upon a time' > "$T/b"
same "the same seed, the same text" "$T/a" "$T/b"
$S -n 30 -s 2 "$R" 'Once upon a time' > "$T/c"
cmp -s "$T/a" "$T/c" && notok "another seed, other text" "$(cat "$T/a" "$T/c")" || ok "another seed, other text"
$S -n 30 -t 0 -s 1 "$R" 'Once upon a time' > "$T/g1"
$S -n 30 -t 0 -s 99 "$R" 'Once upon a time' > "$T/g2"
same "temperature 0: the same text whatever the seed" "$T/g1" "$T/g2"
$S -n 30 --num 3 "$R" 'Once' > "$T/n3"
for k in 1 2 3; do $S -n 30 -s $k "$R" 'Once'; done > "$T/n3b"
same "--num 3: the samples of seeds 1, 2 and 3, each ended by a newline" "$T/n3" "$T/n3b"

# --- records ---
$S -n 7 --num 4 --jsonl "$R" 'The cat' > "$T/j"
jq -se 'length == 4 and all(.[]; .event == "sample" and (.ids | length) <= 7 and (.ids | length) >= 1
	and .prompt == "The cat" and (.prompt_ids | length) >= 2) and ([.[].seed] == [1, 2, 3, 4])' "$T/j" > /dev/null \
	&& ok "--jsonl -n 7: four records, at most 7 ids each" || notok "--jsonl -n 7" "$(cat "$T/j")"
$S -n 7 --no-prompt "$R" 'The cat' > "$T/t7"
jq -r 'select(.seed == 1) | .text' "$T/j" > "$T/j7"
same "--jsonl's text is the text written without it" "$T/t7" "$T/j7"
$S -n 200 --jsonl -t 0 "$R" 'The' | jq -e '(.ids | length) <= 200 and (.stop == "eos" or (.ids | length) == 200)' \
	> /dev/null && ok "-n 200: a bound, or the end-of-text token" || notok "-n 200"

# --- the prompt from stdin ---
echo 'Once upon a time' | $S -n 30 "$R" > "$T/in1"
same "the prompt from stdin equals the prompt as argument" "$T/a" "$T/in1"
printf 'Once upon a time' | $S -n 30 "$R" - > "$T/in2"
same "... and from '-'" "$T/a" "$T/in2"

# --- top-p ---
$S -n 30 -p 1.0 "$R" 'Once upon a time' > "$T/p1"
same "--top-p 1.0 equals no --top-p" "$T/a" "$T/p1"
$S -n 30 --num 4 "$R" 'Once upon a time' > "$T/p0"
$S -n 30 --num 4 -p 0.3 "$R" 'Once upon a time' > "$T/p3"
cmp -s "$T/p0" "$T/p3" && notok "--top-p 0.3 draws otherwise" || ok "--top-p 0.3 draws otherwise"
$S -n 30 --num 2 -p 1e-9 -s 1 "$R" 'Once upon a time' > "$T/pg1"
$S -n 30 -t 0 "$R" 'Once upon a time' > "$T/pg0"
[ "$(head -1 "$T/pg1")" = "$(cat "$T/pg0")" ] && [ "$(sed -n 2p "$T/pg1")" = "$(cat "$T/pg0")" ] \
	&& ok "--top-p 1e-9 keeps the most likely token only: greedy" || notok "top-p 1e-9" "$(cat "$T/pg1" "$T/pg0")"

# --- lmt, a checkpoint, the tokenizer given ---
"$BIN/lmt" sample -q -j 1 -n 30 "$R" 'Once upon a time' > "$T/l"
same "lmt sample RUN PROMPT" "$T/a" "$T/l"
$S -n 30 "$R/ckpt/step-00000060" 'Once upon a time' > "$T/ck"
same "a checkpoint directory: its run's newest, the same text" "$T/a" "$T/ck"
$S -n 30 --tokenizer "$T/t.lmtok" "$R" 'Once upon a time' > "$T/tk"
same "--tokenizer: the run's own, the same text" "$T/a" "$T/tk"

# --- a terminal; evalppl's samples ---
if command -v script > /dev/null 2>&1; then
	script -qc "$S -n 30 '$R' 'Once upon a time'" /dev/null < /dev/null | tr -d '\r' > "$T/tty"
	same "on a terminal (script(1)): the same text" "$T/a" "$T/tty"
else
	ok "# SKIP script(1) not installed: no terminal check"
fi
$S -n 12 -k 40 --jsonl "$R" 'Once' | jq -c .ids > "$T/ev1"
"$BIN/evalppl" -q -j 1 --bootstrap 0 --max-docs 1 --samples 1 --prompt Once --sample-tokens 12 "$R" |
	jq -c --argjson n "$(jq length "$T/ev1")" 'select(.event == "sample") | .ids[:$n]' > "$T/ev2"
same "evalppl's sample of the same seed and top-k: the same tokens" "$T/ev1" "$T/ev2"

# --- refusals ---
mkdir -p "$T/empty/ckpt"
check_fail "a run without checkpoints: exit 1" 1 "$T/empty" $S "$T/empty" 'x'
# a checkpoint whose name is not its update (copied by hand) is not the newest
# valid one: train's resume and ckpt-inspect refuse it, sample used it
mkdir -p "$T/misnamed/ckpt"
cp -r "$R/ckpt/step-00000060" "$T/misnamed/ckpt/step-00000090"
check_fail "a run whose only checkpoint is misnamed: no checkpoint verifies" 1 "no checkpoint in" \
	$S -n 2 "$T/misnamed" 'x'
grep -qF "its manifest says update 60, its name 90" "$T/.err" && ok "... the warning says why it was skipped" ||
	notok "misnamed warning" "$(cat "$T/.err")"
check_fail "another tokenizer: exit 1, naming it" 1 "t2.lmtok" $S --tokenizer "$T/t2.lmtok" "$R" 'x'
check_fail "an empty prompt: exit 1" 1 "empty prompt" $S "$R" ''
check_fail "an empty stdin: exit 1" 1 "empty prompt" $S "$R" < /dev/null
check_fail "no run: exit 2" 2 "Try" $S
check_fail "--top-p 0: exit 2" 2 "top-p" $S -p 0 "$R" 'x'
check_fail "--top-p 1.5: exit 2" 2 "top-p" $S -p 1.5 "$R" 'x'
check_fail "-n 0: exit 2" 2 "max-tokens" $S -n 0 "$R" 'x'
check_fail "--temperature -1: exit 2" 2 "temperature" $S -t -1 "$R" 'x'
check_fail "two prompts: exit 2" 2 "unexpected argument" $S "$R" 'a' 'b'
check_fail "--seed 2^63-1 with --num 2: its second seed could not be given back, exit 2" 2 "cannot give back" \
	$S -s 9223372036854775807 --num 2 "$R" 'x'
check_fail "an unknown option: exit 2" 2 "Try" $S --bogus "$R"

finish
