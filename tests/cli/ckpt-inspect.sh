#!/bin/sh
# tests/cli/ckpt-inspect.sh: ckpt-inspect on real checkpoints of a tiny training run.
#
#   - listing: every tensor of the model three times (parameters and AdamW's two
#     moments, as params.json names them), the state, checksums equal to the
#     manifest's, and statistics checked against values computed independently,
#     with od and awk, from the llm.c file train exports of the same parameters;
#     non-finite values counted and left out of the statistics;
#   - --verify passes on a good checkpoint and, on damaged copies (a flipped
#     payload byte, two in two tensors, a truncated file, a deleted file, manifests
#     edited in a CRC, a size, a SHA-256), exits 1 naming the file and every tensor
#     hit, as an independent count from the manifest's byte offsets predicts;
#   - a checkpoint resharded to 3 ranks (when ckpt-reshard is built): each tensor's
#     CRC-32C as with 1 rank, nothing differs but the sharding state, a flipped
#     byte in one rank's file is pinned on that file;
#   - directories that are not checkpoints (interrupted saves, through
#     LMT_TEST_CKPT_KILL; a step directory without its manifest; truncated,
#     invalid or empty manifests; data files of zeros or random bytes) are
#     explained and exit 1, never crash;
#   - --diff: two updates of a run differ in parameters and state.update, a
#     byte-identical copy does not, a planted NaN and a planted value give exactly
#     the differences expected, and a resumed run ends identical to an
#     uninterrupted one;
#   - the man page's example pipelines;
#   - usage errors exit 2.
. tests/cli/lib.sh
CI=$BIN/ckpt-inspect
TR=$BIN/train

"$BIN/gen-corpus" -q --docs 400 --seed 7 -o "$T/c.jsonl" > /dev/null
"$BIN/tok-train" -q -v 300 -o "$T/t.lmtok" "$T/c.jsonl" > /dev/null
"$BIN/tok-encode" -q -t "$T/t.lmtok" -o "$T/s.lmtoks" "$T/c.jsonl" > /dev/null
"$BIN/shard-pack" -q -L 32 --split val=0.1 -o "$T/d" "$T/s.lmtoks" > /dev/null
TINY="--data $T/d --layers 1 --heads 2 --channels 32 --micro-batch 4 --threads 1 --eval-every 0"
$TR $TINY --updates 10 --ckpt-every 5 -o "$T/run" --export-llmc "$T/m.bin" > /dev/null 2>&1
S5=$T/run/ckpt/step-00000005
S10=$T/run/ckpt/step-00000010
[ -f "$S5/manifest.json" ] && [ -f "$S10/manifest.json" ] && ok "train made checkpoints at updates 5 and 10" \
	|| notok "train made checkpoints" "$(ls -R "$T/run")"

# ---- usage ----
check "ckpt-inspect --help exits 0" $CI --help
grep -q "^usage: ckpt-inspect" "$T/.out" && ok "--help prints the usage to stdout" || notok "--help"
check "ckpt-inspect --version exits 0" $CI --version
grep -q "^ckpt-inspect (lmt) " "$T/.out" && ok "--version names the tool" || notok "--version" "$(cat "$T/.out")"
check_fail "no checkpoint is a usage error" 2 "no checkpoint" $CI
check_fail "two checkpoints without --diff are a usage error" 2 "one checkpoint at a time" $CI "$S5" "$S10"
check_fail "--diff with one checkpoint is a usage error" 2 "give A and B" $CI --diff "$S5"
check_fail "an unknown option is a usage error" 2 "unknown option" $CI --frobnicate "$S5"
check_fail "--json with --table is a usage error" 2 "exclude each other" $CI --json --table "$S5"
check_fail "ckpt-reshard: a file given as the checkpoint is named as a file" 1 "is a file, not a checkpoint directory" \
	"$BIN/ckpt-reshard" -w 2 "$S5/manifest.json" "$T/rs"
check_fail "ckpt-reshard: a missing checkpoint says why (it said 'not a checkpoint directory: Success' for a file)" 1 \
	"'$T/nowhere': cannot open the checkpoint directory: No such file or directory" "$BIN/ckpt-reshard" -w 2 "$T/nowhere" "$T/rs"
check_fail "--atol without --diff is a usage error" 2 "apply to --diff" $CI --atol 0.1 "$S5"
check_fail "a bad --atol names the option" 2 "'--atol'" $CI --diff --atol much "$S5" "$S10"
check_fail "a hex --atol is not a number (strtod would read 0x10 as 16)" 2 "'0x10' is not a number" \
	$CI --diff --atol 0x10 "$S5" "$S10"
check_fail "--tensor with --verify is a usage error" 2 "do not apply" $CI --verify --tensor 'param/*' "$S5"

# ---- listing ----
check "list a checkpoint" $CI "$S10"
cp "$T/.out" "$T/l.jsonl"
jq -e -s 'length == 50 and (.[0] | .event == "checkpoint" and .update == 10 and .state.update == 10
	and .world == 1 and .committed and (.files | length) == 1 and .files[0].ok)
	and (.[-1] | .event == "summary" and .tensors == 48 and .bad_tensors == 0 and .bad_files == 0)' \
	"$T/l.jsonl" > /dev/null && ok "a checkpoint record (update 10, the state), 48 tensor records, a summary" \
	|| notok "listing records" "$(head -c 400 "$T/l.jsonl")"
