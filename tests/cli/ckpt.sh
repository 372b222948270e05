#!/bin/sh
# tests/cli/ckpt.sh: train's checkpoints as a crash sees them.
#
#   - kill and resume: a run is killed with SIGKILL mid-save (three points of the
#     protocol, through LMT_TEST_CKPT_KILL), right after the rename, mid-update
#     (a SIGKILL from outside) and stopped by SIGTERM, and resumed each time with
#     --resume auto; its final parameters are bitwise those of a run that was never
#     interrupted, and every update record of every segment (loss, sample ids)
#     equals the uninterrupted run's record of that update;
#   - a killed save is never taken for a checkpoint;
#   - corruption (a flipped byte, a truncated file, a deleted file, edited
#     manifests) is refused by --resume RUN naming the file, and --resume auto
#     falls back to the previous generation and still ends bitwise equal;
#   - retention keeps exactly the newest --keep and the --keep-every milestones;
#   - resume refuses another tokenizer, dataset, model shape or data order;
#   - an asynchronous checkpoint holds the same bytes as a synchronous one of the
#     same update, and a save in flight makes the next one be refused, not queued.
. tests/cli/lib.sh
TR=$BIN/train

"$BIN/gen-corpus" -q --docs 400 --seed 7 -o "$T/c.jsonl" > /dev/null
"$BIN/tok-train" -q -v 300 -o "$T/t.lmtok" "$T/c.jsonl" > /dev/null
"$BIN/tok-train" -q -v 310 -o "$T/t2.lmtok" "$T/c.jsonl" > /dev/null
"$BIN/tok-encode" -q -t "$T/t.lmtok" -o "$T/s.lmtoks" "$T/c.jsonl" > /dev/null
"$BIN/tok-encode" -q -t "$T/t2.lmtok" -o "$T/s2.lmtoks" "$T/c.jsonl" > /dev/null
"$BIN/shard-pack" -q -L 32 --split val=0.1 -o "$T/d" "$T/s.lmtoks" > /dev/null
"$BIN/shard-pack" -q -L 32 --split val=0.1 -o "$T/d2" "$T/s2.lmtoks" > /dev/null
# about 20 ms an update on one thread: slow enough for a signal to land mid-run
M="--data $T/d --layers 2 --heads 2 --channels 96 --micro-batch 8 --threads 1 --eval-every 0 --log-samples"
N=60
RUN="$M --updates $N --ckpt-every 5 --keep 3"

# whole records of a file (a killed process may leave a partial last line)
whole() { grep -a '^{.*}$' "$@"; }
# update number -> "loss samples", for comparing records across runs
records() { whole "$@" | jq -c 'select(.event == "update") | [.update, .loss, .samples]'; }
# has FILE FILTER: some record of FILE passes the jq condition FILTER (jq 1.6's -e
# looks at the last output only, so count instead)
has() { whole "$1" | jq -se "map(select($2)) | length > 0" > /dev/null; }

# the uninterrupted reference
check "the uninterrupted run" $TR --no-save $M --updates $N --export-llmc "$T/ref.bin"
records "$T/.out" > "$T/ref.rec"
[ "$(wc -l < "$T/ref.rec")" = $N ] && ok "reference: $N update records, with their sample ids" \
	|| notok "reference records" "$(wc -l < "$T/ref.rec")"

# every record of a segment must be the reference's record of that update
segment_matches() {
	records "$1" > "$T/seg.rec"
	if [ ! -s "$T/seg.rec" ]; then notok "$2: the segment did updates"; return; fi
	if grep -vxFf "$T/ref.rec" "$T/seg.rec" > "$T/seg.bad"; then
		notok "$2: losses and sample ids equal the uninterrupted run's" "$(head -2 "$T/seg.bad")"
	else
		ok "$2: $(wc -l < "$T/seg.rec") updates, losses and sample ids equal the uninterrupted run's"
	fi
}
killed() { # DESC STATUS: the last command died of SIGKILL
	[ "$2" = 137 ] && ok "$1" || notok "$1" "exit status $2" "$(tail -c 400 "$T/seg.err")"
}

