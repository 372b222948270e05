#!/bin/sh
# tests/cli/ddp.sh: data-parallel training on CPU ranks under Open MPI's mpirun
# (issue "Distributed training"):
#   - one update on 2 and on 3 ranks (micro-batch B each) equals one update on one
#     rank with micro-batch 2B (3B) on the union batch, parameter by parameter, to
#     a stated tolerance; also with accumulation; the same for ZeRO-1, -2 and -3;
#   - 20 updates on 2 ranks track the 1-rank run's losses;
#   - rank 0 alone writes the run (stdout, metrics, checkpoints with every rank's
#     cursor); a 2-rank run stopped and resumed ends where the uninterrupted 2-rank
#     run does, bitwise;
#   - a rank with another configuration is refused at start, naming it; a rank
#     killed mid-run ends the whole job non-zero.
. tests/cli/lib.sh
TR=$BIN/train
need_mpi

"$BIN/gen-corpus" -q --docs 600 --seed 9 -o "$T/c.jsonl" > /dev/null
"$BIN/tok-train" -q -v 400 -o "$T/t.lmtok" "$T/c.jsonl" > /dev/null
"$BIN/tok-encode" -q -t "$T/t.lmtok" --eos -o "$T/s.lmtoks" "$T/c.jsonl" > /dev/null
"$BIN/shard-pack" -q -L 32 --split val=0.1 -o "$T/d" "$T/s.lmtoks" > /dev/null
# fp32: the tolerance below is about summation order, not bf16's rounding
M="--data $T/d --layers 2 --heads 2 --channels 32 --lr 1e-2 --eps 1e-3 --eval-every 0 --threads 1 --precision fp32"
# scripts/gpu-check runs these same cases on GPUs: LMT_TEST_TRAIN_FLAGS="--backend cuda --comm nccl"
M="$M ${LMT_TEST_TRAIN_FLAGS:-}"

# Tolerance: the ranks' gradients are summed by MPI in another order than one rank's
# micro-batch sums them, so the fp32 gradient differs in its last bits (relative
# ~1e-6). AdamW's first step is lr g / (|g| + eps): with eps = 1e-3 (not 1e-8, where
# a gradient near zero turns a rounding difference into a step of up to lr) that
# is smooth in g, and the parameters agree to ~1e-7. 1e-4 lets the rounding through
# and catches any wrong normalisation or missing sample (those move parameters by
# a good part of lr = 1e-2 on most elements).
for n in 2 3; do
	B=$((4 * n))
	check "1 rank, micro-batch $B: one update" $TR $M --micro-batch $B --updates 1 -o "$T/one$n"
	$MPIRUN -n $n $TR $M --micro-batch 4 --updates 1 -o "$T/dp$n" > "$T/dp$n.out" 2> "$T/dp$n.err"
	[ $? = 0 ] && ok "$n ranks, micro-batch 4 each: one update" || notok "$n ranks" "$(tail -c 600 "$T/dp$n.err")"
	"$BIN/ckpt-inspect" --diff --tensor 'param/*' --atol 1e-4 --ignore config --ignore clocks --ignore loader \
		--ignore rng --ignore sharding --ignore metrics_offset --ignore code \
		"$T/one$n/ckpt/step-00000001" "$T/dp$n/ckpt/step-00000001" > "$T/diff$n" 2>&1 \
		&& ok "$n ranks: every parameter within 1e-4 of the 1-rank update on the union batch" \
		|| notok "$n ranks against 1" "$(grep -v '"equal":true' "$T/diff$n" | head -c 600)"
	# the record: one per update, from rank 0 only, with the global token count
	[ "$(grep -c '"event":"update"' "$T/dp$n.out")" = 1 ] && \
		[ "$(jq -s 'map(select(.event == "update")) | .[0].tokens' "$T/dp$n.out")" = \
		  "$(jq -s 'map(select(.event == "update")) | .[0].tokens' "$T/.out")" ] \
		&& ok "$n ranks: one update record on stdout (rank 0's), counting every rank's tokens" \
		|| notok "$n ranks records" "$(grep -c update "$T/dp$n.out")"
	jq -e --argjson n $n '.state.loader.world == $n and ([.state.loader.cursors[].rank] == [range($n)])' \
		"$T/dp$n/ckpt/step-00000001/manifest.json" > /dev/null \
		&& ok "$n ranks: the checkpoint holds every rank's loader cursor" \
		|| notok "$n ranks cursors" "$(jq -c .state.loader "$T/dp$n/ckpt/step-00000001/manifest.json")"
