#!/bin/sh
# tests/cli/evalppl.sh: evalppl on real runs of the tools, and on a model whose
# predictions are known in closed form.
#
#   - a uniform model (an llm.c file of zeros, put into a checkpoint by train with
#     --lr 0): every token costs ln V whatever its context, so the loss is ln V to
#     1e-6 (float log-softmax) for every context and stride, and the tokens scored
#     are exactly the tokens tok-encode --eos makes of the files (each once);
#   - bits per byte = loss x tokens / (bytes ln 2) from the record's own fields, with
#     the bytes those wc -c counts in the files (text) or the token stream records
#     (a dataset: the train and val splits together hold every document, token and
#     byte of the stream, with --tail pad);
#   - a trained model: more history (a smaller stride) gives a lower loss at a short
#     context (tolerance 0.002 nats between neighbours, a strict drop end to end);
#     the curve over a run's checkpoints in update order, the loss falling;
#   - the entropy floor of gen-corpus documents equals gen-corpus's own figure for
#     them (1e-9 relative), from their logprob field or by parsing the text, and the
#     gap is the model's bits per byte minus it; --floor-bpb;
#   - samples repeat with the seed; greedy ones do not depend on it;
#   - memorization: a model trained to memorize (pad mode, many epochs) continues
#     its train documents exactly and its val documents not;
#   - bootstrap intervals contain the estimate, narrow with more documents, and the
#     same seed gives the same records;
#   - refusals: missing or damaged checkpoints, another tokenizer, another
#     vocabulary, a context too long, bad options; each naming the file.
. tests/cli/lib.sh
E=$BIN/evalppl
J="-j 1"
# the overall ppl record of a JSONL file, and fields of it
overall() { jq -c 'select(.event == "ppl" and .scope == "overall")' "$@"; }
field() { overall "$1" | jq -r ".$2"; }
# close A B TOL: |A - B| <= TOL * |B|
close() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; exit !(d <= t * m) }'; }
# le A B TOL: A <= B + TOL
le() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { exit !(a <= b + t) }'; }
# has FILE FILTER: some record of FILE passes the jq condition (jq 1.6's -e looks at
# the last output only, so count instead)
has() { jq -se "map(select($2)) | length > 0" "$1" > /dev/null; }

# --- a packed dataset of generated stories, and a short run with checkpoints ---
"$BIN/gen-corpus" -q --docs 240 --seed 3 -o "$T/c.jsonl" > /dev/null
"$BIN/tok-train" -q -v 300 -o "$T/t.lmtok" "$T/c.jsonl" > /dev/null
"$BIN/tok-train" -q -v 280 -o "$T/t2.lmtok" "$T/c.jsonl" > /dev/null
"$BIN/tok-encode" -q -t "$T/t.lmtok" --eos -o "$T/s.lmtoks" "$T/c.jsonl" > "$T/enc.json"
"$BIN/shard-pack" -q -L 64 --tail pad --split val=0.1 -o "$T/d" "$T/s.lmtoks" > /dev/null
check "train: a short run, checkpoints at 50 and 100" "$BIN/train" -q $J --data "$T/d" -t "$T/t.lmtok" --layers 2 \
	--heads 2 --channels 64 --micro-batch 8 --updates 100 --lr 3e-3 --eval-every 0 --ckpt-every 50 -o "$T/run"
CK=$T/run/ckpt/step-00000100

# --- a dataset split, found from the checkpoint ---
check "evalppl CHECKPOINT: the val split of its own dataset" $E -q $J --bootstrap 200 "$CK"
cp "$T/.out" "$T/val.out"
jq -se '(.[0].event == "eval-config") and (.[-1].event == "summary") and
	(map(select(.event == "ppl" and .scope == "overall")) | length == 1) and
	(map(select(.event == "ppl" and .scope == "length")) | length >= 2) and
	(map(select(.event == "ppl" and .scope == "source")) | length == 1)' "$T/val.out" > /dev/null \
	&& ok "records: eval-config first, overall, per source, per length bucket, summary last" \
	|| notok "record layout" "$(jq -c .event "$T/val.out" | tr '\n' ' ')"
