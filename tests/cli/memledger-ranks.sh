#!/bin/sh
# tests/cli/memledger-ranks.sh: memledger's predicted model-state bytes equal the
# counters train reports, exactly, on 1, 2 and 3 ranks under every ZeRO stage, in
# fp32, bf16 and fp16, for several shapes (tied, untied, another vocabulary and
# sequence length): params, weights_working, grads, optimizer, staging,
# activations and by_dtype of config.json's "memory" and of the first update
# record's, and the parameter count of the "parameters" record.
#
# The comparison is exact (no tolerance): the ledger asks the trainer's own code
# for every figure (lmt_gpt_layout, lmt_state_bytes, lmt_gpt_act_size), so any
# difference is a bug in one of them. Each case configures memledger from the run's
# config.json (--run) and, for the first case of each shape, from flags too,
# which must give the same records.
. tests/cli/lib.sh
need_mpi
ML=$BIN/memledger

data() { # NAME VOCAB SEQ
	"$BIN/gen-corpus" -q --docs 300 --seed 7 -o "$T/$1.jsonl" > /dev/null
	"$BIN/tok-train" -q -v "$2" -o "$T/$1.lmtok" "$T/$1.jsonl" > /dev/null
	"$BIN/tok-encode" -q -t "$T/$1.lmtok" -o "$T/$1.lmtoks" "$T/$1.jsonl" > /dev/null
	"$BIN/shard-pack" -q -L "$3" --split val=0.1 -o "$T/$1" "$T/$1.lmtoks" > /dev/null
}
data d300 300 32
data d500 500 48

# compare DESC RUN: memledger --run RUN against RUN's counters
compare() {
	"$ML" --jsonl --run "$2" > "$2.ml" 2> "$2.mlerr" || { notok "$1: memledger --run" "$(cat "$2.mlerr")"; return; }
	grep '"event":"update"' "$2.out" | head -1 > "$2.up"
	grep '"event":"parameters"' "$2.out" | head -1 > "$2.par"
	jq -se --slurpfile cfg "$2/config.json" --slurpfile up "$2.up" --slurpfile par "$2.par" '
		(map(select(.event == "term")) | map({(.name): .bytes}) | add) as $t
		| (map(select(.event == "total"))[0]) as $tot | (map(select(.event == "model"))[0]) as $mod
		| [$cfg[0].memory, $up[0].memory] | map(
			$t.params == .params and $t.weights_working == .weights_working and $t.grads == .grads
			and $t.optimizer == .optimizer and $t.staging == .staging and $tot.activations == .activations
			and $tot.by_dtype == .by_dtype) + [$mod.params == $par[0].total] | all' "$2.ml" > /dev/null \
		&& ok "$1: every model-state counter, the activations and the parameter count equal train's" \
		|| notok "$1" "train: $(jq -c .memory "$2/config.json")" \
			"memledger: $(jq -c 'select(.event == "term" and .group == "state") | [.name, .bytes]' "$2.ml" | tr '\n' ' ')"
}

# run DESC RANKS ZERO PRECISION DATA SHAPE...
n=0
run() {
	desc=$1 ranks=$2 zero=$3 prec=$4 d=$5
	shift 5
	n=$((n + 1))
	r="$T/r$n"
	set -- --data "$T/$d" "$@" --micro-batch 2 --updates 1 --eval-every 0 --threads 1 --precision "$prec" \
		--zero "$zero" -o "$r"
	if [ "$ranks" = 1 ]; then "$BIN/train" "$@" > "$r.out" 2> "$r.err"
	else $MPIRUN -n "$ranks" "$BIN/train" "$@" > "$r.out" 2> "$r.err"; fi
	[ $? = 0 ] || { notok "$desc: train" "$(tail -c 400 "$r.err")"; return; }
	compare "$desc" "$r"
}

S1="--layers 2 --heads 2 --channels 32"
S2="--layers 3 --heads 4 --channels 64 --untie"
S3="--layers 1 --heads 2 --channels 48"

# one rank: every shape in every precision
for p in fp32 bf16 fp16; do
	run "1 rank, tied, vocab 300, $p" 1 0 $p d300 $S1
	run "1 rank, untied, $p" 1 0 $p d300 $S2
	run "1 rank, vocab 500, T 48, $p" 1 0 $p d500 $S3
done

run "1 rank, recompute every:2, bf16" 1 0 bf16 d300 --layers 4 --heads 2 --channels 32 --recompute every:2

# the comparison can fail: the ledger of another stage than the run's differs
"$ML" --jsonl --run "$T/r1" --zero 0 --world 1 > "$T/z0.ml"
jq -e 'select(.event == "term" and .name == "optimizer") | .bytes' "$T/z0.ml" > "$T/z0.opt"
[ "$(cat "$T/z0.opt")" = "$(jq .memory.optimizer "$T/r1/config.json")" ] \
	&& ok "the ledger of the run's own layout has its optimizer bytes" || notok "z0" "$(cat "$T/z0.opt")"
"$ML" --jsonl --run "$T/r1" --world 2 --zero 1 | jq -e 'select(.event == "term" and .name == "optimizer") | .bytes' \
	> "$T/z1.opt"
[ "$(cat "$T/z1.opt")" != "$(cat "$T/z0.opt")" ] \
	&& ok "a ledger for 2 ranks under ZeRO-1 does not match the 1-rank run (the check can fail)" \
	|| notok "z1 differs" "$(cat "$T/z1.opt")"

# flags give what --run gives (the flags path: --vocab, --untie, -T, --context)
"$ML" --jsonl $S2 --vocab 300 --context 32 -B 2 --precision bf16 > "$T/flags.ml"
"$ML" --jsonl --run "$T/r5" > "$T/run.ml"
same "flags and --run describe the same untied run alike" "$T/flags.ml" "$T/run.ml"

# ZeRO 0 and 1 on 2 and 3 ranks, every precision
for ranks in 2 3; do
	for z in 0 1; do
		for p in fp32 bf16 fp16; do
			run "$ranks ranks, ZeRO-$z, tied, $p" $ranks $z $p d300 $S1
		done
		run "$ranks ranks, ZeRO-$z, untied, bf16" $ranks $z bf16 d300 $S2
		run "$ranks ranks, ZeRO-$z, vocab 500, fp16" $ranks $z fp16 d500 $S3
	done
done

# ZeRO-2 and -3 (train --zero 2/3 has landed: enabled; the staging term is
# 4 (outer + 4 ls) at stage 2, plus (4 + ds) (outer + 2 ls) at stage 3)
for ranks in 2 3; do
	for z in 2 3; do
		for p in fp32 bf16 fp16; do
			run "$ranks ranks, ZeRO-$z, tied, $p" $ranks $z $p d300 $S1
		done
		run "$ranks ranks, ZeRO-$z, untied, bf16" $ranks $z bf16 d300 $S2
		run "$ranks ranks, ZeRO-$z, vocab 500, fp32" $ranks $z fp32 d500 $S3
	done
done
finish
