#!/bin/sh
# tests/cli/gen-corpus.sh: gen-corpus as a user runs it.
#
# Usage errors exit 2; the same seed gives the same bytes, on stdout or through -o,
# whatever --docs; -o leaves no temporary behind; --check accepts what gen-corpus
# wrote and rejects an edited logprob or text with exit 1, naming the line; the
# text format splits back into the same documents with tok-train --doc-sep, as
# gen-corpus(1) says.
. tests/cli/lib.sh
G=$BIN/gen-corpus

# ---- help, version, usage errors ----
check "--help exits 0" $G --help
grep -q -- '--docs N' "$T/.out" && grep -q -- '--check FILE' "$T/.out" \
	&& ok "--help prints the options on stdout" || notok "--help prints the options on stdout"
check "--version exits 0" $G --version
check_fail "an unknown option is a usage error" 2 "Try 'gen-corpus --help'." $G --frobnicate
check_fail "--format xml is a usage error" 2 "'--format'" $G --format xml
check_fail "--docs -1 is a usage error" 2 "'--docs'" $G --docs -1
check_fail "--check with --seed is a usage error" 2 "--check takes no" $G --check x.jsonl --seed 3
check_fail "an extra argument is a usage error" 2 "unexpected argument" $G extra

# ---- generation ----
mkdir "$T/o"
check "-o writes 200 documents" $G --docs 200 --seed 5 -o "$T/o/a.jsonl"
grep -q '^{"event":"summary",.*"docs":200,' "$T/.out" \
	&& ok "-o prints a JSONL summary on stdout" || notok "-o prints a JSONL summary on stdout" "$(cat "$T/.out")"
[ "$(ls -A "$T/o")" = "a.jsonl" ] && ok "-o leaves no temporary file behind" \
	|| notok "-o leaves no temporary file behind" "$(ls -A "$T/o")"
[ "$(wc -l < "$T/o/a.jsonl")" -eq 200 ] && ok "one JSONL line per document" \
	|| notok "one JSONL line per document" "$(wc -l < "$T/o/a.jsonl") lines"

check "a second run with the same seed" $G --docs 200 --seed 5 -o "$T/o/b.jsonl"
same "two runs with the same seed give identical files" "$T/o/a.jsonl" "$T/o/b.jsonl"
check "the same seed to stdout, -q" $G --docs 200 --seed 5 -q
same "stdout gets the same documents as -o" "$T/o/a.jsonl" "$T/.out"
[ ! -s "$T/.err" ] && ok "-q keeps stderr quiet" || notok "-q keeps stderr quiet" "$(cat "$T/.err")"
check "the same seed, 20 documents" $G --docs 20 --seed 5 -q
head -n 20 "$T/o/a.jsonl" > "$T/first20.jsonl"
same "the first 20 documents do not depend on --docs" "$T/first20.jsonl" "$T/.out"
check "another seed" $G --docs 200 --seed 6 -o "$T/o/c.jsonl"
cmp -s "$T/o/a.jsonl" "$T/o/c.jsonl" && notok "another seed gives other documents" \
	|| ok "another seed gives other documents"
nothing_left "no temporaries after three -o runs" "$T/o" tmp

# ---- --check ----
check "--check accepts what gen-corpus wrote" $G --check "$T/o/a.jsonl"
grep -q '^{"event":"check",.*"docs":200,' "$T/.out" \
	&& ok "--check prints a JSONL summary" || notok "--check prints a JSONL summary" "$(cat "$T/.out")"

# line 3 with a digit put in front of its logprob
sed '3s/"logprob":-/"logprob":-1/' "$T/o/a.jsonl" > "$T/lp.jsonl"
cmp -s "$T/o/a.jsonl" "$T/lp.jsonl" && notok "(the logprob edit changed the file)" \
	|| ok "(the logprob edit changed the file)"
check_fail "--check rejects an edited logprob, naming the line" 1 "line 3: logprob" $G --check "$T/lp.jsonl"

# the second line that holds " the ", with a word its state does not allow
L=$(grep -n ' the ' "$T/o/a.jsonl" | sed -n '2s/:.*//p')
sed "${L}s/ the / teh /" "$T/o/a.jsonl" > "$T/word.jsonl"
check_fail "--check rejects an edited text, naming the line" 1 "line $L: text is not in the language" \
	$G --check "$T/word.jsonl"
printf 'not json\n' > "$T/bad.jsonl"
check_fail "--check rejects a line that is not JSON" 1 "line 1: not JSON" $G --check "$T/bad.jsonl"
check_fail "--check of a missing file exits 1" 1 "cannot open" $G --check "$T/missing.jsonl"

# ---- text format, and the pipeline in gen-corpus(1) ----
check "--format text writes 200 documents" $G --docs 200 --seed 5 --format text -o "$T/o/a.txt"
bytes=$(sed -n 's/.*"bytes":\([0-9]*\).*/\1/p' "$T/.out")
[ "$(grep -o '<|endoftext|>' "$T/o/a.txt" | wc -l)" -eq 199 ] \
	&& ok "--format text separates 200 documents with 199 '<|endoftext|>'" \
	|| notok "--format text separates 200 documents with 199 '<|endoftext|>'"
nothing_left "no temporaries after the text run" "$T/o" tmp
check "tok-train --doc-sep '<|endoftext|>' reads the text format" \
	$BIN/tok-train -q -v 300 --doc-sep '<|endoftext|>' -o "$T/o/tok.lmtok" "$T/o/a.txt"
grep -q '"documents":200,' "$T/.out" && grep -q "\"input_bytes\":$bytes," "$T/.out" \
	&& ok "tok-train finds the 200 documents and their $bytes bytes" \
	|| notok "tok-train finds the 200 documents and their $bytes bytes" "$(cat "$T/.out")"

check_fail "-o into a missing directory exits 1, naming the file" 1 "/missing/dir/x.jsonl'" $G --docs 5 -o "$T/missing/dir/x.jsonl"
# write errors name the file and give the errno (RLIMIT_FSIZE for a file: 4 KiB)
check_fail "JSONL into a full stdout" 1 "'<stdout>': write: No space left on device" sh -c '"$@" > /dev/full' sh $G --docs 5
check_fail "text into a full stdout" 1 "'<stdout>': write: No space left on device" sh -c '"$@" > /dev/full' sh $G --docs 5 --format text
for t in gen-corpus train lmt; do
	check_fail "$t --help into a full stdout: exit 1 (it was 0)" 1 "'<stdout>': write error: No space left on device" \
		sh -c '"$@" > /dev/full' sh "$BIN/$t" --help
done
check_fail "a file past RLIMIT_FSIZE" 1 "big.jsonl': write: File too large" \
	sh -c 'trap "" XFSZ; ulimit -f 8; exec "$@"' sh $G --docs 400 -o "$T/big.jsonl"
nothing_left "no temporary after the write error" "$T" big.jsonl
finish
