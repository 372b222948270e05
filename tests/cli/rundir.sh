#!/bin/sh
# tests/cli/rundir.sh: a run given no -o still has a directory (train(1),
# Default run directories; lib/ckpt/rundir.h).
#
#   - without -o, train makes runs/STAMP-TAG under the current directory, names
#     it on stderr and in a first "run" record on stdout, and fills it;
#   - a second run gets a directory of its own, and runs/latest points to it;
#   - --resume auto -o runs/latest continues that run in its own directory, and
#     sample reads runs/latest;
#   - --no-save leaves the current directory as it was;
#   - --no-save with -o, --resume or a checkpoint option, and --resume auto
#     without -o, are usage errors that make nothing.
. tests/cli/lib.sh
TR=$BIN/train

tiny_data 200
M="--data $T/d --layers 1 --heads 2 --channels 16 --micro-batch 2 --threads 1 --eval-every 0"
mkdir "$T/w"
cd "$T/w" || exit 1

# the name a run's stderr line gives
named() { sed -n "s/^train: run directory '\(.*\)'$/\1/p" "$1"; }

$TR $M --updates 4 --ckpt-every 2 > "$T/a.out" 2> "$T/a.err"
rc=$?
a=$(named "$T/a.err")
case $a in
runs/[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]-[0-9][0-9][0-9][0-9][0-9][0-9]-d1-h2-c16) ok "no -o: stderr names runs/STAMP-d1-h2-c16 ($a)" ;;
*) notok "no -o: the name on stderr" "exit $rc, got '$a'" "$(head -c 400 "$T/a.err")" ;;
esac
[ -f "$a/metrics.jsonl" ] && [ -f "$a/config.json" ] && [ -d "$a/ckpt/step-00000004" ] \
	&& [ "$(grep -c '"event":"update"' "$a/metrics.jsonl")" = 4 ] \
	&& ok "the run is there afterwards: config, 4 update records, the final checkpoint" \
	|| notok "the default run's contents" "$(ls -R "$a" 2>&1 | head -20)"
[ "$(head -1 "$T/a.out")" = "{\"event\":\"run\",\"dir\":\"$a\",\"latest\":\"runs/latest\"}" ] \
	&& [ "$(sed -n 2p "$T/a.out" | jq -r .event)" = parameters ] \
	&& ok "the first stdout record names the run, then the parameters record" \
	|| notok "the run record" "$(head -c 300 "$T/a.out")"
grep -q '"event":"run"' "$a/metrics.jsonl" && notok "the run record stays out of the run's metrics" \
	|| ok "the run record stays out of the run's metrics"

$TR -q $M --updates 2 > "$T/b.out" 2> "$T/b.err"
b=$(head -1 "$T/b.out" | jq -r .dir)
[ -n "$b" ] && [ "$b" != "$a" ] && [ -d "$b" ] && [ -d "$a/ckpt/step-00000004" ] && [ ! -s "$T/b.err" ] \
	&& ok "a second run gets a directory of its own ($b); -q: nothing on stderr" \
	|| notok "second run" "a=$a b=$b" "$(head -c 300 "$T/b.err")"
[ -L runs/latest ] && [ "$(readlink runs/latest)" = "${b#runs/}" ] \
	&& ok "runs/latest is a relative link to the newest run" \
	|| notok "runs/latest" "$(ls -l runs 2>&1)"
nothing_left "no temporary link left in runs/" runs .latest-

# resume the first run through runs/latest
ln -sfn "${a#runs/}" runs/latest
check "--resume auto -o runs/latest continues the run" $TR $M --updates 6 --resume auto -o runs/latest
jq -se 'map(select(.event == "resume"))[0].from == "runs/latest/ckpt/step-00000004"' "$T/.out" > /dev/null \
	&& [ "$(grep -c '"event":"update"' "$T/.out")" = 2 ] && ! grep -q '"event":"run"' "$T/.out" \
	&& [ "$(grep -c '"event":"update"' "$a/metrics.jsonl")" = 6 ] && [ -d "$a/ckpt/step-00000006" ] \
	&& [ "$(ls runs | wc -l)" = 3 ] \
	&& ok "it resumed from update 4, wrote updates 5 and 6 into the first run, and made no new run" \
	|| notok "resume through runs/latest" "$(head -c 400 "$T/.out")" "$(ls runs)"
check "sample reads runs/latest" "$BIN/sample" -q --tokenizer "$T/t.lmtok" -n 4 runs/latest "The"

# the lock is the run's, whatever the spelling: a live run by its real name
# refuses a second trainer through runs/latest
$TR $M --updates 1000000 --resume auto -o "$a" > "$T/long.out" 2> "$T/long.err" &
pid=$!
i=0
while [ $i -lt 1000 ] && ! grep -q '"event":"update"' "$T/long.out" 2>/dev/null; do sleep 0.01; i=$((i + 1)); done
check_fail "a live run is refused through runs/latest, naming its owner" 1 "in use by process $pid" \
	timeout 10 $TR $M --updates 1000000 --resume auto -o runs/latest
kill -TERM $pid
wait $pid

# --no-save: nothing written anywhere under the current directory
ls -lR > "$T/before.ls"
check "--no-save trains" $TR $M --updates 2 --no-save
[ "$(grep -c '"event":"update"' "$T/.out")" = 2 ] && ! grep -q '"event":"run"' "$T/.out" \
	&& ok "--no-save: the update records, no run record" || notok "--no-save output" "$(head -c 300 "$T/.out")"
ls -lR > "$T/after.ls"
same "--no-save leaves the current directory as it was" "$T/before.ls" "$T/after.ls"

check_fail "--no-save with -o is a usage error" 2 "--no-save writes no run directory, but -o names one" \
	$TR $M --no-save -o "$T/x"
check_fail "--no-save with --resume is a usage error" 2 "--no-save has none" $TR $M --no-save --resume "$a"
check_fail "--no-save with --ckpt-every is a usage error" 2 "and --no-save has none" $TR $M --no-save --ckpt-every 2
check_fail "--resume auto without -o is a usage error pointing at runs/latest" 2 "-o runs/latest" $TR $M --resume auto
ls -lR > "$T/after2.ls"
[ ! -e "$T/x" ] && same "the usage errors made nothing" "$T/before.ls" "$T/after2.ls"
# a default run refused after its directory was made (its precision): the directory
# goes again and runs/latest still points at the newest run that began (it was left
# empty, with runs/latest and a run record pointing at it)
latest=$(readlink runs/latest)
LMT_PRECISION=bogus $TR $M --updates 1 > "$T/bogus.out" 2> "$T/bogus.err"
[ $? = 2 ] && [ "$(readlink runs/latest)" = "$latest" ] && [ ! -s "$T/bogus.out" ] &&
	ok "a default run refused for its precision: exit 2, runs/latest as it was, no run record" ||
	notok "refused default run" "$(ls -l runs)" "$(cat "$T/bogus.out" "$T/bogus.err")"
ls -lR > "$T/after3.ls"
same "... and no directory left: the tree as it was" "$T/after2.ls" "$T/after3.ls"
cd / && finish
