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
#   - 1 -> 1500 -> 1 ranks, byte-identical; at 1500 an unlisted data file named and
#     a flipped byte found in its own file (the per-rank index of lib/ckpt);
#   - a flipped byte in a source file, cursors out of lockstep, per-rank RNG states
#     that differ: exit 1 naming the problem, nothing left behind; an existing OUT
#     is refused and left as it was;
#   - --export safetensors OUTDIR: HF's directory read back here (the safetensors
#     header parsed, offsets that tile the file, config.json, generation_config.json,
#     tokenizer files, the model card's YAML header), lmt-export.json's SHA-256
#     checked; --max-shard-size: shards whose tensors are the unsharded file's,
#     the index's weight_map naming each once; refused targets (run, checkpoint,
#     other directory, file) left as they were; a re-export replacing the earlier
#     one whole, a failed one leaving it; bf16, an untied head, the same bytes from
#     the 3-rank checkpoint. (tests/unit/test-safetensors.c runs the exported GPT-2.)
#   - --export llmc: model.bin equal to train --export-llmc's, gpt2_tokenizer.bin
#     parsed here against the tokenizer's tokens.
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
check_fail "a bad --max-shard-size" 2 "'5XB' is not a size" $RS --export safetensors --max-shard-size 5XB "$S5" "$T/x"
check_fail "a hex --max-shard-size is not a size" 2 "'0x10M' is not a size" $RS --export safetensors --max-shard-size 0x10M "$S5" "$T/x"
check_fail "--max-shard-size with llmc" 2 "apply to --export safetensors" $RS --export llmc --max-shard-size 1MB "$S5" "$T/x"
check_fail "an unknown dtype" 2 "'fp8' is not fp32, bf16 or fp16" $RS --export safetensors --dtype fp8 "$S5" "$T/x"
check_fail "--dtype without --export" 2 "apply to --export" $RS -w 2 --dtype bf16 "$S5" "$T/x"
check_fail "OUT missing" 2 "give SRC" $RS -w 2 "$S5"
check_fail "an unknown option" 2 "unknown option or missing argument: '--shards'" $RS --shards 2 "$S5" "$T/x"
grep -q "Try 'ckpt-reshard --help'" "$T/.err" && ok "usage errors point to --help" || notok "usage hint"
[ ! -e "$T/x" ] && ok "usage errors write nothing" || notok "x exists"

# ---- never over an input: by device and inode, whatever the spelling ----
cp -r "$S5" "$T/own"
(cd "$T/own" && sha256sum * > "$T/own.sums")
check_fail "--export onto the source's manifest is refused" 1 "(the export) lies inside the input" \
	$RS --export safetensors "$T/own" "$T/own/manifest.json"
check_fail "--export into the source directory is refused" 1 "not writing over an input" \
	$RS --export safetensors "$T/own" "$T/own/"
ln -s "$T/own" "$T/own-link"
check_fail "--export through a symlink to the source is refused" 1 "lies inside the input" \
	$RS --export safetensors "$T/own" "$T/own-link/hf"
check_fail "--export onto the source directory itself is refused" 1 "not writing over an input" \
	$RS --export safetensors "$T/own" "$T/own/x/.."
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
# a world of thousands: opening, verifying and reading went through every chunk for
# each file (world x chunks: 6.7 s for ckpt-inspect at 8000 ranks of this model); now
# by each rank's list. The data must still land where it did, each fault at its file
check "1500 ranks" $RS -q -w 1500 "$S5" "$T/w1500"
check "and back to 1" $RS -q -w 1 "$T/w1500" "$T/w1500to1"
same "... byte-identical to the original" "$S5/rank-00000.lmckpt" "$T/w1500to1/rank-00000.lmckpt"
same "... and so is the manifest" "$S5/manifest.json" "$T/w1500to1/manifest.json"
cp "$T/w1500/rank-00001.lmckpt" "$T/w1500/rank-09999.lmckpt"
check_fail "a data file of 1500 the manifest does not list is named (and ignored)" 0 \
	"'$T/w1500/rank-09999.lmckpt': a data file the manifest does not list; ignored" $BIN/ckpt-inspect -q --verify "$T/w1500"