head -1 "$T/val.out" | jq -e '.data != null and .split == "val" and .training_dataset and .bytes_known and
	.words_known and (.method | test("rolling windows: context 64, stride 32")) and .bootstrap.resamples == 200' \
	> /dev/null && ok "eval-config: the run's dataset and split, the method stated, the bootstrap" \
	|| notok "eval-config" "$(head -1 "$T/val.out")"
l=$(field "$T/val.out" loss); n=$(field "$T/val.out" tokens); b=$(field "$T/val.out" bytes)
bpb=$(field "$T/val.out" bits_per_byte)
close "$bpb" "$(awk -v l="$l" -v n="$n" -v b="$b" 'BEGIN { printf "%.17g", l * n / (b * log(2)) }')" 1e-12 \
	&& ok "bits per byte $bpb = loss x tokens / (bytes ln 2) from the record's own fields" \
	|| notok "bpb identity" "loss $l tokens $n bytes $b bpb $bpb"
jq -se 'map(select(.event == "ppl" and .scope == "length")) | (map(.tokens) | add) as $t |
	(map(.documents) | add) as $d | [$t, $d]' "$T/val.out" > "$T/len.sum"
[ "$(cat "$T/len.sum" | tr -d ' \n')" = "[$n,$(field "$T/val.out" documents)]" ] \
	&& ok "the length buckets partition the documents and tokens" || notok "buckets" "$(cat "$T/len.sum")"

# --- a pipeline: tok-encode | shard-pack gives the file pipeline's dataset and bits per byte ---
"$BIN/tok-encode" -q -t "$T/t.lmtok" --eos "$T/c.jsonl" 2> /dev/null \
	| "$BIN/shard-pack" -q -L 64 --tail pad --split val=0.1 -o "$T/dpipe" > /dev/null
same=1
for f in "$T"/d/*.lmshard "$T"/d/documents.jsonl; do cmp -s "$f" "$T/dpipe/${f##*/}" || same=0; done
[ $same = 1 ] && [ "$(ls "$T/d")" = "$(ls "$T/dpipe")" ] \
	&& ok "piped: the same shards and documents table as from a file" || notok "piped dataset"
strip() { jq -cS 'del(.input.path, .manifest_sha256)' "$1"; }
[ "$(strip "$T/d/manifest.json")" = "$(strip "$T/dpipe/manifest.json")" ] \
	&& grep -q '"path":"<stdin>"' "$T/dpipe/manifest.json" \
	&& ok "piped: the same manifest but for the input path, which says stdin" || notok "piped manifest"
check "evalppl --data of the piped dataset" $E -q $J --bootstrap 0 --data "$T/dpipe" "$CK"
cp "$T/.out" "$T/pipe.out"; cp "$T/.err" "$T/pipe.err"
check "evalppl --data of the file dataset" $E -q $J --bootstrap 0 --data "$T/d" "$CK"
pb=$(field "$T/pipe.out" bits_per_byte); fb=$(field "$T/.out" bits_per_byte)
[ "$pb" = "$fb" ] && [ "$(field "$T/pipe.out" bytes)" = "$(field "$T/.out" bytes)" ] && [ "$pb" != null ] \
	&& ! grep -q "unknown" "$T/pipe.err" \
	&& head -1 "$T/pipe.out" | jq -e '.bytes_known' > /dev/null \
	&& ok "piped: evalppl gives the same bits per byte ($pb) as from a file" \
	|| notok "piped bpb" "pipe $pb file $fb: $(cat "$T/pipe.err")"

# the train and val splits hold every document, token and byte of the stream
check "evalppl --split train" $E -q $J --bootstrap 0 --split train "$CK"
cp "$T/.out" "$T/train.out"
docs=$(( $(field "$T/train.out" documents) + $(field "$T/val.out" documents) ))
toks=$(( $(field "$T/train.out" tokens) + $(field "$T/val.out" tokens) ))
byts=$(( $(field "$T/train.out" bytes) + $(field "$T/val.out" bytes) ))
want=$(jq -r '"\(.documents) \(.tokens) \(.bytes)"' "$T/enc.json")
[ "$docs $toks $byts" = "$want" ] \
	&& ok "train + val: $docs documents, $toks tokens (each scored once, EOS included), $byts bytes: the stream's" \
	|| notok "splits add up to the stream" "got $docs $toks $byts, stream $want"
