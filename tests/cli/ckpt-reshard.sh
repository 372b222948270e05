#!/bin/sh
# tests/cli/ckpt-reshard.sh: ckpt-reshard on the checkpoints of a real (tiny) run.
#
#   - usage errors exit 2 with one line and the hint;
#   - 1 -> 3 -> 2 -> 1 ranks: the world-3 checkpoint has 3 files whose sizes and
#     payload SHA-256 (computed here) are the manifest's, every tensor in 3 chunks,
#     the loader cursors K, K+1, K+2 and one RNG entry per rank; back at world 1 the
#     data file and the manifest are byte-identical to the original;
#   - train --resume from the round-tripped checkpoint ends bitwise where the
#     original run ended (--export-llmc, cmp);
#   - a flipped byte in a source file, cursors out of lockstep, per-rank RNG states
#     that differ: exit 1 naming the problem, nothing left behind; an existing OUT
#     is refused and left as it was;
#   - --export safetensors: the header parsed here (length, JSON, offsets that tile
#     the rest of the file), config.json, bf16 at half the size, the tokenizer's EOS,
#     an untied head, and the same bytes from the 3-rank checkpoint as from the
#     original. (tests/unit/test-safetensors.c runs the exported GPT-2.)
. tests/cli/lib.sh
RS=$BIN/ckpt-reshard
TR=$BIN/train

"$BIN/gen-corpus" -q --docs 400 --seed 7 -o "$T/c.jsonl" > /dev/null
"$BIN/tok-train" -q -v 300 -o "$T/t.lmtok" "$T/c.jsonl" > /dev/null
"$BIN/tok-train" -q -v 310 -o "$T/t2.lmtok" "$T/c.jsonl" > /dev/null
"$BIN/tok-encode" -q -t "$T/t.lmtok" -o "$T/s.lmtoks" "$T/c.jsonl" > /dev/null
"$BIN/shard-pack" -q -L 32 --split val=0.1 -o "$T/d" "$T/s.lmtoks" > /dev/null
M="--data $T/d --layers 2 --heads 2 --channels 32 --micro-batch 4 --threads 1 --eval-every 0"
$TR $M --updates 10 --ckpt-every 5 -o "$T/run" --export-llmc "$T/a.bin" > /dev/null 2> "$T/train.err" \
	|| notok "the fixture run trains" "$(head -c 600 "$T/train.err")"
S5=$T/run/ckpt/step-00000005

# ---- the command line ----

check "--help exits 0" $RS --help
grep -q "^usage: ckpt-reshard" "$T/.out" && ok "--help prints the usage on stdout" || notok "--help output"
check "--version exits 0" $RS --version
grep -q "^ckpt-reshard (lmt)" "$T/.out" && ok "--version names the tool" || notok "--version output"
check_fail "nothing to do is a usage error" 2 "nothing to do" $RS "$S5" "$T/x"
check_fail "--world 0 is out of range" 2 "option '--world': 0 is out of range" $RS --world 0 "$S5" "$T/x"
check_fail "--world x is not a number" 2 "'x' is not an integer" $RS -w x "$S5" "$T/x"
check_fail "--world with --export" 2 "separate runs" $RS -w 2 --export safetensors "$S5" "$T/x"
check_fail "an unknown export format" 2 "'onnx' is not a format" $RS --export onnx "$S5" "$T/x"
check_fail "an unknown dtype" 2 "'fp8' is not fp32, bf16 or fp16" $RS --export safetensors --dtype fp8 "$S5" "$T/x"
check_fail "--dtype without --export" 2 "apply to --export" $RS -w 2 --dtype bf16 "$S5" "$T/x"
check_fail "OUT missing" 2 "give SRC" $RS -w 2 "$S5"
check_fail "an unknown option" 2 "unknown option or missing argument: '--shards'" $RS --shards 2 "$S5" "$T/x"
grep -q "Try 'ckpt-reshard --help'" "$T/.err" && ok "usage errors point to --help" || notok "usage hint"
[ ! -e "$T/x" ] && ok "usage errors write nothing" || notok "x exists"

# ---- never over an input: by device and inode, whatever the spelling ----
cp -r "$S5" "$T/own"
(cd "$T/own" && sha256sum * > "$T/own.sums")
check_fail "--export onto the source's manifest is refused" 1 "(the weights) lies inside the input" \
	$RS --export safetensors "$T/own" "$T/own/manifest.json"
check_fail "--export into the source directory is refused" 1 "lies inside the input" \
	$RS --export safetensors "$T/own" "$T/own/"
