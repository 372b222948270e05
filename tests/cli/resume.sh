#!/bin/sh
# tests/cli/resume.sh: a resume adopts the run's recorded configuration (issue
# "Everyday use", point 3): without its flags it continues as the run began (the
# lr of every update as uninterrupted); a changed shape is refused naming every
# field that differs, a changed seed is refused, more updates are applied with a
# warning and a "config-change" event; and --config RUN/config.json runs the run
# again, bitwise.
. tests/cli/lib.sh
TR=$BIN/train

"$BIN/gen-corpus" -q --docs 300 --seed 3 -o "$T/c.jsonl" > /dev/null
"$BIN/tok-train" -q -v 300 -o "$T/t.lmtok" "$T/c.jsonl" > /dev/null
"$BIN/tok-encode" -q -t "$T/t.lmtok" -o "$T/s.lmtoks" "$T/c.jsonl" > /dev/null
"$BIN/shard-pack" -q -L 32 --split val=0.1 -o "$T/d" "$T/s.lmtoks" > /dev/null
RUN="--data $T/d --layers 1 --heads 2 --channels 32 --micro-batch 4 --updates 20 --lr 2e-3 --warmup 3
	--schedule linear --eval-every 0 --ckpt-every 5"
has() { jq -se "map(select($2)) | length > 0" "$1" > /dev/null; }
lrs() { grep '"event":"update"' "$1" | sed 's/.*"update":\([0-9]*\),.*"lr":\([^,]*\),.*/\1 \2/'; }

check "the uninterrupted run" $TR $RUN --threads 1 -o "$T/ref" --export-llmc "$T/ref.bin"
check "a run stopped at update 10" $TR $RUN --threads 1 -o "$T/run" --stop-at 10
# RUN/config.json is a record for people, not what a resume trusts (the
# checkpoint's sealed state.config is): edited by hand, it changes nothing below
jq -c '.optimization.lr = 0.5 | .model.layers = 3 | .optimization.micro_batch = 7' "$T/run/config.json" > "$T/cfg.json" &&
	mv "$T/cfg.json" "$T/run/config.json"
check "--resume auto -o RUN without the run's flags" $TR --resume auto -o "$T/run" --threads 1 --export-llmc "$T/run.bin"
! grep -q "warning" "$T/.err" && ok "... says nothing: nothing given differs" || notok "warnings" "$(head -c 600 "$T/.err")"
has "$T/.out" '.event == "summary" and .updates_done == 10' && ok "... and runs to the recorded --updates 20" \
	|| notok "summary" "$(tail -1 "$T/.out")"
lrs "$T/ref/metrics.jsonl" > "$T/ref.lr"
lrs "$T/run/metrics.jsonl" > "$T/run.lr"
[ "$(wc -l < "$T/ref.lr")" = 20 ] && same "... with the recorded --lr, --warmup, --schedule: every update's lr as uninterrupted" \
	"$T/ref.lr" "$T/run.lr" || notok "lr records" "$(head -3 "$T/run.lr")"
same "... and ends bitwise where the uninterrupted run did" "$T/ref.bin" "$T/run.bin"

check "a run stopped at update 10, again" $TR $RUN --threads 1 -o "$T/shape" --stop-at 10
check_fail "a changed shape is refused (usage error) ..." 2 "--layers 2 (the run: 1), --channels 64 (the run: 32)" \
	$TR --resume auto -o "$T/shape" --layers 2 --channels 64 --lr 1e-3 --threads 1
grep -q "heads" "$T/.err" && notok "... naming only what differs" "$(cat "$T/.err")" || ok "... naming every field that differs, only those"
! grep -q "warning" "$T/.err" && ok "... and applying nothing (no warning for the --lr given with them)" \
	|| notok "warnings of a refused resume" "$(cat "$T/.err")"
check_fail "a changed --seed is refused" 2 "--seed 5 (the run: 1)" $TR --resume auto -o "$T/shape" --seed 5 --threads 1
check_fail "a changed --micro-batch is refused" 2 "--micro-batch 8 (the run: 4)" \
	$TR --resume "$T/shape" --micro-batch 8 --threads 1
tail -1 "$T/shape/events.jsonl" | grep -q '"stop"' && ! grep -q config-change "$T/shape/events.jsonl" \
	&& ok "a refused resume leaves the run's events as they were" \
	|| notok "events after a refusal" "$(tail -2 "$T/shape/events.jsonl")"
check_fail "--resume auto of a new directory, refused for its data" 1 "cannot open the dataset directory" \
	$TR --data "$T/nodata" --layers 1 --heads 2 --channels 32 --resume auto -o "$T/fresh" --threads 1
[ ! -e "$T/fresh" ] && ok "... leaves no directory (it left ckpt/, metrics and events)" || notok "fresh auto" "$(ls -A "$T/fresh")"
cp "$T/shape/events.jsonl" "$T/shape.events"
check_fail "a resume past its --updates is refused" 1 "past --updates 5" \
	$TR --resume auto -o "$T/shape" --updates 5 --lr 1e-3 --threads 1
same "... with the events.jsonl as it was (no config-change for --lr, no 'failed' at update 0)" \
	"$T/shape.events" "$T/shape/events.jsonl"
check "... and the same flags as recorded are no change" $TR $RUN --threads 1 --resume auto -o "$T/shape" --stop-at 15
! grep -q "warning" "$T/.err" && ok "... said nothing" || notok "warnings" "$(head -c 600 "$T/.err")"

check "--updates 30 on a run of 20 is applied" $TR --resume auto -o "$T/run" --updates 30 --threads 1
grep -q "warning: --updates 30 (the run recorded 20): applied from update 20 on" "$T/.err" \
	&& ok "... with a warning" || notok "warning" "$(head -c 600 "$T/.err")"
has "$T/.out" '.event == "summary" and .updates_done == 10' && ok "... and 10 more updates" \
	|| notok "summary" "$(tail -1 "$T/.out")"
has "$T/run/events.jsonl" '.event == "config-change" and .update == 20 and (.detail | contains("--updates 30"))' \
	&& ok "... and a config-change event in events.jsonl" || notok "event" "$(grep config-change "$T/run/events.jsonl")"
grep -q '"updates":30' "$T/run/config.json" && ok "... config.json records the new --updates" \
	|| notok "config.json" "$(cat "$T/run/config.json")"
check "... after which a resume without flags continues at 30" $TR --resume auto -o "$T/run" --threads 1
! grep -q "warning" "$T/.err" && grep -q "nothing to do" "$T/.err" && ok "... (nothing to do, no warning)" \
	|| notok "second resume" "$(head -c 600 "$T/.err")"

check "train --config RUN/config.json re-runs the run" \
	$TR --config "$T/ref/config.json" -o "$T/again" --threads 1 --export-llmc "$T/again.bin"
same "... bitwise the same parameters" "$T/ref.bin" "$T/again.bin"
# the export's path and the measured peak (this machine's, not the run's) aside
strip() { sed 's/"export_llmc":"[^"]*"/"export_llmc":null/; s/"peak_flops":[^,]*,/"peak_flops":0,/' "$1"; }
strip "$T/ref/config.json" > "$T/c1.json"
strip "$T/again/config.json" > "$T/c2.json"
same "... config.json records the same run" "$T/c1.json" "$T/c2.json"
echo '{"tool": "train", "optimization": {"lr": "fast"}}' > "$T/bad.json"
check_fail "a bad value in a JSON config names the file and key" 2 "optimization.lr" \
	$TR --config "$T/bad.json" --data "$T/d"

finish
