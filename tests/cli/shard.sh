#!/bin/sh
# tests/cli/shard.sh: shard-pack as a user runs it, and every bad input the issue
# names: a corrupt shard payload, a truncated shard, a manifest naming a missing
# shard, a tokenizer that did not make the stream, a sequence length longer than a
# tiny corpus. Each exits 1 naming the file and leaves nothing half-written.
# (tests/unit/test-dataset.c checks the token accounting and the loader.)
. tests/cli/lib.sh
SP=$BIN/shard-pack

"$BIN/gen-corpus" -q --docs 300 --seed 5 -o "$T/c.jsonl" > /dev/null
"$BIN/tok-train" -q -v 300 -o "$T/t.lmtok" "$T/c.jsonl" > /dev/null
"$BIN/tok-train" -q -v 320 -o "$T/other.lmtok" "$T/c.jsonl" > /dev/null
"$BIN/tok-encode" -q -t "$T/t.lmtok" -o "$T/s.lmtoks" "$T/c.jsonl" > /dev/null

check "shard-pack --help exits 0" $SP --help
check_fail "a bad split is a usage error" 2 "unknown split 'dev'" $SP --split dev=0.1 -o "$T/x" "$T/s.lmtoks"
check_fail "a split named twice is a usage error (the last fraction used to win)" 2 "'val' is named twice" \
	$SP --split val=0.1,test=0.1,val=0.2 -o "$T/x" "$T/s.lmtoks"
check_fail "no output is a usage error" 2 "no output" $SP "$T/s.lmtoks"
check_fail "a trailing comma in --split is a usage error (it was dropped)" 2 "an empty item in 'val=0.1,'" \
	$SP --split val=0.1, -o "$T/x" "$T/s.lmtoks"
check_fail "an empty --split is a usage error" 2 "an empty item" $SP --split '' -o "$T/x" "$T/s.lmtoks"
check_fail "--verify twice is a usage error (only the last was checked)" 2 "--verify checks one dataset" \
	$SP --verify "$T/x" --verify "$T/y"
check_fail "a number with a leading space is not one (strtol took it)" 2 "' 64' is not an integer" \
	$SP -L ' 64' -o "$T/x" "$T/s.lmtoks"

check "pack into 64-token sequences" $SP -q -L 64 --split val=0.1,test=0.05 --shard-tokens 2000 -o "$T/d" "$T/s.lmtoks"
grep -q '"event":"summary"' "$T/.out" && ok "JSONL summary" || notok "JSONL summary" "$(cat "$T/.out")"
n=$(grep -c '"event":"shard"' "$T/.out")
[ "$n" = "$(ls "$T/d" | grep -c lmshard)" ] && [ "$n" -gt 3 ] && ok "one shard record per shard file ($n)" || notok "shard records $n"
msha=$(sed -n 's/.*"manifest_sha256":"\([0-9a-f]*\)".*/\1/p' "$T/.out")
[ "$msha" = "$(sha256sum "$T/d/manifest.json" | cut -d' ' -f1)" ] && ok "manifest_sha256 is the manifest's" || notok "manifest sha"
check "pack again, from stdin" sh -c "cat '$T/s.lmtoks' | $SP -q -L 64 --split val=0.1,test=0.05 --shard-tokens 2000 -o '$T/d2'"
same_all=1
for f in "$T"/d/*.lmshard; do cmp -s "$f" "$T/d2/$(basename "$f")" || same_all=0; done
[ $same_all = 1 ] && ok "the same stream gives byte-identical shards (file or stdin)" || notok "deterministic shards"
grep -q '"path":"<stdin>"' "$T/d2/manifest.json" && ok "the manifest names stdin as the input" || notok "stdin path"
m=$(umask); umask 022; check "pack with umask 022" $SP -q -L 64 -o "$T/dmode" "$T/s.lmtoks"; umask "$m"
[ "$(stat -c %a "$T/dmode")" = 755 ] && ok "the dataset directory gets the umask's mode (755), not mkdtemp's 700" ||
	notok "dataset directory mode" "$(stat -c %a "$T/dmode")"
check "verify a good dataset" $SP --verify "$T/d"
grep -q '"bad":0' "$T/.out" && ok "verify reports no bad shard" || notok "verify summary" "$(tail -1 "$T/.out")"
check_fail "--verify of a file names it as a file" 1 "'$T/s.lmtoks' is a file, not a dataset directory" \
	$SP --verify "$T/s.lmtoks"
check_fail "--verify of a missing directory says why" 1 "cannot open the dataset directory: No such file" \
	$SP --verify "$T/nowhere"
check_fail "an existing output is not replaced without --force" 1 "use --force" $SP -q -L 64 -o "$T/d" "$T/s.lmtoks"
check "--force replaces it" $SP -q -L 32 --force -o "$T/d2" "$T/s.lmtoks"
grep -q '"seq_len":32' "$T/d2/manifest.json" && ok "the replaced dataset is the new one" || notok "force"
nothing_left "no staging or old directories left" "$T" ".partial-"
nothing_left "no old dataset left" "$T" ".old-"

# fewer shards than threads: each shard is verified in two threads (one hashes,
# one maps pages ahead); the records are those of one thread, bar threads and
# timings, and a corrupt payload draws the same message
check "pack into one shard" $SP -q -L 64 --split val=0 -o "$T/one" "$T/s.lmtoks"
[ "$(ls "$T/one" | grep -c lmshard)" = 1 ] && ok "one shard" || notok "one shard" "$(ls "$T/one")"
strip_run() { sed 's/"seconds":[0-9.e+-]*//; s/"mb_per_s":[0-9.e+-]*//; s/"threads":[0-9]*//'; }
for j in 1 3; do
	check "verify one shard with -j$j" $SP --verify "$T/one" -j$j
	strip_run < "$T/.out" > "$T/one-j$j.out"
