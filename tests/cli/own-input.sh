#!/bin/sh
# tests/cli/own-input.sh: no tool writes over one of its own inputs.
#
# For every output option of every tool that reads files: an output that is an
# input, lies inside an input directory, or reaches one through a symlink or a
# hard link is refused with exit 1 naming both, before anything is written, and
# the input is byte for byte what it was. (ckpt-reshard's cases are in ckpt-reshard.sh.)
# A file output naming an existing directory, or one written when the work is done
# into a directory that is missing, is refused before the work.
. tests/cli/lib.sh

"$BIN/gen-corpus" -q --docs 200 --seed 3 -o "$T/c.jsonl" > /dev/null
"$BIN/tok-train" -q -v 300 -o "$T/t.lmtok" "$T/c.jsonl" > /dev/null
"$BIN/tok-encode" -q -t "$T/t.lmtok" -o "$T/s.lmtoks" "$T/c.jsonl" > /dev/null
"$BIN/shard-pack" -q -L 32 --split val=0.1 -o "$T/d" "$T/s.lmtoks" > /dev/null
mkdir -p "$T/texts" && cp "$T/c.jsonl" "$T/texts/c.jsonl"
ln -s "$T/texts" "$T/texts-link"
printf 'layers = 1\nheads = 2\nchannels = 32\nupdates = 1\n' > "$T/run.cfg"
ln "$T/c.jsonl" "$T/c-link.jsonl"
ln "$T/t.lmtok" "$T/t-link.lmtok"
(cd "$T" && find . -type f ! -name '*.sums' ! -name '.out' ! -name '.err' | sort | xargs sha256sum) > "$T/before.sums"

# refused DESC CMD...: exit 1, "not writing over an input" on stderr
refused() { d=$1; shift; check_fail "$d" 1 "not writing over an input" "$@"; }

refused "tok-train -o onto its input" "$BIN/tok-train" -q -v 300 -o "$T/c.jsonl" "$T/c.jsonl"
refused "tok-train -o into its input directory, through a symlink" \
	"$BIN/tok-train" -q -v 300 -o "$T/texts-link/tok.lmtok" "$T/texts"
refused "tok-train --export-hf onto the tokenizer it reads" "$BIN/tok-train" -q -t "$T/t.lmtok" --export-hf "$T/t.lmtok"
refused "tok-encode -o onto its input" "$BIN/tok-encode" -q -t "$T/t.lmtok" -o "$T/c.jsonl" "$T/c.jsonl"
refused "tok-encode -o onto its tokenizer" "$BIN/tok-encode" -q -t "$T/t.lmtok" -o "$T/t.lmtok" "$T/c.jsonl"
refused "tok-encode --decode -o onto the stream" "$BIN/tok-encode" -q -t "$T/t.lmtok" --decode -o "$T/s.lmtoks" "$T/s.lmtoks"
refused "dedup-minhash --removed onto its input" "$BIN/dedup-minhash" -q --removed "$T/c.jsonl" "$T/c.jsonl"
refused "dedup-minhash --summary inside an input directory" "$BIN/dedup-minhash" -q --summary "$T/texts/s.json" "$T/texts"
refused "dedup-minhash --removed onto an --against set" "$BIN/dedup-minhash" -q --against "$T/texts/c.jsonl" \
	--removed "$T/texts/c.jsonl" "$T/c.jsonl"
refused "shard-pack --force -o onto the dataset that holds its input" \
	sh -c "cp '$T/s.lmtoks' '$T/d/s.lmtoks' && '$BIN/shard-pack' -q -L 32 --force -o '$T/d' '$T/d/s.lmtoks'"
rm -f "$T/d/s.lmtoks"
refused "train -o inside its dataset" "$BIN/train" --data "$T/d" --layers 1 --heads 2 --channels 32 --updates 1 -o "$T/d/run"
refused "train --export-llmc onto its dataset's manifest" "$BIN/train" --data "$T/d" --layers 1 --heads 2 --channels 32 \
	--updates 1 --export-llmc "$T/d/manifest.json"
refused "train --export-llmc onto its tokenizer" "$BIN/train" --data "$T/d" -t "$T/t.lmtok" --layers 1 --heads 2 \
	--channels 32 --updates 1 --export-llmc "$T/t.lmtok"
refused "train --export-llmc onto its --config file (once written over, exit 0)" "$BIN/train" --data "$T/d" \
	--config "$T/run.cfg" --no-save --eval-every 0 --export-llmc "$T/run.cfg"
# a hard link is the same file under another name: the inode tells, the string not
refused "tok-train -o onto a hard link of its input" "$BIN/tok-train" -q -v 300 -o "$T/c-link.jsonl" "$T/c.jsonl"
refused "tok-encode -o onto a hard link of its tokenizer" "$BIN/tok-encode" -q -t "$T/t.lmtok" -o "$T/t-link.lmtok" "$T/c.jsonl"
refused "dedup-minhash --summary onto a hard link of its input" "$BIN/dedup-minhash" -q --summary "$T/c-link.jsonl" "$T/c.jsonl"
refused "train --export-llmc onto a hard link of its tokenizer" "$BIN/train" --data "$T/d" -t "$T/t.lmtok" --layers 1 \
	--heads 2 --channels 32 --updates 1 --no-save --export-llmc "$T/t-link.lmtok"
