#!/bin/sh
# tests/cli/alerts-ranks.sh: train's timing alerts on 2 CPU ranks under mpirun,
# against planted anomalies: a clean run raises none; a rank slowed by a test
# hook (LMT_TEST_SLOW_RANK=R:S, S seconds more in every update: 60 ms, 30 over
# the median of 2, over the floor of 20 ms an update) fires skew naming that
# rank, whichever it is; a loader slowed by a test hook (LMT_TEST_SLOW_LOADER=R:S,
# S seconds more a sample: 64 ms an update against steps of a few) fires starvation, and not skew (a rank waiting for its loader is
# starved, not slow). Each judges a window: none fires before update 25, half the
# default window.
. tests/cli/lib.sh
need_mpi
TR=$BIN/train
tiny_data 400
M="--data $T/d --layers 2 --heads 2 --channels 32 --micro-batch 8 --eval-every 0 --precision fp32 --threads 1
	--no-save --updates 40"
kinds() { jq -sc '[.[] | select(.event == "alert") | [.kind, .update]]' "$1"; }

$MPIRUN -n 2 $TR $M > "$T/clean.out" 2> "$T/clean.err"
[ $? = 0 ] && [ "$(kinds "$T/clean.out")" = "[]" ] && grep -q '"busy_s"' "$T/clean.out" \
	&& ok "2 ranks, a clean run of 40 updates: no alert (and each update's ranks record their busy time)" \
	|| notok "clean run" "$(kinds "$T/clean.out") $(tail -c 300 "$T/clean.err")"

for r in 0 1; do
	LMT_TEST_SLOW_RANK=$r:0.06 $MPIRUN -x LMT_TEST_SLOW_RANK -n 2 $TR $M > "$T/sk$r.out" 2> "$T/sk$r.err"
	jq -se --arg r "rank $r was slowest" '[.[] | select(.event == "alert")] as $a
		| ($a | map(.kind)) == ["skew"] and $a[0].update >= 25 and ($a[0].evidence | startswith($r))' \
		"$T/sk$r.out" > /dev/null && grep -q "alert skew: rank $r was slowest" "$T/sk$r.err" \
		&& ok "rank $r slowed by 60 ms an update: skew fires once, from update 25, naming rank $r (stdout, stderr)" \
		|| notok "slowed rank $r" "$(grep '"alert' "$T/sk$r.out" | head -c 500) $(tail -c 200 "$T/sk$r.err")"
done

# runcard --explain at the skew alert names the slowed rank from the busy times (in a
# synchronous step every rank's step lasts as long as the slowest one's)
LMT_TEST_SLOW_RANK=1:0.06 $MPIRUN -x LMT_TEST_SLOW_RANK -n 2 $TR $(echo $M | sed 's/--no-save//') -o "$T/skrun" \
	> "$T/skrun.out" 2> "$T/skrun.err"
u=$(jq -s '[.[] | select(.event == "alert" and .kind == "skew")][0].update // 30' "$T/skrun.out")
"$BIN/runcard" --explain "$T/skrun" --update "$u" --jsonl > "$T/ex.jsonl" 2> "$T/ex.err"
jq -se '.[-1] as $e | ($e | tostring | test("slow rank")) and ($e | tostring | test("rank 1.s busy time"))' \
	"$T/ex.jsonl" > /dev/null \
	&& ok "runcard --explain at the skew alert (update $u): a slow rank, rank 1, by its busy time" \
	|| notok "explain a slowed rank" "$(tail -c 600 "$T/ex.jsonl") $(cat "$T/ex.err")"

LMT_TEST_SLOW_LOADER=1:0.008 $MPIRUN -x LMT_TEST_SLOW_LOADER -n 2 $TR $M > "$T/sl.out" 2> "$T/sl.err"
jq -se '[.[] | select(.event == "alert")] as $a | ($a | map(.kind)) == ["starvation"] and $a[0].update >= 25
	and $a[0].value > 0.25' "$T/sl.out" > /dev/null \
	&& ok "rank 1's loader slowed by 8 ms a sample: starvation fires once, from update 25, and no skew" \
	|| notok "slowed loader" "$(grep '"alert' "$T/sl.out" | head -c 500) $(tail -c 200 "$T/sl.err")"
finish