# 1. killed half-way through the first data file of the save of update 10
LMT_TEST_CKPT_KILL=data@10 $TR $RUN -o "$T/run" > "$T/seg1.out" 2> "$T/seg.err"
killed "SIGKILL in the middle of writing a data file" $?
segment_matches "$T/seg1.out" "segment 1"
[ -d "$T/run/ckpt/step-00000005" ] && [ ! -e "$T/run/ckpt/step-00000010" ] \
	&& ls -A "$T/run/ckpt" | grep -q '^\.tmp-step-00000010-' \
	&& ok "the killed save left only its temporary directory" || notok "after a killed save" "$(ls -A "$T/run/ckpt")"

# 2. resumed, and killed after the manifest is written but before the rename
LMT_TEST_CKPT_KILL=manifest@20 $TR $RUN -o "$T/run" --resume auto > "$T/seg2.out" 2> "$T/seg.err"
killed "SIGKILL between the manifest and the rename" $?
grep -q "ignoring .*\.tmp-step-00000010-.*interrupted save" "$T/seg.err" \
	&& ok "resume reports and removes the interrupted save" || notok "interrupted save report" "$(head -c 600 "$T/seg.err")"
has "$T/seg2.out" '.event == "resume" and .update == 5 and .replayed_updates >= 5' \
	&& ok "resumed from update 5, replaying the lost updates" || notok "resume record" "$(grep resume "$T/seg2.out")"
segment_matches "$T/seg2.out" "segment 2"
[ ! -e "$T/run/ckpt/step-00000020" ] && [ -f "$T/run/ckpt/step-00000015/manifest.json" ] \
	&& ok "a complete manifest in an unrenamed directory is still no checkpoint" \
	|| notok "after the manifest kill" "$(ls -A "$T/run/ckpt")"

# 3. resumed, and killed right after the rename of update 25 (before the parent's fsync)
LMT_TEST_CKPT_KILL=rename@25 $TR $RUN -o "$T/run" --resume auto > "$T/seg3.out" 2> "$T/seg.err"
killed "SIGKILL right after the rename" $?
segment_matches "$T/seg3.out" "segment 3"

# 4. resumed (from 25: a renamed directory is complete), killed from outside mid-run
$TR $RUN -o "$T/run" --resume auto > "$T/seg4.out" 2> "$T/seg.err" &
pid=$!
i=0
while [ $i -lt 500 ] && ! grep -Eq '"event":"update","update":(3[3-9]|4[0-9])' "$T/seg4.out" 2>/dev/null; do
	sleep 0.01; i=$((i + 1))
done
kill -9 $pid 2> /dev/null
wait $pid
killed "SIGKILL from outside, mid-update" $?
has "$T/seg4.out" '.event == "resume" and .update == 25' \
	&& ok "the checkpoint renamed just before a crash is resumed from" || notok "resume from 25" "$(grep resume "$T/seg4.out")"
segment_matches "$T/seg4.out" "segment 4"

# 5. resumed, stopped by SIGTERM: finishes the update, saves, exits 0
$TR $RUN -o "$T/run" --resume auto > "$T/seg5.out" 2> "$T/seg.err" &
pid=$!
i=0
while [ $i -lt 500 ] && ! grep -Eq '"event":"update","update":(4[4-9]|5[0-4])' "$T/seg5.out" 2>/dev/null; do
	sleep 0.01; i=$((i + 1))
done
kill -TERM $pid
wait $pid
rc=$?
last=$(whole "$T/seg5.out" | jq -s 'map(select(.event == "update")) | last | .update')
[ "$rc" = 0 ] && has "$T/seg5.out" '.event == "summary" and .status == "interrupted"' \
	&& ok "SIGTERM: exit 0, summary says interrupted (at update $last)" \
	|| notok "SIGTERM" "exit $rc" "$(tail -c 400 "$T/seg.err")"
[ -n "$last" ] && [ -f "$T/run/ckpt/step-$(printf %08d "$last")/manifest.json" ] \
	&& ok "SIGTERM: a checkpoint of the last finished update" || notok "checkpoint on SIGTERM" "$(ls "$T/run/ckpt")"