# the model's tensors, from train's own params.json, each as param/, adam_m/, adam_v/ with its shape
jq -c '.tensors | to_entries[] | [.key, .value]' "$T/run/params.json" > "$T/model.txt"
jq -c 'select(.event == "tensor") | [.name, .shape]' "$T/l.jsonl" > "$T/listed.txt"
for k in param adam_m adam_v; do sed "s|^\[\"|[\"$k/|" "$T/model.txt"; done > "$T/want.txt"
nm=$(wc -l < "$T/model.txt")
[ "$nm" -gt 10 ] && cmp -s "$T/want.txt" "$T/listed.txt" \
	&& ok "every tensor of the model ($nm), three times, with params.json's shapes" \
	|| notok "tensors listed" "$(diff "$T/want.txt" "$T/listed.txt" | head -5)"
total=$(jq .total "$T/run/params.json")
jq -e -s --argjson p "$total" '.[-1].elements == 3 * $p' "$T/l.jsonl" > /dev/null \
	&& ok "the summary counts 3 x $total elements" || notok "element count" "$(tail -1 "$T/l.jsonl")"
jq -c '.tensors[] | [.name, [.chunks[].crc32c]]' "$S10/manifest.json" > "$T/mcrc.txt"
jq -c 'select(.event == "tensor") | [.name, .chunk_crc32c]' "$T/l.jsonl" > "$T/lcrc.txt"
cmp -s "$T/mcrc.txt" "$T/lcrc.txt" && ok "chunk CRC-32Cs are the manifest's" || notok "chunk crcs"
jq -e -s '[.[] | select(.event == "tensor") | .ok and .crc32c == .chunk_crc32c[0]] | all' "$T/l.jsonl" > /dev/null \
	&& ok "one chunk each: the CRC-32C recomputed from the data equals the manifest's" || notok "whole crc"

# statistics against od + awk over the llm.c export of the same parameters (update 10).
# Tolerance 1e-6 x (|value| + rms): od prints each float as a decimal that reads back
# to it, within half a float ulp (6e-8 relative), so awk's sums of them differ from
# exact ones by at most ~6e-8 of the magnitudes; a wrong divisor, a missed element or
# single-precision summation would be off by far more.
jq -r 'select(.event == "tensor" and (.name | startswith("param/"))) |
	"\(.name) \(.elements) \(.min) \(.max) \(.mean) \(.rms) \(.nonfinite)"' "$T/l.jsonl" > "$T/ours.txt"
od -An -v -t f4 -j 1024 "$T/m.bin" | awk -v list="$T/ours.txt" '
	BEGIN { while ((getline l < list) > 0) { nt++; split(l, f, " "); name[nt] = f[1]; cnt[nt] = f[2]
		mn[nt] = f[3]; mx[nt] = f[4]; me[nt] = f[5]; rm[nt] = f[6] }; t = 1; bad = 0 }
	function close_tensor(   m, r, tol) {
		m = s / n; r = sqrt(q / n); tol = 1e-6
		if (abs(a - mn[t]) > tol * (abs(a) + r) || abs(b - mx[t]) > tol * (abs(b) + r) ||
		    abs(m - me[t]) > tol * (abs(m) + r) || abs(r - rm[t]) > tol * r) {
			printf "%s: od+awk %.9g %.9g %.12g %.12g, ckpt-inspect %s %s %s %s\n", name[t], a, b, m, r,
				mn[t], mx[t], me[t], rm[t]; bad++ }
		t++; n = 0; s = 0; q = 0 }
	function abs(x) { return x < 0 ? -x : x }
	{ for (i = 1; i <= NF && t <= nt; i++) { v = $i + 0; if (n == 0 || v < a) a = v; if (n == 0 || v > b) b = v
		n++; s += v; q += v * v; if (n == cnt[t]) close_tensor() } }
	END { if (t != nt + 1 || nt < 10) { print "only " t - 1 " of " nt " tensors in the file"; bad++ }; exit bad > 0 }
' > "$T/stats.diff" && ok "min, max, mean, rms of all $nm parameter tensors agree with od+awk on the llm.c export" \
	|| notok "statistics" "$(head -3 "$T/stats.diff")"

check "a run directory stands for its newest checkpoint" $CI "$T/run"
grep -q "inspecting its newest checkpoint, '$S10'" "$T/.err" && head -1 "$T/.out" | grep -q "\"path\":\"$S10\"" \
	&& ok "... which it names on stderr and in the record" || notok "newest" "$(cat "$T/.err")"
cmp -s "$T/.out" "$T/l.jsonl" && ok "the same records as for the checkpoint itself (no timestamps)" || notok "run output"
# a run whose newest checkpoint was edited: listing falls back to the one before
# (as a resume does), --verify says the run is not intact (it exited 0)
cp -r "$T/run" "$T/rnew"
jq -c '.state.tokens += 1' "$S10/manifest.json" > "$T/rnew/ckpt/step-00000010/manifest.json"
check "a run whose newest checkpoint was edited: listed, from the one before" $CI -q --no-stats "$T/rnew"
check_fail "... --verify of the run exits 1, naming the skipped one" 1 "newer checkpoint did not open" \
	$CI -q --verify "$T/rnew"