done

# ZeRO: 1 AdamW's state sharded (reduce-scatter, each rank's shard updated,
# all-gather); 2 the gradients too (each layer's reduced to its owners in
# backward); 3 the parameters too (each layer gathered before its forward and its
# backward): every stage's one update against the 1-rank update on the union batch,
# under the tolerance above (only the summation order differs)
zero_diff() { # DESC REF RUN
	"$BIN/ckpt-inspect" --diff --atol 1e-4 --ignore config --ignore clocks --ignore loader --ignore rng \
		--ignore sharding --ignore metrics_offset --ignore code \
		"$2/ckpt/step-00000001" "$3/ckpt/step-00000001" > "$3.diff" 2>&1 \
		&& ok "$1: parameters and the gathered AdamW moments within 1e-4 of the 1-rank update" \
		|| notok "$1" "$(tail -c 300 "$3.err") $(grep -v '"status":"same"' "$3.diff" | head -c 400)"
}
for n in 2 3; do
	for z in 1 2 3; do
		$MPIRUN -n $n $TR $M --micro-batch 4 --updates 1 --zero $z -o "$T/z$z-$n" > "$T/z$z-$n.out" 2> "$T/z$z-$n.err"
		zero_diff "--zero $z on $n ranks" "$T/one$n" "$T/z$z-$n"
		# this rank's bytes: 1/n (rounded up) of the moments, and of the gradients
		# from stage 2, of the master weights at stage 3
		jq -se --argjson n $n --argjson z $z '(map(select(.event == "update"))[0].memory) as $m
			| (map(select(.event == "parameters"))[0].total) as $p
			| (($p + $n - 1) / $n | floor) as $s
			| $m.optimizer == 8 * $s and ($z < 2 or $m.grads == 4 * $s) and ($z < 3 or $m.params == 4 * $s)
			  and ($z >= 2 or $m.grads >= 4 * $p) and ($z >= 3 or $m.params >= 4 * $p)' "$T/z$z-$n.out" > /dev/null \
			&& ok "--zero $z on $n ranks: the sharded states' bytes are 1/$n of the model's" \
			|| notok "zero $z memory" "$(grep '"event":"update"' "$T/z$z-$n.out" | jq -c .memory)"
	done
done
$MPIRUN -n 3 $TR $M --micro-batch 4 --updates 1 --zero 3 --prefetch -o "$T/z3p" > /dev/null 2> "$T/z3p.err"
zero_diff "--zero 3 --prefetch on 3 ranks" "$T/one3" "$T/z3p"
for z in 2 3; do
	$MPIRUN -n 2 $TR $M --micro-batch 2 --accum 2 --updates 1 --zero $z -o "$T/za$z" > /dev/null 2> "$T/za$z.err"
	zero_diff "--zero $z on 2 ranks with --accum 2 (each micro-batch reduced into the shard)" "$T/one2" "$T/za$z"
done
# 20 updates with evaluations, samples and an export (ZeRO-3 gathers every
# parameter for them): the same losses as data parallelism without sharding, and
# the same llm.c file. Each update's gradient sums in another order, so equality
# is not promised; 1e-4 nats over 20 updates at lr 1e-2 catches a wrong step.
for z in 0 3; do
	pf=; [ $z = 3 ] && pf=--prefetch # --prefetch goes with --zero 3 only
	$MPIRUN -n 2 $TR $M --micro-batch 4 --updates 20 --eval-every 5 --sample-every 10 --zero $z $pf \
		--export-llmc "$T/lz$z.bin" --no-save > "$T/lz$z.out" 2> "$T/lz$z.err" || notok "zero $z 20 updates" "$(tail -c 300 "$T/lz$z.err")"
