#!/bin/sh
# tests/cli/demo.sh: the README's flow (examples/Makefile, what `make demo` runs) on a
# tiny configuration: the built-in corpus end to end with its byte-exact round trip,
# Make redoing nothing on a second run, and the same flow on a user's own files.
. tests/cli/lib.sh

SMALL='DOCS=300 VOCAB=400 SEQ_LEN=64 UPDATES=10'
SMALLM='--layers 1 --heads 2 --channels 32'
check "the demo flow on 300 built-in documents" \
	make -s -C examples BIN="$BIN" OUT="$T/demo" $SMALL MODEL="$SMALLM"
grep -q "round trip: .* identical to the corpus" "$T/.out" && ok "decoded text is identical to the corpus" \
	|| notok "round trip line" "$(cat "$T/.out")"
grep -q '"event":"summary".*"vocab_size":400' "$T/demo/tok-train.jsonl" && ok "tokenizer trained to 400 tokens" \
	|| notok "tokenizer summary" "$(tail -1 "$T/demo/tok-train.jsonl")"
grep -q '"documents":300,' "$T/demo/tok-encode.jsonl" && ok "300 documents encoded" || notok "encode summary"
n=$(grep -c '"event":"fertility"' "$T/demo/fertility.jsonl")
[ "$n" = 7 ] && ok "fertility for the corpus source, all inputs and 5 labelled samples" || notok "fertility records: $n"
grep -q '"bad":0' "$T/demo/verify.jsonl" && [ -f "$T/demo/data/manifest.json" ] \
	&& ok "shards packed and verified" || notok "dataset" "$(ls "$T/demo")"
grep -q '"bits_per_byte":0\.[45]' "$T/demo/corpus.summary.jsonl" && ok "the corpus summary records its entropy floor" \
	|| notok "corpus summary" "$(cat "$T/demo/corpus.summary.jsonl")"
grep -q "model: validation loss .* after 10 updates" "$T/.out" && ok "a model is trained and evaluated" \
	|| notok "train stage" "$(cat "$T/.out")"
[ -f "$T/demo/run/ckpt/step-00000010/manifest.json" ] && grep -q '"ok":true' "$T/demo/ckpt-verify.jsonl" \
	&& ok "the final checkpoint is written and verified" || notok "checkpoint stage" "$(ls "$T/demo/run/ckpt")"
grep -q '"event":"stop".*--stop-at 5' "$T/demo/run/events.jsonl" && grep -q '"event":"resume","update":5' "$T/demo/run/events.jsonl" \
	&& grep -q "interrupted at update 5" "$T/.out" \
	&& ok "training is interrupted at update 5 and resumed" || notok "interruption" "$(cat "$T/demo/run/events.jsonl")"
[ "$(grep -c '"event":"eval-config"' "$T/demo/run/eval/ppl.jsonl")" -ge 2 ] \
	&& grep -q '"event":"memorization"' "$T/demo/run/eval/ppl.jsonl" && grep -q '"event":"floor"' "$T/demo/run/eval/ppl.jsonl" \
	&& grep -q "evalppl: val loss .* bits per byte" "$T/.out" \
	&& ok "evalppl: every checkpoint, the floor, memorization" || notok "evalppl stage" "$(head -c 300 "$T/demo/run/eval/ppl.jsonl")"
[ -s "$T/demo/run/runcard.yaml" ] && [ -s "$T/demo/run/RUNCARD.md" ] && [ -s "$T/demo/release.tar.zst" ] \
	&& [ -f "$T/demo/release.verified" ] && ok "the run card and the verified release archive" \
	|| notok "runcard stage" "$(ls "$T/demo" "$T/demo/run")"
members=$(tar --zstd -tf "$T/demo/release.tar.zst" 2>/dev/null | sed 's|^[^/]*/||' | sort | tr '\n' ' ')
case $members in
*"RUNCARD.md SHA256SUMS config.json model.safetensors "*"runcard.yaml tokenizer.json tokenizer.lmtok "*)
	ok "the archive holds the weights, config, tokenizer both ways, the card and SHA256SUMS" ;;
*) notok "release members" "$members" ;;
esac
grep -q '"kept":' "$T/demo/dedup.json" && [ -f "$T/demo/removed.jsonl" ] && ok "dedup ran, with its provenance file" \
	|| notok "dedup stage"
check "a second run" make -C examples BIN="$BIN" OUT="$T/demo" $SMALL MODEL="$SMALLM"
grep -q "bin/tok-train\|bin/tok-encode\|bin/gen-corpus\|bin/train\|bin/ckpt-\|bin/evalppl\|bin/runcard" "$T/.out" && notok "a second run redoes nothing" "$(cat "$T/.out")" \
	|| ok "a second run redoes nothing"
touch "$T/demo/corpus.jsonl"
make -C examples BIN="$BIN" OUT="$T/demo" $SMALL MODEL="$SMALLM" > "$T/.out" 2>&1
grep -q "tok-train" "$T/.out" && ok "a newer corpus retrains the tokenizer" || notok "rebuild after touch" "$(cat "$T/.out")"
check "the flow on the user's own files (CORPUS=)" \
	make -s -C examples BIN="$BIN" OUT="$T/own" CORPUS="$(pwd)/tests/data/text" VOCAB=300 SEQ_LEN=16 \
	UPDATES=2 MODEL="$SMALLM" SPLIT=val=0.3
[ -f "$T/own/corpus.lmtoks" ] && [ ! -f "$T/own/corpus.jsonl" ] && ok "own corpus encoded, no built-in corpus made" \
	|| notok "own corpus" "$(ls "$T/own")"
if command -v jq > /dev/null; then
	v=$("$BIN/tok-train" -q -v 300 -o "$T/jq.lmtok" tests/data/text | jq -c 'select(.event=="summary") | {vocab_size}')
	[ "$v" = '{"vocab_size":300}' ] && ok "the README's jq pipeline" || notok "jq pipeline" "$v"
else
	ok "# SKIP jq not installed: the README's jq pipeline"
fi
finish