grep -qF "skipping '$T/rnew/ckpt/step-00000010'" "$T/.err" && ok "... with the warning for it" ||
	notok "skipped warning" "$(cat "$T/.err")"
check "--no-stats lists from the manifest" $CI --no-stats "$S10"
jq -e -s '[.[] | select(.event == "tensor")] | length == 48 and (map(has("min") or has("crc32c")) | any | not)' \
	"$T/.out" > /dev/null && ok "... 48 tensors, without statistics" || notok "--no-stats"
check "--tensor selects by pattern" $CI --tensor 'param/*' --tensor 'adam_v/wte' "$S10"
[ "$(grep -c '"event":"tensor"' "$T/.out")" = $((nm + 1)) ] && ok "... $nm parameters and adam_v/wte" \
	|| notok "--tensor" "$(grep -c '"event":"tensor"' "$T/.out")"
check "--table prints a table" $CI --table "$S10"
grep -q "^param/wte  *f32  *384x32 " "$T/.out" && grep -q "every chunk's CRC-32C matches" "$T/.out" \
	&& ok "... with a row per tensor and a verdict" || notok "--table" "$(head -20 "$T/.out")"
if command -v script > /dev/null 2>&1 && script -qc true /dev/null > /dev/null 2>&1; then
	script -qc "$CI -q $S10" /dev/null > "$T/tty.txt" 2>&1
	grep -q "^param/wte  *f32" "$T/tty.txt" && ! grep -q '"event"' "$T/tty.txt" \
		&& ok "a table when stdout is a terminal" || notok "tty table" "$(head -5 "$T/tty.txt")"
else
	ok "a table when stdout is a terminal # SKIP script(1) cannot make a terminal here"
fi

# non-finite values: a NaN planted in wpe of the export; every update skipped, so the
# checkpoint holds it (with valid checksums), and the statistics leave it out
set -- $(od -An -t d4 -N 32 "$T/m.bin")
C=$7 Vp=$8
wpe=$((1024 + Vp * C * 4))
cp "$T/m.bin" "$T/nan.bin"
printf '\000\000\300\177' | dd of="$T/nan.bin" bs=1 seek=$((wpe + 8)) conv=notrunc 2>/dev/null
R="--data $T/d --micro-batch 4 --threads 1 --eval-every 0 --updates 2 --lr 0 --on-nonfinite skip"
$TR $R --init-llmc "$T/nan.bin" -o "$T/rnan" > /dev/null 2>&1
check "a checkpoint holding a NaN lists (exit 0)" $CI --tensor param/wpe "$T/rnan"
grep -q "1 non-finite value in 1 tensor" "$T/.err" && ok "... with a warning" || notok "nan warning" "$(cat "$T/.err")"
jq -r 'select(.event == "tensor") | "\(.nonfinite) \(.min) \(.max) \(.mean) \(.rms)"' "$T/.out" > "$T/nan.ours"
od -An -v -t f4 -j "$wpe" -N $((C * 32 * 4)) "$T/nan.bin" | awk -v ours="$(cat "$T/nan.ours")" '
	function abs(x) { return x < 0 ? -x : x }
	{ for (i = 1; i <= NF; i++) { if ($i ~ /nan/) { nf++; continue }; v = $i + 0
		if (n == 0 || v < a) a = v; if (n == 0 || v > b) b = v; n++; s += v; q += v * v } }
	END { split(ours, f, " "); m = s / n; r = sqrt(q / n)
		exit !(f[1] == 1 && nf == 1 && abs(f[2] - a) <= 1e-6 * (abs(a) + r) && abs(f[3] - b) <= 1e-6 * (abs(b) + r) &&
			abs(f[4] - m) <= 1e-6 * (abs(m) + r) && abs(f[5] - r) <= 1e-6 * r) }' \
	&& ok "one non-finite value counted, the statistics those of the other $((C * 32 - 1)) (od+awk)" \
	|| notok "nan statistics" "$(cat "$T/nan.ours")"

# ---- verify ----
check "--verify passes on a good checkpoint" $CI --verify "$S10"
jq -e -s '.[-1] | .event == "verify-summary" and .ok and .bad_files == 0 and .bad_tensors == 0 and .tensors == 48' \
	"$T/.out" > /dev/null && ok "... and says so in its summary" || notok "verify summary" "$(tail -1 "$T/.out")"
F=rank-00000.lmckpt
boff() { # TENSOR: the byte offset of its chunk in the file
	jq -r --arg t "$1" '.tensors[] | select(.name == $t) | .chunks[0].byte_offset + 96' "$S10/manifest.json"
}
cp -r "$S10" "$T/bad1"
printf 'Z' | dd of="$T/bad1/$F" bs=1 seek=$(($(boff param/qkvw) + 100)) conv=notrunc 2>/dev/null
check_fail "a flipped payload byte: --verify names the file" 1 "bad1/$F': payload sha256" $CI --verify "$T/bad1"
grep -q "tensor 'param/qkvw'" "$T/.err" && [ "$(grep -c '"tensor":' "$T/.out")" = 1 ] \
	&& ok "... and the one tensor it hit" || notok "flipped byte tensor" "$(cat "$T/.err")"