rm "$T/w1500/rank-09999.lmckpt"
n=$(wc -c < "$T/w1500/rank-00917.lmckpt")
printf '\377' | dd of="$T/w1500/rank-00917.lmckpt" bs=1 seek=$((n - 2)) conv=notrunc 2> /dev/null
check_fail "a flipped byte in rank 917 of 1500 is found in that file" 1 "'$T/w1500/rank-00917.lmckpt'" \
	$RS -q -w 1 "$T/w1500" "$T/w1500b"
nothing_left "... and nothing is left" "$T" w1500b
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

# ---- export: a directory as save_pretrained writes one ----

S10=$T/run/ckpt/step-00000010
# the header of a safetensors file, as JSON: its 8-byte length, then that many bytes
st_header() { n=$(od -An -t u8 -j 0 -N 8 "$1" | tr -d ' '); dd if="$1" bs=1 skip=8 count="$n" 2> /dev/null; }
# a safetensors file's header checked against the file: 8-aligned, offsets that
# tile the rest of it, each tensor's bytes its shape's
st_valid() {
	size=$(wc -c < "$1" | tr -d ' '); n=$(od -An -t u8 -j 0 -N 8 "$1" | tr -d ' ')
	st_header "$1" | jq -e --argjson n "$n" --argjson size "$size" --argjson es "${2:-4}" '
	($n % 8 == 0) and
	(to_entries | map(select(.key != "__metadata__") | .value) | sort_by(.data_offsets[0])) as $t |
	($t[0].data_offsets[0] == 0) and ($t[-1].data_offsets[1] == $size - 8 - $n) and
	([range(1; $t | length) | $t[.].data_offsets[0] == $t[. - 1].data_offsets[1]] | all) and
	($t | all(.data_offsets[1] - .data_offsets[0] == $es * (.shape | reduce .[] as $d (1; . * $d)))) and
	(.__metadata__.format == "pt")' > /dev/null
}
# every file lmt-export.json lists, with its size and SHA-256 computed here, and nothing else in the directory
manifest_ok() {
	(cd "$1" && jq -r '.files[] | "\(.sha256)  \(.path)"' lmt-export.json | sha256sum -c --quiet) > /dev/null 2>&1 &&
	[ "$(cd "$1" && ls | grep -v '^lmt-export.json$' | tr '\n' ' ')" = "$(jq -r '[.files[].path] | sort | join(" ")' "$1/lmt-export.json") " ] &&
	jq -e '.schema == "lmt-export" and (.files | all(.bytes > 0))' "$1/lmt-export.json" > /dev/null
}

check "--export safetensors into a new directory" $RS -q --export safetensors -t "$T/t.lmtok" "$S5" "$T/hf"
jq -e '.event == "export" and .dtype == "F32" and .tensors == 28 and .shards == 1 and .replaced == false
	and ([.files[].path] == ["README.md","config.json","generation_config.json","model.safetensors","tokenizer.json","tokenizer_config.json"])' \
	"$T/.out" > /dev/null && ok "a JSONL export record listing the files written" || notok "export record" "$(cat "$T/.out")"
[ "$(ls "$T/hf" | tr '\n' ' ')" = "README.md config.json generation_config.json lmt-export.json model.safetensors tokenizer.json tokenizer_config.json " ] \
	&& ok "the directory holds HF's files and lmt-export.json" || notok "hf files" "$(ls "$T/hf")"
manifest_ok "$T/hf" && ok "lmt-export.json lists every file with its size and SHA-256 (checked here)" || notok "manifest"
jq -e --slurpfile rec "$T/.out" '.files == $rec[0].files' "$T/hf/lmt-export.json" > /dev/null \
	&& ok "... the same list as the JSONL record" || notok "manifest vs record"
ST=$T/hf/model.safetensors
st_valid "$ST" && ok "safetensors: an 8-aligned JSON header whose offsets tile the rest of the file" || notok "safetensors header"
st_header "$ST" | jq -e '(.["transformer.wte.weight"].shape == [300, 32]) and (.["transformer.h.1.mlp.c_fc.weight"].shape == [32, 128]) and
	(.["transformer.h.0.attn.c_attn.weight"].shape == [32, 96]) and (has("lm_head.weight") | not)' > /dev/null \
	&& ok "GPT-2's names and shapes" || notok "shapes"
jq -e '.model_type == "gpt2" and .vocab_size == 300 and .n_layer == 2 and .n_head == 2 and .n_embd == 32
	and .n_positions == 32 and .tie_word_embeddings == true and .eos_token_id == 299 and .bos_token_id == 299
	and .torch_dtype == "float32"' "$T/hf/config.json" > /dev/null \
	&& ok "config.json: bos = eos = the tokenizer's end-of-text, after which documents start" || notok "config" "$(cat "$T/hf/config.json")"