done
same "one shard: the same records with -j1 and -j3" "$T/one-j1.out" "$T/one-j3.out"
check "verify $(ls "$T/d" | grep -c lmshard) shards with -j16" $SP --verify "$T/d" -j16
grep -q '"bad":0' "$T/.out" && ok "-j16: no bad shard" || notok "-j16 summary" "$(tail -1 "$T/.out")"
cp -r "$T/one" "$T/bad0"
size=$(wc -c < "$T/one/train-00000.lmshard")
for at in 200 $((size / 2)) $((size - 3)); do
	cp "$T/one/train-00000.lmshard" "$T/bad0/train-00000.lmshard"
	orig=$(od -An -t u1 -j "$at" -N 1 "$T/bad0/train-00000.lmshard" | tr -d ' ')
	printf "\\$(printf '%03o' $(( (orig + 1) % 256 )))" | dd of="$T/bad0/train-00000.lmshard" bs=1 seek="$at" conv=notrunc 2>/dev/null
	for j in 1 3; do
		check_fail "one shard, byte $at of $size changed: -j$j names its payload" 1 \
			"train-00000.lmshard': payload sha256" $SP --verify "$T/bad0" -j$j
	done
done

# chunk digests: the manifest lists the SHA-256 of every --chunk-bytes of each
# shard's payload, so --verify splits one shard among its threads; each digest is
# that of the bytes dd cuts out of the file, and damage anywhere is named by its
# chunk, the same for any thread count
check "pack into one shard with 4Ki chunks" $SP -q -L 64 --split val=0 --chunk-bytes 4Ki -o "$T/ch" "$T/s.lmtoks"
f="$T/ch/train-00000.lmshard"
size=$(wc -c < "$f")
hs=$(od -An -t u4 -j 12 -N 4 "$f" | tr -d ' ')
nch=$(( (size - hs + 4095) / 4096 ))
[ "$(jq '.shards[0].chunk_sha256 | length' "$T/ch/manifest.json")" = "$nch" ] && [ "$nch" -gt 2 ] &&
	[ "$(jq '.shards[0].chunk_bytes' "$T/ch/manifest.json")" = 4096 ] &&
	ok "the manifest lists $nch chunk digests for a $((size - hs))-byte payload" || notok "chunk count" "$nch"