check_fail "listing a checkpoint with a flipped byte exits 1, naming the tensor" 1 "tensor 'param/qkvw'" $CI "$T/bad1"
cp -r "$S10" "$T/bad1b"
printf 'Z' | dd of="$T/bad1b/$F" bs=1 seek=$(($(boff param/wpe) + 4)) conv=notrunc 2>/dev/null
printf 'Z' | dd of="$T/bad1b/$F" bs=1 seek=$(($(boff adam_v/fcw) + 8)) conv=notrunc 2>/dev/null
check_fail "two flipped bytes: --verify names both tensors, not just the first" 1 "tensor 'adam_v/fcw'" \
	$CI --verify "$T/bad1b"
grep -q "tensor 'param/wpe'" "$T/.err" && grep -q "2 of 48 tensors failed" "$T/.err" \
	&& ok "... param/wpe as well, 2 of 48" || notok "two tensors" "$(cat "$T/.err")"
cp -r "$S10" "$T/bad2"
cut=150000
head -c $cut "$S10/$F" > "$T/bad2/$F"
check_fail "a truncated data file: --verify names it" 1 "bad2/$F': $cut bytes, the manifest says" $CI --verify "$T/bad2"
want=$(jq --argjson c $cut '[.tensors[] | select(.chunks[0].byte_offset + 96 + 4 * .chunks[0].count > $c)] | length' \
	"$S10/manifest.json")
got=$(jq -s '[.[] | select(.tensor and (.ok | not))] | length' "$T/.out")
[ "$want" -gt 0 ] && [ "$got" = "$want" ] && ok "... and each of the $want tensors past the cut, as the manifest's offsets predict" \
	|| notok "truncated tensors" "want $want, got $got"
cp -r "$S10" "$T/bad3"
rm "$T/bad3/$F"
check_fail "a deleted data file: --verify names it" 1 "bad3/$F': missing" $CI --verify "$T/bad3"
[ "$(jq -s '[.[] | select(.tensor)] | length' "$T/.out")" = 48 ] && ok "... and the 48 tensors it held" || notok "deleted"
check_fail "listing a checkpoint whose data file is gone exits 1" 1 "bad3/$F': missing" $CI "$T/bad3"
check_fail "--diff of it against itself exits 1" 1 "could not be compared in full" $CI --diff "$T/bad3" "$T/bad3"
[ "$(wc -l < "$T/.err")" -le 12 ] && grep -q "and [0-9]* more tensors that could not be compared" "$T/.err" &&
	! grep -q "; '$T/bad3" "$T/.err" &&
	ok "... saying the first 8 tensors, each reason once, then how many more (it said 48, each twice)" ||
	notok "diff errors on stderr" "$(head -5 "$T/.err")"
cp -r "$S10" "$T/bad4"
jq -c '(.tensors[] | select(.name == "param/lnfw") | .chunks[0].crc32c) |= "00000000"' "$S10/manifest.json" \
	> "$T/bad4/manifest.json"
check_fail "a manifest edited in a CRC and not re-sealed: the manifest is named, its checksum broken" 1 \
	"bad4/manifest.json': its contents do not match its own checksum" $CI --verify "$T/bad4"
reseal "$T/bad4/manifest.json"
check_fail "a manifest edited in a CRC: named, and the manifest blamed" 1 \
	"tensor 'param/lnfw': elements [0, 32): CRC-32C" $CI --verify "$T/bad4"
grep -q "the manifest's CRC was changed" "$T/.err" && ok "... since the file matches its SHA-256" || notok "crc blame"
cp -r "$S10" "$T/bad5"
jq -c '.files[0].bytes += 64' "$S10/manifest.json" > "$T/bad5/manifest.json"
reseal "$T/bad5/manifest.json"
check_fail "a manifest edited in a size: the file is named" 1 "bad5/$F': 313056 bytes, the manifest says 313120" \
	$CI --verify "$T/bad5"
cp -r "$S10" "$T/bad6"
jq -c '.files[0].payload_sha256 |= ("0" * 64)' "$S10/manifest.json" > "$T/bad6/manifest.json"
reseal "$T/bad6/manifest.json"
check_fail "a manifest edited in a SHA-256: the file is named" 1 "bad6/$F': its header's payload sha256" \
	$CI --verify "$T/bad6"

# chunks that do not tile their tensor, re-sealed. A duplicate of a whole-tensor
# chunk; and, with each rank's chunk count kept (40 ranks: ranks 0-7 hold an empty
# chunk of each 32-element tensor), an empty chunk past a tensor's end traded for
# one of another tensor's. The second was accepted (the tiling check stopped at
# full cover), and a chunk so let through inside the tensor could make a read copy
# 2^64 bytes, or copy nothing and succeed
cp -r "$S10" "$T/bad7"
jq -c '(.tensors[] | select(.name == "param/lnfw") | .chunks) |= . + [.[0]]' "$S10/manifest.json" \
	> "$T/bad7/manifest.json"