jq -e '.bos_token_id == 299 and .eos_token_id == 299' "$T/hf/generation_config.json" > /dev/null \
	&& ok "generation_config.json: the same bos and eos" || notok "generation_config"
jq -e '.bos_token == "<|endoftext|>" and .eos_token == "<|endoftext|>" and .add_bos_token == true and .model_max_length == 32' \
	"$T/hf/tokenizer_config.json" > /dev/null && ok "tokenizer_config.json: bos and eos the end-of-text token" || notok "tokenizer_config"
"$BIN/tok-train" -q -t "$T/t.lmtok" --export-hf "$T/tok-hf.json" > /dev/null
jq -e --slurpfile hf "$T/tok-hf.json" '(del(.post_processor) == ($hf[0] | del(.post_processor))) and
	.post_processor.type == "TemplateProcessing" and .post_processor.single[0].SpecialToken.id == "<|endoftext|>"
	and .post_processor.special_tokens["<|endoftext|>"].ids == [299]' "$T/hf/tokenizer.json" > /dev/null \
	&& ok "tokenizer.json: tok-train --export-hf's, with a post-processor that starts prompts after <|endoftext|>" \
	|| notok "tokenizer.json" "$(jq -c .post_processor "$T/hf/tokenizer.json")"
head -1 "$T/hf/README.md" | grep -qx -- '---' && awk 'NR > 1 && /^---$/ { exit } NR > 1' "$T/hf/README.md" > "$T/card.yaml" &&
	grep -qx 'library_name: transformers' "$T/card.yaml" && grep -qx 'pipeline_tag: text-generation' "$T/card.yaml" &&
	grep -qx -- '- gpt2' "$T/card.yaml" && grep -q '^| layers | 2 |$' "$T/hf/README.md" && grep -q '^| updates | 5 |$' "$T/hf/README.md" \
	&& ok "README.md: HF's metadata header (library_name, pipeline_tag, tags) and the run's model and training" \
	|| notok "model card" "$(head -12 "$T/hf/README.md")"

# the tokenizer the run recorded, when -t is not given
$TR $M -t "$T/t.lmtok" --updates 2 --ckpt-every 2 -o "$T/runt" > /dev/null 2>&1
check "without -t, the tokenizer the run recorded" $RS -q --export safetensors "$T/runt/ckpt/step-00000002" "$T/hft"
jq -e '.tokenizer == "'"$T/t.lmtok"'"' "$T/.out" > /dev/null && [ -s "$T/hft/tokenizer.json" ] \
	&& ok "... named in the record, tokenizer.json written" || notok "recorded tokenizer" "$(cat "$T/.out")"
check_fail "another tokenizer is refused" 1 "is not the checkpoint's tokenizer" \
	$RS --export safetensors -t "$T/t2.lmtok" "$S5" "$T/hf-t2"
[ ! -e "$T/hf-t2" ] && ok "... and nothing written" || notok "hf-t2 exists"

# sharding: a small --max-shard-size; the shards together are the unsharded tensors
check "--max-shard-size 20KB shards the weights" $RS -q --export safetensors -t "$T/t.lmtok" --max-shard-size 20KB "$S5" "$T/hfs"
ns=$(jq '.shards' "$T/.out")
IDX=$T/hfs/model.safetensors.index.json
[ "$ns" -gt 1 ] && [ ! -e "$T/hfs/model.safetensors" ] && [ "$(ls "$T/hfs" | grep -c '^model-[0-9]\{5\}-of-[0-9]\{5\}\.safetensors$')" = "$ns" ] \
	&& ls "$T/hfs" | grep -q "^model-00001-of-$(printf %05d "$ns").safetensors$" \
	&& ok "$ns files model-0000i-of-$(printf %05d "$ns").safetensors and no model.safetensors" || notok "shard files" "$(ls "$T/hfs")"
good=1
for f in "$T"/hfs/model-*.safetensors; do st_valid "$f" || { good=0; echo "# invalid $f"; }
	[ "$(st_header "$f" | jq '[to_entries[] | select(.key != "__metadata__") | .value | .data_offsets[1] - .data_offsets[0]] | add')" -le 20000 ] \
		|| [ "$(st_header "$f" | jq 'length')" = 2 ] || { good=0; echo "# $f over 20KB with several tensors"; }
	st_header "$f" | jq -c --arg f "${f##*/}" 'del(.__metadata__) | keys[] | {(.): $f}'
