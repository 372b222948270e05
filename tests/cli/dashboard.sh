#!/bin/sh
# tests/cli/dashboard.sh: runcard --explain and --dashboard on runs with planted
# anomalies. A dataset whose middle source is junk (printable noise, packed in
# manifest order by --shuffle-window 1) raises a loss spike that --explain traces
# to that source file, with the newest checkpoint before it to roll back to; a
# learning rate 100x too high for three updates (LMT_TEST_LR_SCALE) raises a
# gradient-norm spike that --explain puts down to the learning rate; a clean
# update explains as nothing standing out. The dashboard opened in headless
# Chromium: a screenshot, every panel in the DOM, the page's own check passed
# with no script error (skipped, saying so, without chromium). --watch rewrites
# the page while the run grows and stops when it ends or on SIGINT. Bad input
# exits 1 naming the file.
. tests/cli/lib.sh
RC=$BIN/runcard
TR=$BIN/train

# the data: a.jsonl, then junk.jsonl (4 documents of 300 pseudo-random printable
# characters, the same every time), then b.jsonl; the tokenizer knows only a.jsonl
"$BIN/gen-corpus" -q --docs 120 --seed 7 -o "$T/a.jsonl" > /dev/null
"$BIN/gen-corpus" -q --docs 60 --seed 8 -o "$T/b.jsonl" > /dev/null
awk 'BEGIN { srand(3); for (d = 0; d < 4; d++) { s = ""; for (i = 0; i < 300; i++) s = s sprintf("%c", 33 + int(rand() * 90));
	gsub(/[\\"]/, "x", s); printf "{\"text\":\"%s\"}\n", s } }' > "$T/junk.jsonl"
"$BIN/tok-train" -q -v 300 -o "$T/t.lmtok" "$T/a.jsonl" > /dev/null
(cd "$T" && "$BIN/tok-encode" -q -t t.lmtok -o s.lmtoks a.jsonl junk.jsonl b.jsonl > /dev/null \
	&& "$BIN/shard-pack" -q -L 32 --split val=0.1 -o d s.lmtoks > /dev/null)
M="--data $T/d --layers 2 --heads 2 --channels 32 --micro-batch 8 --eval-every 50 --precision fp32"

$TR $M --updates 130 --shuffle-window 1 --log-samples --stats-every 5 --ckpt-every 40 -o "$T/g" > "$T/g.out" 2> "$T/g.err" \
	|| notok "the junk run" "$(tail -c 300 "$T/g.err")"
A=$(jq -s '[.[] | select(.event == "alert" and .kind == "loss_spike")][0].update // empty' "$T/g.out")
[ -n "$A" ] && ok "the junk batches raise a loss spike (update $A)" || notok "junk loss spike" "$(grep '"alert' "$T/g.out" | head -c 400)"
A=${A:-91}
$RC --explain "$T/g" --update "$A" > "$T/ex.out" 2> "$T/ex.err"
jq -e '.event == "explain" and .cause == "data" and (.verdict | test("junk.jsonl"))
	and ([.data.by_source[] | select(.source == "junk.jsonl")][0].ratio > 1.3)
	and (.data.list | length) == 8 and (.data.list[0].sources | length) >= 1 and .data.order_matches_log' "$T/ex.out" > /dev/null \
	&& ok "--explain at the spike, piped: JSONL whose verdict is data, naming junk.jsonl, its surprisal over 1.3x the split's (the loader's order rebuilt, as logged)" \
	|| notok "explain junk" "$(head -c 600 "$T/ex.out") $(head -c 300 "$T/ex.err")"
# ckpt-every 40, keep 3: 40 was removed when 130 was saved, so 80 is the newest before the spike
jq -e '.checkpoint.update == 80 and (.checkpoint.path | endswith("ckpt/step-00000080"))' "$T/ex.out" > /dev/null \
	&& ok "... and the checkpoint to roll back to is the newest on disk from before it (step 80)" \
	|| notok "rollback" "$(jq -c .checkpoint "$T/ex.out")"
# a clean update: the first from 55 on that did not clip and whose loader wait was
# under 5% of its step (the shared machine's noise is not the data's fault)
C=$(jq -s '[.[] | select(.event == "update" and .update >= 55 and .update <= 80 and (.clipped | not)
	and .time.data_wait < 0.05 * .time.step)][0].update' "$T/g.out")
$RC --explain "$T/g" --update "$C" > "$T/clean.out" 2> "$T/clean.err"
jq -e '.cause == null and (.verdict | startswith("nothing stands out")) and (.findings | length) == 0' "$T/clean.out" > /dev/null \
	&& ok "--explain on a clean update ($C): nothing stands out" \
	|| notok "explain clean" "$(head -c 600 "$T/clean.out")"
if command -v script > /dev/null 2>&1; then
	script -qc "$RC --explain $T/g --update $A" /dev/null > "$T/tty.out" 2>&1
	grep -q "^verdict: likely data: batch from 'junk.jsonl'" "$T/tty.out" && ! grep -q '^{' "$T/tty.out" \
		&& grep -q "order check  *the same as train --log-samples recorded" "$T/tty.out" \
		&& ok "--explain on a terminal: text, the verdict first, the batch's order checked against the log" \
		|| notok "explain tty" "$(head -c 400 "$T/tty.out")"
else
	ok "# skip no script(1) for a terminal"
fi

LMT_TEST_LR_SCALE=70-72:100 $TR $M --updates 110 --stats-every 0 -o "$T/lr" > "$T/lr.out" 2> "$T/lr.err" \
	|| notok "the lr run" "$(tail -c 300 "$T/lr.err")"
G=$(jq -s '[.[] | select(.event == "alert" and .kind == "grad_spike")][0].update // empty' "$T/lr.out")
$RC --explain "$T/lr" --update "${G:-71}" > "$T/exl.out" 2> "$T/exl.err"
[ -n "$G" ] && jq -e '.cause == "optimization" and .gradients.lr_ratio > 10 and .gradients.ratio > 5
	and (.verdict | test("learning rate")) and (.data.from | startswith("the loader")) and .data.samples == 8
	and .data.ratio < 1.3 and (.data | has("order_matches_log") | not)
	and (.data.order_check | test("recorded no samples.*--log-samples"))' "$T/exl.out" > /dev/null \
	&& ok "lr 100x too high at 70-72: a gradient-norm spike at $G that --explain puts down to the learning rate (its batch, from the loader's order, unremarkable; the order unchecked, as no samples were logged, which it says)" \
	|| notok "explain lr" "alert at '$G'" "$(head -c 600 "$T/exl.out")"