tail -1 "$T/run/events.jsonl" | grep -q '"event":"stop".*signal 15' \
	&& ok "SIGTERM: the events say so" || notok "stop event" "$(tail -1 "$T/run/events.jsonl")"
segment_matches "$T/seg5.out" "segment 5"

# 6. resumed to the end
check "the last segment" $TR $RUN -o "$T/run" --resume auto --export-llmc "$T/final.bin"
cp "$T/.out" "$T/seg6.out"
segment_matches "$T/seg6.out" "segment 6"
same "after five crashes and a SIGTERM, the final parameters are bitwise the uninterrupted run's" \
	"$T/ref.bin" "$T/final.bin"
records "$T/run/metrics.jsonl" > "$T/run.rec"
same "metrics.jsonl, rewound at each resume, holds each update once, as uninterrupted" "$T/ref.rec" "$T/run.rec"
[ "$(grep -c '"event":"resume"' "$T/run/events.jsonl")" = 5 ] && ok "events.jsonl records the five resumes" \
	|| notok "resume events" "$(grep resume "$T/run/events.jsonl")"
jq -se 'map(select(.event == "resume")) | map(. as $r | $r.from | endswith("step-" + ("0000000" + ($r.update | tostring))[-8:])) | all' \
	"$T/run/events.jsonl" > /dev/null && ok "each resume names the checkpoint it started from" \
	|| notok "resume sources" "$(grep resume "$T/run/events.jsonl")"
ls "$T/run/ckpt" | tr '\n' ' ' > "$T/ls"
[ "$(cat "$T/ls")" = "step-00000050 step-00000055 step-00000060 " ] \
	&& ok "--keep 3 keeps the three newest" || notok "retention" "$(cat "$T/ls")"

# a resumed run's wall clock continues
whole "$T/seg6.out" | jq -se 'map(select(.event == "resume"))[0].wall_s as $w |
	map(select(.event == "update"))[0].clocks.wall_s > $w and $w > 0' > /dev/null \
	&& ok "the clocks continue across a resume" || notok "clocks"

# --stop-at: a deterministic interruption (time slices, the demo)
check "--stop-at 20 stops after update 20, exit 0" $TR $RUN -o "$T/stop" --stop-at 20
[ -f "$T/stop/ckpt/step-00000020/manifest.json" ] && tail -1 "$T/stop/events.jsonl" | grep -q '"stop".*--stop-at 20' \
	&& has "$T/.out" '.event == "summary" and .status == "interrupted" and .updates == 20' \
	&& ok "... with its checkpoint, a stop event and an interrupted summary" || notok "--stop-at" "$(ls "$T/stop/ckpt")"
check "... and --resume auto continues it" $TR $RUN -o "$T/stop" --stop-at 20 --resume auto --export-llmc "$T/stop.bin"
same "... to the uninterrupted run's parameters (a resumed run past --stop-at does not stop)" "$T/ref.bin" "$T/stop.bin"

