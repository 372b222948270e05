#!/bin/sh
# tests/cli/tok.sh: tok-train and tok-encode as a user runs them.
#
# Training is deterministic and independent of the thread count; encoding output is
# independent of the thread count; encode then decode is byte-exact on every fixture,
# on random bytes and on NUL bytes; imports encode as tiktoken does (ids from the
# fixtures), also after a HuggingFace round trip; bad input exits 1 with a message
# naming the file (and line or member) and leaves no output behind; usage errors
# exit 2.
. tests/cli/lib.sh
TT=$BIN/tok-train
TE=$BIN/tok-encode

# ---- help, version, usage errors ----
check "tok-train --help exits 0" $TT --help
grep -q '^usage: tok-train' "$T/.out" && ok "tok-train --help prints usage on stdout" || notok "usage on stdout"
check "tok-encode --version exits 0" $TE --version
grep -q '^backends: cpu' "$T/.out" && ok "--version names the backends" || notok "--version names the backends"
check_fail "an unknown option is a usage error" 2 "Try 'tok-train --help'." $TT --frobnicate
check_fail "a bad number is a usage error naming the option" 2 "'--vocab-size'" $TT -v many -o "$T/x" "$DATA/text"
check_fail "tok-encode without -t is a usage error" 2 "no tokenizer" $TE "$DATA/text/en.txt"

# ---- training ----
check "train on the text fixtures" $TT -q -v 600 -o "$T/a.lmtok" "$DATA/text"
cp "$T/.out" "$T/train.jsonl"
grep -q '"event":"summary"' "$T/train.jsonl" && ok "JSONL summary on stdout" || notok "JSONL summary on stdout"
sha=$(sed -n 's/.*"event":"summary".*"sha256":"\([0-9a-f]*\)".*/\1/p' "$T/train.jsonl")
[ "$sha" = "$(sha256sum "$T/a.lmtok" | cut -d' ' -f1)" ] && ok "the printed sha256 is the file's" \
	|| notok "the printed sha256 is the file's" "printed '$sha'"
check "encode, reporting the stream's sha256" $TE -q -t "$T/a.lmtok" -o "$T/e.lmtoks" "$DATA/text/en.txt"
grep -q "\"sha256\":\"$(sha256sum "$T/e.lmtoks" | cut -d' ' -f1)\"" "$T/.out" && ok "tok-encode's printed sha256 is the file's" \
	|| notok "tok-encode sha256" "$(cat "$T/.out")"
grep -q '"vocab_size":600' "$T/train.jsonl" && ok "vocabulary size as asked" || notok "vocabulary size" "$(cat "$T/train.jsonl")"
check "train again with 1 thread" $TT -q -j1 -v 600 -o "$T/b.lmtok" "$DATA/text"
same "same inputs give the same tokenizer, whatever the threads" "$T/a.lmtok" "$T/b.lmtok"
check "train with 5 threads" $TT -q -j5 -v 600 -o "$T/b5.lmtok" "$DATA/text"
same "5 threads: the same tokenizer" "$T/a.lmtok" "$T/b5.lmtok"
check "--ties id is the default" $TT -q --ties id -v 600 -o "$T/tid.lmtok" "$DATA/text"
same "--ties id: the default's tokenizer" "$T/a.lmtok" "$T/tid.lmtok"
for j in 1 3; do
	check "--ties hf with $j threads" $TT -q -j$j --ties hf -v 600 -o "$T/thf$j.lmtok" "$DATA/text"
done
same "--ties hf: the same tokenizer with 1 and 3 threads" "$T/thf1.lmtok" "$T/thf3.lmtok"
grep -q '"event":"trained",.*"ties":"hf"' "$T/.out" && ok "the trained record says ties hf" ||
	notok "trained record ties" "$(grep trained "$T/.out")"
check "default ties, JSONL" $TT -q -v 600 -o "$T/tdef.lmtok" "$DATA/text"
grep -q '"event":"trained",.*"ties":"id"' "$T/.out" && ok "... and id by default" ||
	notok "trained record default ties" "$(grep trained "$T/.out")"
grep '"event":"trained"' "$T/.out" | jq -e '.steps >= 1 and .steps <= .merges and .setup_seconds > 0 and
	.step_seconds > 0 and .pick_seconds >= 0 and
	.setup_seconds + .step_seconds + .pick_seconds <= .merge_seconds' > /dev/null &&
	ok "the trained record splits merge_seconds into set-up, steps and picking" ||
	notok "trained record parts" "$(grep trained "$T/.out")"
cmp -s "$T/a.lmtok" "$T/thf1.lmtok" && notok "--ties hf changes the merge order on these texts" \
	|| ok "--ties hf changes the merge order on these texts"
