#!/bin/sh
# tests/cli/corpus.sh: what the corpus reader passes over in a directory walk.
#
# A dangling symlink, a symlink loop, a symlink back to the directory itself (it was
# walked again to the depth limit; two a level never ended), a FIFO (the way to make an entry unreadable
# when the tests run as root: chmod 000 does not stop root) and binary files (a NUL
# byte; mostly invalid UTF-8) inside a named directory are skipped: exit 0, counted
# and named on stderr and in the summary record, and the output for the other files
# is byte-identical to the output without them. --strict makes each an error naming
# the file. A named missing file is an error; a named binary file is read as given
# unless --strict. Compressed input cut short is an error naming the filter. NUL
# bytes on stdin (an empty tar stream) are a skipped input.
. tests/cli/lib.sh
TT=$BIN/tok-train
TE=$BIN/tok-encode
DM=$BIN/dedup-minhash

mkdir "$T/good"
printf 'the quick brown fox jumps over the lazy dog\n' > "$T/good/a.txt"
printf 'caf\303\251 cr\303\250me br\373l\351e, Latin-1 prose\n' > "$T/good/b.txt"
"$TT" -q -v 300 -o "$T/t.lmtok" "$T/good" > /dev/null || notok "tok-train on the good files"
"$TE" -q -t "$T/t.lmtok" -o "$T/good.lmtoks" "$T/good" > "$T/good.json" || notok "tok-encode on the good files"
"$DM" -q "$T/good" > "$T/good.dedup" || notok "dedup-minhash on the good files"

# bad KIND DIR: one bad entry of KIND added to DIR. The outputs name their
# sources, so the bad entries go into the good directory itself, one at a time.
bad() {
	case $1 in
	dangling) ln -s "$T/nowhere" "$2/c-link" ;;
	loop) ln -s c-loop "$2/c-loop" ;;
	dirloop) ln -s . "$2/c-dir" ;;
	fifo) mkfifo "$2/c.fifo" ;;
	nul) printf 'ELF\000\000\001text after the NUL\n' > "$2/c.o" ;;
	utf8) awk 'BEGIN { for (i = 0; i < 2000; i++) printf "%c%c", 255, 97 }' > "$2/c.img" ;;
	esac
}
mkdir "$T/keep"
for k in dangling loop dirloop fifo nul utf8; do
	bad $k "$T/good"
	name=$(ls "$T/good" | grep '^c')
	check "tok-encode skips a $k entry in a directory (exit 0)" "$TE" -t "$T/t.lmtok" -o "$T/$k.lmtoks" "$T/good"
	grep -qF "skipped 1 input" "$T/.err" && grep -qF "'$T/good/$name'" "$T/.err" &&
		ok "the $k entry is counted and named on stderr" || notok "$k named on stderr" "$(cat "$T/.err")"
	grep -q "\"skipped\":1,\"skipped_inputs\":\[{\"name\":\"$T/good/$name\"" "$T/.out" &&
		ok "the $k entry is counted and named in the summary record" || notok "$k in summary" "$(cat "$T/.out")"
	same "the tokens of the other files are those without the $k entry" "$T/good.lmtoks" "$T/$k.lmtoks"
	check_fail "--strict refuses the $k entry naming it" 1 "'$T/good/$name'" \
		"$TE" --strict -t "$T/t.lmtok" -o "$T/$k.strict" "$T/good"
	nothing_left "--strict leaves no output" "$T" "$k.strict"
	check "dedup-minhash skips the $k entry" "$DM" -q "$T/good"
	same "dedup-minhash output without the $k entry" "$T/good.dedup" "$T/.out"
	check_fail "dedup-minhash --strict refuses the $k entry" 1 "'$T/good/$name'" "$DM" -q --strict "$T/good"
	check "tok-train skips the $k entry" "$TT" -q -v 300 -o "$T/$k.lmtok" "$T/good"
	same "tok-train trains the same tokenizer without the $k entry" "$T/t.lmtok" "$T/$k.lmtok"
	check_fail "tok-train --strict refuses the $k entry" 1 "'$T/good/$name'" \
		"$TT" -q --strict -v 300 -o "$T/$k.strict" "$T/good"
	mv "$T/good/$name" "$T/keep/"
done

for k in dangling loop dirloop fifo nul utf8; do bad $k "$T/good"; done
check "six bad entries together are skipped" "$TE" -t "$T/t.lmtok" -o "$T/all.lmtoks" "$T/good"
grep -qF "skipped 6 inputs" "$T/.err" && ok "all six counted on stderr" || notok "six counted" "$(cat "$T/.err")"
grep -qF "'$T/good/c-dir' (a loop back to the directory '$T/good')" "$T/.err" && ok "the loop names the directory it leads back to" \
	|| notok "the loop's reason" "$(cat "$T/.err")"