[ "$(jq -r '"\(.documents) \(.bytes)"' "$T/enc.json")" = "$(jq -sr 'length as $n | "\($n) \(map(.text | utf8bytelength) | add)"' "$T/c.jsonl")" ] \
	&& ok "... and the stream's bytes are the corpus's UTF-8 bytes" || notok "stream bytes"

# --- raw text: bytes are the files', tokens are tok-encode's, each scored once ---
F1=$DATA/text/en.txt F2=$DATA/text/code.c F3=$DATA/text/te.txt
wc=$(cat "$F1" "$F2" "$F3" | wc -c)
ntok=$("$BIN/tok-encode" -t "$T/t.lmtok" --eos --format ids "$F1" "$F2" "$F3" 2> /dev/null | wc -w)
for cs in 64:32 16:16 16:1 8:3 5:5; do
	c=${cs%%:*} s=${cs#*:}
	check "--text, context $c, stride $s" $E -q $J --bootstrap 0 --context "$c" --stride "$s" --text "$F1" --text "$F2" \
		--text "$F3" "$CK"
	[ "$(field "$T/.out" tokens)" = "$ntok" ] && [ "$(field "$T/.out" bytes)" = "$wc" ] \
		&& [ "$(jq -s 'map(select(.event == "ppl" and .scope == "source")) | length' "$T/.out")" = 3 ] \
		&& ok "... $ntok tokens scored (tok-encode --eos makes $ntok), $wc bytes (wc -c), 3 sources" \
		|| notok "... counts" "tokens $(field "$T/.out" tokens) bytes $(field "$T/.out" bytes), want $ntok $wc"
done

# --- a uniform model: an llm.c file of zeros, made a checkpoint by train --lr 0 ---
le32() { printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255)))"; }
V=300 VP=384 C=32 L=1 NH=2 CTX=64
{
	for v in 20240326 3 $CTX $V $L $NH $C $VP; do le32 $v; done
	head -c $((248 * 4)) /dev/zero
	head -c $(( (VP * C + CTX * C + L * (12 * C * C + 13 * C) + 2 * C) * 4 )) /dev/zero
} > "$T/zero.bin"
check "train --init-llmc zeros --lr 0: a checkpoint of the uniform model" "$BIN/train" -q $J --data "$T/d" \
	-t "$T/t.lmtok" --init-llmc "$T/zero.bin" --lr 0 --updates 1 --eval-every 0 -o "$T/zrun"