check_fail "--ties takes id or hf" 2 "--ties 'bytes': expected id or hf" $TT -q --ties bytes -v 600 -o "$T/x.lmtok" "$DATA/text"
check "train into a directory" $TT -q -v 600 -o "$T/" "$DATA/text"
[ -f "$T/tok-$(echo "$sha" | cut -c1-16).lmtok" ] && ok "-o DIR/ names the file by its sha256" || notok "-o DIR/ naming" "$(ls "$T")"
check "train with --max-bytes and a custom regex" $TT -q -v 400 --max-bytes 1000 --regex '\w+|\W' -o "$T/c.lmtok" "$DATA/text"
grep -q '"input_bytes":[0-9]\{1,3\},' "$T/.out" && ok "--max-bytes bounds the input" || notok "--max-bytes bounds the input" "$(cat "$T/.out")"
# --max-bytes keeps the documents before the first that does not fit, and none after
# it, even one that would fit (-j2 read on past the stop, and took the short one)
{
	for i in 1 2 3 4 5 6 7 8 9 10; do printf '{"text":"%0100d"}\n' "$i"; done
	printf '{"text":"%0500d"}\n' 11
	printf '{"text":"short one"}\n'
} > "$T/fit.jsonl"
for j in 1 2 3; do
	check "--max-bytes 1200, -j$j" $TT -q -j$j -v 300 --max-bytes 1200 -o "$T/fit$j.lmtok" "$T/fit.jsonl"
	grep -q '"event":"counted","documents":10,"bytes":1000,' "$T/.out" \
		&& ok "--max-bytes, -j$j: the 10 documents before the one that does not fit" \
		|| notok "--max-bytes, -j$j: the prefix that fits" "$(grep counted "$T/.out")"
done

# ---- encoding: threads, round trips ----
for j in 1 2 3; do
	check "encode with $j threads" $TE -q -j$j -t "$T/a.lmtok" --eos -o "$T/s$j.lmtoks" "$DATA/text"
done
same "output does not depend on the thread count (1 vs 2)" "$T/s1.lmtoks" "$T/s2.lmtoks"
same "output does not depend on the thread count (1 vs 3)" "$T/s1.lmtoks" "$T/s3.lmtoks"
# several batches (the first three are 1, 2 and 4 MiB; each is written while the
# next is encoded): every format the same for any thread count
$BIN/gen-corpus -q --docs 12000 --seed 3 -o "$T/many.jsonl" > /dev/null
for j in 1 2 3; do
	check "encode 12000 documents, several batches, with $j threads" \
		$TE -q -j$j -t "$T/a.lmtok" --eos -o "$T/m$j.lmtoks" "$T/many.jsonl"
	cp "$T/.out" "$T/m$j.summary"
	$TE -q -j$j -t "$T/a.lmtok" --format ids -o "$T/m$j.ids" "$T/many.jsonl" > /dev/null
	$TE -q -j$j -t "$T/a.lmtok" --format llmc -o "$T/m$j.bin" "$T/many.jsonl" > /dev/null
done
jq -e '.documents == 12000 and .bytes > 3000000' "$T/m2.summary" > /dev/null \
	&& ok "... 12000 documents of more than 3 MB" || notok "several batches' summary" "$(cat "$T/m2.summary")"
[ "$(wc -l < "$T/m2.ids")" = 12000 ] && ok "... an ids line a document" || notok "ids lines" "$(wc -l < "$T/m2.ids")"
for j in 2 3; do
	same "several batches: the stream with $j threads is 1 thread's" "$T/m1.lmtoks" "$T/m$j.lmtoks"
	same "several batches: ids with $j threads are 1 thread's" "$T/m1.ids" "$T/m$j.ids"
	same "several batches: llm.c's tokens with $j threads are 1 thread's" "$T/m1.bin" "$T/m$j.bin"
done
$TE -t "$T/a.lmtok" --decode "$T/m2.lmtoks" > "$T/m2.back"
jq -j '.text' "$T/many.jsonl" > "$T/many.want"
same "several batches decode to the documents' texts, in order" "$T/many.want" "$T/m2.back"
# one document of 3 MB (a text file is one by default): the threads share it,
# cut where the pieces stay the same; each thread count gives 1 thread's output
sed 's/$/ <|endoftext|>/' "$T/many.want" > "$T/one.txt"
for j in 1 3; do
	$TE -q -j$j -t "$T/a.lmtok" --eos -o "$T/one$j.lmtoks" "$T/one.txt" > "$T/one$j.summary"
	$TE -q -j$j -t "$T/a.lmtok" --eos --allow-special -o "$T/ones$j.lmtoks" "$T/one.txt" > /dev/null
	$TT -q -j$j -v 600 -o "$T/one$j.lmtok" "$T/one.txt" > "$T/one$j.train"
done
jq -e '.documents == 1 and .bytes > 3000000' "$T/one3.summary" > /dev/null \
	&& ok "one document of more than 3 MB" || notok "one document" "$(cat "$T/one3.summary")"
same "one long document: the stream with 3 threads is 1 thread's" "$T/one1.lmtoks" "$T/one3.lmtoks"
same "... with --allow-special too" "$T/ones1.lmtoks" "$T/ones3.lmtoks"
cmp -s "$T/one1.lmtoks" "$T/ones1.lmtoks" && notok "--allow-special made the special tokens" \
	|| ok "--allow-special made the special tokens"
$TE -t "$T/a.lmtok" --decode "$T/one3.lmtoks" > "$T/one3.back"
same "... and it decodes to the document" "$T/one.txt" "$T/one3.back"
grep -q '"documents":1,' "$T/one3.train" && ok "tok-train counted one document" \
	|| notok "tok-train: one document" "$(cat "$T/one3.train")"