done
jq -s '[.[] | select(.event == "update" or .event == "eval") | .loss]' "$T/lz0.out" > "$T/lz0.l"
jq -s --slurpfile a "$T/lz0.l" '[.[] | select(.event == "update" or .event == "eval") | .loss] as $b
	| ($b | length) == 24 and ([range(24)] | all(($a[0][.] - $b[.]) | fabs < 1e-4))' "$T/lz3.out" > /dev/null \
	&& ok "--zero 3 on 2 ranks, 20 updates with evaluations and samples: losses within 1e-4 of --zero 0" \
	|| notok "zero 3 losses" "$(jq -c . "$T/lz0.l" | head -c 200)"
cmp -s "$T/lz0.bin" "$T/lz3.bin" && ok "... and its --export-llmc file is the same bytes" \
	|| notok "zero 3 export" "$(ls -l "$T/lz0.bin" "$T/lz3.bin" 2>&1)"
# bf16: the working copy gathered and cast by each rank, as AdamW writes it unsharded
for z in 0 3; do
	$MPIRUN -n 2 $TR $M --precision bf16 --micro-batch 4 --updates 5 --zero $z --no-save > "$T/bz$z.out" 2> "$T/bz$z.err"
done
jq -s '[.[] | select(.event == "update") | .loss]' "$T/bz0.out" > "$T/bz0.l"
jq -s --slurpfile a "$T/bz0.l" '[.[] | select(.event == "update") | .loss] as $b
	| ($b | length) == 5 and ([range(5)] | all(($a[0][.] - $b[.]) | fabs < 1e-3))' "$T/bz3.out" > /dev/null \
	&& ok "--zero 3 in bf16 on 2 ranks: 5 losses within 1e-3 of --zero 0 (bf16's rounding of an update apart)" \
	|| notok "zero 3 bf16" "$(tail -c 300 "$T/bz3.err") $(cat "$T/bz0.l" | head -c 200)"

for z in 1 3; do
	RZ="$M --micro-batch 4 --updates 8 --ckpt-every 4 --zero $z"
	$MPIRUN -n 2 $TR $RZ -o "$T/zref$z" > /dev/null 2> "$T/zref$z.err"
	$MPIRUN -n 2 $TR $RZ -o "$T/zres$z" --stop-at 4 > /dev/null 2> "$T/zres$z.err"
	$MPIRUN -n 2 $TR --resume auto -o "$T/zres$z" > /dev/null 2>> "$T/zres$z.err"
	same "--zero $z on 2 ranks, stopped at 4 and resumed: the same bytes as the uninterrupted run" \
		"$T/zref$z/ckpt/step-00000008/rank-00000.lmckpt" "$T/zres$z/ckpt/step-00000008/rank-00000.lmckpt"
done

# --stats-every on 2 ranks: each rank adds its shard's part of each layer's sums of
# squares; ZeRO-3's per-layer statistics are ZeRO-0's (the sums in another order:
# 1e-9 relative)
for z in 0 3; do
	$MPIRUN -n 2 $TR $M --micro-batch 4 --updates 10 --stats-every 5 --zero $z --no-save > "$T/sz$z.out" 2> "$T/sz$z.err"
done
jq -s '[.[] | select(.event == "stats") | .layers[] | .grad_norm, .param_norm, .act_rms]' "$T/sz0.out" > "$T/sz0.v"
jq -se --slurpfile a "$T/sz0.v" '[.[] | select(.event == "stats") | .layers[] | .grad_norm, .param_norm, .act_rms]
	| length == 12 and (. as $b | [range(length)]
		| all(. as $i | (($a[0][$i] - $b[$i]) | fabs) <= 1e-9 * ($b[$i] | fabs) + 1e-12))' \
	"$T/sz3.out" > /dev/null && ok "--stats-every on 2 ranks: --zero 3's per-layer statistics are --zero 0's" \
	|| notok "stats zero 3" "$(tail -c 300 "$T/sz3.err") $(head -c 300 "$T/sz0.v")"