good=1
for k in 0 1 $((nch - 1)); do
	want=$(jq -r ".shards[0].chunk_sha256[$k]" "$T/ch/manifest.json")
	got=$(tail -c +$((hs + k * 4096 + 1)) "$f" | head -c 4096 | sha256sum | cut -c1-64)
	[ "$want" = "$got" ] || good=0
done
[ $good = 1 ] && ok "chunks 1, 2 and $nch: the SHA-256 of their bytes in the file" || notok "chunk digests"
[ "$(jq -r .shards[0].payload_sha256 "$T/ch/manifest.json")" = "$(jq -r .shards[0].payload_sha256 "$T/one/manifest.json")" ] &&
	ok "the shard and its whole-payload SHA-256 are those of a pack without chunks" || notok "chunks changed the shard"
cmp -s "$f" "$T/one/train-00000.lmshard" && ok "... byte for byte" || notok "chunked shard differs"
for j in 1 2 3; do
	check "verify the chunked shard with -j$j" $SP --verify "$T/ch" -j$j
	strip_run < "$T/.out" > "$T/ch-j$j.out"
done
same "chunks: the same records with -j1 and -j3" "$T/ch-j1.out" "$T/ch-j3.out"
cp -r "$T/ch" "$T/chbad"
for at in $hs $((hs + 4096 * (nch / 2) + 17)) $((size - 1)); do
	cp "$f" "$T/chbad/train-00000.lmshard"
	orig=$(od -An -t u1 -j "$at" -N 1 "$f" | tr -d ' ')
	printf "\\$(printf '%03o' $(( (orig + 1) % 256 )))" | dd of="$T/chbad/train-00000.lmshard" bs=1 seek="$at" conv=notrunc 2>/dev/null
	k=$(( (at - hs) / 4096 ))
	lo=$((k * 4096)); hi=$(( (k + 1) * 4096 - 1 )); [ $hi -lt $((size - hs)) ] || hi=$((size - hs - 1))
	for j in 1 3; do
		check_fail "chunks: byte $at of $size changed, -j$j names bytes $lo-$hi of the payload" 1 \
			"train-00000.lmshard': payload sha256 of bytes $lo-$hi (chunk $((k + 1)) of $nch) is" $SP --verify "$T/chbad" -j$j
	done
done
cp "$f" "$T/chbad/train-00000.lmshard"
jq -c '.shards[0].chunk_sha256 |= .[1:]' "$T/ch/manifest.json" > "$T/chbad/manifest.json"
reseal "$T/chbad/manifest.json"
check_fail "a manifest with a chunk digest too few (re-sealed) is refused, naming the shard" 1 \
	"train-00000.lmshard': $((size - hs)) payload bytes are $nch chunks of 4096, the manifest lists $((nch - 1))" $SP --verify "$T/chbad" -j2
jq -c '.shards[0].chunk_sha256[1] = .shards[0].chunk_sha256[0]' "$T/ch/manifest.json" > "$T/chbad/manifest.json"
reseal "$T/chbad/manifest.json"
check_fail "a manifest with a wrong chunk digest (re-sealed) is refused, naming the chunk" 1 \
	"train-00000.lmshard': payload sha256 of bytes 4096-8191 (chunk 2 of $nch)" $SP --verify "$T/chbad" -j2
jq -c 'del(.shards[0].chunk_bytes)' "$T/ch/manifest.json" > "$T/chbad/manifest.json"
reseal "$T/chbad/manifest.json"
check_fail "a manifest with chunk digests and no chunk_bytes is refused" 1 \
	"manifest.json': shards[0]: chunk_bytes or chunk_sha256 is missing or invalid" $SP --verify "$T/chbad"
# a manifest that contradicts itself, re-sealed: the split totals against its shards
# (both passed --verify, and train trained on the first)
cp -r "$T/ch" "$T/contra"
jq -c '.splits.train.sequences += 1' "$T/ch/manifest.json" > "$T/contra/manifest.json"
reseal "$T/contra/manifest.json"
check_fail "splits.train's sequences one more than its shards hold (re-sealed): refused" 1 \
	"manifest.json': splits.train says" $SP --verify "$T/contra"
grep -qF "(the manifest contradicts itself)" "$T/.err" && ok "... saying the manifest contradicts itself" ||
	notok "contradiction message" "$(cat "$T/.err")"