same "one long document: tok-train with 3 threads makes 1 thread's tokenizer" "$T/one1.lmtok" "$T/one3.lmtok"
# ... and the parts give what the whole gives: gpt2's cut rule against a custom regex
# that splits as gpt2 does, which tok-encode and tok-train cut where they guess a
# piece starts and settle where the parts' pieces meet (the same ids; tokenizers
# that encode a text to the same ids)
re="(?:'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+)"
for k in cut whole; do
	if [ $k = cut ]; then set -- --pattern gpt2; else set -- --regex "$re"; fi
	$TT -q --import "tiktoken:$DATA/tiktoken/gpt2-3000.tiktoken" "$@" --special '<|endoftext|>=3000' \
		-o "$T/imp-$k.lmtok" > "$T/imp-$k.out"
	$TE -q -j3 -t "$T/imp-$k.lmtok" --allow-special --format ids -o "$T/one-$k.ids" "$T/one.txt" > /dev/null
	$TT -q -j3 -v 600 "$@" -o "$T/one-$k.lmtok" "$T/one.txt" > /dev/null
	$TE -q -t "$T/one-$k.lmtok" --format ids -o "$T/onetok-$k.ids" "$T/many.want" > /dev/null
done
grep -q '"pattern":"custom"' "$T/imp-whole.out" && grep -q '"pattern":"gpt2"' "$T/imp-cut.out" \
	&& ok "the reference's pattern is custom, the other gpt2" || notok "the reference's pattern" "$(cat "$T"/imp-*.out)"
same "one long document in parts encodes to the ids of the whole (-j3, --allow-special)" "$T/one-whole.ids" "$T/one-cut.ids"
same "... and tok-train counts it in parts to the tokenizer of the whole" "$T/onetok-whole.ids" "$T/onetok-cut.ids"
# a custom regex whose pieces (3 bytes from the part's start) never meet the whole's:
# each guessed part is encoded again on one thread, the same ids at -j1 and -j3
$TT -q --import "tiktoken:$DATA/tiktoken/gpt2-3000.tiktoken" --regex '(?s).{1,3}' -o "$T/three.lmtok" > /dev/null
for j in 1 3; do
	$TE -q -j$j -t "$T/three.lmtok" -o "$T/three$j.lmtoks" "$T/one.txt" > /dev/null
