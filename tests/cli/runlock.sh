#!/bin/sh
# tests/cli/runlock.sh: one owner per run directory (RUN/lock, lib/ckpt/runlock.h).
#
#   - a second `train --resume auto -o RUN` while the first trains is refused at
#     once (exit 1) naming the first's PID, and the first's metrics and
#     checkpoints are unharmed: each update recorded once, in order, nothing set
#     aside;
#   - evalppl writing into RUN/eval/, runcard writing its card into RUN and
#     ckpt-reshard writing into RUN/ckpt/ and ckpt-inspect --rehash are refused
#     the same way;
#   - the same through symlinks (to RUN, to RUN/ckpt), and for another run's
#     evalppl, runcard or export writing into this run: the run is found by what
#     the path is (lmt_run_holding), not by its spelling;
#   - after a SIGKILL, --resume auto takes the run at once (the kernel dropped the
#     lock: no stale lock); a symlink planted as RUN/lock is refused and its
#     target left alone;
#   - two fresh `train -o RUN` started together: exactly one runs, the other is
#     refused naming it;
#   - a fresh run that fails before its first update (a damaged dataset) leaves a
#     run directory that the identical command reuses, and succeeds once the
#     dataset is fixed.
. tests/cli/lib.sh
TR=$BIN/train

tiny_data 200
M="--data $T/d --layers 1 --heads 2 --channels 32 --micro-batch 4 --threads 1 --eval-every 0"
# long enough never to end by itself: each test stops it
LONG="$M --updates 1000000 --ckpt-every 20 --keep 3"

# wait_for FILE PATTERN: until FILE holds PATTERN (at most about 10 s)
wait_for() {
	i=0
	while [ $i -lt 1000 ] && ! grep -q "$2" "$1" 2>/dev/null; do
		sleep 0.01; i=$((i + 1))
	done
}
# in_order FILE: the update records of FILE are 1, 2, ..., N, each once
in_order() {
	grep -a '^{"event":"update"' "$1" | sed 's/^{"event":"update","update":\([0-9]*\).*/\1/' |
		awk '$1 != NR { bad = 1 } END { exit bad || NR == 0 }'
}
# the newest checkpoint's update in run directory $1 (a save whose record a kill
# cut off is there all the same)
last_ckpt() { ls "$1/ckpt" | grep '^step-[0-9]*$' | sort | tail -1 | sed 's/^step-0*//'; }

# a finished run, whose checkpoint ckpt-reshard reads below
$TR $M --updates 20 --ckpt-every 20 -o "$T/ref" > /dev/null 2>&1

# 1. a live run and a second trainer, and the other writers
$TR $LONG -o "$T/run" --resume auto > "$T/a.out" 2> "$T/a.err" &
a=$!
wait_for "$T/a.out" '"event":"checkpoint"'
[ "$(cat "$T/run/lock" 2>/dev/null)" = "$a" ] && ok "RUN/lock holds the owner's PID for people" \
	|| notok "lock file" "want $a, got '$(cat "$T/run/lock" 2>/dev/null)'"
check_fail "a second --resume auto on a live run is refused, naming the owner" 1 \
	"'$T/run' is in use by process $a (its lock $T/run/lock): one process owns a run at a time" \
	timeout 10 $TR $LONG -o "$T/run" --resume auto
mkdir -p "$T/run/eval"
timeout 10 "$BIN/evalppl" -q "$T/run" > "$T/run/eval/ppl.jsonl" 2> "$T/ev.err"
rc=$?
[ "$rc" = 1 ] && grep -qF "in use by process $a" "$T/ev.err" && ok "evalppl writing into RUN/eval/ is refused" \
	|| notok "evalppl on a live run" "exit $rc" "$(head -c 300 "$T/ev.err")"
check_fail "runcard writing its card into a live run is refused" 1 "in use by process $a" \
	timeout 10 "$BIN/runcard" -q --allow-missing "$T/run"