reseal "$T/bad7/manifest.json"
check_fail "a duplicate chunk, re-sealed: refused" 1 "bad7" $CI --verify "$T/bad7"
"$BIN/ckpt-reshard" -q -w 40 "$S10" "$T/w40" > /dev/null || notok "reshard to 40 ranks"
jq -c '(.tensors[] | select(.name == "param/lnfb") | .chunks) |= map(select(.rank != 0)) |
	(.tensors[] | select(.name == "param/lnfw") | .chunks) |= . + [.[0] | .offset = 40 | .count = 0 | .byte_offset = 0]' \
	"$T/w40/manifest.json" > "$T/w40/manifest.edit" && mv "$T/w40/manifest.edit" "$T/w40/manifest.json"
reseal "$T/w40/manifest.json"
check_fail "an empty chunk past the tensor's end, re-sealed, chunk counts kept: the tensor named" 1 \
	"tensor 'param/lnfw': its chunks do not cover its 32 elements exactly" $CI --verify "$T/w40"

# ---- the manifest covers itself: every state field, edited by one value ----
# (cursor 8 -> 9 once passed --verify and --resume and the resumed run differed)
cp -r "$S10" "$T/edit"
edit_each "$S10/manifest.json" '.[0] == "state"' "$T/edit/manifest.json" \
	"edit/manifest.json': its contents do not match its own checksum" "$CI" --verify "$T/edit"
[ "$nf" -gt 50 ] && [ "$nbad" = 0 ] && ok "each of the $nf state fields edited: --verify refuses the manifest, naming it" \
	|| notok "state field edits" "$nbad of $nf passed or were not blamed on the manifest" "$firstbad"
for f in '.state.loader.cursors[0].cursor' '.state.update' '.state.tokens' '.state.opt_steps' \
	'.state.metrics_offset' '.state.clipped_updates' '.state.scheduler.next_lr'; do
	rm -rf "$T/erun" && cp -r "$T/run" "$T/erun"
	jq -c "$f += 1" "$S10/manifest.json" > "$T/erun/ckpt/step-00000010/manifest.json"
	check_fail "train --resume refuses a manifest with $f edited" 1 "its contents do not match its own checksum" \
		$TR $TINY --updates 12 -o "$T/erun" --resume "$T/erun/ckpt/step-00000010"
done
jq -c '.tensors[3].name |= . + "x"' "$S10/manifest.json" > "$T/edit/manifest.json"
check_fail "a damaged tensor name: --verify refuses the manifest" 1 "its contents do not match its own checksum" \
	$CI --verify "$T/edit"
reseal "$T/edit/manifest.json"
check_fail "... re-sealed on purpose, --verify still refuses a tensor the model does not have" 1 \
	"(the model its state describes has it)" $CI --verify "$T/edit"
rm -rf "$T/erun" && cp -r "$T/run" "$T/erun"
jq -c '.tensors[3].name |= . + "x"' "$S10/manifest.json" > "$T/erun/ckpt/step-00000010/manifest.json"
reseal "$T/erun/ckpt/step-00000010/manifest.json"
check_fail "... re-sealed on purpose, resume still refuses a tensor the model does not have" 1 \
	"(the model its state describes has it)" \
	$TR $TINY --updates 12 -o "$T/erun" --resume "$T/erun/ckpt/step-00000010"
cp "$S10/manifest.json" "$T/edit/manifest.json"
printf ' ' >> "$T/edit/manifest.json"
check "white space after the seal changes nothing it covers" $CI --verify "$T/edit"
sed 's/{"schema"/{ "schema"/' "$S10/manifest.json" > "$T/edit/manifest.json"
check_fail "white space inside is an edit too" 1 "its contents do not match its own checksum" $CI --verify "$T/edit"
jq -c '.schema_version = 1 | del(.manifest_sha256)' "$S10/manifest.json" > "$T/edit/manifest.json"
check_fail "a wave-1 manifest (schema 1, no seal) is refused by its version, with the way out" 1 \
	"schema version 1, this build reads 2 (an older manifest carries no checksum of itself" $CI --verify "$T/edit"

# ---- --rehash: surgery by hand, vouched for out loud ----
check_fail "--rehash of a run directory says to name a checkpoint (it said manifest.json: No such file)" 1 \
	"is a run directory: --rehash re-seals one checkpoint" $CI --rehash "$T/run"
cp -r "$S10" "$T/surg"
jq -c '.state.clipped_updates += 1' "$S10/manifest.json" > "$T/surg/manifest.json"
check_fail "an edit by hand is refused" 1 "its contents do not match its own checksum" $CI --verify "$T/surg"
check "--rehash seals it as it stands, and verifies the data against it" $CI -q --rehash "$T/surg"
grep -q "RE-SEALED '$T/surg/manifest.json' as it now stands (its seal did not match: it was edited)" "$T/.err" &&
	ok "... saying loudly what it re-signed, --quiet or not" || notok "rehash message" "$(cat "$T/.err")"
jq -s 'map(select(.event == "rehash"))[0] | .was_sealed == false and .old_schema == 2' "$T/.out" | grep -q true &&
	ok "... and a rehash record on stdout" || notok "rehash record" "$(cat "$T/.out")"
