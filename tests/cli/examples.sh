#!/bin/sh
# tests/cli/examples.sh: examples/Makefile redoes exactly what a change touches. Each
# stage depends on a stamp of the variables it uses and, for a corpus of the user's
# own, on the list of its files with sizes and mtimes; `make -n` (which writes
# nothing) shows which tools a run would start after each change, one at a time.
. tests/cli/lib.sh

SMALL='DOCS=300 VOCAB=400 SEQ_LEN=64 UPDATES=10'
SMALLM='--layers 1 --heads 2 --channels 32'

# stages OUT [VAR=VALUE...]: the stages `make -n` would run, in the flow's order
stages() {
	o=$1; shift
	make -n --no-print-directory -C examples BIN="$BIN" OUT="$o" $SMALL MODEL="$SMALLM" "$@" > "$T/.n" 2>&1 || { echo "make failed"; return; }
	s=
	grep -q "$BIN/gen-corpus " "$T/.n" && s="$s gen-corpus"
	grep -q "$BIN/dedup-minhash " "$T/.n" && s="$s dedup"
	grep -q "$BIN/tok-train -q .*-v " "$T/.n" && s="$s tok-train"
	grep -q "$BIN/tok-encode -q .*--eos -o " "$T/.n" && s="$s tok-encode"
	grep -q "$BIN/shard-pack -q --force" "$T/.n" && s="$s shard-pack"
	grep -q "$BIN/train " "$T/.n" && s="$s train"
	grep -q "$BIN/evalppl " "$T/.n" && s="$s evalppl"
	grep "$BIN/runcard -q " "$T/.n" | grep -qv -- "--verify" && s="$s runcard"
	echo "${s# }"
}
# reruns DESC WANT OUT [VAR=VALUE...]
reruns() {
	d=$1; want=$2; shift 2
	got=$(stages "$@")
	[ "$got" = "$want" ] && ok "$d" || notok "$d" "want: $want" "got: $got" "$(head -c 400 "$T/.n")"
}
ALL='gen-corpus dedup tok-train tok-encode shard-pack train evalppl runcard'
FROM_DEDUP='dedup tok-train tok-encode shard-pack train evalppl runcard'

check "the flow on 300 built-in documents" make -s -C examples BIN="$BIN" OUT="$T/b" $SMALL MODEL="$SMALLM"
reruns "unchanged, nothing reruns" "" "$T/b"
reruns "THREADS changes no result: nothing reruns" "" "$T/b" THREADS=1
reruns "DOCS: everything from gen-corpus" "$ALL" "$T/b" DOCS=301
reruns "SEED: everything from gen-corpus" "$ALL" "$T/b" SEED=2
reruns "VOCAB: tok-train and after, not gen-corpus or dedup" \
	"tok-train tok-encode shard-pack train evalppl runcard" "$T/b" VOCAB=450
reruns "PATTERN: tok-train and after" "tok-train tok-encode shard-pack train evalppl runcard" "$T/b" PATTERN=gpt2
reruns "SEQ_LEN: shard-pack and after, not tok-train" "shard-pack train evalppl runcard" "$T/b" SEQ_LEN=32
reruns "SPLIT: shard-pack and after" "shard-pack train evalppl runcard" "$T/b" SPLIT=val=0.05
reruns "UPDATES: train and after, not tok-train" "train evalppl runcard" "$T/b" UPDATES=12
reruns "MODEL: train and after" "train evalppl runcard" "$T/b" MODEL='--layers 1 --heads 2 --channels 16'
reruns "TRAIN: train and after" "train evalppl runcard" "$T/b" TRAIN='--micro-batch 4'
reruns "CKPT_EVERY: train and after" "train evalppl runcard" "$T/b" CKPT_EVERY=5
reruns "PROMPT: evalppl and after" "evalppl runcard" "$T/b" PROMPT='They meet'
grep -q "prompt.*This is a story about" "$T/b/run/eval/ppl.jsonl" \
	&& ok "the built-in corpus's sample prompt is how its documents open" \
	|| notok "sample prompt" "$(grep prompt "$T/b/run/eval/ppl.jsonl" | head -c 300)"

check "a run with VOCAB=450" make -s -C examples BIN="$BIN" OUT="$T/b" $SMALL VOCAB=450 MODEL="$SMALLM"
reruns "after it, VOCAB=450 again reruns nothing" "" "$T/b" VOCAB=450
reruns "and the earlier VOCAB reruns tok-train and after" \
	"tok-train tok-encode shard-pack train evalppl runcard" "$T/b"

# dirA: the test texts, one in a subdirectory; dirB: the same names, other contents
mkdir -p "$T/dirA/sub" "$T/dirB"
cp "$DATA"/text/* "$T/dirA/"; mv "$T/dirA/numbers.txt" "$T/dirA/sub/b.txt"; cp "$DATA/text/en.txt" "$T/dirA/a.txt"
for f in "$DATA"/text/*; do cp "$DATA/text/te.txt" "$T/dirB/${f##*/}"; done
OWN='VOCAB=300 SEQ_LEN=16 UPDATES=2 SPLIT=val=0.3'
check "the flow on a corpus directory" make -s -C examples BIN="$BIN" OUT="$T/u" CORPUS="$T/dirA" $OWN MODEL="$SMALLM"
reruns "the same directory unchanged: nothing reruns" "" "$T/u" CORPUS="$T/dirA" $OWN
reruns "another directory: everything from dedup" "$FROM_DEDUP" "$T/u" CORPUS="$T/dirB" $OWN
reruns "the built-in corpus in the same OUT: everything" "$ALL" "$T/u" $OWN
touch -d '+1 minute' "$T/dirA/sub/b.txt"
reruns "a file touched inside the directory: everything from dedup" "$FROM_DEDUP" "$T/u" CORPUS="$T/dirA" $OWN
check "the run after the touch" make -s -C examples BIN="$BIN" OUT="$T/u" CORPUS="$T/dirA" $OWN MODEL="$SMALLM"
reruns "then nothing reruns" "" "$T/u" CORPUS="$T/dirA" $OWN
cp "$DATA/text/te.txt" "$T/dirA/sub/c.txt"
reruns "a file added inside the directory: everything from dedup" "$FROM_DEDUP" "$T/u" CORPUS="$T/dirA" $OWN
rm "$T/dirA/sub/c.txt"
printf 'x' >> "$T/dirA/a.txt"; touch -r "$T/dirA/sub/b.txt" "$T/dirA/a.txt"
reruns "a file's size changed, mtime kept: everything from dedup" "$FROM_DEDUP" "$T/u" CORPUS="$T/dirA" $OWN

# without the caller's MAKEFLAGS, whose jobserver (make check -jN) make -n would warn of
MAKEFLAGS= MAKELEVEL= make -n --no-print-directory -C examples BIN="$BIN" clean > "$T/.n" 2>&1
[ "$(cat "$T/.n")" = "rm -rf $(pwd)/build/examples" ] \
	&& ok "results go under build/examples by default, not into the source tree" \
	|| notok "default OUT" "$(head -c 400 "$T/.n")"
finish