done
same "one long document, a custom regex of 3-byte pieces: -j3 gives -j1's stream" "$T/three1.lmtoks" "$T/three3.lmtoks"
$TE -t "$T/three.lmtok" --decode "$T/three3.lmtoks" > "$T/three3.back"
same "... and it decodes to the document" "$T/one.txt" "$T/three3.back"
# ... and a long document in other scripts, without an ASCII letter: Japanese, Chinese,
# Korean and Telugu (whose vowel signs are marks), cut after letters beyond ASCII.
# o200k's letter runs take marks, so a cut before a mark would change its pieces
grep -hv '[A-Za-z]' "$DATA/text/cjk.txt" "$DATA/text/te.txt" > "$T/script1.txt"
for i in 1 2 3 4 5 6 7 8 9 10 11; do cat "$T/script1.txt" "$T/script1.txt" > "$T/script2.txt" && mv "$T/script2.txt" "$T/script1.txt"; done
cat > "$T/o200k.re" <<'RE'
(?:[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)
RE
for p in gpt2 o200k; do
	for k in cut whole; do
		if [ $k = cut ]; then set -- --pattern $p; elif [ $p = gpt2 ]; then set -- --regex "$re"; else set -- --regex "$(cat "$T/o200k.re")"; fi
		$TT -q --import "tiktoken:$DATA/tiktoken/gpt2-3000.tiktoken" "$@" -o "$T/simp-$p-$k.lmtok" > /dev/null
		$TE -q -j3 -t "$T/simp-$p-$k.lmtok" --format ids -o "$T/script-$p-$k.ids" "$T/script1.txt" > "$T/script-$p-$k.out"
		$TT -q -j3 -v 700 "$@" -o "$T/script-$p-$k.lmtok" "$T/script1.txt" > /dev/null
		$TE -q -t "$T/script-$p-$k.lmtok" --format ids -o "$T/scripttok-$p-$k.ids" "$T/script1.txt" > /dev/null
	done
	jq -e '.documents == 1 and .bytes > 1000000' "$T/script-$p-cut.out" > /dev/null \
		&& same "one document of 1 MB without ASCII letters, $p: in parts, the ids of the whole (-j3)" \
			"$T/script-$p-whole.ids" "$T/script-$p-cut.ids" || notok "one document in other scripts" "$(cat "$T/script-$p-cut.out")"
	same "... and tok-train counts it in parts to the tokenizer of the whole ($p)" "$T/scripttok-$p-whole.ids" "$T/scripttok-$p-cut.ids"
done
for j in 1 3; do
	$TT -q -j$j -t "$T/a.lmtok" --fertility "$T/one.txt" | grep '"fertility"' > "$T/onefert$j"
done
grep -q '"documents":1,' "$T/onefert3" && same "... --fertility on it: the same record with 3 threads as with 1" \
	"$T/onefert1" "$T/onefert3" || notok "--fertility on one long document" "$(cat "$T/onefert3")"
for f in "$DATA"/text/*; do
	b=$(basename "$f")
	$TE -q -t "$T/a.lmtok" -o "$T/$b.lmtoks" "$f" > /dev/null && $TE -t "$T/a.lmtok" --decode "$T/$b.lmtoks" > "$T/$b.back"
	same "encode/decode round-trips $b" "$f" "$T/$b.back"
done
# random bytes, deterministic: an LCG in awk, C locale so %c writes single bytes
# (MINSTD: exact in awk's doubles; the top bits are incompressible enough for gzip)
LC_ALL=C awk 'BEGIN { x = 12345; for (i = 0; i < 200000; i++) { x = (x * 16807) % 2147483647; printf "%c", int(x / 8388608) % 256 } }' > "$T/random.bin"
[ "$(wc -c < "$T/random.bin")" = 200000 ] && ok "200000 random bytes made" || notok "random bytes" "$(wc -c < "$T/random.bin")"
# one word of 1 MB (-p none): the trainer's figure counts its working space, the
# changes a merge with many sites notes (it left out about three quarters of it),
# and stays within the process's peak
LC_ALL=C awk 'BEGIN { x = 7; for (i = 0; i < 1000000; i++) { x = (x * 16807) % 2147483647; printf "%c", 97 + int(x / 8388608) % 10 } }' > "$T/word.txt"
for j in 1 3; do
	$TT -q -j$j -p none --no-special -v 400 -o "$T/word$j.lmtok" "$T/word.txt" > "$T/word$j.out"
	jq -e -s '(.[] | select(.event == "trained") | .trainer_peak_bytes) as $p | (.[] | select(.event == "summary") | .peak_rss) as $r
		| $p >= 15000000 and $p <= $r' "$T/word$j.out" > /dev/null \
		&& ok "one word of 1 MB, -j$j: trainer_peak_bytes over 15 bytes a byte, within peak_rss" \
		|| notok "trainer_peak_bytes of one long word" "$(grep -o '"trainer_peak_bytes":[0-9]*\|"peak_rss":[0-9]*' "$T/word$j.out")"
done
check "train with a BOS token too" $TT -q -v 600 -s '<|endoftext|>' -s '<|bos|>' --bos '<|bos|>' -o "$T/bo.lmtok" "$DATA/text"
grep -q '"eos_id":598,"bos_id":599' "$T/.out" && ok "EOS by convention, BOS as named" || notok "roles" "$(cat "$T/.out")"
$TE -q -t "$T/bo.lmtok" --bos --eos -o "$T/r.lmtoks" "$T/random.bin" > /dev/null &&
	$TE -t "$T/bo.lmtok" --decode "$T/r.lmtoks" > "$T/random.back"
same "random bytes round-trip (invalid UTF-8, NUL), BOS/EOS markers removed" "$T/random.bin" "$T/random.back"
printf 'a\000b\000\000c\n\000' > "$T/nul.bin"
$TE -q -t "$T/a.lmtok" -o "$T/n.lmtoks" "$T/nul.bin" > /dev/null && $TE -t "$T/a.lmtok" --decode "$T/n.lmtoks" > "$T/nul.back"
same "NUL bytes round-trip" "$T/nul.bin" "$T/nul.back"
cat "$DATA/text/en.txt" | $TE -q -t "$T/a.lmtok" - > "$T/stdin.lmtoks"
$TE -t "$T/a.lmtok" --decode < "$T/stdin.lmtoks" > "$T/stdin.back"
same "stdin to stdout and back through pipes" "$DATA/text/en.txt" "$T/stdin.back"
printf 'one<|endoftext|>two<|endoftext|>three' > "$T/sep.txt"
$TE -q -t "$T/a.lmtok" --doc-sep '<|endoftext|>' -o "$T/sep.lmtoks" "$T/sep.txt" > "$T/.out"
grep -q '"documents":3' "$T/.out" && ok "--doc-sep splits three documents" || notok "--doc-sep" "$(cat "$T/.out")"
$TE -t "$T/a.lmtok" --decode --doc-sep '<|endoftext|>' "$T/sep.lmtoks" > "$T/sep.back"
same "--decode --doc-sep puts the separator back" "$T/sep.txt" "$T/sep.back"
script -qec "$TE -t $T/a.lmtok $DATA/text/en.txt" /dev/null > "$T/tty.out" 2>&1 < /dev/null
rc=$?
[ "$rc" = 2 ] && grep -q "refusing to write a binary token stream to a terminal" "$T/tty.out" \
	&& ok "a binary stream is not written to a terminal (exit 2)" || notok "terminal check" "status $rc: $(head -c 300 "$T/tty.out")"

# ---- special tokens ----
printf 'hi<|endoftext|>there' > "$T/special.txt"
$TE -q -t "$T/a.lmtok" --format ids "$T/special.txt" > "$T/plain.ids"
$TE -q -t "$T/a.lmtok" --format ids --allow-special "$T/special.txt" > "$T/allowed.ids"
eos=$(sed -n 's/.*"eos_id":\([0-9]*\).*/\1/p' "$T/train.jsonl")
grep -qw "$eos" "$T/plain.ids" && notok "special token text is ordinary text by default" || ok "special token text is ordinary text by default"
grep -qw "$eos" "$T/allowed.ids" && ok "--allow-special turns it into the special token" || notok "--allow-special" "$(cat "$T/allowed.ids")"

# ---- llm.c format ----
check "write llm.c's format" $TE -q -t "$T/a.lmtok" --format llmc -o "$T/llmc.bin" "$DATA/text/en.txt" "$DATA/text/code.c"
hdr=$(od -An -t d4 -N 12 "$T/llmc.bin" | tr -s ' ')
ntok=$(echo "$hdr" | cut -d' ' -f4)
[ "$(echo "$hdr" | cut -d' ' -f2,3)" = "20240520 1" ] && ok "llm.c header: magic 20240520, version 1" || notok "llm.c header" "$hdr"
[ "$(wc -c < "$T/llmc.bin")" = $((1024 + 2 * ntok)) ] && ok "llm.c file is 1024 + 2 x $ntok bytes" || notok "llm.c size"
first=$(od -An -t u2 -j 1024 -N 2 "$T/llmc.bin" | tr -d ' ')
[ "$first" = "$eos" ] && ok "llm.c: an EOS token starts each document" || notok "llm.c EOT first" "first token $first, eos $eos"
# a vocabulary over 65536 (GPT-2's 3000 ranks, its EOS placed at 70000, the ids
# between held by unused specials): llm.c's version 2, uint32 tokens
$TT -q --import "tiktoken:$DATA/tiktoken/gpt2-3000.tiktoken" --pattern gpt2 --special '<|endoftext|>=70000' \
	--eos '<|endoftext|>' -o "$T/big.lmtok" > /dev/null
check_fail "--import with one special string at two ids is a usage error (it named the rank file)" 2 \
	"option '--special': '<|endoftext|>' given twice" $TT -q --import "tiktoken:$DATA/tiktoken/gpt2-3000.tiktoken" \
	--pattern gpt2 --special '<|endoftext|>=3000' --special '<|endoftext|>=3001' -o "$T/twice.lmtok"
nothing_left "no tokenizer written for it" "$T" twice.lmtok
check_fail "--import with an id too large for any table is refused, not read as part of the string" 1 "is out of range" \
	$TT -q --import "tiktoken:$DATA/tiktoken/gpt2-3000.tiktoken" --pattern gpt2 --special '<a>=99999999999999999999999' \
	-o "$T/twice.lmtok"
nothing_left "no tokenizer written for it" "$T" twice.lmtok
check_fail "--import with an empty special string is a usage error" 2 "option '--special': the special token is empty" \
	$TT -q --import "tiktoken:$DATA/tiktoken/gpt2-3000.tiktoken" --pattern gpt2 --special '' -o "$T/twice.lmtok"
check "llm.c's format for a vocabulary of 70001" $TE -q -t "$T/big.lmtok" --format llmc -o "$T/big.bin" "$DATA/text/en.txt" "$DATA/text/code.c"
jq -e '.token_bytes == 4' "$T/.out" > /dev/null && ok "... the summary says 4 bytes a token" || notok "big summary" "$(cat "$T/.out")"
hdr=$(od -An -t d4 -N 12 "$T/big.bin" | tr -s ' ')
bn=$(echo "$hdr" | cut -d' ' -f4)
[ "$(echo "$hdr" | cut -d' ' -f2,3)" = "20240520 2" ] && [ "$(wc -c < "$T/big.bin")" = $((1024 + 4 * bn)) ] \
	&& ok "llm.c header: version 2, 1024 + 4 x $bn bytes" || notok "llm.c v2 header" "$hdr"
# the tokens are --format ids' for the same tokenizer, with the EOS before each document
$TE -q -t "$T/big.lmtok" --format ids -o "$T/big.ids" "$DATA/text/en.txt" "$DATA/text/code.c"
od -An -v -t u4 -j 1024 "$T/big.bin" | tr -s ' ' '\n' | grep -v '^$' > "$T/big.u32"
[ "$(grep -c '^70000$' "$T/big.u32")" = 2 ] && [ "$(head -1 "$T/big.u32")" = 70000 ] \
	&& [ "$(grep -v '^70000$' "$T/big.u32" | tr '\n' ' ')" = "$(tr '\n' ' ' < "$T/big.ids" | tr -s ' ')" ] \
	&& ok "uint32 tokens: EOS 70000 before each of the 2 documents, the rest --format ids' ids" \
	|| notok "llm.c v2 tokens" "$(head -5 "$T/big.u32" | tr '\n' ' ')"

# ---- GPT-2's own pair of files (encoder.json, vocab.bpe), made from an HF export ----
$TT -q --import "tiktoken:$DATA/tiktoken/gpt2-3000.tiktoken" --pattern gpt2 -o "$T/g2.lmtok" --export-hf "$T/g2.json"
jq '.model.vocab' "$T/g2.json" > "$T/encoder.json"
{ echo '#version: 0.2'; jq -r '.model.merges[] | if type == "array" then join(" ") else . end' "$T/g2.json"; } > "$T/vocab.bpe"
check "GPT-2's encoder.json and vocab.bpe import" $TT -q --import "gpt2:$T/encoder.json,$T/vocab.bpe" -o "$T/g2b.lmtok"
$TE -t "$T/g2.lmtok" --format ids -o "$T/g2a.ids" "$DATA/text/en.txt" "$DATA/text/code.c"
$TE -t "$T/g2b.lmtok" --format ids -o "$T/g2b.ids" "$DATA/text/en.txt" "$DATA/text/code.c"
[ -s "$T/g2a.ids" ] && cmp -s "$T/g2a.ids" "$T/g2b.ids" && ok "and encodes id for id as the tiktoken import" ||
	notok "GPT-2 pair import encodes differently" "$(cmp "$T/g2a.ids" "$T/g2b.ids" 2>&1)"
: > "$T/empty.bpe"
check_fail "an empty vocab.bpe is refused, naming it" 1 "empty.bpe': line 1: expected GPT-2's \"#version:\" line" \
	$TT -q --import "gpt2:$T/encoder.json,$T/empty.bpe" -o "$T/x.lmtok"
sed 1d "$T/vocab.bpe" > "$T/noversion.bpe"
check_fail "a vocab.bpe without its version line is refused" 1 "noversion.bpe': line 1: expected" \
	$TT -q --import "gpt2:$T/encoder.json,$T/noversion.bpe" -o "$T/x.lmtok"
echo '#version: 0.2' > "$T/nomerges.bpe"
check_fail "a vocab.bpe with no merges is refused" 1 "nomerges.bpe': no merges after the version line" \
	$TT -q --import "gpt2:$T/encoder.json,$T/nomerges.bpe" -o "$T/x.lmtok"

# ---- imports encode as tiktoken does ----
for enc in gpt2 cl100k o200k; do
	check "import the $enc fixture with an HF export" $TT -q --import "tiktoken:$DATA/tiktoken/$enc-3000.tiktoken" \
		--pattern $enc --special '<|endoftext|>=3000' -o "$T/$enc.lmtok" --export-hf "$T/$enc.json"
	check "import the HF export" $TT -q --import "hf:$T/$enc.json" -o "$T/$enc-hf.lmtok"
	bad=
	for f in "$DATA"/text/*; do
		b=$(basename "$f")
		$TE -q -t "$T/$enc.lmtok" --format ids "$f" > "$T/$b.$enc.ids"
		$TE -q -t "$T/$enc-hf.lmtok" --format ids "$f" > "$T/$b.$enc-hf.ids"
		cmp -s "$T/$b.$enc.ids" "$DATA/tiktoken/$b.$enc-3000" || bad="$bad $b"
		cmp -s "$T/$b.$enc-hf.ids" "$DATA/tiktoken/$b.$enc-3000" || bad="$bad $b(hf)"
	done
	[ -z "$bad" ] && ok "$enc: ids equal tiktoken's on every fixture, also after tokenizer.json" || notok "$enc ids" "differ:$bad"
done

# ---- character-level vocabulary ----
check "train a character-level tokenizer" $TT -q --chars -v 400 -o "$T/ch.lmtok" "$DATA/text"
grep -q '"kind":"chars","merges":0' "$T/.out" && ok "--chars learns no merges" || notok "--chars" "$(cat "$T/.out")"
$TE -q -t "$T/ch.lmtok" --format ids "$DATA/text/te.txt" > "$T/te.ids"
n=$(wc -w < "$T/te.ids")
chars=$(LC_ALL=C.UTF-8 wc -m < "$DATA/text/te.txt")
[ "$n" = "$chars" ] && ok "one token per character of the Telugu sample ($n)" || notok "chars per token" "$n tokens, $chars characters"
$TE -q -t "$T/ch.lmtok" -o "$T/ch.lmtoks" "$T/random.bin" > /dev/null && $TE -t "$T/ch.lmtok" --decode "$T/ch.lmtoks" > "$T/ch.back"
same "--chars tokenizers round-trip random bytes through the byte fallback" "$T/random.bin" "$T/ch.back"
check_fail "--chars with --pattern is a usage error" 2 "--chars sets its own pattern" $TT --chars -p gpt2 -o "$T/x" "$DATA/text"
check_fail "--chars with --ties is a usage error (no merges to order)" 2 "--ties and" $TT --chars --ties hf -o "$T/x" "$DATA/text"
check_fail "--chars with --progress-every is a usage error (no merges to report)" 2 "--progress-every do not apply" \
	$TT --chars --progress-every 10 -o "$T/x" "$DATA/text"

# ---- fertility ----
check "fertility report" $TT -t "$T/a.lmtok" --fertility --eval "telugu=$DATA/text/te.txt" --eval "code=$DATA/text/code.c" "$DATA/text"
n=$(grep -c '"event":"fertility"' "$T/.out")
[ "$n" = 11 ] && ok "one fertility record per source, one for all, one per --eval" || notok "fertility records" "$n records"
grep '"label":"telugu"' "$T/.out" | grep -q '"tokens_per_byte":' && ok "labelled evaluation file reported" || notok "label"
# the label ends at the first '=': a file named with one takes a label
cp "$DATA/text/te.txt" "$T/a=b.txt"
check "--eval x=a=b.txt reads the file a=b.txt" $TT -t "$T/a.lmtok" --fertility --eval "x=$T/a=b.txt" "$DATA/text"
grep -q '"label":"x"' "$T/.out" && ok "... labelled x" || notok "eval label with =" "$(grep -c fertility "$T/.out")"

# ---- -o and --export-hf are committed together ----
mkdir -p "$T/both" "$T/both/hf-is-a-dir"
check_fail "--export-hf onto a directory fails" 1 "hf-is-a-dir" \
	$TT -q -v 300 -o "$T/both/tok.lmtok" --export-hf "$T/both/hf-is-a-dir" "$DATA/text"
[ ! -e "$T/both/tok.lmtok" ] && [ -z "$(ls -A "$T/both/hf-is-a-dir")" ] &&
	ok "... and leaves no -o file either (all outputs or none)" || notok "left behind" "$(ls -R "$T/both")"
check "both outputs when both can be written" $TT -q -v 300 -o "$T/both/tok.lmtok" --export-hf "$T/both/tok.json" "$DATA/text"
[ -s "$T/both/tok.lmtok" ] && [ -s "$T/both/tok.json" ] && ok "... both in place" || notok "both outputs"

# ---- bad input: exit 1, the file named, nothing left behind ----
mkdir "$T/out"
check_fail "missing input file" 1 "nope.txt" $TE -t "$T/a.lmtok" -o "$T/out/x.lmtoks" "$T/nope.txt"
mkdir -p "$T/empty-dir"
check_fail "an empty directory has no documents (and reads no NULL listing)" 1 "no documents" $TT -q -v 300 -o "$T/x.lmtok" "$T/empty-dir"
nothing_left "no output after a missing input" "$T/out" x.lmtoks
check_fail "missing tokenizer file" 1 "none.lmtok" $TE -t "$T/none.lmtok" -o "$T/out/x.lmtoks" "$DATA/text/en.txt"
size=$(wc -c < "$T/a.lmtok")
head -c $((size - 10)) "$T/a.lmtok" > "$T/trunc.lmtok"
check_fail "truncated tokenizer" 1 "trunc.lmtok': file is" $TE -t "$T/trunc.lmtok" -o "$T/out/x.lmtoks" "$DATA/text/en.txt"
head -c 40 "$T/a.lmtok" > "$T/trunc2.lmtok"
check_fail "tokenizer truncated inside the header" 1 "trunc2.lmtok': truncated header" $TE -t "$T/trunc2.lmtok" -o "$T/out/x.lmtoks" "$DATA/text/en.txt"
# flip one byte in each field: magic, major, minor, header size, payload size,
# payload sha256, header crc, vocab count (format field), and the payload
for spec in 0:magic 8:major 10:minor 12:header_size 16:payload_size 30:payload_sha256 57:header_crc \
	    64:n_vocab 80:eos_id 200:payload; do
	off=${spec%%:*}; what=${spec#*:}
	cp "$T/a.lmtok" "$T/bad.lmtok"
	orig=$(od -An -t u1 -j "$off" -N 1 "$T/bad.lmtok" | tr -d ' ')
	printf "$(printf '\\%03o' $(( (orig + 1) % 256 )))" | dd of="$T/bad.lmtok" bs=1 seek="$off" conv=notrunc 2>/dev/null
	check_fail "corrupted $what (byte $off) is rejected" 1 "bad.lmtok'" $TE -t "$T/bad.lmtok" -o "$T/out/x.lmtoks" "$DATA/text/en.txt"
done
nothing_left "no output after any corrupted tokenizer" "$T/out" x.lmtoks
check_fail "a token stream is not a tokenizer" 1 "this is an lmt token stream, expected an lmt tokenizer" \
	$TE -t "$T/s1.lmtoks" -o "$T/out/x.lmtoks" "$DATA/text/en.txt"
cp "$T/a.lmtok" "$T/v2.lmtok"
printf '\002' | dd of="$T/v2.lmtok" bs=1 seek=8 conv=notrunc 2>/dev/null
check_fail "a newer major version is refused" 1 "tokenizer format version 2.0, this build reads 1.x" \
	$TE -t "$T/v2.lmtok" -o "$T/out/x.lmtoks" "$DATA/text/en.txt"
check_fail "asking for a vocabulary below 256 + specials is a usage error" 2 "smaller than 256 byte tokens + 2 special" \
	$TT -v 257 -s '<|a|>' -s '<|b|>' -o "$T/out/v.lmtok" "$DATA/text"
nothing_left "no tokenizer written" "$T/out" v.lmtok
printf '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},\n "pre_tokenizer": {"type": "ByteLevel", "use_regex": true}}\n' > "$T/small.json"
check_fail "a tokenizer with fewer than 256 byte tokens is refused, naming the file" 1 "small.json': byte 0x00 has no token" \
	$TT --import "hf:$T/small.json" -o "$T/out/small.lmtok"
nothing_left "no tokenizer written from it" "$T/out" small.lmtok
check_fail "a bad role is a usage error found before any work" 2 "'<|x|>' is not one of the special tokens" \
	$TT -v 300 --eos '<|x|>' -o "$T/out/r.lmtok" "$DATA/text"
# an empty special matched everywhere and counting never moved on (it hung); one
# given twice was caught only after training, and with --chars not at all
for mode in "" --chars; do
	check_fail "an empty special token is a usage error before any work ${mode:-(BPE)}" 2 "special token is empty" \
		timeout 60 $TT $mode -v 300 -s '' -o "$T/out/s.lmtok" "$DATA/text"
	check_fail "a special token given twice is a usage error before any work ${mode:-(BPE)}" 2 "'<|a|>' given twice" \
		timeout 60 $TT $mode -v 300 -s '<|a|>' -s '<|b|>' -s '<|a|>' -o "$T/out/s.lmtok" "$DATA/text"
	[ -s "$T/.out" ] && notok "nothing counted before the special tokens are checked ${mode:-(BPE)}" "$(head -c 300 "$T/.out")" \
		|| ok "nothing counted before the special tokens are checked ${mode:-(BPE)}"
done
nothing_left "no tokenizer written for bad special tokens" "$T/out" s.lmtok
check_fail "--fertility cannot read stdin twice" 2 "not stdin" $TT -v 300 --fertility -o "$T/out/f.lmtok" -
check_fail "training options with -t are refused" 2 "--vocab-size applies to training" $TT -t "$T/a.lmtok" -v 300 --fertility "$DATA/text"
check_fail "--decode refuses encoding options" 2 "--decode takes no encoding options" $TE -t "$T/a.lmtok" --decode --format ids "$T/s1.lmtoks"
printf '{"text":"fine"}\n{"text": "also fine"}\n{"text": broken\n' > "$T/bad.jsonl"
check_fail "malformed JSONL names file and line (tok-train)" 1 "bad.jsonl': line 3: invalid JSON" \
	$TT -v 300 -o "$T/out/j.lmtok" "$T/bad.jsonl"
check_fail "malformed JSONL names file and line (tok-encode)" 1 "bad.jsonl': line 3" \
	$TE -t "$T/a.lmtok" -o "$T/out/j.lmtoks" "$DATA/text/en.txt" "$T/bad.jsonl"
nothing_left "no output after malformed JSONL" "$T/out" j.lmtok
mkdir -p "$T/arch"
head -c 300000 "$T/random.bin" > "$T/arch/member.txt"
cp "$DATA/text/en.txt" "$T/arch/first.txt"
(cd "$T/arch" && tar czf ../arch.tar.gz first.txt member.txt)
size=$(wc -c < "$T/arch.tar.gz")
head -c $((size / 2)) "$T/arch.tar.gz" > "$T/cut.tar.gz"
check_fail "an unreadable archive member names archive and member" 1 "cut.tar.gz' member 'member.txt'" \
	$TE -t "$T/a.lmtok" -o "$T/out/a.lmtoks" "$T/cut.tar.gz"
nothing_left "no output after the bad archive" "$T/out" a.lmtoks
check_fail "decoding with another tokenizer is refused" 1 "was encoded with tokenizer" \
	$TE -t "$T/gpt2.lmtok" --decode "$T/s1.lmtoks"
head -c 300 "$T/s1.lmtoks" > "$T/cut.lmtoks"
check_fail "a truncated token stream is refused" 1 "cut.lmtoks'" $TE -t "$T/a.lmtok" --decode "$T/cut.lmtoks"

# ---- interrupted: no temporary left ----
for i in 1 2 3 4 5 6 7 8; do cat "$T/random.bin" "$DATA"/text/*; done > "$T/big1.txt"
for i in 1 2 3 4 5 6 7 8; do cat "$T/big1.txt"; done > "$T/big.txt"
$TE -q -j1 -t "$T/o200k.lmtok" -o "$T/out/big.lmtoks" "$T/big.txt" &
pid=$!
sleep 0.3
kill -TERM $pid 2>/dev/null
wait $pid 2>/dev/null
rc=$?
[ "$rc" = 143 ] && ok "SIGTERM stops tok-encode" || ok "tok-encode finished before SIGTERM (status $rc)"
nothing_left "no temporary file after SIGTERM" "$T/out" big.lmtoks
# write errors name the file and give the errno
check_fail "ids into a full stdout" 1 "'<stdout>': write: No space left on device" \
	sh -c '"$@" > /dev/full' sh $TE -q -t "$T/a.lmtok" --format ids "$DATA/text/en.txt"
check_fail "llm.c's format past RLIMIT_FSIZE" 1 "fsz.bin': write: File too large" \
	sh -c 'trap "" XFSZ; ulimit -f 2; exec "$@"' sh $TE -q -t "$T/a.lmtok" --format llmc -o "$T/out/fsz.bin" \
	"$DATA/text/en.txt" "$DATA/text/code.c"
nothing_left "no llm.c file after the write error" "$T/out" fsz.bin
# the same failures while a later batch is encoded (a helper thread writes)
check_fail "ids of several batches into a full stdout, 2 threads" 1 "'<stdout>': write: No space left on device" \
	sh -c '"$@" > /dev/full' sh $TE -q -j2 -t "$T/a.lmtok" --format ids "$T/many.jsonl"
check_fail "a stream of several batches past RLIMIT_FSIZE, 2 threads" 1 "fsz.lmtoks': write: File too large" \
	sh -c 'trap "" XFSZ; ulimit -f 1024; exec "$@"' sh $TE -q -j2 -t "$T/a.lmtok" -o "$T/out/fsz.lmtoks" \
	"$T/many.jsonl"
nothing_left "no stream after the write error" "$T/out" fsz.lmtoks

# the edges of tok-train's documented ranges: each end trains (exit 0), just
# outside is a usage error naming the option (exit 2); '-' where an end has no
# outside or is not worth a run (a 2^30-token table)
while read -r opt lo hi below above; do
	for v in $lo $hi; do
		[ "$v" = - ] && continue
		check "tok-train --$opt $v trains" $TT -q -v 300 --$opt "$v" -o "$T/edge.lmtok" "$DATA/text"
	done
	for v in $below $above; do
		[ "$v" = - ] && continue
		check_fail "tok-train --$opt $v is out of range" 2 "option '--$opt'" $TT -q -v 300 --$opt "$v" -o "$T/edge.lmtok" "$DATA/text"
	done
done <<RANGES
vocab-size 257 - 0 1073741825
max-token-len 2 16777216 1 16777217
min-count 1 9223372036854775807 0 -
sample - 1 0 1.000001
seed 0 9223372036854775807 -1 -
progress-every 0 1073741824 -1 1073741825
RANGES
check_fail "tok-train -v 256 leaves no room for the end-of-text token" 2 "smaller than 256 byte tokens + 1 special" \
	$TT -q -v 256 -o "$T/edge.lmtok" "$DATA/text"
# --sample 0 was documented as valid (0 to 1) and always failed: no document kept
check_fail "--sample 0 is refused, naming the range" 2 "option '--sample': 0 is out of range (0, 1]" \
	$TT -q -v 300 --sample 0 -o "$T/edge.lmtok" "$DATA/text"
finish