check_fail "ckpt-reshard writing into a live run's ckpt/ is refused" 1 "in use by process $a" \
	timeout 10 "$BIN/ckpt-reshard" -q --world 2 "$T/ref/ckpt/step-00000020" "$T/run/ckpt/step-99999999"
ck=$(ls -d "$T"/run/ckpt/step-* | head -1)
check_fail "ckpt-inspect --rehash of a live run's checkpoint is refused" 1 "in use by process $a" \
	timeout 10 "$BIN/ckpt-inspect" -q --rehash "$ck"
# the run found by what a path is, not by its spelling: through symlinks, and
# for outputs of another run's tools that land in this one
ln -s "$T/run/ckpt" "$T/ck-link"
ln -s "$T/run" "$T/run-link"
check_fail "ckpt-reshard into the live run's ckpt/ through a symlink is refused" 1 "in use by process $a" \
	timeout 10 "$BIN/ckpt-reshard" -q --world 2 "$T/ref/ckpt/step-00000020" "$T/ck-link/step-99999999"
check_fail "ckpt-inspect --rehash through a symlink to the run is refused" 1 "in use by process $a" \
	timeout 10 "$BIN/ckpt-inspect" -q --rehash "$T/run-link/ckpt/$(basename "$ck")"
check_fail "ckpt-reshard --export into the run's ckpt/ through a symlink is refused" 1 "lies in the checkpoints of the run" \
	timeout 10 "$BIN/ckpt-reshard" -q --export safetensors "$T/ref/ckpt/step-00000020" "$T/ck-link/hf"
check_fail "ckpt-reshard --export elsewhere in a live run is refused" 1 "in use by process $a" \
	timeout 10 "$BIN/ckpt-reshard" -q --export safetensors "$T/ref/ckpt/step-00000020" "$T/run/hf"
timeout 10 "$BIN/evalppl" -q "$T/ref" > "$T/run/eval/other.jsonl" 2> "$T/ev.err"
rc=$?
[ "$rc" = 1 ] && grep -qF "in use by process $a" "$T/ev.err" && ok "evalppl of another run writing into the live run's eval/ is refused" \
	|| notok "evalppl of another run into a live run" "exit $rc" "$(head -c 300 "$T/ev.err")"
check_fail "runcard of another run writing its card into the live run is refused" 1 "in use by process $a" \
	timeout 10 "$BIN/runcard" -q --allow-missing -o "$T/run/card" "$T/ref"
[ -z "$(ls "$T/run/ckpt" | grep -v '^step-0000')" ] && [ ! -e "$T/run/hf" ] && [ ! -e "$T/run/card" ] \
	&& ok "... and none of them wrote into the run" || notok "written into a live run" "$(ls "$T/run" "$T/run/ckpt")"
i=0
until [ "$(grep -c '"event":"checkpoint"' "$T/a.out")" -ge 3 ] || [ $i -ge 500 ]; do sleep 0.01; i=$((i + 1)); done
kill -TERM $a
wait $a
rc=$?
[ "$rc" = 0 ] && in_order "$T/run/metrics.jsonl" && ok "the owner's metrics: every update once, in order" \
	|| notok "the owner's metrics" "exit $rc" "$(grep -a '"event":"update"' "$T/run/metrics.jsonl" |
		cut -c1-40 | uniq -c | awk '$1 > 1' | head -3)"
left=$(ls "$T/run/ckpt" | grep -v '^step-' || true)
[ -z "$left" ] && [ -z "$(grep -F set-aside "$T/run/events.jsonl")" ] \
	&& ok "the owner's checkpoints: none set aside" || notok "checkpoints set aside" "$left"
[ "$(grep -Ec '"event":"(start|restart|resume)"' "$T/run/events.jsonl")" = 1 ] \
	&& ok "events.jsonl: the owner's start alone" || notok "events" "$(head -5 "$T/run/events.jsonl")"