check "the re-sealed checkpoint verifies" $CI --verify "$T/surg"
[ "$(jq -c .state.clipped_updates "$T/surg/manifest.json")" = "$(($(jq -c .state.clipped_updates "$S10/manifest.json") + 1))" ] &&
	ok "... with the edit kept" || notok "edit kept"
jq -c '.schema_version = 1 | del(.manifest_sha256)' "$S10/manifest.json" > "$T/surg/manifest.json"
check "--rehash carries a wave-1 manifest (schema 1, no seal) to schema 2" $CI -q --rehash "$T/surg"
[ "$(jq -c .schema_version "$T/surg/manifest.json")" = 2 ] && $CI --verify "$T/surg" > /dev/null 2>&1 &&
	ok "... which then verifies" || notok "schema 1 rehash"
check_fail "--rehash of a directory that is no checkpoint is refused, naming the manifest" 1 "manifest.json': No such file" \
	$CI --rehash "$T"
check_fail "--rehash with --verify is a usage error" 2 "exclude each other" $CI --rehash --verify "$T/surg"

# ---- a checkpoint of 3 ranks (ckpt-reshard cuts one) ----
if [ -x "$BIN/ckpt-reshard" ]; then
	"$BIN/ckpt-reshard" -q -w 3 "$S10" "$T/w3" > /dev/null 2>&1
	check "list a checkpoint of 3 ranks" $CI "$T/w3"
	jq -c 'select(.event == "tensor") | [.name, .crc32c, .chunks, (.chunk_crc32c | length), .ok]' "$T/.out" > "$T/w3.txt"
	jq -c 'select(.event == "tensor") | [.name, .crc32c, 3, 3, true]' "$T/l.jsonl" > "$T/w1.txt"
	cmp -s "$T/w1.txt" "$T/w3.txt" && ok "... 3 chunks a tensor, and each tensor's CRC-32C that of 1 rank" \
		|| notok "world 3 crcs" "$(diff "$T/w1.txt" "$T/w3.txt" | head -3)"
	check "--verify passes on it" $CI --verify "$T/w3"
	check "--diff with the 1-rank original: no tensor differs" sh -c "$CI --diff '$S10' '$T/w3'; [ \$? -le 1 ]"
	jq -e -s '.[-1] | .same == 48 and .differ == 0 and .errors == 0' "$T/.out" > /dev/null \
		&& grep -q '"key":"state.sharding.world","a":1,"b":3' "$T/.out" \
		&& ok "... only the state's sharding (and loader) differ" || notok "world 3 diff" "$(tail -3 "$T/.out")"
	cp -r "$T/w3" "$T/w3bad"
	printf 'Z' | dd of="$T/w3bad/rank-00001.lmckpt" bs=1 seek=2000 conv=notrunc 2>/dev/null
	check_fail "a flipped byte in rank 1 of 3: named" 1 "rank-00001.lmckpt': payload sha256" $CI --verify "$T/w3bad"
	! grep -q "rank-0000[02]" "$T/.err" && [ "$(jq -s '[.[] | select(.tensor)] | length' "$T/.out")" = 1 ] \
		&& ok "... and only it, with its one tensor" || notok "world 3 flip" "$(cat "$T/.err")"
else
	ok "a checkpoint of 3 ranks # SKIP no ckpt-reshard in $BIN"
fi

# ---- directories that are not checkpoints ----
LMT_TEST_CKPT_KILL=data@5 $TR $TINY --updates 10 --ckpt-every 5 -o "$T/kd" > /dev/null 2>&1
tmpd=$(ls -d "$T"/kd/ckpt/.tmp-step-00000005-* 2>/dev/null | head -1)
[ -n "$tmpd" ] && ok "a save killed while writing data leaves a .tmp directory" || notok "kill data" "$(ls -a "$T/kd/ckpt")"
check_fail "... which is explained: never finished, not a checkpoint" 1 \
	"an interrupted save of update 5 by process" $CI "$tmpd"
grep -q "no manifest.json: this save never finished; it is not a checkpoint" "$T/.err" && jq -e '.event == "incomplete"
	and .manifest == "absent" and .update == 5 and (.committed | not) and (.files[0].kind == "data-temporary")
	and (.files[0].status | test("header all zeros"))' "$T/.out" > /dev/null \
	&& ok "... its half-written data file found, its header still zeros" || notok "explain tmp" "$(cat "$T/.out")"
check_fail "a run whose only save was interrupted has no checkpoint" 1 "no checkpoint in" $CI "$T/kd"
LMT_TEST_CKPT_KILL=manifest@5 $TR $TINY --updates 10 --ckpt-every 5 -o "$T/km" > /dev/null 2>&1
tmpm=$(ls -d "$T"/km/ckpt/.tmp-step-00000005-* 2>/dev/null | head -1)
check_fail "a save killed before its rename: complete, but not a checkpoint" 1 "never renamed into place" $CI "$tmpm"
jq -e -s '(.[0].committed | not) and (.[-1].tensors == 48) and .[-1].bad_tensors == 0' "$T/.out" > /dev/null \
	&& ok "... its 48 tensors listed, committed false" || notok "kill manifest" "$(tail -1 "$T/.out")"