# two links a level back up: each level doubled the paths, and the walk never ended
mkdir -p "$T/tree/sub"
cp "$T/good/a.txt" "$T/tree/"
ln -s .. "$T/tree/sub/up"
ln -s .. "$T/tree/sub/up2"
ln -s . "$T/tree/here"
check "links back up at two levels are each skipped once" timeout 60 "$TE" -t "$T/t.lmtok" -o "$T/tree.lmtoks" "$T/tree"
grep -qF "skipped 3 inputs" "$T/.err" && grep -q '"documents":1,' "$T/.out" && ok "three links skipped, the one file read once" \
	|| notok "links back up" "$(cat "$T/.err" "$T/.out")"
same "the tokens are still those of the good files" "$T/good.lmtoks" "$T/all.lmtoks"

# named inputs are the user's choice
check_fail "a named missing file is an error" 1 "'$T/missing.txt'" "$TE" -t "$T/t.lmtok" -o "$T/m.lmtoks" "$T/missing.txt"
check_fail "a named dangling symlink is an error" 1 "'$T/good/c-link'" "$TE" -t "$T/t.lmtok" -o "$T/m.lmtoks" "$T/good/c-link"
check "a named binary file is read as given" "$TE" -t "$T/t.lmtok" -o "$T/n.lmtoks" "$T/good/c.o"
check_fail "a named binary file is an error with --strict" 1 "'$T/good/c.o': binary file (a NUL byte" \
	"$TE" --strict -t "$T/t.lmtok" -o "$T/n.lmtoks" "$T/good/c.o"
check_fail "a binary file on stdin is an error with --strict" 1 "'<stdin>': binary file" \
	sh -c "\"$TE\" --strict -t \"$T/t.lmtok\" -o \"$T/n.lmtoks\" - < \"$T/good/c.img\""
# NUL bytes on stdin read as a tar archive with no members (an empty tar stream is
# just that): said as a skipped input, not 0 documents without a word; an error
# with --strict; an empty stdin is still no input and no warning
head -c 20000 /dev/zero > "$T/zeros"
check "NUL bytes on stdin: exit 0" sh -c "\"$TE\" -t \"$T/t.lmtok\" -o \"$T/z0.lmtoks\" - < \"$T/zeros\""
grep -qF "skipped 1 input" "$T/.err" && grep -qF "an archive with no members" "$T/.err" &&
	grep -q '"documents":0,' "$T/.out" && grep -q '"skipped":1,' "$T/.out" &&
	ok "NUL bytes on stdin: skipped, named as an archive with no members" ||
	notok "NUL bytes on stdin" "$(cat "$T/.err" "$T/.out")"
check_fail "NUL bytes on stdin with --strict: an error" 1 "'<stdin>': an archive with no members" \
	sh -c "\"$DM\" --strict - < \"$T/zeros\""
check "an empty stdin: exit 0" sh -c "\"$TE\" -t \"$T/t.lmtok\" -o \"$T/e0.lmtoks\" - < /dev/null"
grep -q skipped "$T/.err" "$T/.out" && notok "an empty stdin is not a skipped input" "$(cat "$T/.err")" ||
	ok "an empty stdin is not a skipped input"
check "NUL bytes in a named file are read as given" "$TE" -t "$T/t.lmtok" -o "$T/z1.lmtoks" "$T/zeros"
grep -q '"documents":1,' "$T/.out" && ok "the named file of NULs is one document" ||
	notok "the named file of NULs" "$(cat "$T/.out")"
# compressed input cut short: libarchive says nothing for a gzip stream cut before
# its 8-byte trailer ("read error" was all), and liblzma "No progress is possible"
# for a cut xz stream; the message now names the filter and what happened
awk 'BEGIN { for (i = 0; i < 4000; i++) printf "{\"text\": \"line %d of the story\"}\n", i }' > "$T/z.jsonl"
gzip -c "$T/z.jsonl" > "$T/z.jsonl.gz"
xz -c "$T/z.jsonl" > "$T/z.jsonl.xz"
n=$(wc -c < "$T/z.jsonl.gz")
head -c $((n - 8)) "$T/z.jsonl.gz" > "$T/cut-trailer.jsonl.gz"
n=$(wc -c < "$T/z.jsonl.xz")
head -c $((n / 2)) "$T/z.jsonl.xz" > "$T/cut.jsonl.xz"
check_fail "gzip without its trailer: the filter and a truncated file named" 1 \
	"'$T/cut-trailer.jsonl.gz': the gzip data ends early or is damaged (a truncated file?)" \
	"$TE" -q -t "$T/t.lmtok" -o "$T/cut.lmtoks" "$T/cut-trailer.jsonl.gz"
check_fail "xz cut in half: 'truncated xz input'" 1 "'$T/cut.jsonl.xz': truncated xz" \
	"$TE" -q -t "$T/t.lmtok" -o "$T/cut.lmtoks" "$T/cut.jsonl.xz"
nothing_left "no output of the cut inputs is left" "$T" cut.lmtoks
check "the whole files read" "$TE" -q -t "$T/t.lmtok" -o "$T/whole.lmtoks" "$T/z.jsonl.gz" "$T/z.jsonl.xz"
finish