jq -c '.shards = []' "$T/ch/manifest.json" > "$T/contra/manifest.json"
reseal "$T/contra/manifest.json"
check_fail "no shards listed while the splits count sequences (re-sealed): refused" 1 \
	"splits.train says" $SP --verify "$T/contra"
check_fail "train refuses that dataset" 1 "splits.train says" \
	"$BIN/train" -q --data "$T/contra" --layers 1 --heads 2 --channels 32 --updates 1 -o "$T/crun"
[ ! -e "$T/crun" ] && ok "... and leaves no run directory (it held its lock alone)" || notok "run left" "$(ls -A "$T/crun")"
check_fail "--chunk-bytes below 4Ki is a usage error" 2 "below 4Ki" $SP --chunk-bytes 100 -o "$T/x" "$T/s.lmtoks"
check "--chunk-bytes 0 lists no chunks" $SP -q -L 64 --split val=0 --chunk-bytes 0 -o "$T/ch0" "$T/s.lmtoks"
[ "$(jq '[.shards[] | has("chunk_sha256")] | any' "$T/ch0/manifest.json")" = false ] && ok "... none in the manifest" ||
	notok "chunk-bytes 0"
check "... and the dataset verifies by whole shards" $SP --verify "$T/ch0" -j2
cp -r "$T/ch0" "$T/ch0bad"
printf 'Z' | dd of="$T/ch0bad/train-00000.lmshard" bs=1 seek=300 conv=notrunc 2>/dev/null
for j in 1 2; do
	check_fail "no chunks, a byte changed: -j$j names the shard against its header" 1 \
		"train-00000.lmshard': payload sha256 " $SP --verify "$T/ch0bad" -j$j
	grep -q "does not match the header's" "$T/.err" && ok "... the whole payload's digest, -j$j" || notok "ch0 message" "$(cat "$T/.err")"
done

# the documents table (documents.jsonl, which evalppl reads for bits per byte) is
# checked too: its size, SHA-256 and lines against the manifest, a record of its own
docsize=$(wc -c < "$T/ch/documents.jsonl")
[ "$(jq --argjson n "$docsize" '.documents.bytes == $n' "$T/ch/manifest.json")" = true ] &&
	ok "the manifest gives the documents table's size" || notok "documents.bytes" "$(jq -c .documents "$T/ch/manifest.json")"
check "verify: a record for the documents table" $SP --verify "$T/ch" -j2
grep -q '"event":"verify","path":"[^"]*ch/documents.jsonl","ok":true' "$T/.out" && ok "... ok:true" ||
	notok "documents record" "$(cat "$T/.out")"
[ "$(jq -s '.[-1] | .files == .shards + 1' "$T/.out")" = true ] && ok "the summary counts it among the files" ||
	notok "files count" "$(tail -1 "$T/.out")"