done > "$T/shardmap.jsonl"
[ $good = 1 ] && ok "every shard a valid safetensors file, none over 20 KB of data but a lone tensor" || notok "shards"
st_header "$ST" > "$T/hdr-all.json"
jq -e --slurpfile m "$T/shardmap.jsonl" --slurpfile h "$T/hdr-all.json" '
	(.weight_map == ($m | add)) and ([$m[] | keys[0]] | length == (unique | length)) and
	((.weight_map | keys) == ($h[0] | del(.__metadata__) | keys)) and
	(.metadata.total_size == ($h[0] | del(.__metadata__) | [.[] | .data_offsets[1] - .data_offsets[0]] | add))' "$IDX" > /dev/null \
	&& ok "the index: weight_map names each tensor's shard, every tensor once; total_size the data's bytes" \
	|| notok "index" "$(head -c 300 "$IDX")"
head -2 "$IDX" | tr -d '\n' | grep -q '^{  "metadata": {' && tail -c 2 "$IDX" | od -c | grep -q '}  *\\n' \
	&& ok "... written as json.dumps(indent=2, sort_keys=True) + newline" || notok "index layout"
# each tensor's bytes, from the shards and from the unsharded file
tbytes() { st_header "$1" | jq -r --arg t "$2" '.[$t].data_offsets | "\(.[0]) \(.[1])"' | {
	read -r b e; n=$(od -An -t u8 -j 0 -N 8 "$1" | tr -d ' '); tail -c +$((9 + n + b)) "$1" | head -c $((e - b)) | sha256sum; }; }
good=1
for t in $(jq -r '.weight_map | keys[]' "$IDX"); do
	f=$T/hfs/$(jq -r --arg t "$t" '.weight_map[$t]' "$IDX")
	[ "$(tbytes "$f" "$t")" = "$(tbytes "$ST" "$t")" ] || { good=0; echo "# $t differs"; }
done
[ $good = 1 ] && ok "every tensor in the shards has the unsharded file's bytes" || notok "shard bytes"
same "config.json does not depend on the sharding" "$T/hf/config.json" "$T/hfs/config.json"

# refused targets: exit 1, left as they were
mkdir "$T/other" && echo mine > "$T/other/notes.txt"
echo data > "$T/afile"
# what a target holds: every file's name and SHA-256 (a file: its own)
snap() { if [ -d "$1" ]; then (cd "$1" && find . -type f | sort | xargs sha256sum); else sha256sum < "$1"; fi; }
for tgt in "$T/run" "$T/own" "$T/other" "$T/afile"; do snap "$tgt" > "$tgt.before"; done
check_fail "a run directory is refused" 1 "is a run directory" $RS -q --export safetensors "$T/w3" "$T/run"
check_fail "a checkpoint directory is refused" 1 "is a checkpoint" $RS -q --export safetensors "$T/w3" "$T/own"
check_fail "a directory that is not an earlier export is refused" 1 "is not an earlier export" \
	$RS -q --export safetensors "$S5" "$T/other"
check_fail "a file is refused" 1 "is not a directory" $RS -q --export safetensors "$S5" "$T/afile"
check_fail "a directory in a run's ckpt/ is refused" 1 "lies in the checkpoints of the run" \
	$RS -q --export safetensors "$S5" "$T/run/ckpt/hf"
cp -r "$T/hf" "$T/hfx" && echo extra > "$T/hfx/extra.txt"
check_fail "an earlier export with a file it did not write is refused" 1 "holds 'extra.txt'" \
	$RS -q --export safetensors "$S5" "$T/hfx"
good=1
for tgt in "$T/run" "$T/own" "$T/other" "$T/afile"; do
	snap "$tgt" > "$tgt.after"
	cmp -s "$tgt.before" "$tgt.after" || { good=0; echo "# $tgt changed"; }
done
[ $good = 1 ] && [ "$(cat "$T/other/notes.txt")" = mine ] && [ "$(cat "$T/afile")" = data ] && [ -e "$T/hfx/extra.txt" ] \
	&& ! [ -e "$T/run/ckpt/hf" ] && ok "the refused targets are left as they were" || notok "a refused target changed"
