#!/bin/sh
# tests/cli/recorded-paths.sh: the paths a run records, used from another directory.
#
# train records --data, -t (and --init-llmc, --export-llmc) as given, and the
# directory it ran in as config.json's "cwd": a relative path is relative to
# that. Run from elsewhere, ckpt-reshard --export finds the tokenizer (it warned
# "no tokenizer recorded" and wrote no tokenizer files), runcard finds the dataset
# (it said 'data/manifest.json' is missing), and a resume finds both (it failed
# on 'tok.lmtok'); a run whose tree moved whole still reads from its new top; and
# a recorded tokenizer that is not there is named as such, not as unrecorded.
. tests/cli/lib.sh

mkdir "$T/proj" "$T/elsewhere"
"$BIN/gen-corpus" -q --docs 200 --seed 3 -o "$T/proj/c.jsonl" > /dev/null
(
	cd "$T/proj" &&
	"$BIN/tok-train" -q -v 300 -o tok.lmtok c.jsonl > /dev/null &&
	"$BIN/tok-encode" -q -t tok.lmtok -o s.lmtoks c.jsonl > /dev/null &&
	"$BIN/shard-pack" -q -L 32 --split val=0.1 -o data s.lmtoks > /dev/null &&
	"$BIN/train" -q --data data -t tok.lmtok --layers 1 --heads 2 --channels 32 --micro-batch 4 --updates 4 \
		--ckpt-every 2 --eval-every 0 --threads 1 -o run > /dev/null
) || notok "a run trained with relative paths"
[ "$(jq -r .cwd "$T/proj/run/config.json")" = "$(cd "$T/proj" && pwd)" ] &&
	[ "$(jq -r .data.dir "$T/proj/run/config.json")" = data ] &&
	ok "config.json records the paths as given and the directory train ran in" ||
	notok "cwd" "$(jq -c '{cwd, data}' "$T/proj/run/config.json")"

cd "$T/elsewhere" || exit 1
check "ckpt-reshard --export from another directory" "$BIN/ckpt-reshard" -q --export safetensors \
	"$T/proj/run/ckpt/step-00000004" hf
[ -f hf/tokenizer.json ] && [ -f hf/tokenizer_config.json ] && ! grep -q warning "$T/.err" &&
	ok "... finds the run's tokenizer (tokenizer.json written, no warning)" || notok "export tokenizer" "$(cat "$T/.err")"
check "runcard from another directory" "$BIN/runcard" -q -o card "$T/proj/run"
[ -f card/runcard.yaml ] && ok "... finds the run's dataset" || notok "runcard"
check "a resume from another directory" "$BIN/train" -q --updates 6 --threads 1 --resume "$T/proj/run"
grep '"event":"summary"' "$T/.out" | grep -q '"updates_done":2' && ok "... finds the data and the tokenizer" ||
	notok "resume elsewhere" "$(tail -1 "$T/.out")"

# back where it ran, the original command line resumes it again: the data path the
# resume from elsewhere recorded whole is the same file ('data' once gave a
# config-change warning against it, and --init-llmc a refusal)
cd "$T/proj" || exit 1
check "back in the run's directory, the same options resume it" "$BIN/train" -q --data data -t tok.lmtok \
	--layers 1 --heads 2 --channels 32 --micro-batch 4 --updates 8 --ckpt-every 2 --eval-every 0 --threads 1 \
	--resume auto -o run
! grep -q "data data\|tokenizer tok.lmtok" "$T/.err" && ! grep -q config-change.*data "run/events.jsonl" &&
	ok "... without a config-change for the same files named relatively" || notok "same file" "$(cat "$T/.err")"
jq -c '.checkpoints.every = 0' run/config.json > nockpt.json
check "--config CONFIG.json --no-save, a run without --ckpt-every: its recorded --keep is no clash" \
	"$BIN/train" -q --config nockpt.json --no-save --updates 2

# the tree moved whole: the recorded directory is gone, the paths hold from the new
# top (the checkpoint of update 4, whose run recorded them relative; the resume
# above, run from elsewhere, recorded where it found them: absolute paths)
mv "$T/proj" "$T/moved"
cd "$T/moved" || exit 1
check "after the tree moved: an export from its new top" "$BIN/ckpt-reshard" -q --export safetensors \
	run/ckpt/step-00000004 hf2
[ -f hf2/tokenizer.json ] && ok "... still finds the tokenizer" || notok "moved export" "$(cat "$T/.err")"

# a recorded tokenizer that is not there is said to be missing, not unrecorded
mv tok.lmtok tok.away
check "an export whose recorded tokenizer is gone" "$BIN/ckpt-reshard" -q --export safetensors \
	run/ckpt/step-00000006 hf3
grep -qF "the tokenizer its run recorded, '" "$T/.err" && grep -qF "tok.lmtok', is not there" "$T/.err" &&
	ok "... warns that the recorded tokenizer is not there" || notok "missing tokenizer" "$(cat "$T/.err")"
finish