[ ! -e "$T/d/run" ] && ok "nothing was created for a refused run" || notok "run created" "$(ls "$T/d")"
(cd "$T" && find . -type f ! -name '*.sums' ! -name '.out' ! -name '.err' | sort | xargs sha256sum) > "$T/after.sums"
cmp -s "$T/before.sums" "$T/after.sums" && ok "every input is byte for byte what it was" ||
	notok "inputs changed" "$(diff "$T/before.sums" "$T/after.sums" | head -5)"
check "an output beside the inputs is fine" "$BIN/tok-train" -q -v 300 -o "$T/texts-other.lmtok" "$T/texts"

# a file output that names an existing directory is refused before the work, not
# at the rename that ends it ("rename into place: Is a directory", after encoding
# every input or training every update); tok-train -o DIR and shard-pack -o DIR
# are directories by design
mkdir "$T/adir"
isdir() { d=$1; shift; check_fail "$d" 1 "is a directory: give a file name" "$@"; }
isdir "tok-encode -o DIR" "$BIN/tok-encode" -q -t "$T/t.lmtok" -o "$T/adir" "$T/c.jsonl"
isdir "gen-corpus -o DIR" "$BIN/gen-corpus" -q --docs 10 -o "$T/adir"
isdir "dedup-minhash --removed DIR" "$BIN/dedup-minhash" -q --removed "$T/adir" "$T/c.jsonl"
"$BIN/train" -q -j1 --config "$T/run.cfg" --data "$T/d" -t "$T/t.lmtok" --micro-batch 2 -o "$T/arun" > /dev/null 2>&1 ||
	notok "a one-update run for runcard"
isdir "runcard --dashboard -o DIR" "$BIN/runcard" -q --dashboard -o "$T/adir" "$T/arun"
isdir "train --export-llmc DIR, before the first update" "$BIN/train" -q -j1 --config "$T/run.cfg" --data "$T/d" \
	-t "$T/t.lmtok" --micro-batch 2 --no-save --export-llmc "$T/adir"
grep -q '"event":"update"' "$T/.out" && notok "train trained before refusing --export-llmc DIR" || ok "... no update ran"
[ -z "$(ls -A "$T/adir")" ] && ok "the directory is left empty" || notok "left in the directory" "$(ls -A "$T/adir")"

# outputs written only when the work is done are checked before it: tok-train
# trained, and train ran every update, before "cannot create" at the end
nodir() { d=$1; shift; check_fail "$d" 1 "cannot write into '$T/nowhere': No such file or directory" "$@"; }
nodir "tok-train -o into a missing directory" "$BIN/tok-train" -q -v 300 -o "$T/nowhere/t.lmtok" "$T/c.jsonl"
grep -q '"event"' "$T/.out" && notok "tok-train counted or trained first" "$(head -c 200 "$T/.out")" || ok "... nothing counted"
nodir "tok-train --export-hf into a missing directory" "$BIN/tok-train" -q -v 300 -o "$T/t2.lmtok" \
	--export-hf "$T/nowhere/tokenizer.json" "$T/c.jsonl"
nothing_left "... and no tokenizer written" "$T" t2.lmtok
isdir "tok-train --export-hf DIR" "$BIN/tok-train" -q -v 300 -o "$T/t2.lmtok" --export-hf "$T/adir" "$T/c.jsonl"
check_fail "tok-train -o through a file" 1 "'$T/run.cfg' is not a directory" \
	"$BIN/tok-train" -q -v 300 -o "$T/run.cfg/t.lmtok" "$T/c.jsonl"
nodir "train --export-llmc into a missing directory" "$BIN/train" -q -j1 --config "$T/run.cfg" --data "$T/d" \
	-t "$T/t.lmtok" --micro-batch 2 --no-save --export-llmc "$T/nowhere/m.bin"
grep -q '"event":"update"' "$T/.out" && notok "train trained before refusing" || ok "... no update ran"
check "tok-train -o DIR still names a file inside it" "$BIN/tok-train" -q -v 300 -o "$T/adir" "$T/c.jsonl"
ls "$T/adir" | grep -q '^tok-[0-9a-f]*\.lmtok$' && ok "... tok-<sha>.lmtok" || notok "tok-train -o DIR" "$(ls "$T/adir")"
# an output that is a device, a FIFO or a link to nowhere is refused: the rename
# into place replaced /dev/full, a FIFO and the link itself with a regular file
# (a FIFO stands for the devices here: a test that failed must not replace one);
# a link to a file keeps pointing at it, at the new file
mkfifo "$T/ff"
check_fail "a FIFO as the output is refused, named" 1 "'$T/ff' is not a regular file" \
	"$BIN/gen-corpus" -q --docs 1 -o "$T/ff"