nothing_left "no staging directory left behind" "$T" ".partial-"

# re-export: an earlier export is replaced as a whole
cp "$T/hf/config.json" "$T/hf-old-config.json"
check "a re-export replaces an earlier export" $RS -q --export safetensors --dtype bf16 -t "$T/t.lmtok" "$S10" "$T/hf"
jq -e '.replaced == true and .update == 10 and .dtype == "BF16"' "$T/.out" > /dev/null && manifest_ok "$T/hf" &&
	jq -e '.torch_dtype == "bfloat16"' "$T/hf/config.json" > /dev/null && jq -e '.source.update == 10' "$T/hf/lmt-export.json" > /dev/null \
	&& st_valid "$T/hf/model.safetensors" 2 \
	&& ok "... bf16 of update 10 in its place, its manifest true" || notok "re-export" "$(cat "$T/.out")"
check "a re-export as shards replaces an unsharded one, leaving no file of the earlier" \
	$RS -q --export safetensors --max-shard-size 20KB -t "$T/t.lmtok" "$S5" "$T/hf"
[ ! -e "$T/hf/model.safetensors" ] && manifest_ok "$T/hf" && ok "... only the new export's files" || notok "reexport files" "$(ls "$T/hf")"
check "and back to one file" $RS -q --export safetensors -t "$T/t.lmtok" "$S5" "$T/hf"
[ -z "$(ls "$T/hf" | grep '^model-')" ] && [ ! -e "$T/hf/model.safetensors.index.json" ] && same "... the same config.json as the first export" \
	"$T/hf-old-config.json" "$T/hf/config.json" || notok "shards left over"
# a failing re-export leaves the earlier one untouched: the write stopped by RLIMIT_FSIZE
(cd "$T/hf" && sha256sum *) > "$T/hf.sums"
sh -c 'trap "" XFSZ; ulimit -f 64; exec "$@"' sh $RS -q --export safetensors -t "$T/t.lmtok" "$S10" "$T/hf" > /dev/null 2> "$T/.err"
rc=$?
[ "$rc" = 1 ] && (cd "$T/hf" && sha256sum -c --quiet "$T/hf.sums") && [ "$(ls "$T/hf" | wc -l)" = "$(wc -l < "$T/hf.sums")" ] \
	&& ok "a failed re-export (a write error) leaves the earlier export as it was" || notok "failed re-export" "status $rc" "$(cat "$T/.err")"
nothing_left "and no staging directory" "$T" ".partial-"

# from the 3-rank checkpoint, the same bytes; an untied model
check "--export from the 3-rank checkpoint" $RS -q --export safetensors -t "$T/t.lmtok" "$T/w3" "$T/hf3"
same "... the same model.safetensors as from the original" "$T/hf/model.safetensors" "$T/hf3/model.safetensors"
jq -e --slurpfile a "$T/hf/lmt-export.json" '(.files | map(select(.path != "README.md"))) == ($a[0].files | map(select(.path != "README.md")))' \
	"$T/hf3/lmt-export.json" > /dev/null && ok "... and every file the same but the card, which names the directory" || notok "hf3 manifest"
check "--export bf16" $RS -q --export safetensors --dtype bf16 "$S5" "$T/hf16"
b16=$(wc -c < "$T/hf16/model.safetensors" | tr -d ' ')
n16=$(od -An -t u8 -j 0 -N 8 "$T/hf16/model.safetensors" | tr -d ' ')
size=$(wc -c < "$ST" | tr -d ' '); n=$(od -An -t u8 -j 0 -N 8 "$ST" | tr -d ' ')
[ $((2 * (b16 - 8 - n16))) = $((size - 8 - n)) ] && jq -e '(has("eos_token_id") | not)' "$T/hf16/config.json" > /dev/null \
	&& [ ! -e "$T/hf16/tokenizer.json" ] && grep -q "no tokenizer recorded" "$T/.err" \
	&& ok "bf16 data is half of fp32's; without a tokenizer, no eos and no tokenizer files, said" || notok "bf16 export"
$TR $M --untie --updates 2 --ckpt-every 2 -o "$T/untied" > /dev/null 2>&1
check "--export an untied model" $RS -q --export safetensors "$T/untied/ckpt/step-00000002" "$T/hfu"
st_header "$T/hfu/model.safetensors" | jq -e '.["lm_head.weight"].shape == [300, 32]' > /dev/null \
	&& jq -e '.tie_word_embeddings == false' "$T/hfu/config.json" > /dev/null \
	&& ok "it has lm_head.weight [V, C] and config.json says untied" || notok "untied"