sumbytes=$(($(cat "$T"/ch/*.lmshard | wc -c) + docsize))
[ "$(jq -s --argjson n "$sumbytes" '.[-1].bytes == $n' "$T/.out")" = true ] &&
	ok "the summary's bytes are the shards' and the documents table's ($sumbytes)" ||
	notok "summary bytes" "$(tail -1 "$T/.out")"
# a manifest from before documents.bytes (the field removed, re-sealed) still
# verifies, and the summary counts the size verify read
cp -r "$T/ch" "$T/docold"
jq -c 'del(.documents.bytes)' "$T/ch/manifest.json" > "$T/docold/manifest.json"
reseal "$T/docold/manifest.json"
check "verify: a manifest without documents.bytes" $SP --verify "$T/docold"
[ "$(jq -s --argjson n "$sumbytes" '.[-1].bytes == $n and .[-1].bad == 0' "$T/.out")" = true ] &&
	ok "... its summary's bytes are the same" || notok "old manifest summary" "$(tail -1 "$T/.out")"
jq -c '.documents.bytes = -1' "$T/ch/manifest.json" > "$T/docold/manifest.json"
reseal "$T/docold/manifest.json"
check_fail "a documents.bytes below zero is refused" 1 "documents is incomplete" $SP --verify "$T/docold"
cp -r "$T/ch" "$T/docbad"
# a digit changed, so the size holds and the digest must catch it
sed '1s/"tokens":1/"tokens":2/;t;1s/"tokens":[0-9]/"tokens":1/' "$T/ch/documents.jsonl" > "$T/docbad/documents.jsonl"
[ "$(wc -c < "$T/docbad/documents.jsonl")" = "$docsize" ] && ! cmp -s "$T/ch/documents.jsonl" "$T/docbad/documents.jsonl" &&
	ok "(the edit keeps the table's size)" || notok "size-keeping edit"
for j in 1 2; do
	check_fail "an edited documents table is named, -j$j" 1 "docbad/documents.jsonl': sha256 " $SP --verify "$T/docbad" -j$j
done
grep -q '"path":"[^"]*docbad/documents.jsonl","ok":false' "$T/.out" && ok "... its record says ok:false" ||
	notok "documents bad record"
rm "$T/docbad/documents.jsonl"
check_fail "a missing documents table is named" 1 "docbad/documents.jsonl'" $SP --verify "$T/docbad"
head -n -1 "$T/ch/documents.jsonl" > "$T/docbad/documents.jsonl"
for j in 1 2; do
	check_fail "a documents table cut short is refused by its size, -j$j" 1 \
		"docbad/documents.jsonl': $(wc -c < "$T/docbad/documents.jsonl") bytes, the manifest says $docsize" \
		$SP --verify "$T/docbad" -j$j
done
jq -c --arg h "$(sha256sum < "$T/docbad/documents.jsonl" | cut -c1-64)" --argjson n "$(wc -c < "$T/docbad/documents.jsonl")" \
	'.documents.sha256 = $h | .documents.bytes = $n' "$T/ch/manifest.json" > "$T/docbad/manifest.json"
reseal "$T/docbad/manifest.json"
check_fail "a documents table a line short (manifest re-sealed to its digest and size) is refused by its count" 1 \
	"documents.jsonl': $(($(wc -l < "$T/ch/documents.jsonl") - 1)) lines, the manifest counts $(wc -l < "$T/ch/documents.jsonl") documents" \
	$SP --verify "$T/docbad"
[ "$(jq '.shards[0] | (.chunk_sha256 | length) == 1 and .chunk_bytes == 4194304' "$T/one/manifest.json")" = true ] &&
	ok "by default (4Mi), a small shard's manifest entry lists one chunk" || notok "default chunks"

# corrupt payload, truncated shard, missing shard, edited manifest
cp -r "$T/d" "$T/bad1"
printf 'Z' | dd of="$T/bad1/train-00001.lmshard" bs=1 seek=300 conv=notrunc 2>/dev/null
check_fail "verify names a shard with a corrupt payload" 1 "train-00001.lmshard': payload sha256" $SP --verify "$T/bad1"
grep -q '"ok":false' "$T/.out" && ok "its JSONL record says ok:false" || notok "verify record"
cp -r "$T/d" "$T/bad2"
head -c 1000 "$T/d/train-00000.lmshard" > "$T/bad2/train-00000.lmshard"
check_fail "verify names a truncated shard" 1 "train-00000.lmshard': file is 1000 bytes" $SP --verify "$T/bad2"
cp -r "$T/d" "$T/bad3"
rm "$T/bad3/val-00000.lmshard"
check_fail "verify names a shard the manifest lists but the directory lacks" 1 "val-00000.lmshard" $SP --verify "$T/bad3"
cp -r "$T/d" "$T/bad4"
sed 's/"bytes":\([0-9]*\)/"bytes":1\1/' "$T/d/manifest.json" > "$T/bad4/manifest.json"
check_fail "a manifest edited and not re-sealed is refused by its own checksum" 1 \
	"bad4/manifest.json': its contents do not match its own checksum" $SP --verify "$T/bad4"
reseal "$T/bad4/manifest.json"
check_fail "a manifest edited to another shard size is caught, naming the shard" 1 "bytes, the manifest says" $SP --verify "$T/bad4"
sed 's/"sequences":\([0-9]*\),"segments"/"sequences":1\1,"segments"/' "$T/d/manifest.json" > "$T/bad4/manifest.json"
reseal "$T/bad4/manifest.json"
check_fail "a manifest edited to inconsistent counts is refused" 1 "manifest.json': shards[0] is incomplete or inconsistent" $SP --verify "$T/bad4"
# every field of the manifest beyond the shard hashes (counts, packing, seed,
# sources, the tokenizer's hash), edited by one value: the seal refuses each, in
# --verify and in train, which reads the dataset
# (schema and schema_version are refused by the kind check that comes first)
edit_each "$T/d/manifest.json" '.[-1] != "manifest_sha256"' "$T/bad4/manifest.json" \
	"bad4/manifest.json': \(its contents do not match its own checksum\|not an lmt dataset manifest\|manifest schema version\)" \
	$SP --verify "$T/bad4"
[ "$nf" -gt 20 ] && [ "$nbad" = 0 ] && ok "each of the dataset manifest's $nf fields edited: --verify refuses it" \
	|| notok "dataset manifest edits" "$nbad of $nf passed or were not blamed on the manifest" "$firstbad"
jq -c '.vocab_size += 1' "$T/d/manifest.json" > "$T/bad4/manifest.json"
check_fail "... and train refuses it too" 1 "bad4/manifest.json': its contents do not match its own checksum" \
	"$BIN/train" --data "$T/bad4" --layers 1 --heads 2 --channels 32 --updates 1 --no-save
rm "$T/bad4/manifest.json"
check_fail "a directory without a manifest is not a dataset" 1 "no manifest.json" $SP --verify "$T/bad4"

# input problems: nothing half-written
check_fail "a stream from another tokenizer is refused" 1 "was encoded with tokenizer" \
	$SP -t "$T/other.lmtok" -o "$T/x1" "$T/s.lmtoks"
[ ! -e "$T/x1" ] && ok "no dataset after the tokenizer mismatch" || notok "x1 exists"
check "the right tokenizer is accepted" $SP -q -t "$T/t.lmtok" -L 64 -o "$T/x2" "$T/s.lmtoks"
printf '{"text": "a tiny corpus"}\n' > "$T/tiny.jsonl"
"$BIN/tok-encode" -q -t "$T/t.lmtok" -o "$T/tiny.lmtoks" "$T/tiny.jsonl" > /dev/null
check_fail "a sequence longer than a tiny corpus is refused, naming the input" 1 "tiny.lmtoks': " \
	$SP -L 1024 -o "$T/x3" "$T/tiny.lmtoks"
[ ! -e "$T/x3" ] && ok "no dataset after the tiny corpus" || notok "x3 exists"
nothing_left "no staging directory left after failures" "$T" ".partial-"
check "--tail pad makes the tiny corpus one padded sequence" $SP -q -L 1024 --tail pad --split val=0 -o "$T/x4" "$T/tiny.lmtoks"
grep -q '"sequences":1,' "$T/x4/manifest.json" && ok "one sequence" || notok "tiny padded"
head -c 200 "$T/s.lmtoks" > "$T/cut.lmtoks"
check_fail "a truncated token stream is refused" 1 "cut.lmtoks'" $SP -o "$T/x5" "$T/cut.lmtoks"

# interrupted: no dataset, no staging directory
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do cat "$T/c.jsonl"; done > "$T/big.jsonl"
for i in 1 2 3 4 5 6 7 8; do cat "$T/big.jsonl"; done > "$T/bigger.jsonl"
"$BIN/tok-encode" -q -t "$T/t.lmtok" -o "$T/big.lmtoks" "$T/bigger.jsonl" > /dev/null
$SP -q -L 8 --shard-tokens 64 -o "$T/x6" "$T/big.lmtoks" > /dev/null 2>&1 &
pid=$!
sleep 0.2
kill -TERM $pid 2>/dev/null
wait $pid 2>/dev/null
[ ! -e "$T/x6" ] && ok "interrupted (or finished) shard-pack: no half dataset at -o" \
	|| { [ -f "$T/x6/manifest.json" ] && ok "shard-pack finished before the signal" || notok "half dataset"; }
nothing_left "no staging directory after SIGTERM" "$T" ".partial-"
finish
