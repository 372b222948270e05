#!/bin/sh
# tests/cli/alerts.sh: train's alerts (lib/report/alerts.h) on planted anomalies:
# a clean run raises none; a learning rate 30x too high for three updates
# (LMT_TEST_LR_SCALE) fires a loss spike and a gradient-norm spike, each once per
# episode, on stdout, in metrics.jsonl, in events.jsonl and on stderr, and each
# clears; a non-finite gradient (LMT_TEST_OVERFLOW, skipped by --on-nonfinite
# skip) fires "nonfinite"; thresholds are set with --alert NAME=X. The statistics
# (--stats-every): the units' gradient norms make up the update's norm, and the
# planted spike shows in the update ratio (ddp.sh: the same on 2 ranks under ZeRO-3).
# The run's plan: --mem-limit and the ledger's prediction (memory, memory_ledger),
# --budget, and a checkpoint made to fail verification (LMT_TEST_CKPT_CORRUPT).
# alerts-ranks.sh: a slowed rank and a slowed loader on 2 ranks.
. tests/cli/lib.sh
TR=$BIN/train
tiny_data 600
M="--data $T/d --layers 2 --heads 2 --channels 32 --micro-batch 8 --eval-every 50 --precision fp32"

$TR $M --updates 250 -o "$T/clean" > "$T/clean.out" 2> "$T/clean.err"
[ $? = 0 ] && ! grep -q '"alert' "$T/clean.out" && ! grep -q '"alert' "$T/clean/events.jsonl" \
	&& ok "a clean run of 250 updates raises no alert" \
	|| notok "clean run" "$(grep '"alert' "$T/clean.out" | head -c 400)"

LMT_TEST_LR_SCALE=150-152:30 $TR $M --updates 250 -o "$T/lr" > "$T/lr.out" 2> "$T/lr.err"
[ $? = 0 ] || notok "lr spike run" "$(tail -c 300 "$T/lr.err")"
for k in loss_spike grad_spike; do
	jq -se --arg k $k '[.[] | select(.event == "alert" and .kind == $k)] as $a
		| [.[] | select(.event == "alert-cleared" and .kind == $k)] as $c
		| ($a | length) >= 1 and ($a | length) <= 2 and ($a[0].update >= 151 and $a[0].update <= 155)
		  and ($c | length) == ($a | length) and ($a[0].value > $a[0].threshold)' "$T/lr.out" > /dev/null \
		&& ok "lr 30x too high at updates 150-152: $k fires at 151-155, at most twice, and clears" \
		|| notok "$k" "$(grep '"alert' "$T/lr.out" | head -c 600)"
done
[ "$(grep -c '"event":"alert"' "$T/lr/metrics.jsonl")" = "$(grep -c '"event":"alert"' "$T/lr.out")" ] \
	&& grep -q '"event":"alert".*loss_spike: loss' "$T/lr/events.jsonl" && grep -q "alert loss_spike" "$T/lr.err" \
	&& ok "... the alerts are in metrics.jsonl, in events.jsonl with their evidence, and on stderr" \
	|| notok "alert records" "$(grep alert "$T/lr/events.jsonl" | head -c 300)"
! grep -q '"kind":"clipping"\|"kind":"nonfinite"' "$T/lr.out" \
	&& ok "... and no other kind fires" || notok "other kinds" "$(grep '"alert"' "$T/lr.out" | head -c 300)"

LMT_TEST_OVERFLOW=20 $TR $M --updates 30 --on-nonfinite skip --no-save > "$T/nf.out" 2> "$T/nf.err"
jq -se '[.[] | select(.kind == "nonfinite")] | map([.event, .update]) == [["alert", 20], ["alert-cleared", 21]]' \
	"$T/nf.out" > /dev/null \
	&& ok "a non-finite gradient at update 20 (skipped): nonfinite fires at 20 and clears at 21" \
	|| notok "nonfinite alert" "$(grep '"alert' "$T/nf.out" | head -c 300) $(tail -c 200 "$T/nf.err")"

