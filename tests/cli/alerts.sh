#!/bin/sh
# tests/cli/alerts.sh: train's alerts (lib/report/alerts.h) on planted anomalies:
# a clean run raises none; a learning rate 30x too high for three updates
# (LMT_TEST_LR_SCALE) fires a loss spike and a gradient-norm spike, each once per
# episode, on stdout, in metrics.jsonl, in events.jsonl and on stderr, and each
# clears; a non-finite gradient (LMT_TEST_OVERFLOW, skipped by --on-nonfinite
# skip) fires "nonfinite"; thresholds are set with --alert NAME=X. The statistics
# (--stats-every): the units' gradient norms make up the update's norm, and the
# planted spike shows in the update ratio (ddp.sh: the same on 2 ranks under ZeRO-3).
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