check_fail "... and --verify says its files are intact but it is not a checkpoint" 1 "its files are intact" \
	$CI --verify "$tmpm"
mkdir "$T/x"
cp -r "$S10" "$T/x/step-00000010"
rm "$T/x/step-00000010/manifest.json"
check_fail "a step directory without its manifest is explained" 1 "no manifest.json: a save names its directory" \
	$CI "$T/x/step-00000010"
jq -e '.files[0].status | test("complete by its header")' "$T/.out" > /dev/null \
	&& ok "... its data file complete by its own header" || notok "step without manifest" "$(cat "$T/.out")"
check_fail "a directory that is neither a checkpoint nor a run is refused" 1 "neither a checkpoint nor a run" $CI "$T/x"

# garbage never crashes: every case exits 1 with a message
g=0
garbage() { # DESC NEEDLE: a copy of S10 was damaged into $T/g
	for mode in "" --verify --table; do
		$CI $mode "$T/g" > "$T/g.out" 2> "$T/g.err"
		rc=$?
		if [ $rc != 1 ] || ! grep -qF -- "$2" "$T/g.err"; then
			notok "$1 ($mode): exit 1 saying '$2'" "exit status $rc" "$(head -c 300 "$T/g.err")"
			return
		fi
	done
	ok "$1: listing, --verify and --table exit 1 saying '$2'"
}
fresh() { rm -rf "$T/g"; cp -r "$S10" "$T/g"; }
fresh; head -c 2000 "$S10/manifest.json" > "$T/g/manifest.json"
garbage "a truncated manifest" "invalid JSON"
fresh; printf '{"schema": "lmt-checkpoint", ' > "$T/g/manifest.json"
garbage "invalid JSON" "invalid JSON"
fresh; printf '{}\n' > "$T/g/manifest.json"
garbage "an empty object for a manifest" "not an lmt checkpoint manifest"
fresh; : > "$T/g/manifest.json"
garbage "an empty manifest" "invalid JSON"
fresh; head -c 313056 /dev/zero > "$T/g/$F"
garbage "a data file of zeros" "header all zeros"
fresh; head -c 313056 /dev/urandom > "$T/g/$F"
garbage "a data file of random bytes" "bad magic"
fresh; : > "$T/g/$F"
garbage "an empty data file" "0 bytes, the manifest says"
size=$(wc -c < "$S10/manifest.json")
bad=0
for k in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19; do
	fresh
	head -c $((k * size / 20)) "$S10/manifest.json" > "$T/g/manifest.json"
	for mode in "" --verify; do
		$CI $mode "$T/g" > /dev/null 2>&1
		rc=$?
		[ $rc = 1 ] || { bad=$((bad + 1)); echo "# manifest cut at $((k * size / 20)) bytes ($mode): exit status $rc"; }
	done
	$CI --diff "$S10" "$T/g" > /dev/null 2>&1
	rc=$?
	[ $rc = 1 ] || { bad=$((bad + 1)); echo "# manifest cut at $((k * size / 20)) bytes (--diff): exit status $rc"; }
done
[ $bad = 0 ] && ok "a manifest cut at 19 places: listing, --verify and --diff all exit 1" || notok "cut manifests"

# ---- diff ----
check_fail "--diff of updates 5 and 10 finds differences (exit 1)" 1 "differ" $CI --diff "$S5" "$S10"
cp "$T/.out" "$T/diff.jsonl"
jq -e -s 'map(select(.event == "state" and .key == "state.update" and .a == 5 and .b == 10)) | length == 1' \
	"$T/diff.jsonl" > /dev/null && ok "... state.update: 5 -> 10" || notok "state.update" "$(grep state "$T/diff.jsonl")"
jq -e -s 'map(select(.event == "state") | .key) | index("state.loader.cursors[0].cursor") != null' "$T/diff.jsonl" \
	> /dev/null && ok "... and the loader's cursor, by its dotted path" || notok "cursor path"
jq -e -s --argjson n "$nm" '[.[] | select(.event == "tensor" and (.name | startswith("param/")))] |
	length == $n and all(.status == "differ" and .max_abs > 0 and .rel > 0 and .differing > 0)' \
	"$T/diff.jsonl" > /dev/null && ok "... every parameter tensor differs, with max_abs and rel" || notok "param diff"
jq -e -s '.[-1] | .event == "summary" and (.identical | not) and .state_differ > 0 and .errors == 0' \
	"$T/diff.jsonl" > /dev/null && ok "... and the summary says not identical" || notok "diff summary"
check_fail "--ignore clocks leaves them out" 1 "differ" $CI --diff --ignore clocks "$S5" "$S10"
! grep -q '"key":"state.clocks' "$T/.out" && grep -q '"key":"state.update"' "$T/.out" \
	&& ok "... and keeps the rest" || notok "--ignore"