LMT_TEST_LR_SCALE=150-152:30 $TR $M --updates 250 --alert loss_spike=0 --alert grad_spike=0 --alert val_regression=0 --no-save \
	> "$T/off.out" 2> "$T/off.err"
! grep -q '"alert' "$T/off.out" && ok "--alert loss_spike=0, grad_spike=0, val_regression=0: those kinds off" \
	|| notok "alert off" "$(grep '"alert' "$T/off.out" | head -c 300)"
check_fail "--alert with an unknown name: usage error naming the names" 2 "expected NAME=X with NAME one of" \
	$TR $M --updates 1 --no-save --alert spikes=3
check_fail "--alert with a negative threshold: usage error" 2 "alert" $TR $M --updates 1 --no-save --alert clipping=-1

# the run's plan: a peak over 0.9 of --mem-limit (1 MB: this model's 2.4 MB peak
# is over it at update 1) and over 0.5 of the ledger's prediction (the measured
# peak is the prediction, to 1e-3: a threshold of 1.2 never fires on it)
$TR $M --updates 5 --no-save --mem-limit 1M --alert memory_ledger=0.5 > "$T/mem.out" 2> "$T/mem.err"
jq -se '[.[] | select(.event == "alert")] | map(.kind) | sort == ["memory", "memory_ledger"]' "$T/mem.out" > /dev/null \
	&& grep -q '"kind":"memory".*of the limit of 1.0 MB' "$T/mem.out" \
	&& grep -q '"kind":"memory_ledger".*ledger.s prediction' "$T/mem.out" \
	&& ok "--mem-limit 1M, --alert memory_ledger=0.5: memory and memory_ledger fire once, naming the limit and the prediction" \
	|| notok "memory alerts" "$(grep '"alert' "$T/mem.out" | head -c 600)"

# the budget (memledger --budget's record): a budget of 1e9 tokens for a run of
# 40 updates of at most 256 tokens is off by nearly 100%, judged at update 25
printf '{"event":"budget","target_tokens":1e9,"device_hours":{"total":1000}}\n' > "$T/budget.jsonl"
$TR $M --updates 40 --no-save --budget "$T/budget.jsonl" > "$T/bu.out" 2> "$T/bu.err"
jq -se '[.[] | select(.event | startswith("alert"))] | map([.event, .kind, .update]) == [["alert", "budget", 25]]' \
	"$T/bu.out" > /dev/null && grep -q "off the budget's 1e+09" "$T/bu.out" \
	&& ok "--budget FILE: a run far short of the budget's tokens fires budget once, at update 25 (half the window)" \
	|| notok "budget alert" "$(grep '"alert' "$T/bu.out" | head -c 400) $(tail -c 200 "$T/bu.err")"
printf '{"event":"budget","target_tokens":0}\n' > "$T/bad-budget.jsonl"
check_fail "--budget with no positive target: exit 1 naming the file" 1 "bad-budget.jsonl': line 1: the budget record needs" \
	$TR $M --updates 5 --no-save --budget "$T/bad-budget.jsonl"
[ ! -s "$T/.out" ] && ok "... and nothing on stdout" || notok "output of a refused budget" "$(head -c 200 "$T/.out")"

# a checkpoint made to fail verification (LMT_TEST_CKPT_CORRUPT flips a byte of
# its data file once committed): ckpt_verify fires at its update with the
# verifier's reason, ckpt_age once the last good one is 1.5 intervals old, both
# clear at the next checkpoint that verifies (--ckpt-sync: a save in the
# background is verified when collected, maybe after ckpt_age fired); a resume
# passes over the bad one
LMT_TEST_CKPT_CORRUPT=10 $TR $M --updates 30 --ckpt-every 10 --ckpt-sync -o "$T/cc" > "$T/cc.out" 2> "$T/cc.err"
jq -se '[.[] | select(.event | startswith("alert"))] | map([.event, .kind, .update])
	== [["alert", "ckpt_verify", 10], ["alert", "ckpt_age", 16], ["alert-cleared", "ckpt_verify", 20],
	    ["alert-cleared", "ckpt_age", 20]]' "$T/cc.out" > /dev/null \
	&& jq -se 'map(select(.event == "checkpoint")) | map(.verified) == [false, true, true]' "$T/cc.out" > /dev/null \
	&& grep -q '"alert".*ckpt_verify: .*step-00000010/rank-00000.lmckpt.*data corrupted' "$T/cc/events.jsonl" \
	&& grep -q "alert ckpt_verify" "$T/cc.err" \
	&& ok "a checkpoint corrupted at update 10: ckpt_verify there, ckpt_age at 16, both cleared at 20; in events.jsonl and on stderr" \
	|| notok "failed verification" "$(grep '"alert\|"checkpoint"' "$T/cc.out" | head -c 900)"
