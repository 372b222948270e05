#!/bin/sh
# tests/cli/maxdoc.sh: --max-doc-bytes, the most a document may hold.
#
# The reader holds a document whole, so input without a document's end (a file of
# no newlines read by lines, /dev/zero) grew its buffer until the machine ran out:
# tok-train, tok-encode and dedup-minhash on /dev/zero took 4.5-9.4 GB in 8 s.
# Now a document longer than the limit is an error (exit 1) naming the input and
# where, with no output left, whatever way the input splits into documents: lines,
# paragraphs, a separator, whole files, JSONL lines, stdin. A document of exactly
# the limit passes; one byte more fails (the boundary is exact, so each case is run
# at both). /dev/zero and a pipe of zeros stop at the limit (within timeout 60).
. tests/cli/lib.sh
TT=$BIN/tok-train
TE=$BIN/tok-encode
DM=$BIN/dedup-minhash

printf 'the quick brown fox\n' > "$T/a.txt"
"$TT" -q -v 300 -o "$T/t.lmtok" "$T/a.txt" > /dev/null || notok "tok-train on a small file"

# rep N CHAR: CHAR N times
rep() { awk -v n="$1" -v c="$2" 'BEGIN { for (i = 0; i < n; i++) printf "%s", c }'; }

# lines of 100 and 1000 bytes (and a '\n' each)
{ rep 100 a; echo; rep 1000 b; echo; } > "$T/lines.txt"
check "--txt-docs line: a line of exactly --max-doc-bytes passes" \
	"$TE" -q -t "$T/t.lmtok" --txt-docs line --max-doc-bytes 1000 -o "$T/l.lmtoks" "$T/lines.txt"
grep -q '"documents":2,' "$T/.out" && ok "both lines are documents" || notok "line documents" "$(cat "$T/.out")"
check_fail "--txt-docs line: a line one byte over, named by its number" 1 \
	"'$T/lines.txt': line 2: longer than 999 bytes, the most a document may hold (--max-doc-bytes)" \
	"$TE" -q -t "$T/t.lmtok" --txt-docs line --max-doc-bytes 999 -o "$T/l2.lmtoks" "$T/lines.txt"
nothing_left "no output file is left" "$T" l2.lmtoks
[ ! -s "$T/.out" ] && ok "nothing on stdout" || notok "stdout after the error" "$(head -c 300 "$T/.out")"

# the whole file, 1102 bytes, is one document by default
check "--txt-docs file: a file of exactly --max-doc-bytes passes" \
	"$TE" -q -t "$T/t.lmtok" --max-doc-bytes 1102 -o "$T/f.lmtoks" "$T/lines.txt"
check_fail "--txt-docs file: one byte over names the file, and that a file is one document" 1 \
	"'$T/lines.txt': longer than 1101 bytes, the most a document may hold (--max-doc-bytes); with --txt-docs file" \
	"$TE" -q -t "$T/t.lmtok" --max-doc-bytes 1101 -o "$T/f2.lmtoks" "$T/lines.txt"

# paragraphs: three lines of 10 bytes after a blank one make a document of 32
{ echo x; echo; rep 10 c; echo; rep 10 d; echo; rep 10 e; echo; } > "$T/para.txt"
check "--txt-docs blank: a paragraph of exactly --max-doc-bytes passes" \
	"$TE" -q -t "$T/t.lmtok" --txt-docs blank --max-doc-bytes 32 -o "$T/p.lmtoks" "$T/para.txt"
check_fail "--txt-docs blank: one byte over names the paragraph's first line" 1 "'$T/para.txt': line 3: longer than 31 bytes" \
	"$TE" -q -t "$T/t.lmtok" --txt-docs blank --max-doc-bytes 31 -o "$T/p2.lmtoks" "$T/para.txt"

# a separator: documents of 4 and 8 bytes
{ rep 4 a; printf '<|e|>'; rep 8 b; } > "$T/sep.txt"
check "--doc-sep: a document of exactly --max-doc-bytes passes" \
	"$TE" -q -t "$T/t.lmtok" --doc-sep '<|e|>' --max-doc-bytes 8 -o "$T/s.lmtoks" "$T/sep.txt"
check_fail "--doc-sep: one byte over names the document's number" 1 "'$T/sep.txt': document 2: longer than 7 bytes" \
	"$TE" -q -t "$T/t.lmtok" --doc-sep '<|e|>' --max-doc-bytes 7 -o "$T/s2.lmtoks" "$T/sep.txt"

# JSONL: the limit is on the line, which holds the text; a line of 1011 bytes
{ echo '{"text":"hi"}'; printf '{"text":"'; rep 1000 z; echo '"}'; } > "$T/d.jsonl"
for j in 1 2; do
	check "JSONL -j$j: a line of exactly --max-doc-bytes passes" \
		"$TE" -q -j$j -t "$T/t.lmtok" --max-doc-bytes 1011 -o "$T/j.lmtoks" "$T/d.jsonl"
	check_fail "JSONL -j$j: a line one byte over names the line" 1 "'$T/d.jsonl': line 2: longer than 1010 bytes" \
		"$TE" -q -j$j -t "$T/t.lmtok" --max-doc-bytes 1010 -o "$T/j2.lmtoks" "$T/d.jsonl"
done
check_fail "tok-train: the same line, the same message" 1 "'$T/d.jsonl': line 2: longer than 1010 bytes" \
	"$TT" -q --max-doc-bytes 1010 -v 300 -o "$T/t2.lmtok" "$T/d.jsonl"
nothing_left "tok-train leaves no tokenizer" "$T" t2.lmtok
check_fail "dedup-minhash: the same line, the same message" 1 "'$T/d.jsonl': line 2: longer than 1010 bytes" \
	"$DM" -q --max-doc-bytes 1010 "$T/d.jsonl"

# input that never ends a document stops at the limit, not when memory runs out
for tool in "$TT -v 300 -o $T/z.lmtok" "$TE -t $T/t.lmtok -o $T/z.lmtoks" "$DM"; do
	name=$(basename "${tool%% *}")
	check_fail "$name on /dev/zero stops at the limit" 1 "'/dev/zero': longer than 1000000 bytes" \
		timeout 60 $tool -q --max-doc-bytes 1M /dev/zero
done
check_fail "a pipe of 3 MB without a newline, read by lines, stops at line 1" 1 "'<stdin>': line 1: longer than 1048576 bytes" \
	sh -c "head -c 3000000 /dev/zero | tr '\\0' a | timeout 60 \"$TE\" -q -t \"$T/t.lmtok\" --txt-docs line --max-doc-bytes 1Mi -o \"$T/z.lmtoks\" -"
nothing_left "no output of the zeros is left" "$T" z.lm

check_fail "--max-doc-bytes 0 is a usage error" 2 "'--max-doc-bytes'" "$TE" -t "$T/t.lmtok" --max-doc-bytes 0 -o "$T/x.lmtoks" "$T/a.txt"
check_fail "--max-doc-bytes with an unknown unit is a usage error" 2 "'--max-doc-bytes'" \
	"$TE" -t "$T/t.lmtok" --max-doc-bytes 3X -o "$T/x.lmtoks" "$T/a.txt"
finish