lnv=$(awk -v v=$V 'BEGIN { printf "%.17g", log(v) }')
for cs in 64:32 16:1 7:7 3:2; do
	c=${cs%%:*} s=${cs#*:}
	check "uniform model, context $c, stride $s" $E -q $J --bootstrap 0 --context "$c" --stride "$s" --text "$F1" \
		--text "$F2" --text "$F3" "$T/zrun/ckpt/step-00000001"
	l=$(field "$T/.out" loss)
	close "$l" "$lnv" 1e-6 && [ "$(field "$T/.out" tokens)" = "$ntok" ] \
		&& ok "... loss $l = ln $V to 1e-6, $ntok tokens" || notok "... uniform loss" "loss $l, ln V $lnv"
done
check "uniform model on the val split" $E -q $J --bootstrap 0 "$T/zrun/ckpt/step-00000001"
close "$(field "$T/.out" loss)" "$lnv" 1e-6 && ok "... loss ln $V there too" || notok "uniform val" "$(overall "$T/.out")"

# --- more history, lower loss (a trained model, a short context) ---
for s in 1 2 4; do
	$E -q $J --bootstrap 0 --context 4 --stride $s "$CK" > "$T/s$s.out" 2> "$T/.err"
done
l1=$(field "$T/s1.out" loss) l2=$(field "$T/s2.out" loss) l4=$(field "$T/s4.out" loss)
le "$l1" "$l2" 0.002 && le "$l2" "$l4" 0.002 && awk -v a="$l1" -v b="$l4" 'BEGIN { exit !(a < b) }' \
	&& ok "context 4: stride 1 $l1 <= stride 2 $l2 <= stride 4 $l4 (0.002), 1 < 4" \
	|| notok "stride order" "$l1 $l2 $l4"

# --- every checkpoint of a run: a curve ---
check "evalppl RUN: every checkpoint" $E -q $J --bootstrap 0 "$T/run"
overall "$T/.out" | jq -sc 'map([.update, .tokens_trained, .loss])' > "$T/curve"
jq -e 'length == 2 and .[0][0] == 50 and .[1][0] == 100 and .[1][1] > .[0][1] and .[1][2] < .[0][2]' \
	"$T/curve" > /dev/null && ok "the curve: updates 50 and 100 in order, tokens trained, the loss falling: $(cat "$T/curve")" \
	|| notok "curve" "$(cat "$T/curve")"
[ "$(jq -s 'map(select(.event == "eval-config")) | length' "$T/.out")" = 2 ] && ok "... an eval-config per checkpoint" \
	|| notok "eval-config per checkpoint"
check "evalppl --latest RUN" $E -q $J --bootstrap 0 --latest "$T/run"
[ "$(overall "$T/.out" | jq -sc 'map(.update)')" = "[100]" ] && ok "--latest: the newest only" || notok "--latest"

# --- the entropy floor of gen-corpus documents ---
"$BIN/gen-corpus" -q --docs 40 --seed 11 -o "$T/g.jsonl" > "$T/g.summary"
jq -c '{text}' "$T/g.jsonl" > "$T/g-nolp.jsonl"
gbpb=$(jq -r .bits_per_byte "$T/g.summary")
check "--text gen-corpus JSONL" $E -q $J --bootstrap 0 --text "$T/g.jsonl" "$CK"
fl=$(jq -r 'select(.event == "floor") | .bits_per_byte' "$T/.out")
close "$fl" "$gbpb" 1e-9 && has "$T/.out" '.event == "floor" and (.source | test("logprob"))' \
	&& ok "floor from the logprob field: $fl bits per byte, gen-corpus says $gbpb" || notok "floor (field)" "$fl vs $gbpb"
mb=$(field "$T/.out" bits_per_byte)
gap=$(jq -r 'select(.event == "floor") | .gap_bits_per_byte' "$T/.out")
close "$gap" "$(awk -v a="$mb" -v b="$fl" 'BEGIN { printf "%.17g", a - b }')" 1e-9 && awk -v g="$gap" 'BEGIN { exit !(g > 0) }' \
	&& ok "the gap: model $mb - floor $fl = $gap bits per byte, above 0" || notok "gap" "$mb $fl $gap"
[ "$(field "$T/.out" bytes)" = "$(jq -r .bytes "$T/g.summary")" ] && ok "... over gen-corpus's bytes" || notok "floor bytes"
check "--text gen-corpus text without logprob" $E -q $J --bootstrap 0 --text "$T/g-nolp.jsonl" "$CK"
fl2=$(jq -r 'select(.event == "floor") | .bits_per_byte' "$T/.out")
close "$fl2" "$gbpb" 1e-9 && has "$T/.out" '.event == "floor" and (.source | test("gen-corpus language"))' \
	&& ok "floor by parsing the text: $fl2, the same" || notok "floor (parse)" "$fl2 vs $gbpb"
check "--floor-bpb 0.25" $E -q $J --bootstrap 0 --floor-bpb 0.25 --text "$F1" "$CK"
has "$T/.out" '.event == "floor" and .bits_per_byte == 0.25 and .source == "--floor-bpb"' \
	&& ok "... the floor given" || notok "--floor-bpb" "$(grep floor "$T/.out")"
has "$T/val.out" '.event == "floor" and (.source | test("gen-corpus"))' \
	&& ok "a dataset of gen-corpus documents gets its floor by parsing the decoded text" || notok "dataset floor"

# --- samples ---
S="--bootstrap 0 --max-docs 2 --samples 2 --prompt Once --sample-tokens 12"
$E -q $J $S "$CK" | jq -c 'select(.event == "sample") | del(.tokens_per_s)' > "$T/sa"
$E -q $J $S "$CK" | jq -c 'select(.event == "sample") | del(.tokens_per_s)' > "$T/sb"
[ "$(wc -l < "$T/sa")" = 2 ] && same "samples: the same seed, the same records" "$T/sa" "$T/sb" || notok "samples" "$(cat "$T/sa")"
jq -se 'map(.ids | length) == [12, 12] and map(.seed) == [1, 2] and .[0].ids != .[1].ids and
	(.[0].prompt_ids | length) >= 2 and (.[0].text | type) == "string"' "$T/sa" > /dev/null \
	&& ok "... 12 tokens each, seeds 1 and 2, different draws, decoded text" || notok "sample fields" "$(cat "$T/sa")"
$E -q $J $S --temperature 0 "$CK" | jq -c 'select(.event == "sample") | .ids' > "$T/sg"
[ "$(sort -u "$T/sg" | wc -l)" = 1 ] && ok "greedy samples (--temperature 0) do not depend on the seed" \
	|| notok "greedy" "$(cat "$T/sg")"

# --- memorization: random words, each document its own sequence, many epochs ---
awk 'BEGIN { srand(7); n = split("apple river stone cloud green quick brown lazy dog cat moon sun star tree leaf " \
	"wind rain snow fire ice bird fish road hill lake sea sand rock gold iron salt milk bread corn rice bean seed " \
	"root bark rope wire door wall roof bell drum horn harp", w, " ")
	for (d = 0; d < 40; d++) { k = 8 + int(rand() * 6); s = ""
		for (i = 0; i < k; i++) s = s (i ? " " : "") w[1 + int(rand() * n)]
		printf "{\"text\":\"%s\"}\n", s } }' > "$T/r.jsonl"