# two ranks, shuffled: the loader's order rebuilt for update 7 holds both ranks'
# samples, rank 0's first, as train --log-samples recorded rank 0's and the audit
# record (--audit-samples) every rank's
MPIRUN="mpirun --oversubscribe"
[ "$(id -u)" = 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
R2=
if command -v mpirun > /dev/null 2>&1 && $MPIRUN -n 2 $TR $M --micro-batch 4 --updates 12 --log-samples --audit-samples 12 -o "$T/r2" > /dev/null 2> "$T/r2.err"; then
	R2=1
	$RC --explain "$T/r2" --update 7 > "$T/ex2.out" 2> "$T/ex2.err"
	jq -s '.[] | select(.event == "audit" and .update == 7) | [.ranks[][] | .[1]]' "$T/r2/metrics.jsonl" > "$T/audit7"
	jq -e --slurpfile a "$T/audit7" '.data.samples == 8 and .data.order_matches_log and (.data.from | test("every rank"))
		and [.data.list[].index] == $a[0]' "$T/ex2.out" > /dev/null \
		&& ok "2 ranks: --explain rebuilds the batch of both ranks from the loader's order, as rank 0 logged it and the audit lists it" \
		|| notok "loader order" "$(jq -c .data "$T/ex2.out" | head -c 400) $(head -c 200 "$T/ex2.err")"
else
	ok "# skip no mpirun or no mpi communicator: no 2-rank run ($(tail -c 100 "$T/r2.err" 2> /dev/null))"
fi

# the dashboard
$RC --dashboard "$T/g" -o "$T/g.html" > "$T/dash.out" 2> "$T/dash.err"
jq -e '.event == "dashboard" and .ended and .updates == 130' "$T/dash.out" > /dev/null \
	&& ! grep -qi '<script[^>]*src=\|<link\|<img[^>]*src=\|@import\|url(' "$T/g.html" \
	&& ok "--dashboard: one HTML file, no external script, style, image or URL" \
	|| notok "dashboard" "$(cat "$T/dash.out" "$T/dash.err" | head -c 400)"
$RC --dashboard "$T/lr" -o "$T/lr.html" > /dev/null 2>&1
PANELS="p-loss p-lr p-gnorm p-layers p-ratio p-throughput p-wait p-ranks p-comm p-memory p-events p-alerts"
CHROME=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$CHROME" ]; then
	# a profile of its own, in $T, so that nothing outside the test is touched
	CH="$CHROME --headless --no-sandbox --disable-gpu --user-data-dir=$T/chrome --virtual-time-budget=5000"
	$CH --dump-dom "file://$T/g.html" > "$T/g.dom" 2> /dev/null
	missing=
	for p in $PANELS; do grep -q "<section class=\"panel\" id=\"$p\" data-state=\"\(data\|nodata\)\"" "$T/g.dom" || missing="$missing $p"; done
	[ -z "$missing" ] && ok "chromium: the DOM holds every panel, each drawn or saying why not" \
		|| notok "panels" "missing or not drawn:$missing" "$(grep -o '<section[^>]*>' "$T/g.dom" | head -c 600)"
	grep -q '<div id="selfcheck" data-ok="1" data-errors="0" data-panels="12">' "$T/g.dom" \
		&& ok "chromium: the page's own check passed, no script error recorded" \
		|| notok "selfcheck" "$(grep -o '<div id="selfcheck"[^<]*' "$T/g.dom")"
	# the junk run's page: the stats heat map drawn, the alert with its explanation
	grep -q 'id="p-layers" data-state="data"' "$T/g.dom" && grep -q 'explanation.*junk.jsonl' "$T/g.dom" \
		&& ok "... the units' heat map drawn, and the loss spike's explanation naming junk.jsonl" \
		|| notok "dom content" "$(grep -o '<section[^>]*id="p-layers"[^>]*>' "$T/g.dom")"
	# two other clocks (#clock=NAME opens the page on one; valid tokens is drawn
	# as these are): every panel drawn again against it, the axes named after it,
	# the check passed
	bad=
	for c in wall:'wall time (s)' device_h:'device-hours'; do
		$CH --dump-dom "file://$T/g.html#clock=${c%%:*}" > "$T/c.dom" 2> /dev/null
		grep -q "<body data-clock=\"${c%%:*}\">" "$T/c.dom" && grep -q "text-anchor=\"middle\">${c#*:}</text>" "$T/c.dom" \
			&& grep -q '<div id="selfcheck" data-ok="1" data-errors="0"' "$T/c.dom" || bad="$bad ${c%%:*}"
	done
	[ -z "$bad" ] && ok "the clocks wall time and device-hours: the panels redrawn against each, the check passed" \
		|| notok "clocks" "failed:$bad" "$(grep -o '<div id="selfcheck"[^<]*' "$T/c.dom")"
	$CH --dump-dom "file://$T/lr.html" > "$T/lr.dom" 2> /dev/null
	grep -q 'id="p-layers" data-state="nodata".*no data: metrics.jsonl has no stats record: run train with --stats-every' "$T/lr.dom" \
		&& grep -q '<div id="selfcheck" data-ok="1" data-errors="0"' "$T/lr.dom" \
		&& ok "a run without --stats-every: the heat map says why it has no data, and the check still passes" \
		|| notok "nodata panel" "$(grep -o '<section[^>]*id="p-layers".\{0,300\}' "$T/lr.dom")"
	# two ranks: each update record carries every rank's step (ranks.step_s.by_rank),
	# drawn as a rank x update heat map of 2 x 12 cells
	if [ -n "$R2" ]; then
		$RC --dashboard "$T/r2" -o "$T/r2.html" > /dev/null 2>&1
		$CH --dump-dom "file://$T/r2.html" > "$T/r2.dom" 2> /dev/null
		jq -se '[.[] | select(.event == "update")] | all(.ranks.step_s.by_rank | length == 2)' "$T/r2/metrics.jsonl" > /dev/null \
			&& grep -q 'id="p-ranks" data-state="data"><h2>[^<]*</h2><div class="plot"><svg data-n="24"' "$T/r2.dom" \
			&& grep -q '<div id="selfcheck" data-ok="1" data-errors="0"' "$T/r2.dom" \
			&& ok "2 ranks: every rank's step in each record, the rank x update heat map drawn (2 x 12 cells)" \
			|| notok "rank heat map" "$(grep -o '<section[^>]*id="p-ranks".\{0,300\}' "$T/r2.dom")"
	else
		ok "# skip no 2-rank run: no rank heat map"
	fi
	$CH --window-size=1240,2400 --screenshot="$T/g.png" "file://$T/g.html" > /dev/null 2>&1
	sz=$(wc -c < "$T/g.png" 2> /dev/null || echo 0)
	# a page of twelve drawn panels compresses to well over 50 kB; a blank one to a few
	[ "$(head -c 8 "$T/g.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] && [ "$sz" -gt 50000 ] \
		&& ok "chromium: a screenshot, a PNG of $sz bytes" || notok "screenshot" "size $sz"
else
	ok "# skip no chromium on PATH (Debian: chromium): the page is not opened in a browser"
fi

# --watch: started on a run directory with no metrics yet, which then writes half
# its records; the page reloads itself and is rewritten as records come; the run's
# end stops the watch
mkdir "$T/w"
cp "$T/g/config.json" "$T/w/"
$RC --dashboard "$T/w" -o "$T/w.html" --watch --interval 0.1 > "$T/watch.out" 2> "$T/watch.err" &
W=$!
sleep 0.3
[ ! -e "$T/w.html" ] && kill -0 $W 2> /dev/null && ok "--watch waits for a run that has no metrics.jsonl yet" \
	|| notok "watch wait" "$(head -c 300 "$T/watch.err")"
head -n 1 "$T/g/events.jsonl" > "$T/w/events.jsonl"
head -n 60 "$T/g/metrics.jsonl" > "$T/w/metrics.jsonl"
i=0
while [ $i -lt 100 ] && ! grep -qs 'http-equiv="refresh"' "$T/w.html"; do sleep 0.05; i=$((i + 1)); done
grep -q 'http-equiv="refresh"' "$T/w.html" && grep -q 'still running' "$T/w.html" \
	&& ok "--watch: the page of a run still going reloads itself" || notok "watch page" "$(head -c 300 "$T/watch.err")"
cp "$T/g/metrics.jsonl" "$T/w/metrics.jsonl"
cp "$T/g/events.jsonl" "$T/w/events.jsonl"
i=0
while [ $i -lt 100 ] && kill -0 $W 2> /dev/null; do sleep 0.05; i=$((i + 1)); done
if kill -0 $W 2> /dev/null; then
	kill $W
	notok "--watch did not stop when the run ended"
else
	wait $W
	rc=$?
	[ $rc = 0 ] && ! grep -q 'http-equiv="refresh"' "$T/w.html" && jq -e '.ended and .updates == 130' "$T/watch.out" > /dev/null \
		&& ok "... rewritten as the run grows, and when the run ends the watch stops (0) and the page no longer reloads" \
		|| notok "watch end" "rc $rc" "$(cat "$T/watch.out" "$T/watch.err" | head -c 400)"
fi
head -n 60 "$T/g/metrics.jsonl" > "$T/w/metrics.jsonl"
head -n 1 "$T/g/events.jsonl" > "$T/w/events.jsonl"
rm -f "$T/w.html"
$RC --dashboard "$T/w" -o "$T/w.html" --watch --interval 0.1 > "$T/watch.out" 2> "$T/watch.err" &
W=$!
i=0
while [ $i -lt 100 ] && [ ! -f "$T/w.html" ]; do sleep 0.05; i=$((i + 1)); done
kill -INT $W
wait $W
rc=$?
[ $rc = 0 ] && [ -f "$T/w.html" ] && ! grep -q 'http-equiv="refresh"' "$T/w.html" \
	&& ok "--watch stops on SIGINT (0), leaving a page that no longer reloads" || notok "watch sigint" "rc $rc" "$(head -c 300 "$T/watch.err")"
nothing_left "... and no temporary file next to it" "$T" "w.html."

# bad input: exit 1 naming the file, nothing written
check_fail "--dashboard of no such run: 1, naming it" 1 "'$T/none'" $RC --dashboard "$T/none" -o "$T/none.html"
cp -r "$T/g" "$T/bad"
sed -i '20s/.*/{"event":"update","update":/' "$T/bad/metrics.jsonl"
check_fail "a damaged metrics.jsonl line: 1, naming the file and the line" 1 "metrics.jsonl': line 20" \
	$RC --dashboard "$T/bad" -o "$T/bad.html"
[ ! -e "$T/bad.html" ] && ok "... and no page written" || notok "partial output" "$T/bad.html exists"
check_fail "--explain of a damaged run: 1, naming the line" 1 "metrics.jsonl': line 20" $RC --explain "$T/bad" --update 5
# a run killed while writing a record: its last line cut short is left out with a
# warning naming it, so a crashed run can still be looked at (it was an error, as a
# damaged line in the middle still is, above)
cp -r "$T/g" "$T/cut"
printf '{"event":"update","upd' >> "$T/cut/metrics.jsonl"
n=$(wc -l < "$T/cut/metrics.jsonl")
check "--dashboard of a run cut short in its last line: 0" $RC --dashboard "$T/cut" -o "$T/cut.html"
grep -qF "metrics.jsonl': line $((n + 1)) is cut short (the run stopped while writing it): left out" "$T/.err" \
	&& ok "... a warning naming the file and the line" || notok "cut-short warning" "$(cat "$T/.err")"
$RC --dashboard "$T/g" -o "$T/g2.html" > /dev/null 2>&1
sed "s|$T/cut|$T/g|g" "$T/cut.html" | cmp -s - "$T/g2.html" && ok "... the same page as without the cut line (but the name)" \
	|| notok "the page of a cut run differs" "$(sed "s|$T/cut|$T/g|g" "$T/cut.html" | cmp - "$T/g2.html")"
check "--explain of the same run: 0" $RC --explain "$T/cut" --update 5 --jsonl
grep -qF "is cut short" "$T/.err" && ok "... with the warning" || notok "explain cut warning" "$(cat "$T/.err")"
check_fail "--explain --update past the run: 1, naming metrics.jsonl and the run's updates" 1 "no update 131 (the run has updates 1 to 130)" \
	$RC --explain "$T/g" --update 131
check_fail "--explain without --update: usage error" 2 "--explain needs --update N" $RC --explain "$T/g"
check_fail "--watch without --dashboard: usage error" 2 "--watch and --interval apply to --dashboard" $RC --watch "$T/g"
finish