ln -s "$T/own" "$T/own-link"
check_fail "--export through a symlink to the source is refused" 1 "lies inside the input" \
	$RS --export safetensors "$T/own" "$T/own-link/model.safetensors"
check_fail "--export onto the source directory itself (the config inside it) is refused" 1 "not writing over an input" \
	$RS --export safetensors "$T/own" "$T/own/x/../model.safetensors"
check_fail "a reshard into the source is refused" 1 "lies inside the input" $RS -w 2 "$T/own" "$T/own/sub"
(cd "$T/own" && sha256sum -c --quiet "$T/own.sums") && [ "$(ls "$T/own" | wc -l)" = "$(wc -l < "$T/own.sums")" ] &&
	ok "the source checkpoint is intact after every refusal" || notok "source changed" "$(ls -la "$T/own")"

# ---- 1 -> 3 -> 2 -> 1 ----

K=$(jq '.state.loader.cursors[0].cursor' "$S5/manifest.json")
check "reshard 1 -> 3 ranks" $RS -w 3 "$S5" "$T/w3"
jq -e '.event == "reshard" and .from_world == 1 and .world == 3 and .update == 5' "$T/.out" > /dev/null \
	&& ok "a JSONL reshard record" || notok "reshard record" "$(cat "$T/.out")"
! grep -q "warning" "$T/.err" && ok "no warning: any world size resumes it ($K samples consumed)" \
	|| notok "warnings" "$(cat "$T/.err")"
[ "$(ls "$T/w3" | sort | tr '\n' ' ')" = "manifest.json rank-00000.lmckpt rank-00001.lmckpt rank-00002.lmckpt " ] \
	&& ok "3 data files and a manifest" || notok "w3 files" "$(ls "$T/w3")"
good=1
for r in 0 1 2; do
	f=$T/w3/rank-0000$r.lmckpt
	want=$(jq -r ".files[$r] | \"\(.path) \(.bytes) \(.payload_sha256)\"" "$T/w3/manifest.json")
	# the payload follows the 64-byte common header and 32 bytes of checkpoint fields
	have="rank-0000$r.lmckpt $(wc -c < "$f" | tr -d ' ') $(tail -c +97 "$f" | sha256sum | cut -d' ' -f1)"
	[ "$want" = "$have" ] || { good=0; echo "# manifest: $want; file: $have"; }
done
[ $good = 1 ] && ok "each file's size and payload SHA-256 (computed here) are the manifest's" || notok "w3 files vs manifest"
jq -e --argjson k "$K" '.world == 3 and .state.loader.world == 3 and .state.sharding.world == 3
	and .state.loader.cursors == [{"rank":0,"cursor":$k},{"rank":1,"cursor":($k+1)},{"rank":2,"cursor":($k+2)}]
	and ([.state.rng[].rank] == [0,1,2]) and (.state.rng | map(del(.rank)) | unique | length == 1)
	and (.tensors | all(.chunks | length == 3))' "$T/w3/manifest.json" > /dev/null \
	&& ok "the state: world 3, cursors K, K+1, K+2 (K = $K), an RNG entry per rank, 3 chunks a tensor" \
	|| notok "w3 state" "$(jq -c '.state.loader, .state.sharding' "$T/w3/manifest.json")"
jq -e --slurpfile a "$S5/manifest.json" '.state | del(.loader, .sharding, .rng) == ($a[0].state | del(.loader, .sharding, .rng))' \
	"$T/w3/manifest.json" > /dev/null && ok "the rest of the state is unchanged" || notok "other state fields changed"
check "reshard 3 -> 2" $RS -q -w 2 "$T/w3" "$T/w2"
jq -e --argjson k "$K" '.state.loader.cursors == [{"rank":0,"cursor":$k},{"rank":1,"cursor":($k+1)}]' \
	"$T/w2/manifest.json" > /dev/null && ok "world 2: cursors K, K+1" || notok "w2 cursors"
mkdir -p "$T/run2/ckpt"
cp "$T/run/metrics.jsonl" "$T/run/config.json" "$T/run/params.json" "$T/run/events.jsonl" "$T/run2/"
check "reshard 2 -> 1, into a run directory" $RS -q -w 1 "$T/w2" "$T/run2/ckpt/step-00000005"
same "back at one rank, the data file is byte-identical to the original" "$S5/rank-00000.lmckpt" \
	"$T/run2/ckpt/step-00000005/rank-00000.lmckpt"