# 2. killed: the kernel drops the lock, --resume auto takes the run at once
$TR $LONG -o "$T/run" --resume auto > "$T/b.out" 2> "$T/b.err" &
b=$!
wait_for "$T/b.out" '"event":"checkpoint"'
kill -9 $b
wait $b 2> /dev/null
stop=$(( $(last_ckpt "$T/run") + 5 ))
check "after SIGKILL, --resume auto takes the run at once" \
	timeout 20 $TR $LONG -o "$T/run" --resume auto --stop-at $stop
grep -q '"event":"resume"' "$T/.out" && in_order "$T/run/metrics.jsonl" \
	&& ok "... resumed, the metrics still every update once, in order" \
	|| notok "resume after SIGKILL" "$(head -c 300 "$T/.err")"

# a symlink planted as RUN/lock: refused, and what it points to untouched (the
# lock once followed it, truncated the file and wrote a PID into it)
echo precious > "$T/victim"
mv "$T/run/lock" "$T/lock.real"
ln -s "$T/victim" "$T/run/lock"
check_fail "a symlink as RUN/lock is refused" 1 "run/lock' is a symbolic link" \
	timeout 20 $TR $LONG -o "$T/run" --resume auto --stop-at $((stop + 1))
[ "$(cat "$T/victim")" = precious ] && ok "... and the file it points to is untouched" || notok "victim" "$(cat "$T/victim")"
rm "$T/run/lock" && mv "$T/lock.real" "$T/run/lock"

# 3. two fresh starts together: exactly one runs
$TR $LONG -o "$T/two" > "$T/p.out" 2> "$T/p.err" &
p=$!
$TR $LONG -o "$T/two" > "$T/q.out" 2> "$T/q.err" &
q=$!
i=0
until grep -qs 'in use by process' "$T/p.err" "$T/q.err" || [ $i -ge 500 ]; do sleep 0.01; i=$((i + 1)); done
if grep -qs "in use by process $q" "$T/p.err"; then winner=$q loser=$p lerr=$T/p.err
else winner=$p loser=$q lerr=$T/q.err; fi
wait $loser
lrc=$?
wait_for "$T/two/metrics.jsonl" '"event":"update"'
kill -TERM $winner
wait $winner
wrc=$?
[ "$lrc" = 1 ] && grep -qF "'$T/two' is in use by process $winner" "$lerr" && [ "$wrc" = 0 ] && in_order "$T/two/metrics.jsonl" \
	&& [ "$(grep -c '"event":"start"' "$T/two/events.jsonl")" = 1 ] \
	&& ok "two fresh starts together: one runs, the other is refused naming it" \
	|| notok "two fresh starts" "exits: loser $lrc, winner $wrc" "$(cat "$T/p.err" "$T/q.err" | head -c 400)"

# 4. a fresh start that fails before its first update, then the same command again
cp -r "$T/d" "$T/bad"
sh=$(ls "$T/bad"/train-*.lmshard | head -1)
cp "$sh" "$T/good.lmshard"
printf '\377\377\377\377' | dd of="$sh" bs=1 seek=$(( $(wc -c < "$sh") / 2 )) conv=notrunc 2> /dev/null
B="$M --data $T/bad --updates 5"
check_fail "a damaged dataset stops a fresh run" 1 "payload corrupted" $TR $B -o "$T/fail"
check_fail "... the identical rerun is not blocked by what it left, and says so" 1 \
	"stopped before its first update (no update record, no checkpoint): starting it again in place" $TR $B -o "$T/fail"
cp "$T/good.lmshard" "$sh"
check "... and, the dataset fixed, the identical command succeeds" $TR $B -o "$T/fail"
[ "$(grep -c '"event":"update"' "$T/fail/metrics.jsonl")" = 5 ] && in_order "$T/fail/metrics.jsonl" \
	&& ok "... its metrics hold its own updates alone" || notok "metrics after the reuse" "$(head -c 300 "$T/fail/metrics.jsonl")"
check_fail "a run with updates is still not reused" 1 "holds a previous run" $TR $B -o "$T/fail"

finish
