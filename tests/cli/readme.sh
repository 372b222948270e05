#!/bin/sh
# tests/cli/readme.sh: the README's pipeline block, taken from README.md as written
# (the sh block after the <!-- readme-pipeline --> comment) and run with `sh -e` in
# a scratch directory with only the build's tools added to PATH, as a reader would
# type it after `make`; its sizes come from the environment so it takes seconds.
# Then each `$ ` line of the jq block (after <!-- readme-jq -->) runs in the
# directory the pipeline made, so its files are ones the pipeline creates.
. tests/cli/lib.sh

# block MARKER: the next ```sh block after the line starting <!-- MARKER
block() {
	awk -v m="<!-- $1" 'index($0, m) == 1 { f = 1; next }
		f == 1 && /^```sh$/ { f = 2; next }
		f == 2 && /^```$/ { exit }
		f == 2' README.md
}

block readme-pipeline > "$T/pipeline.sh"
n=$(grep -c '^lmt ' "$T/pipeline.sh")
[ "$n" -ge 10 ] && ok "README.md has the pipeline block ($n lmt commands)" \
	|| notok "pipeline block" "$(cat "$T/pipeline.sh")"
grep -q 'build/\|out/' "$T/pipeline.sh" && notok "the block names no build tree paths" "$(grep 'build/\|out/' "$T/pipeline.sh")" \
	|| ok "the block names no build tree paths (the tools come from PATH)"

mkdir "$T/cwd"
(cd "$T/cwd" && env PATH="$BIN:$PATH" DOCS=300 VOCAB=400 SEQ_LEN=64 UPDATES=10 \
	MODEL='--layers 1 --heads 2 --channels 32' sh -ex "$T/pipeline.sh") > "$T/pipe.out" 2> "$T/pipe.err"
rc=$?
[ "$rc" = 0 ] && ok "the block runs as written with sh -e" \
	|| notok "the block runs as written with sh -e" "exit status $rc" "$(tail -c 800 "$T/pipe.err")"
ran=$(grep -c '^+ lmt ' "$T/pipe.err")
[ "$ran" = "$n" ] && ok "every one of its $n lmt commands ran" || notok "commands run: $ran of $n" "$(grep '^+ ' "$T/pipe.err")"

W=$T/cwd/work
grep -q '"bits_per_byte":0\.[45]' "$W/corpus.summary.jsonl" 2> /dev/null && ok "the corpus summary the run card reads" \
	|| notok "corpus summary" "$(ls "$W")"
[ -f "$W/data/manifest.json" ] && [ -f "$W/run/ckpt/step-00000010/manifest.json" ] \
	&& grep -q '"event":"resume","update":5' "$W/run/events.jsonl" \
	&& ok "the dataset, the final checkpoint, the stop at update 5 and the resume" \
	|| notok "train stage" "$(ls "$W" "$W/run/ckpt" 2>&1)"
[ "$(grep -c '"event":"ppl".*"scope":"overall"' "$W/run/eval/ppl.jsonl" 2> /dev/null)" = 2 ] \
	&& ok "the evaluation JSONL: both checkpoints" || notok "evalppl stage" "$(head -c 300 "$W/run/eval/ppl.jsonl" 2>&1)"
[ -s "$W/run/runcard.yaml" ] && [ -s "$W/run/RUNCARD.md" ] && [ -s "$W/release.tar.zst" ] \
	&& grep -q '"event":"verify".*"ok":true' "$T/pipe.out" \
	&& ok "the run card and the verified release archive" || notok "runcard stage" "$(ls "$W" "$W/run" 2>&1)"

block readme-jq | sed -n 's/^\$ //p' > "$T/jq.txt"
m=$(wc -l < "$T/jq.txt")
[ "$m" -ge 1 ] && ok "README.md has the jq block ($m commands)" || notok "jq block" "$(block readme-jq)"
if command -v jq > /dev/null; then
	i=0
	while IFS= read -r line; do
		i=$((i + 1))
		out=$(cd "$W" && env PATH="$BIN:$PATH" sh -ec "$line" 2> "$T/jq.err")
		rc=$?
		if [ "$rc" = 0 ] && [ -n "$out" ] && printf '%s\n' "$out" | jq -e . > /dev/null 2>&1; then
			ok "jq example $i, in work/"
		else
			notok "jq example $i, in work/" "exit status $rc: $line" "$out" "$(head -c 600 "$T/jq.err")"
		fi
	done < "$T/jq.txt"
else
	ok "# SKIP jq not installed: the README's jq examples"
fi
finish