"$BIN/tok-train" -q -v 320 -o "$T/rt.lmtok" "$T/r.jsonl" > /dev/null
"$BIN/tok-encode" -q -t "$T/rt.lmtok" --eos -o "$T/rs.lmtoks" "$T/r.jsonl" > /dev/null
"$BIN/shard-pack" -q -L 32 --mode pad --split val=0.25 -o "$T/rd" "$T/rs.lmtoks" > /dev/null
check "train: memorize 30 short documents" "$BIN/train" -q $J --data "$T/rd" -t "$T/rt.lmtok" --layers 2 --heads 2 \
	--channels 64 --micro-batch 8 --updates 200 --lr 1e-2 --schedule constant --warmup 10 --eval-every 0 -o "$T/mrun"
check "--memorization" $E -q $J --bootstrap 0 --memorization --prefix 4 --continuation 8 "$T/mrun"
jq -sc 'map(select(.event == "memorization")) | map({split, fraction, documents, fraction_ci})' "$T/.out" > "$T/mem"
jq -e '.[0].split == "train" and .[1].split == "val" and .[0].fraction >= 0.5 and .[1].fraction < .[0].fraction and
	.[0].fraction_ci[0] > .[1].fraction_ci[1]' "$T/mem" > /dev/null \
	&& ok "train documents continued exactly, val ones not; the intervals apart: $(cat "$T/mem")" \
	|| notok "memorization" "$(cat "$T/mem")"
grep -q "each document starts a sequence" "$T/.out" && ok "pad mode: documents framed as the dataset presented them" \
	|| notok "pad-mode framing" "$(head -c 600 "$T/.out")"

# --- bootstrap ---
$E -q $J --bootstrap 300 --max-docs 4 "$CK" > "$T/b4" 2> /dev/null
$E -q $J --bootstrap 300 "$CK" > "$T/ball" 2> /dev/null
jq -se 'map(select(.event == "ppl")) | all(.loss_ci[0] <= .loss and .loss <= .loss_ci[1] and
	.bits_per_byte_ci[0] <= .bits_per_byte and .bits_per_byte <= .bits_per_byte_ci[1] and
	.word_ppl_ci[0] <= .word_ppl and .word_ppl <= .word_ppl_ci[1])' "$T/ball" > /dev/null \
	&& ok "every interval (overall, source, length) contains its estimate" || notok "intervals"
w4=$(overall "$T/b4" | jq '.loss_ci[1] - .loss_ci[0]') wall=$(overall "$T/ball" | jq '.loss_ci[1] - .loss_ci[0]')
awk -v a="$wall" -v b="$w4" 'BEGIN { exit !(a < b) }' && ok "more documents, a narrower interval: $w4 -> $wall" \
	|| notok "narrowing" "$w4 $wall"