# --- corruption: refused by --resume RUN naming the file; auto falls back ---
payload_off=4096 # inside the payload of any data file here (header: 96 bytes)
corrupt() { # NAME: a copy of the finished run with step-60 damaged by the commands on stdin
	rm -rf "$T/$1"
	cp -r "$T/run" "$T/$1"
	(cd "$T/$1/ckpt/step-00000060" && sh)
}
echo 'printf "\377" | dd of=rank-00000.lmckpt bs=1 seek='$payload_off' conv=notrunc 2>/dev/null' | corrupt flip
echo 'truncate -s -1000 rank-00000.lmckpt' | corrupt trunc
echo 'rm rank-00000.lmckpt' | corrupt gone
echo 'sed -i "s/\"crc32c\":\"[0-9a-f]*\"/\"crc32c\":\"00000000\"/" manifest.json' | corrupt crc
echo 'sed -i "s/\"payload_sha256\":\"[0-9a-f]/\"payload_sha256\":\"0/" manifest.json' | corrupt sha
# the same edits re-sealed (deliberate surgery): the data behind the manifest is checked
(cd "$T" && rm -rf crcs shas && cp -r crc crcs && cp -r sha shas)
reseal "$T/crcs/ckpt/step-00000060/manifest.json"
reseal "$T/shas/ckpt/step-00000060/manifest.json"
echo 'sed -i "s/\"update\":60,/\"update\":61,/" manifest.json' | corrupt upd
echo 'head -c 100 manifest.json > m && mv m manifest.json' | corrupt json
for c in flip:rank-00000.lmckpt trunc:rank-00000.lmckpt gone:rank-00000.lmckpt \
	crc:"step-00000060/manifest.json': its contents do not match its own checksum" crcs:param/ \
	sha:"step-00000060/manifest.json': its contents do not match" shas:rank-00000.lmckpt \
	upd:"step-00000060/manifest.json': its contents do not match" json:manifest.json; do
	name=${c%%:*} needle=${c#*:}
	check_fail "corrupt ($name): --resume RUN refuses it, naming $needle" 1 "$needle" \
		$TR $M --updates $N -o "$T/$name" --resume "$T/$name"
done
# the same damage under --resume auto: fall back to step-55, redo 5 updates, end equal
for name in flip trunc gone crc json; do
	check "corrupt ($name): --resume auto falls back to the previous generation" \
		$TR $RUN -o "$T/$name" --resume auto --export-llmc "$T/$name.bin"
	has "$T/.out" '.event == "resume" and .update == 55' && grep -q "ignoring" "$T/.err" \
		&& same "corrupt ($name): ... and ends bitwise equal to the uninterrupted run" "$T/ref.bin" "$T/$name.bin" \
		|| notok "corrupt ($name): fallback" "$(grep resume "$T/.out")" "$(head -c 300 "$T/.err")"
done
ls "$T/flip/ckpt" | grep -q '^stale-step-00000060-' \
	&& ok "the damaged generation is moved aside, not deleted" || notok "set aside" "$(ls "$T/flip/ckpt")"

# --- a save killed anywhere is never accepted: kill at random moments of sync saves ---
for k in 1 2 3 4 5; do
	rm -rf "$T/rk"
	$TR $M --updates 40 --ckpt-every 1 --ckpt-sync --keep 2 -o "$T/rk" > /dev/null 2>&1 &
	pid=$!
	sleep 0.$((k * 7 % 10 + 1))
	kill -9 $pid 2> /dev/null
	wait $pid 2> /dev/null
	for ck in "$T"/rk/ckpt/step-*; do
		[ -d "$ck" ] || continue
		u=$(basename "$ck" | sed 's/step-0*//')
		# resuming at its own update verifies it fully and trains no further
		if ! $TR $M --updates "${u:-0}" --resume "$ck" > /dev/null 2> "$T/v.err"; then
			notok "random SIGKILL $k: $(basename "$ck") is a valid checkpoint" "$(head -c 300 "$T/v.err")"
			continue 2
		fi
	done
	ok "random SIGKILL $k: every step-* left ($(ls "$T/rk/ckpt" | tr '\n' ' ')) is complete and valid"
done

# --- retention with milestones ---
# synchronous saves: under load an asynchronous one can still be in flight when
# the next falls due, and is then refused (tested below); retention is the point here
check "--keep 2 --keep-every 10" $TR $M --updates 40 --ckpt-every 5 --keep 2 --keep-every 10 --ckpt-sync -o "$T/ret"
[ "$(ls "$T/ret/ckpt" | tr '\n' ' ')" = "step-00000010 step-00000020 step-00000030 step-00000035 step-00000040 " ] \
	&& ok "keeps exactly the two newest and the multiples of 10" || notok "milestones" "$(ls "$T/ret/ckpt")"
check_fail "--keep 1 is a usage error" 2 "'--keep'" $TR $M --keep 1 -o "$T/k1"
check_fail "checkpoint options need a run directory" 2 "and --no-save has none" $TR --no-save $M --ckpt-every 5

# --- refusals ---
check_fail "resume refuses another tokenizer" 1 "made with tokenizer" \
	$TR $M --data "$T/d2" --updates $N -o "$T/ret" --resume "$T/ret"
# (given against what the run recorded, before anything is loaded: usage errors; tests/cli/resume.sh)
check_fail "resume refuses another model shape, naming it" 2 "--channels 64 (the run: 96)" \
	$TR $M --channels 64 --updates $N -o "$T/ret" --resume "$T/ret"
check_fail "resume refuses another data order" 2 "--seed 9 (the run: 1)" \
	$TR $M --seed 9 --updates $N -o "$T/ret" --resume "$T/ret"
check_fail "resume refuses a checkpoint past --updates" 1 "past --updates" \
	$TR $M --updates 30 -o "$T/ret" --resume "$T/ret"
mkdir -p "$T/empty"
check_fail "--resume of a run without checkpoints" 1 "no checkpoint" $TR $M -o "$T/empty" --resume "$T/empty"
check_fail "--resume and -o must name the same run" 2 "but -o names" $TR $M -o "$T/empty" --resume "$T/ret"
check "--resume auto on a new directory starts from scratch" $TR $M --updates 3 -o "$T/fresh" --resume auto
grep -q '"event":"restart"' "$T/fresh/events.jsonl" && ok "... and says so in its events" \
	|| notok "restart event" "$(cat "$T/fresh/events.jsonl")"

# --- asynchronous and synchronous saves hold the same bytes ---
check "async saves" $TR $M --updates 20 --ckpt-every 10 -o "$T/as"
check "sync saves" $TR $M --updates 20 --ckpt-every 10 --ckpt-sync -o "$T/sy"
same "an asynchronous checkpoint (training went on during the write) equals a synchronous one" \
	"$T/as/ckpt/step-00000010/rank-00000.lmckpt" "$T/sy/ckpt/step-00000010/rank-00000.lmckpt"
has "$T/as/metrics.jsonl" '.event == "checkpoint" and .update == 10 and .async and .pause_s < .write_s' && ok "the checkpoint record: async, pause shorter than the write" \
	|| notok "checkpoint record" "$(grep '"checkpoint"' "$T/as/metrics.jsonl" | head -1)"
LMT_TEST_CKPT_DELAY=0.3 $TR $M --updates 12 --ckpt-every 1 -o "$T/busy" --export-llmc "$T/busy.bin" \
	> "$T/busy.out" 2> "$T/busy.err"
grep -q "waited .* for the save of update" "$T/busy.err" && grep -q '"checkpoint-wait"' "$T/busy/events.jsonl" \
	&& ok "a save due while one is in flight waits for it, with a warning and an event" \
	|| notok "waiting save" "$(head -c 400 "$T/busy.err")"
[ "$(grep -c '"event":"checkpoint",' "$T/busy/events.jsonl")" = 12 ] && [ -f "$T/busy/ckpt/step-00000012/manifest.json" ] \
	&& ok "... and every save due is written: the checkpoints a run leaves do not depend on the load" \
	|| notok "saves after waits" "$(grep -c '"event":"checkpoint",' "$T/busy/events.jsonl") $(ls "$T/busy/ckpt")"
has "$T/busy/metrics.jsonl" '.event == "checkpoint" and .update == 2 and .pause_s >= 0.2' \
	&& ok "... the wait counts in the save's pause" || notok "pause with wait" "$(grep '"checkpoint"' "$T/busy/metrics.jsonl" | sed -n 2p)"
check "--mtbf reports the optimal interval" $TR $M --updates 5 --ckpt-every 5 --mtbf 3600 -o "$T/mt"
has "$T/.out" '.event == "checkpoint" and .optimal_interval_s > 0 and
	((.optimal_interval_s * .optimal_interval_s - 2 * .cost_s * 3600) | fabs) < 1e-6 * .optimal_interval_s * .optimal_interval_s' && grep -q "best interval" "$T/.err" \
	&& ok "... sqrt(2 C MTBF) in the record and on stderr" || notok "mtbf" "$(grep checkpoint "$T/.out")"
finish