[ -p "$T/ff" ] && ok "... and stays a FIFO" || notok "FIFO replaced"
ln -s nowhere.jsonl "$T/dangling.jsonl"
check_fail "a link to nowhere as the output is refused" 1 "symbolic link to a file that is not there" \
	"$BIN/gen-corpus" -q --docs 1 -o "$T/dangling.jsonl"
printf 'old\n' > "$T/target.jsonl"
ln -s target.jsonl "$T/link.jsonl"
check "a link to a file as the output" "$BIN/gen-corpus" -q --docs 1 -o "$T/link.jsonl"
[ -L "$T/link.jsonl" ] && [ "$(readlink "$T/link.jsonl")" = target.jsonl ] && grep -q '"text"' "$T/target.jsonl" &&
	ok "... is written through: the link stays, its file holds the output" || notok "link replaced" "$(ls -l "$T")"
# tok-train's --eval texts are read after training: a missing one is found first
# (it was found after the tokenizer was written); outputs named '' or '-' or a
# missing directory DIR/ are refused before the work
check_fail "tok-train --eval of a missing file: exit 1 before training" 1 "'$T/missing.txt' (--eval)" \
	"$BIN/tok-train" -q -v 300 -o "$T/ev.lmtok" --eval "$T/missing.txt" "$T/c.jsonl"
[ ! -e "$T/ev.lmtok" ] && [ ! -s "$T/.out" ] && ok "... no tokenizer written, no record" || notok "--eval late"
check_fail "tok-train --eval with an empty label: exit 2" 2 "an empty label" \
	"$BIN/tok-train" -q -v 300 -o "$T/ev.lmtok" --eval "=$T/c.jsonl" "$T/c.jsonl"
check_fail "tok-train -o DIR/ of a missing directory: exit 1 before training" 1 "cannot write into '$T/nodir/'" \
	"$BIN/tok-train" -q -v 300 -o "$T/nodir/" "$T/c.jsonl"
[ ! -s "$T/.out" ] && ok "... no record on stdout" || notok "-o DIR/ late" "$(head -c 300 "$T/.out")"
check_fail "tok-train -o '': exit 2" 2 "an empty path" "$BIN/tok-train" -q -v 300 -o '' "$T/c.jsonl"
check_fail "tok-train -o -: exit 2 (it wrote a file named '-')" 2 "give a file name" \
	"$BIN/tok-train" -q -v 300 -o - "$T/c.jsonl"
check_fail "tok-train --max-bytes 0: exit 2 (it meant no limit)" 2 "'--max-bytes': '0' is zero" \
	"$BIN/tok-train" -q -v 300 --max-bytes 0 -o "$T/mb.lmtok" "$T/c.jsonl"
check_fail "tok-encode -o '': exit 2" 2 "an empty path" "$BIN/tok-encode" -q -t "$T/t.lmtok" -o '' "$T/c.jsonl"
check_fail "dedup-minhash --removed '': exit 2" 2 "an empty path" "$BIN/dedup-minhash" -q --removed '' "$T/c.jsonl"
for o in --strict "--max-doc-bytes 1k"; do
	check_fail "tok-encode --decode $o: exit 2 (it was accepted and did nothing)" 2 "only --doc-sep applies" \
		"$BIN/tok-encode" -q -t "$T/t.lmtok" --decode $o "$T/s.lmtoks"
done
check "tok-encode --format ids" "$BIN/tok-encode" -q -t "$T/t.lmtok" --format ids -o "$T/c.ids" "$T/c.jsonl"
grep '"event":"summary"' "$T/.out" | grep -q '"token_bytes":2' && ok "... its summary gives token_bytes, as tok-encode(1) says" ||
	notok "ids token_bytes" "$(cat "$T/.out")"
# far more threads than CPUs is said (it is slower, not faster), and changes nothing
if [ "$(nproc)" -lt 16 ]; then
	check "tok-train -j 64 on $(nproc) CPUs" "$BIN/tok-train" -q -v 300 -j 64 -o "$T/j64.lmtok" "$T/c.jsonl"
	grep -q "warning: -j 64: this process may use $(nproc) CPU" "$T/.err" && cmp -s "$T/j64.lmtok" "$T/t.lmtok" &&
		ok "... warns, and trains the same tokenizer" || notok "-j 64" "$(cat "$T/.err")"
fi
# links and devices as the outputs written after the work are found before it
ln -s nowhere.json "$T/dangling-hf.json"
check_fail "tok-train --export-hf to a link to nowhere: refused before training" 1 "symbolic link to a file that is not there" \
	"$BIN/tok-train" -q -v 300 -o "$T/lk.lmtok" --export-hf "$T/dangling-hf.json" "$T/c.jsonl"
[ ! -s "$T/.out" ] && [ ! -e "$T/lk.lmtok" ] && ok "... no record, no tokenizer" || notok "dangling export late"
check_fail "tok-train -o a FIFO: refused before training" 1 "is not a regular file" \
	"$BIN/tok-train" -q -v 300 -o "$T/ff" "$T/c.jsonl"
[ ! -s "$T/.out" ] && ok "... no record" || notok "FIFO output late"
finish