# buckets: one per layer (--bucket-mb 0, an all-reduce started in backward as each
# layer finishes, waited for after) against the default (one bucket): on 2 ranks
# each element's sum a + b is the same whatever the chunks, so bitwise equal
$MPIRUN -n 2 $TR $M --micro-batch 4 --updates 1 --bucket-mb 0 -o "$T/b0" > /dev/null 2> "$T/b0.err"
same "2 ranks, a bucket per layer started in backward: bitwise the single-bucket run" \
	"$T/dp2/ckpt/step-00000001/rank-00000.lmckpt" "$T/b0/ckpt/step-00000001/rank-00000.lmckpt"

# with accumulation: 2 ranks x 2 micro-batches of 2 against 1 rank x 1 of 8
check "1 rank, one micro-batch of 8" $TR $M --micro-batch 8 --updates 1 -o "$T/oneacc"
$MPIRUN -n 2 $TR $M --micro-batch 2 --accum 2 --updates 1 -o "$T/dpacc" > /dev/null 2> "$T/dpacc.err"
"$BIN/ckpt-inspect" --diff --tensor 'param/*' --atol 1e-4 --ignore config --ignore clocks --ignore loader --ignore rng \
	--ignore sharding --ignore metrics_offset --ignore code \
	"$T/oneacc/ckpt/step-00000001" "$T/dpacc/ckpt/step-00000001" > "$T/diffacc" 2>&1 \
	&& ok "2 ranks x 2 micro-batches of 2 equal 1 rank x 8 within 1e-4" \
	|| notok "accumulation" "$(head -c 600 "$T/dpacc.err") $(grep -v '"equal":true' "$T/diffacc" | head -c 400)"

# 20 updates: the losses track. Tolerance 1e-4 nats: summation order moves the
# trajectories apart slowly (measured here: 3e-8, fp32); a rank training on the
# wrong samples, or a gradient not averaged, is off by far more within a few updates.
check "1 rank, micro-batch 8, 20 updates" $TR $M --micro-batch 8 --updates 20 --no-save
grep '"event":"update"' "$T/.out" | jq -r .loss > "$T/one20"
$MPIRUN -n 2 $TR $M --micro-batch 4 --updates 20 --no-save > "$T/dp20.out" 2> "$T/dp20.err"
grep '"event":"update"' "$T/dp20.out" | jq -r .loss > "$T/dp20"
d=$(paste "$T/one20" "$T/dp20" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d } END { print m + 0 }')
[ "$(wc -l < "$T/dp20")" = 20 ] && awk -v d="$d" 'BEGIN { exit !(d < 1e-4) }' \
	&& ok "20 updates on 2 ranks: every loss within 1e-4 of the 1-rank run's (largest gap $d)" \
	|| notok "20 updates" "$d $(wc -l < "$T/dp20") $(tail -c 300 "$T/dp20.err")"

# stop and resume on 2 ranks: bitwise the uninterrupted 2-rank run
R="$M --micro-batch 4 --updates 8 --ckpt-every 4"
$MPIRUN -n 2 $TR $R -o "$T/ref2" > /dev/null 2> "$T/ref2.err"
$MPIRUN -n 2 $TR $R -o "$T/res2" --stop-at 4 > /dev/null 2> "$T/res2.err"
$MPIRUN -n 2 $TR --resume auto -o "$T/res2" > "$T/res2.out" 2>> "$T/res2.err"
[ $? = 0 ] && grep -q '"event":"resume"' "$T/res2.out" && ok "2 ranks: stopped at 4 and resumed with --resume auto" \
	|| notok "2-rank resume" "$(tail -c 600 "$T/res2.err")"
same "... ends on the same bytes as the uninterrupted 2-rank run" "$T/ref2/ckpt/step-00000008/rank-00000.lmckpt" \
	"$T/res2/ckpt/step-00000008/rank-00000.lmckpt"
ls -A "$T" | grep -q '^runs$' && notok "a rank wrote a default run directory" || ok "no rank made a run directory of its own"

# each rank writes its own file of a save: rank 1 killed half-way through its file
# of the save of update 8 ends the job; no step-00000008 appears, update 4 stays the
# newest valid checkpoint, and the resume from it ends bitwise where the
# uninterrupted run does
R12="$M --micro-batch 4 --updates 12 --ckpt-every 4 --zero 2"
$MPIRUN -n 2 $TR $R12 -o "$T/k12ref" > /dev/null 2> "$T/k12ref.err"
LMT_TEST_CKPT_KILL=data@8 LMT_TEST_CKPT_KILL_RANK=1 timeout 60 $MPIRUN -n 2 $TR $R12 -o "$T/k12" \
	> /dev/null 2> "$T/k12.err"