same "and so is the manifest (state, cursors, CRCs)" "$S5/manifest.json" "$T/run2/ckpt/step-00000005/manifest.json"
check "70 ranks: two groups, and ranks with empty chunks of 32-element tensors" $RS -q -w 70 "$S5" "$T/w70"
jq -e '.world == 70 and (.tensors | map(select(.name == "param/lnfw")) | .[0].chunks | map(.count) | min == 0)' \
	"$T/w70/manifest.json" > /dev/null && ok "... 70 files, some chunks empty" || notok "w70 manifest"
check "and back to 1" $RS -q -w 1 "$T/w70" "$T/w70to1"
same "... byte-identical to the original" "$S5/rank-00000.lmckpt" "$T/w70to1/rank-00000.lmckpt"
check "the same world is a verified copy" $RS -q -w 3 "$T/w3" "$T/w3b"
same "... byte for byte" "$T/w3/rank-00002.lmckpt" "$T/w3b/rank-00002.lmckpt"

check "train resumes from the round-tripped checkpoint" \
	$TR $M --updates 10 --ckpt-every 5 --resume "$T/run2/ckpt/step-00000005" --export-llmc "$T/b.bin"
same "and ends bitwise where the original run ended" "$T/a.bin" "$T/b.bin"
mkdir -p "$T/run3/ckpt" && cp -r "$T/w3" "$T/run3/ckpt/step-00000005"
check "train (one rank) resumes from the 3-rank checkpoint, reading its three files" \
	$TR $M --updates 10 --resume "$T/run3/ckpt/step-00000005" --export-llmc "$T/c.bin"
same "and ends bitwise where the original run ended" "$T/a.bin" "$T/c.bin"

# ---- bad sources, existing output ----

cp -r "$S5" "$T/bad"
printf 'Z' | dd of="$T/bad/rank-00000.lmckpt" bs=1 seek=3000 conv=notrunc 2> /dev/null
check_fail "a flipped byte in the source is refused, naming the file" 1 "bad/rank-00000.lmckpt'" \
	$RS -w 2 "$T/bad" "$T/x1"
cp -r "$T/w3" "$T/bad3"
printf 'Z' | dd of="$T/bad3/rank-00001.lmckpt" bs=1 seek=2000 conv=notrunc 2> /dev/null
check_fail "... in any rank's file" 1 "bad3/rank-00001.lmckpt'" $RS -w 1 "$T/bad3" "$T/x2"
cp -r "$T/w3" "$T/skew"
jq -c '.state.loader.cursors[2].cursor += 3' "$T/w3/manifest.json" > "$T/skew/manifest.json"
reseal "$T/skew/manifest.json"
check_fail "cursors out of lockstep are refused" 1 "not in lockstep: rank 0 is at $K, rank 2 at $((K + 5))" \
	$RS -w 2 "$T/skew" "$T/x3"
jq -c '.state.rng[1].cpu.seed = 99' "$T/w3/manifest.json" > "$T/skew/manifest.json"
reseal "$T/skew/manifest.json"
check_fail "per-rank RNG states that differ are refused" 1 "state.rng[1] differs" $RS -w 2 "$T/skew" "$T/x4"
[ ! -e "$T/x1" ] && [ ! -e "$T/x2" ] && [ ! -e "$T/x3" ] && [ ! -e "$T/x4" ] && ok "no output after the failures" \
	|| notok "output left behind"
nothing_left "no staging directory left behind" "$T" ".partial-"
mkdir "$T/exists"
check_fail "an existing OUT is refused" 1 "exists" $RS -w 2 "$S5" "$T/exists"
[ -z "$(ls -A "$T/exists")" ] && ok "and left as it was" || notok "exists was touched"
check_fail "a source that is not a checkpoint" 1 "no manifest.json" $RS -w 2 "$T/exists" "$T/x5"

# ---- export ----

mkdir "$T/hf"
check "--export safetensors into a directory" $RS -q --export safetensors -t "$T/t.lmtok" "$S5" "$T/hf"
ST=$T/hf/model.safetensors
jq -e '.event == "export" and .dtype == "F32" and .tensors == 28' "$T/.out" > /dev/null \
	&& ok "a JSONL export record" || notok "export record" "$(cat "$T/.out")"