cp -r "$S10" "$T/copy"
check "--diff of a checkpoint and a byte-identical copy finds none (exit 0)" $CI --diff "$S10" "$T/copy"
jq -e -s '.[-1] | .identical and .same == 48 and .state_differ == 0' "$T/.out" > /dev/null \
	&& [ "$(grep -c '"event":"state"' "$T/.out")" = 0 ] && ok "... 48 tensors the same, no state field" \
	|| notok "identical" "$(tail -1 "$T/.out")"
check_fail "--diff with a damaged copy exits 1, as trouble" 1 "could not be compared" $CI --diff "$S10" "$T/bad1"
jq -e -s '.[-1].errors > 0' "$T/.out" > /dev/null && ok "... counted as an error, not a difference" || notok "diff error"
check_fail "--diff refuses a directory that is not a checkpoint" 1 "says what the directory holds" \
	$CI --diff "$S10" "$tmpd"

# exact differences: from the same export, one with a NaN and one value 0.5 planted in
# wpe, every update skipped or made with lr 0, so the parameters stay as planted
cp "$T/nan.bin" "$T/mod.bin"
printf '\000\000\000\077' | dd of="$T/mod.bin" bs=1 seek=$((wpe + 20)) conv=notrunc 2>/dev/null
orig=$(od -An -t f4 -j $((wpe + 20)) -N 4 "$T/m.bin" | tr -d ' ')
$TR $R --init-llmc "$T/m.bin" -o "$T/rok" > /dev/null 2>&1
$TR $R --init-llmc "$T/mod.bin" -o "$T/rmod" > /dev/null 2>&1
check_fail "--diff of planted values exits 1" 1 "differ" $CI --diff --tensor 'param/*' "$T/rok" "$T/rmod"
jq -r 'select(.event == "tensor" and .status != "same") | "\(.name) \(.differing) \(.nonfinite_mismatch) \(.max_abs) \(.rel)"' \
	"$T/.out" > "$T/planted.txt"
awk -v o="$orig" '{ want = 0.5 - o; exit !(NR == 1 && $1 == "param/wpe" && $2 == 2 && $3 == 1 &&
	($4 - want) ^ 2 <= (1e-7 * want) ^ 2 && ($5 - want / 0.5) ^ 2 <= (1e-7 * want) ^ 2) }
	END { if (NR != 1) exit 1 }' "$T/planted.txt" \
	&& ok "only param/wpe differs: 2 elements, 1 non-finite, max_abs 0.5 - ($orig), rel max_abs / 0.5" \
	|| notok "planted diff" "$(cat "$T/planted.txt")" "orig $orig"
check_fail "--atol 1: the NaN still differs" 1 "differ" $CI --diff --atol 1 --tensor param/wpe "$T/rok" "$T/rmod"
jq -e -s 'map(select(.event == "tensor")) | length == 1 and .[0].differing == 1 and .[0].nonfinite_mismatch == 1' \
	"$T/.out" > /dev/null \
	&& ok "... and only it: the planted 0.5 is within --atol" || notok "atol" "$(cat "$T/.out")"

# the man page's examples
$CI --tensor 'param/*' "$S10" 2> /dev/null |
	jq -r 'select(.event == "tensor" and ([.min, .max] | map(fabs) | max) > 10) | .name' > "$T/ex1.txt"
$CI --tensor 'param/*' "$S10" 2> /dev/null |
	jq -r 'select(.event == "tensor" and ([.min, .max] | map(fabs) | max) > 0.5) | .name' > "$T/ex1b.txt"
[ ! -s "$T/ex1.txt" ] && [ "$(tr '\n' ' ' < "$T/ex1b.txt")" = "param/ln1w param/ln2w param/lnfw " ] \
	&& ok "example: no parameter beyond 10; beyond 0.5 only the LayerNorm gains" || notok "example 1" "$(cat "$T/ex1b.txt")"
$CI --verify "$T/bad1b" 2> /dev/null |
	jq -r 'select(.event == "verify" and (.ok | not)) | [.path, .tensor // "-", .error] | @tsv' > "$T/ex2.txt"
[ "$(cut -f2 "$T/ex2.txt" | tr '\n' ' ')" = "- param/wpe adam_v/fcw " ] \
	&& ok "example: the bad file, then its two bad tensors, as TSV" || notok "example 2" "$(cat "$T/ex2.txt")"
$CI --diff --ignore clocks --table "$S5" "$S10" > "$T/ex3.txt" 2> /dev/null
[ $? = 1 ] && grep -q "^state.update  *5 -> 10" "$T/ex3.txt" && ! grep -q "clocks" "$T/ex3.txt" \
	&& grep -q "^param/wte  *differ" "$T/ex3.txt" && ok "example: --diff --ignore clocks --table" \
	|| notok "example 3" "$(head -5 "$T/ex3.txt")"
# a run stopped mid-save and resumed ends where the uninterrupted run did
LMT_TEST_CKPT_KILL=data@10 $TR $TINY --updates 10 --ckpt-every 5 -o "$T/rr" > /dev/null 2>&1
$TR $TINY --updates 10 --ckpt-every 5 -o "$T/rr" --resume auto > /dev/null 2>&1
check "a resumed run's last checkpoint equals the uninterrupted one's (man page example)" \
	$CI -q --diff --ignore clocks --ignore config --ignore metrics_offset "$T/run" "$T/rr"
finish