rc=$?
# (mpirun names the process that died: rank 1's own, so rank 1 wrote its file)
[ $rc != 0 ] && [ $rc != 124 ] && [ -f "$T/k12/ckpt/step-00000004/manifest.json" ] && [ ! -e "$T/k12/ckpt/step-00000008" ] \
	&& ls -A "$T/k12/ckpt" | grep -q '^\.tmp-step-00000008-' && grep -q "process rank 1 .*signal 9" "$T/k12.err" \
	&& ok "rank 1 killed writing its own file of a save: the job fails ($rc), update 4 stays the newest checkpoint" \
	|| notok "rank killed mid-save" "$rc $(ls -A "$T/k12/ckpt") $(tail -c 300 "$T/k12.err")"
"$BIN/ckpt-inspect" -q --verify "$T/k12/ckpt/step-00000004" > /dev/null 2>&1 \
	&& ok "... and it verifies" || notok "step 4 verify" "$(tail -c 300 "$T/k12.err")"
$MPIRUN -n 2 $TR --resume auto -o "$T/k12" > "$T/k12r.out" 2> "$T/k12r.err"
[ $? = 0 ] && has_resume=$(jq -se 'map(select(.event == "resume")) | .[0].update == 4' "$T/k12r.out") \
	&& [ "$has_resume" = true ] && ok "... resumed on 2 ranks from update 4" || notok "resume after the kill" "$(tail -c 300 "$T/k12r.err")"
same "... ending on the same bytes as the run never killed" "$T/k12ref/ckpt/step-00000012/rank-00000.lmckpt" \
	"$T/k12/ckpt/step-00000012/rank-00000.lmckpt"
same "... rank 1's file too" "$T/k12ref/ckpt/step-00000012/rank-00001.lmckpt" "$T/k12/ckpt/step-00000012/rank-00001.lmckpt"

# a 2-rank checkpoint resumed on 3 ranks: the cursors rebased, the run continuing
# with the 3-rank batch (4 updates of 2 x 4 sequences, then 4 of 3 x 4); under
# ZeRO-2 the same losses as without sharding (within 1e-4, as above)
$MPIRUN -n 2 $TR $R -o "$T/w23" --stop-at 4 > /dev/null 2> "$T/w23.err"
$MPIRUN -n 3 $TR --resume auto -o "$T/w23" > "$T/w23.out" 2>> "$T/w23.err"
rc=$?
K=$((4 * 2 * 4 + 4 * 3 * 4))
[ $rc = 0 ] && jq -se --argjson k $K '(map(select(.event == "update")) | map(.update)) == [5, 6, 7, 8]' "$T/w23.out" > /dev/null \
	&& jq -e --argjson k $K '.state.loader.world == 3 and ([.state.loader.cursors[].cursor] == [$k, $k + 1, $k + 2])' \
		"$T/w23/ckpt/step-00000008/manifest.json" > /dev/null \
	&& ok "a 2-rank checkpoint resumed on 3 ranks: updates 5-8, cursors rebased to $K, $((K + 1)), $((K + 2))" \
	|| notok "2 -> 3 ranks" "$(tail -c 300 "$T/w23.err") $(jq -c .state.loader "$T/w23/ckpt/step-00000008/manifest.json")"
$MPIRUN -n 2 $TR $R --zero 2 -o "$T/w23z" --stop-at 4 > /dev/null 2> "$T/w23z.err"
$MPIRUN -n 3 $TR --resume auto -o "$T/w23z" > "$T/w23z.out" 2>> "$T/w23z.err"
jq -s '[.[] | select(.event == "update") | .loss]' "$T/w23.out" > "$T/w23.l"
jq -se --slurpfile a "$T/w23.l" '[.[] | select(.event == "update") | .loss] as $b
	| ($b | length) == 4 and ([range(4)] | all(($a[0][.] - $b[.]) | fabs < 1e-4))' "$T/w23z.out" > /dev/null \
	&& ok "--zero 2: a 2-rank checkpoint resumed on 3 ranks continues with the losses of the unsharded run" \
	|| notok "zero 2, 2 -> 3 ranks" "$(tail -c 300 "$T/w23z.err") $(head -c 200 "$T/w23.l")"