size=$(wc -c < "$ST" | tr -d ' ')
n=$(od -An -t u8 -j 0 -N 8 "$ST" | tr -d ' ')
dd if="$ST" bs=1 skip=8 count="$n" 2> /dev/null > "$T/hdr.json"
jq -e --argjson n "$n" --argjson size "$size" '
	($n % 8 == 0) and
	(to_entries | map(select(.key != "__metadata__") | .value) | sort_by(.data_offsets[0])) as $t |
	($t[0].data_offsets[0] == 0) and ($t[-1].data_offsets[1] == $size - 8 - $n) and
	([range(1; $t | length) | $t[.].data_offsets[0] == $t[. - 1].data_offsets[1]] | all) and
	($t | all(.dtype == "F32" and .data_offsets[1] - .data_offsets[0] == 4 * (.shape | reduce .[] as $d (1; . * $d)))) and
	(.["transformer.wte.weight"].shape == [300, 32]) and (.["transformer.h.1.mlp.c_fc.weight"].shape == [32, 128]) and
	(.["transformer.h.0.attn.c_attn.weight"].shape == [32, 96]) and (has("lm_head.weight") | not) and
	(.__metadata__.format == "pt")' "$T/hdr.json" > /dev/null \
	&& ok "safetensors: an 8-aligned JSON header whose offsets tile the rest of the file, GPT-2's shapes" \
	|| notok "safetensors header" "$(head -c 400 "$T/hdr.json")"
jq -e '.model_type == "gpt2" and .vocab_size == 300 and .n_layer == 2 and .n_head == 2 and .n_embd == 32
	and .n_positions == 32 and .tie_word_embeddings == true and .eos_token_id == 299 and .torch_dtype == "float32"' \
	"$T/hf/config.json" > /dev/null && ok "config.json, with the tokenizer's EOS" || notok "config" "$(cat "$T/hf/config.json")"
check_fail "an OUT in a missing directory fails, naming it" 1 "hf3/m.safetensors': cannot create" \
	$RS -q --export safetensors "$T/w3" "$T/hf3/m.safetensors"
mkdir "$T/hf3"
check "--export from the 3-rank checkpoint, bf16, to a file name" \
	$RS -q --export safetensors --dtype bf16 "$T/w3" "$T/hf3/m.safetensors"
[ -s "$T/hf3/config.json" ] && jq -e '.torch_dtype == "bfloat16" and (has("eos_token_id") | not)' "$T/hf3/config.json" \
	> /dev/null && ok "config.json next to it: bfloat16, no EOS without -t" || notok "hf3 config"
b16=$(wc -c < "$T/hf3/m.safetensors" | tr -d ' ')
n16=$(od -An -t u8 -j 0 -N 8 "$T/hf3/m.safetensors" | tr -d ' ')
[ $((2 * (b16 - 8 - n16))) = $((size - 8 - n)) ] && ok "bf16 data is exactly half of fp32's ($size -> $b16 bytes)" \
	|| notok "bf16 size $b16 of $size"
check "--export fp32 from the 3-rank checkpoint" $RS -q --export safetensors "$T/w3" "$T/hf3/f32.safetensors"
$RS -q --export safetensors "$S5" "$T/hf/plain.safetensors" > /dev/null
same "... the same bytes as from the original" "$T/hf/plain.safetensors" "$T/hf3/f32.safetensors"
check_fail "another tokenizer is refused" 1 "is not the checkpoint's tokenizer" \
	$RS --export safetensors -t "$T/t2.lmtok" "$S5" "$T/hf/t2.safetensors"
$TR $M --untie --updates 2 --ckpt-every 2 -o "$T/untied" > /dev/null 2>&1
check "--export an untied model" $RS -q --export safetensors "$T/untied/ckpt/step-00000002" "$T/hfu.safetensors"
n=$(od -An -t u8 -j 0 -N 8 "$T/hfu.safetensors" | tr -d ' ')
dd if="$T/hfu.safetensors" bs=1 skip=8 count="$n" 2> /dev/null | jq -e '.["lm_head.weight"].shape == [300, 32]' \
	> /dev/null && ok "it has lm_head.weight [V, C]" || notok "untied lm_head"
jq -e '.tie_word_embeddings == false' "$T/config.json" > /dev/null && ok "and config.json says untied" \
	|| notok "untied config"
check_fail "the weights may not be called config.json" 2 "cannot be named config.json" \
	$RS --export safetensors "$S5" "$T/hf/config.json"

# a write error mid-file names the rank file (the writer keeps its own copy of the
# path) and leaves nothing: RLIMIT_FSIZE of 64 KiB, below one rank's file
sh -c 'trap "" XFSZ; ulimit -f 128; exec "$@"' sh $RS -w 3 "$S5" "$T/fsz" > /dev/null 2> "$T/.err"
rc=$?
[ "$rc" = 1 ] && grep -qF "/rank-00000.lmckpt': write: File too large" "$T/.err" \
	&& ok "a write error mid-file names the rank file and the errno" || notok "reshard write error" "status $rc" "$(cat "$T/.err")"
nothing_left "nothing left after the write error" "$T" fsz
finish