$E -q $J --bootstrap 300 "$CK" 2> /dev/null | grep -v '"summary"' > "$T/b1"
grep -v '"summary"' "$T/ball" > "$T/b2"
same "the same seed: byte-identical records" "$T/b1" "$T/b2"
overall "$T/b1" > "$T/o1"
$E -q $J --bootstrap 300 --seed 2 "$CK" 2> /dev/null | overall > "$T/o2"
if cmp -s "$T/o1" "$T/o2"; then notok "another seed, other intervals"; else ok "another seed, other intervals"; fi
[ "$(overall "$T/train.out" | jq -c .loss_ci)" = null ] && ok "--bootstrap 0: no intervals (null)" || notok "no bootstrap"

# --- refusals ---
check_fail "a missing checkpoint" 1 "$T/nope" $E -q "$T/nope"
check_fail "--buckets ,, is a usage error (it meant no buckets)" 2 "an empty item in ',,'" $E -q --buckets ,, "$CK"
check_fail "--max-tokens 0 is a usage error (it meant no limit)" 2 "'--max-tokens': '0' is zero" $E -q --max-tokens 0 "$CK"
check_fail "--prefix without --memorization is a usage error (it was ignored)" 2 "give --memorization" \
	$E -q --prefix 5 "$CK"
check_fail "stdin twice with --text is a usage error (exit 1 before)" 2 "given more than once" \
	$E -q --text - --text - "$CK"
rm -rf "$T/bad" && cp -r "$CK" "$T/bad"
printf '\377' | dd of="$T/bad/rank-00000.lmckpt" bs=1 seek=4096 conv=notrunc 2> /dev/null
check_fail "a damaged checkpoint, naming its file" 1 "rank-00000.lmckpt" $E -q --text "$F1" "$T/bad"
check_fail "another tokenizer, naming both" 1 "t2.lmtok' is tokenizer" $E -q -t "$T/t2.lmtok" --text "$F1" "$CK"
rm -rf "$T/vocab" && cp -r "$CK" "$T/vocab"
sed -i 's/"vocab":300,/"vocab":301,/' "$T/vocab/manifest.json"
reseal "$T/vocab/manifest.json"
check_fail "another vocabulary, naming both" 1 "vocabulary of 300, the model in '$T/vocab' 301" \
	$E -q -t "$T/t.lmtok" --text "$F1" "$T/vocab"
check_fail "a dataset of another tokenizer" 1 "was made with tokenizer" $E -q --data "$T/rd" "$CK"
check_fail "--context longer than the model's" 1 "longer than the context" $E -q --context 65 --text "$F1" "$CK"
# the model's context is known from the checkpoint: a stride longer than it is
# refused before any document is read (a missing --text file would be named next)
check_fail "--stride longer than the model's context, before reading" 1 \
	"--stride 65 is longer than the context of the model in '$CK' (64)" $E -q --stride 65 --text "$T/none.txt" "$CK"
[ ! -s "$T/.out" ] && ok "--stride too long: nothing on stdout" || notok "--stride too long: stdout" "$(head -c 300 "$T/.out")"
check_fail "no checkpoint" 2 "no checkpoint" $E -q
check_fail "--stride 0" 2 "'--stride'" $E -q --stride 0 "$CK"
check_fail "--split nope" 2 "'--split'" $E -q --split nope "$CK"
check_fail "--text and --data" 2 "--text" $E -q --text "$F1" --data "$T/d" "$CK"
check_fail "--prompt without --samples" 2 "--samples" $E -q --prompt hi "$CK"
check_fail "an unknown option" 2 "--frobnicate" $E --frobnicate "$CK"
mkdir -p "$T/norun/ckpt"
check_fail "a run directory without checkpoints" 1 "no checkpoint" $E -q "$T/norun"
check_fail "a directory that is neither" 1 "neither a checkpoint" $E -q "$T/norun/ckpt"
mv "$T/d" "$T/d.moved"
check_fail "the run's dataset moved away: refused for a split, naming --data" 1 "give --data" $E -q "$CK"
check "... but raw text still evaluates" $E -q $J --bootstrap 0 --text "$F1" "$CK"
mv "$T/d.moved" "$T/d"
check "--help" $E --help
grep -q "usage: evalppl" "$T/.out" && ok "--help: usage on stdout" || notok "--help output"
finish