# a rank with another seed is refused at start, naming it
$MPIRUN -n 1 $TR $M --micro-batch 4 --updates 2 --no-save : -n 1 $TR $M --micro-batch 4 --updates 2 --no-save --seed 7 \
	> /dev/null 2> "$T/mis.err"
rc=$?
[ $rc != 0 ] && grep -q "rank 1 of 2 trains another run than rank 0" "$T/mis.err" \
	&& ok "a rank with another --seed: the job fails at start naming rank 1" || notok "mismatch" "$rc $(tail -c 400 "$T/mis.err")"
check_fail "several ranks without -o or --no-save: usage error" 2 "name it with -o RUN" \
	$MPIRUN -n 2 $TR $M --micro-batch 4 --updates 1

# every rank's step, data wait and communication time in each update record
jq -se 'map(select(.event == "update")) | length == 20 and all(.[]; .ranks.step_s.slowest < 2 and
	.ranks.step_s.min <= .ranks.step_s.median and .ranks.step_s.median <= .ranks.step_s.max and .ranks.comm_s.max >= 0)' \
	"$T/dp20.out" > /dev/null && ok "each update record gives the ranks' min, median, max step time and the slowest rank" \
	|| notok "rank times" "$(grep '"event":"update"' "$T/dp20.out" | head -1 | jq -c .ranks)"

# the audit: the ranks' samples are disjoint and together the 1-rank run's
check "1 rank, micro-batch 8, sample ids logged" $TR $M --micro-batch 8 --updates 3 --no-save --log-samples
cp "$T/.out" "$T/aud1.out"
$MPIRUN -n 2 $TR $M --micro-batch 4 --updates 3 --no-save --audit-samples 3 > "$T/aud2.out" 2> "$T/aud2.err"
jq -sre --slurpfile one "$T/aud1.out" '
	[.[] | select(.event == "audit")] as $a
	| [$one[] | select(.event == "update")] as $u
	| ($a | length) == 3 and all(range(3); . as $k |
		($a[$k].ranks[0] - $a[$k].ranks[1]) == $a[$k].ranks[0]
		and (($a[$k].ranks[0] + $a[$k].ranks[1]) | sort) == ($u[$k].samples | sort))' "$T/aud2.out" > /dev/null \
	&& ok "--audit-samples 3: in each update the 2 ranks' samples are disjoint and together the 1-rank run's" \
	|| notok "audit" "$(grep audit "$T/aud2.out" | head -1 | cut -c1-300)"

# a stalled rank: rank 0's collective times out (--comm-timeout 2) and the job fails,
# naming the operation, instead of hanging
timeout 60 $MPIRUN -n 2 sh -c '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && (sleep 3; kill -STOP $$) & exec "$0" "$@"' \
	$TR $M --micro-batch 4 --updates 100000 --no-save --comm-timeout 2 > /dev/null 2> "$T/stall.err"
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] && grep -q "timed out after 2 s on rank 0 of 2" "$T/stall.err" \
	&& ok "rank 1 stopped mid-run: rank 0 times out after --comm-timeout 2, naming the operation; the job exits $rc" \
	|| notok "stalled rank" "$rc $(grep -v '^train: precision\|parameters' "$T/stall.err" | tail -c 400)"

# a rank killed mid-run: the job ends non-zero, well within the guard
LMT_DDP_KILL=1 timeout 60 $MPIRUN -n 2 sh -c '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && (sleep 2; kill -9 $$) & exec "$0" "$@"' \
	$TR $M --micro-batch 4 --updates 100000 --no-save > /dev/null 2> "$T/kill.err"
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] && ok "rank 1 killed mid-run: the job exits $rc, not hanging" \
	|| notok "killed rank" "$rc $(tail -c 400 "$T/kill.err")"

finish