# ---- export: llm.c ----

check "--export llmc" $RS -q --export llmc -t "$T/t.lmtok" "$S10" "$T/llmc"
[ "$(ls "$T/llmc" | tr '\n' ' ')" = "gpt2_tokenizer.bin lmt-export.json model.bin " ] && manifest_ok "$T/llmc" \
	&& jq -e '.format == "llmc" and ([.files[].path] == ["gpt2_tokenizer.bin", "model.bin"])' "$T/.out" > /dev/null \
	&& ok "model.bin, gpt2_tokenizer.bin and the manifest" || notok "llmc files" "$(ls "$T/llmc")"
same "model.bin is train --export-llmc's bytes for the same update" "$T/a.bin" "$T/llmc/model.bin"
# gpt2_tokenizer.bin read here: 256 uint32 header words, then per token a length byte and the bytes
TB=$T/llmc/gpt2_tokenizer.bin
[ "$(od -An -t u4 -N 16 "$TB" | tr -s ' ')" = " 20240328 2 300 299" ] && [ "$(od -An -t u4 -j 16 -N 1008 "$TB" | tr -d ' 0\n*')" = "" ] \
	&& ok "gpt2_tokenizer.bin: magic 20240328, version 2, 300 tokens, end-of-text 299, zeros" || notok "tokenizer header" "$(od -An -t u4 -N 16 "$TB")"
"$BIN/tok-train" -q -t "$T/t.lmtok" --export-hf "$T/tok-hf.json" > /dev/null
tail -c +1025 "$TB" | od -An -v -t u1 | tr -s ' ' '\n' | grep -v '^$' | awk '
	BEGIN { want = 0 } { if (want == 0) { if (n) print ""; want = $1; n = 1; printf "%d", $1; next } printf " %d", $1; want-- }
	END { print "" }' > "$T/tb.tokens"
# the tokenizer's own tokens, from its HF export: GPT-2's byte-level alphabet
# undone (bytes 33-126, 161-172, 174-255 are their own characters; the others,
# in order, are U+0100 on), specials as their text
jq -r '([range(33; 127)] + [range(161; 173)] + [range(174; 256)]) as $p | ([range(0; 256)] - $p) as $m |
	([.model.vocab | to_entries[] | {id: .value, b: (.key | explode | map(if . >= 256 then $m[. - 256] else . end))}] +
	 [.added_tokens[] | {id, b: (.content | explode)}]) | unique_by(.id)[] | "\(.b | length) \(.b | map(tostring) | join(" "))"' \
	"$T/tok-hf.json" > "$T/tok.tokens"
good=1
[ "$(wc -l < "$T/tok.tokens")" = 300 ] && same_q() { cmp -s "$1" "$2"; } && same_q "$T/tok.tokens" "$T/tb.tokens" || good=0
[ $(($(wc -c < "$TB") - 1024)) = $(awk '{ s += 1 + $1 } END { print s }' "$T/tb.tokens") ] || good=0
[ "$good" = 1 ] && ok "gpt2_tokenizer.bin: 300 tokens, each a length and the tokenizer's bytes" || notok "tokenizer tokens"
check_fail "llm.c's export of an untied model is refused" 1 "untied output head" \
	$RS -q --export llmc -t "$T/t.lmtok" "$T/untied/ckpt/step-00000002" "$T/llmcu"
[ ! -e "$T/llmcu" ] && ok "... nothing written" || notok "llmcu exists"
check_fail "llm.c's export needs a tokenizer" 1 "give -t FILE" $RS -q --export llmc "$S5" "$T/llmcn"

# a write error mid-file names the rank file (the writer keeps its own copy of the
# path) and leaves nothing: RLIMIT_FSIZE of 64 KiB, below one rank's file
sh -c 'trap "" XFSZ; ulimit -f 128; exec "$@"' sh $RS -w 3 "$S5" "$T/fsz" > /dev/null 2> "$T/.err"
rc=$?
[ "$rc" = 1 ] && grep -qF "/rank-00000.lmckpt': write: File too large" "$T/.err" \
	&& ok "a write error mid-file names the rank file and the errno" || notok "reshard write error" "status $rc" "$(cat "$T/.err")"
nothing_left "nothing left after the write error" "$T" fsz
finish