LMT_TEST_CKPT_CORRUPT=20 $TR $M --updates 20 --ckpt-every 10 -o "$T/cr" > /dev/null 2> "$T/cr.err"
grep -q '"event":"checkpoint-set-aside".*failed-step-00000020-' "$T/cr/events.jsonl" \
	&& [ -d "$(echo "$T"/cr/ckpt/failed-step-00000020-*)" ] && [ ! -e "$T/cr/ckpt/step-00000020" ] \
	&& grep -q "step-00000020' failed its verification; moved to" "$T/cr.err" \
	&& ok "... the last checkpoint corrupted: moved aside to ckpt/failed-step-00000020-PID, saying so" \
	|| notok "a failed checkpoint set aside" "$(ls "$T/cr/ckpt"; tail -c 400 "$T/cr.err")"
$TR --resume auto -o "$T/cr" --updates 25 > "$T/cr2.out" 2> "$T/cr2.err"
grep -q '"event":"resume".*step-00000010' "$T/cr2.out" \
	&& ok "... and the resume is from update 10" \
	|| notok "resume over a corrupted checkpoint" "$(tail -c 400 "$T/cr2.err")"
# retention counts only checkpoints that verified: with --keep 2 and the third
# checkpoint failing, both good ones stay (the one of update 10 was removed)
LMT_TEST_CKPT_CORRUPT=30 $TR $M --updates 30 --ckpt-every 10 --keep 2 --ckpt-sync -o "$T/ck2" > /dev/null 2> "$T/ck2.err"
"$BIN/ckpt-inspect" --verify "$T/ck2/ckpt/step-00000010" > /dev/null 2>&1 \
	&& "$BIN/ckpt-inspect" --verify "$T/ck2/ckpt/step-00000020" > /dev/null 2>&1 \
	&& ok "--keep 2 and the newest checkpoint failing verification: the two good ones are kept" \
	|| notok "retention over a failed checkpoint" "$(ls "$T/ck2/ckpt"; tail -c 300 "$T/ck2.err")"

# statistics: the units' squared gradient norms add up to the update's squared norm
# (the same sums in another order: 1e-9 relative), every 5 updates
SQ='[.[] | select(.event == "stats")] as $s | [.[] | select(.event == "update")] as $u
	| ($s | map(.update)) == [5, 10, 15, 20]
	and ($s | all(. as $r | ((([$r.embeddings, $r.head] + $r.layers) | map(.grad_norm * .grad_norm) | add) | sqrt)
		as $n | ($u[$r.update - 1].grad_norm - $n | fabs) <= 1e-9 * $n))'
$TR $M --updates 20 --stats-every 5 --no-save > "$T/st.out" 2> "$T/st.err"
jq -se "$SQ" "$T/st.out" > /dev/null && ok "--stats-every 5: a stats record every 5 updates, its layers' norms making up the gradient norm" \
	|| notok "stats" "$(grep '"stats"' "$T/st.out" | head -c 400)"
jq -se '[.[] | select(.event == "stats")] as $s | ($s | map(select(.update == 150))[0].update_ratio.matrix)
	> 10 * ($s | map(select(.update == 125))[0].update_ratio.matrix)' "$T/lr/metrics.jsonl" > /dev/null \
	&& ok "the planted learning rate shows in the matrices' update-to-parameter ratio (update 150 over 10x update 125's)" \
	|| notok "update ratio" "$(grep '"stats"' "$T/lr/metrics.jsonl" | jq -c '[.update, .update_ratio.matrix]' | tail -3)"
finish
