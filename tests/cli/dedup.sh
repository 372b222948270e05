#!/bin/sh
# tests/cli/dedup.sh: dedup-minhash as a user runs it.
#
# Exact duplicates (after normalisation) and a near duplicate are removed and
# recorded with the document they duplicate; kept documents come out in input
# order with their ids; a passage of an evaluation set planted in a longer training
# document is removed as contamination, a shorter overlap is not; --verify gives
# similarities in [0, 1]; stdout and --removed do not depend on the thread count
# or on how stdin arrives; bad input exits 1 naming the file (and line or member)
# with no --removed or --summary file left behind; usage errors exit 2.
. tests/cli/lib.sh
DM=$BIN/dedup-minhash

# N deterministic words from a 48-word vocabulary (MINSTD, exact in awk's doubles);
# two different seeds share hardly any 5-word sequence
words() {
	awk -v n="$1" -v x="$2" 'BEGIN {
		nv = split("apple bird cloud door engine field garden house island jacket kettle lamp " \
			"mountain needle ocean pencil quilt river stone table umbrella valley window yard " \
			"zebra anchor bridge candle desert forest glass harbor iron jungle kite lemon " \
			"marble nest orchard pillow quarry rocket saddle tunnel velvet wagon", v, " ")
		for (i = 0; i < n; i++) { x = (x * 16807) % 2147483647; printf "%s%s", v[x % nv + 1], (i < n - 1 ? " " : "") }
	}'
}
jsonl() { printf '{"text":"%s"}\n' "$1"; }

# ---- help, version, usage errors ----
check "--help exits 0" $DM --help
grep -q '^usage: dedup-minhash' "$T/.out" && ok "--help prints usage on stdout" || notok "usage on stdout"
check "--version exits 0" $DM --version
check_fail "an unknown option is a usage error" 2 "Try 'dedup-minhash --help'." $DM --frobnicate x
check_fail "no input is a usage error" 2 "no input" $DM
check_fail "a threshold above 1 is a usage error naming the option" 2 "'--threshold'" $DM -t 1.5 x
check_fail "--num-perm 0 is a usage error" 2 "'--num-perm'" $DM --num-perm 0 x
check_fail "--shingle x is a usage error" 2 "'--shingle'" $DM --shingle x x
check_fail "an unknown --method is a usage error" 2 "'--method': 'minwise', expected oph or classic" $DM --method minwise x
check_fail "an unknown normalisation step is named" 2 "unknown step 'bogus'" $DM --normalize lower,bogus x
check_fail "--verify without --removed is a usage error" 2 "--verify" $DM --verify x
check_fail "--against - is a usage error" 2 "not stdin" $DM --against - x
check_fail "--ngram without --against is a usage error" 2 "give --against" $DM --ngram 8 x
check_fail "--ngram-min without --against is a usage error" 2 "--ngram-min sets" $DM --ngram-min 3 x
check_fail "stdin twice is a usage error" 2 "more than once" $DM - -

# ---- exact and near duplicates ----
A=$(words 200 1)
B=$(words 200 2)
C=$(words 200 3)
AU=$(echo "$A" | tr 'a-z' 'A-Z' | sed 's/ /, /g')            # A after normalisation
B1=$(echo "$B" | awk '{ $100 = "changed"; print }')          # B with one word changed
C6=$(echo "$C" | awk '{ for (i = 1; i <= NF; i += 2) $i = "x" i; print }')  # half of C changed
{
	jsonl "$A"; jsonl "$B"; jsonl "$AU"; jsonl "$B1"; jsonl "$C"; jsonl '!!!'; jsonl '? ? ?'; jsonl "$C6"
} > "$T/a.jsonl"
mkdir "$T/out"
check "deduplicate 8 documents" $DM --removed "$T/out/rem.jsonl" --summary "$T/out/sum.json" --verify \
	"$T/a.jsonl"
cp "$T/.out" "$T/kept.jsonl"
[ "$(wc -l < "$T/kept.jsonl")" = 5 ] && ok "5 documents kept" || notok "5 documents kept" "$(cut -c1-80 "$T/kept.jsonl")"
ids=$(sed 's/.*"id":"[^"]*:\([0-9]*\)"}$/\1/' "$T/kept.jsonl" | tr '\n' ' ')
[ "$ids" = "0 1 4 5 7 " ] && ok "kept in input order: documents 0 1 4 5 7" || notok "kept ids" "$ids"
head -n 1 "$T/kept.jsonl" | grep -qF "{\"text\":\"$A\",\"source\":\"$T/a.jsonl\",\"id\":\"$T/a.jsonl:0\"}" \
	&& ok "a kept record is {text, source, id} with the original text" || notok "kept record" "$(head -c 200 "$T/kept.jsonl")"
R=$T/out/rem.jsonl
grep -qF "{\"id\":\"$T/a.jsonl:2\",\"reason\":\"exact\",\"duplicate_of\":\"$T/a.jsonl:0\",\"estimated_jaccard\":1,\"jaccard\":1}" "$R" \
	&& ok "upper case and punctuation: an exact duplicate after normalisation" || notok "exact record" "$(cat "$R")"
grep -qF "{\"id\":\"$T/a.jsonl:3\",\"reason\":\"near\",\"duplicate_of\":\"$T/a.jsonl:1\"," "$R" \
	&& ok "one word changed in 200: a near duplicate of its original" || notok "near record" "$(cat "$R")"
# 5 of 196 shingles replaced: J = 191/201
grep "a.jsonl:3\"" "$R" | grep -q '"jaccard":0.950248756218905' \
	&& ok "--verify: its exact Jaccard similarity is 191/201" || notok "--verify Jaccard" "$(grep 'a.jsonl:3"' "$R")"
grep -qF "{\"id\":\"$T/a.jsonl:6\",\"reason\":\"exact\",\"duplicate_of\":\"$T/a.jsonl:5\"" "$R" \
	&& ok "empty after normalisation: only exact deduplication" || notok "empty docs" "$(cat "$R")"
[ "$(wc -l < "$R")" = 3 ] && ok "three removal records" || notok "three removal records" "$(cat "$R")"
bad=$(sed -n 's/.*"estimated_jaccard":\([^,}]*\).*"jaccard":\([^,}]*\)}$/\1 \2/p' "$R" |
	awk '$1 < 0 || $1 > 1 || $2 < 0 || $2 > 1' | wc -l)
[ "$bad" = 0 ] && ok "similarities are in [0, 1]" || notok "similarities in [0, 1]" "$(cat "$R")"
S=$T/out/sum.json
grep -q '"documents":8,"kept":5,"removed":{"exact":2,"near":1,"contamination":0},"clusters":3,"bands":9,"rows":13,"num_perm":128' "$S" \
	&& ok "--summary counts documents, kept, removed by reason, clusters, bands and rows" || notok "summary" "$(cat "$S")"
grep -q '"bytes_per_doc":[0-9]' "$S" && grep -q '"docs_per_s":[0-9]' "$S" && grep -q '"threads":[0-9]' "$S" \
	&& grep -q '"method":"oph"' "$S" && grep -Eq '"norm_kernel":"(avx512|scalar)"' "$S" \
	&& ok "--summary has bytes_per_doc, docs_per_s, threads, method (oph by default), norm_kernel" || notok "summary fields" "$(cat "$S")"
grep -q "8 documents, 5 kept; removed 2 exact, 1 near, 0 contaminated" "$T/.err" \
	&& ok "a one-line summary on stderr" || notok "stderr summary" "$(cat "$T/.err")"
check "-q is quiet" $DM -q "$T/a.jsonl"
[ ! -s "$T/.err" ] && ok "nothing on stderr with -q" || notok "-q" "$(cat "$T/.err")"
check "--normalize none" $DM -q --normalize none --removed "$T/out/none.jsonl" "$T/a.jsonl"
grep -q '"a.jsonl:2","reason"' "$T/out/none.jsonl" && notok "without normalisation the upper-case copy is kept" \
	|| ok "without normalisation the upper-case copy is kept"
check "a threshold of 1" $DM -q -t 1 --removed "$T/out/t1.jsonl" --summary "$T/out/t1.json" "$T/a.jsonl"
grep -q '"near"' "$T/out/t1.jsonl" && notok "-t 1 does not remove the near duplicate (it may, by chance)" \
	"$(cat "$T/out/t1.jsonl")" || ok "-t 1 keeps the near duplicate"

# ---- invalid UTF-8 and text input ----
printf 'caf\351 ok\nsame line\nSAME LINE!\n' > "$T/latin1.txt"
check "text input, one document a line" $DM -q --txt-docs line "$T/latin1.txt"
grep -q "caf$(printf '\357\277\275') ok" "$T/.out" && ok "a byte that is not UTF-8 is written as U+FFFD" \
	|| notok "U+FFFD" "$(cat "$T/.out")"
[ "$(wc -l < "$T/.out")" = 2 ] && ok "line 3 is an exact duplicate of line 2" || notok "text lines" "$(cat "$T/.out")"

# ---- threads and stdin ----
$BIN/gen-corpus -q --docs 1500 --seed 4 > "$T/g.jsonl"
# plant copies after every 50th document: with commas between words (an exact duplicate after
# normalisation), and after every 50th + 25 with its first word changed
awk '{ print } NR % 50 == 0 { l = $0; gsub(/ /, " ,, ", l); print l }
     NR % 50 == 25 { sub(/"text":"[A-Za-z]*/, "\"text\":\"Changed"); print }' "$T/g.jsonl" > "$T/gd.jsonl"
for j in 1 2 3; do
	check "-j$j" $DM -q -j$j --verify --removed "$T/out/r$j.jsonl" "$T/gd.jsonl"
	mv "$T/.out" "$T/k$j.jsonl"
done
same "kept documents do not depend on threads (1 vs 2)" "$T/k1.jsonl" "$T/k2.jsonl"
same "kept documents do not depend on threads (1 vs 3)" "$T/k1.jsonl" "$T/k3.jsonl"
same "--removed does not depend on threads (1 vs 2)" "$T/out/r1.jsonl" "$T/out/r2.jsonl"
same "--removed does not depend on threads (1 vs 3)" "$T/out/r1.jsonl" "$T/out/r3.jsonl"
check "--method classic" $DM -q -j2 --method classic --removed "$T/out/rc.jsonl" --summary "$T/out/rc.json" "$T/gd.jsonl"
grep -q '"method":"classic"' "$T/out/rc.json" && ok "--summary names the method" || notok "summary method" "$(cat "$T/out/rc.json")"
[ "$(grep -c '"reason":"exact"' "$T/out/rc.jsonl")" = 30 ] && [ "$(grep -c '"reason":"near"' "$T/out/rc.jsonl")" -ge 10 ] \
	&& ok "classic MinHash finds the same 30 exact copies and at least 10 near ones" \
	|| notok "classic method" "$(grep -c '"near"' "$T/out/rc.jsonl") near records"
[ "$(grep -c '"reason":"exact"' "$T/out/r1.jsonl")" = 30 ] && ok "the 30 copies with commas are exact duplicates" \
	|| notok "planted exact copies" "$(grep -c '"exact"' "$T/out/r1.jsonl") exact records"
[ "$(grep -c '"reason":"near"' "$T/out/r1.jsonl")" -ge 10 ] && ok "at least 10 of the 30 edited copies are near duplicates" \
	|| notok "planted near copies" "$(grep -c '"near"' "$T/out/r1.jsonl") near records"
$DM -q --removed "$T/out/rs.jsonl" - < "$T/gd.jsonl" > "$T/ks.jsonl"
sed "s|$T/gd.jsonl|<stdin>|g" "$T/k1.jsonl" > "$T/k1s.jsonl"
same "stdin from a file: the same documents, source <stdin>" "$T/k1s.jsonl" "$T/ks.jsonl"
cat "$T/gd.jsonl" | $DM -q --removed "$T/out/rp.jsonl" - > "$T/kp.jsonl"
same "stdin from a pipe (spooled): the same documents" "$T/ks.jsonl" "$T/kp.jsonl"
same "stdin from a pipe: the same removals" "$T/out/rs.jsonl" "$T/out/rp.jsonl"
gzip -c "$T/gd.jsonl" | $DM -q --input-format jsonl - > "$T/kz.jsonl"
same "compressed stdin: the same documents" "$T/ks.jsonl" "$T/kz.jsonl"

# ---- decontamination ----
P=$(words 30 9)
{ jsonl "$P"; jsonl "$(words 5 10)"; } > "$T/eval.jsonl"
SHORT=$(echo "$P" | cut -d' ' -f1-10)
{
	jsonl "$(words 100 11) $P $(words 100 12)"      # the passage inside a longer document
	jsonl "$(words 100 13) $SHORT $(words 100 14)"  # only 10 of its words
	jsonl "$(words 200 15) $(words 5 10)"           # contains the 5-word evaluation item
	jsonl "$(echo "$P" | tr 'a-z' 'A-Z')"           # the passage itself, upper case
	jsonl "$(words 200 16)"
} > "$T/train.jsonl"
check "decontaminate against an evaluation file" $DM --against "$T/eval.jsonl" --removed "$T/out/c.jsonl" \
	--summary "$T/out/c.json" "$T/train.jsonl"
C=$T/out/c.jsonl
grep -qF "{\"id\":\"$T/train.jsonl:0\",\"reason\":\"contamination\",\"method\":\"ngram\",\"eval_id\":\"$T/eval.jsonl:0\"" "$C" \
	&& ok "a 30-word evaluation passage inside a training document is found (13-grams)" || notok "planted passage" "$(cat "$C")"
grep -qF "{\"id\":\"$T/train.jsonl:3\",\"reason\":\"contamination\",\"method\":\"exact\",\"eval_id\":\"$T/eval.jsonl:0\"" "$C" \
	&& ok "the passage itself in upper case: exact match" || notok "exact contamination" "$(cat "$C")"
[ "$(wc -l < "$C")" = 2 ] && ok "a 10-word overlap and a 5-word item (below --ngram-min) are kept" \
	|| notok "only two contaminated" "$(cat "$C")"
grep -q '"removed":{"exact":0,"near":0,"contamination":2}' "$T/out/c.json" && grep -q '"evaluation_documents":2' "$T/out/c.json" \
	&& ok "the summary counts contamination and evaluation documents" || notok "contamination summary" "$(cat "$T/out/c.json")"
check "--ngram-min 3: short evaluation items count" $DM -q --against "$T/eval.jsonl" --ngram-min 3 \
	--removed "$T/out/c3.jsonl" "$T/train.jsonl"
grep -qF "{\"id\":\"$T/train.jsonl:2\",\"reason\":\"contamination\",\"method\":\"ngram\",\"eval_id\":\"$T/eval.jsonl:1\"" "$T/out/c3.jsonl" \
	&& ok "with --ngram-min 3 the 5-word item is found inside a document" || notok "--ngram-min" "$(cat "$T/out/c3.jsonl")"
check "--ngram 8: the 10-word overlap counts" $DM -q --against "$T/eval.jsonl" --ngram 8 --verify \
	--removed "$T/out/c8.jsonl" "$T/train.jsonl"
grep -qF "\"$T/train.jsonl:1\",\"reason\":\"contamination\",\"method\":\"ngram\"" "$T/out/c8.jsonl" \
	&& ok "with --ngram 8 the 10-word overlap is contamination" || notok "--ngram 8" "$(cat "$T/out/c8.jsonl")"
grep "train.jsonl:3\"" "$T/out/c8.jsonl" | grep -q '"jaccard":1}' \
	&& ok "--verify: the exact match has Jaccard 1" || notok "contamination --verify" "$(cat "$T/out/c8.jsonl")"

# ---- the examples of dedup-minhash(1) ----
mkdir -p "$T/ex/corpus" "$T/ex/eval" "$T/ex/train"
cp "$T/a.jsonl" "$T/gd.jsonl" "$T/ex/corpus/"
cp "$T/eval.jsonl" "$T/ex/eval/"
cp "$T/train.jsonl" "$T/gd.jsonl" "$T/ex/train/"
(cd "$T/ex" && $DM --removed removed.jsonl --summary summary.json corpus/ > kept.jsonl 2> err.txt) \
	&& [ -s "$T/ex/kept.jsonl" ] && grep -q '"event":"summary"' "$T/ex/summary.json" \
	&& ok "example 1: --removed and --summary" || notok "example 1" "$(cat "$T/ex/err.txt")"
if command -v jq > /dev/null 2>&1; then
	(cd "$T/ex" && $DM -q --verify --removed removed.jsonl corpus/ > kept.jsonl &&
		jq -r 'select(.reason == "near") | [.id, .duplicate_of, .jaccard] | @tsv' \
		removed.jsonl > near.tsv) && grep -q '^corpus/a.jsonl:3	corpus/a.jsonl:1	0.95' "$T/ex/near.tsv" \
		&& ok "example 2: near duplicates through jq" || notok "example 2" "$(cat "$T/ex/near.tsv")"
else
	notok "example 2 needs jq (scripts/install-deps installs it)"
fi
(cd "$T/ex" && $DM -q --against eval/ --removed removed.jsonl train/ |
	$BIN/tok-train -q -v 32768 -o tok.lmtok - > tok.out 2> tok.err) && [ -s "$T/ex/tok.lmtok" ] \
	&& grep -q '"reason":"contamination"' "$T/ex/removed.jsonl" \
	&& ok "example 3: decontaminate, deduplicate, train a tokenizer" || notok "example 3" "$(cat "$T/ex/tok.err")"

# ---- bad input: exit 1, the file named, nothing left behind ----
check_fail "missing input file" 1 "nope.jsonl" $DM --removed "$T/out/x.jsonl" --summary "$T/out/x.json" "$T/nope.jsonl"
nothing_left "no --removed file after a missing input" "$T/out" x.json
check_fail "the same --against twice is a usage error" 2 "same evaluation set" \
	$DM --against "$T/eval.jsonl" --against "$T/eval.jsonl" "$T/a.jsonl"
(cd "$T" && check_fail "... also by two names" 2 "same evaluation set" \
	$DM --against eval.jsonl --against "./eval.jsonl" a.jsonl)
check_fail "missing evaluation file" 1 "noeval.jsonl" $DM --against "$T/noeval.jsonl" --removed "$T/out/x.jsonl" "$T/a.jsonl"
nothing_left "no --removed file after a missing evaluation file" "$T/out" x.json
check_fail "a --removed path in a missing directory" 1 "nodir/r.jsonl" $DM --removed "$T/nodir/r.jsonl" "$T/a.jsonl"
{ jsonl "fine"; jsonl "also fine"; echo '{"text": broken'; } > "$T/bad.jsonl"
check_fail "malformed JSONL names file and line" 1 "bad.jsonl': line 3: invalid JSON" \
	$DM --removed "$T/out/x.jsonl" --summary "$T/out/x.json" "$T/a.jsonl" "$T/bad.jsonl"
nothing_left "no --removed or --summary file after malformed JSONL" "$T/out" x.json
check_fail "malformed evaluation JSONL names file and line" 1 "bad.jsonl': line 3" \
	$DM --against "$T/bad.jsonl" --removed "$T/out/x.jsonl" "$T/a.jsonl"
mkdir -p "$T/arch"
LC_ALL=C awk 'BEGIN { x = 12345; for (i = 0; i < 300000; i++) { x = (x * 16807) % 2147483647; printf "%c", int(x / 8388608) % 256 } }' > "$T/arch/member.txt"
cp "$T/a.jsonl" "$T/arch/first.jsonl"
(cd "$T/arch" && tar czf ../arch.tar.gz first.jsonl member.txt)
size=$(wc -c < "$T/arch.tar.gz")
head -c $((size / 2)) "$T/arch.tar.gz" > "$T/cut.tar.gz"
check_fail "an unreadable archive member names archive and member" 1 "cut.tar.gz' member 'member.txt'" \
	$DM --removed "$T/out/x.jsonl" --summary "$T/out/x.json" "$T/cut.tar.gz"
nothing_left "no --removed or --summary file after the bad archive" "$T/out" x.json
# the outputs are committed together: a --summary that fails leaves no --removed.
# RLIMIT_FSIZE of 512 bytes: nothing is removed from two distinct documents (an
# empty --removed), the summary record with --against's fields is over 512 bytes
{ jsonl "$A"; jsonl "$B"; } > "$T/ab.jsonl"
jsonl "zzz qqq" > "$T/ev.jsonl"
if [ -n "${ASAN_OPTIONS:-}" ]; then
	# clang's OpenMP runtime (the sanitizer build's) sizes a shared-memory file at
	# start, which a 512-byte RLIMIT_FSIZE forbids: it cannot start at all there
	ok "# skip --summary write error under RLIMIT_FSIZE: clang's libomp needs a larger shm file"
	ok "# skip (the same)"
else
sh -c 'trap "" XFSZ; ulimit -f 1; exec "$@"' sh $DM --against "$T/ev.jsonl" --removed "$T/out/y.jsonl" \
	--summary "$T/out/y.json" "$T/ab.jsonl" > /dev/null 2> "$T/.err"
rc=$?
[ "$rc" = 1 ] && grep -qF "out/y.json': write: File too large" "$T/.err" \
	&& ok "a --summary write error exits 1, naming the file and the errno" \
	|| notok "--summary write error" "status $rc" "$(cat "$T/.err")"
nothing_left "no --removed file after the --summary write error" "$T/out" y.json
fi
mkdir "$T/out/z.json"
check_fail "a --summary that is a directory exits 1, before the work" 1 "out/z.json' is a directory: give a file name" \
	$DM --removed "$T/out/z.jsonl" --summary "$T/out/z.json" "$T/a.jsonl"
nothing_left "no --removed file after the --summary is refused" "$T/out" z.jsonl
check_fail "kept documents into a full stdout name it and the errno" 1 "'<stdout>': write: No space left on device" \
	sh -c '"$@" > /dev/full' sh $DM "$T/a.jsonl"
# kept texts already in the escaped form lmt writes are copied as they stand, the
# others decoded and encoded again: the same bytes out as with --verify, which
# decodes every text
{
	printf '{"text":"%s \\"q\\" back\\\\slash\\nnew\\tline \\b\\f\\r caf\303\251"}\n' "$(words 30 11)"
	printf '{"id":1,"text":"%s \\u00e9 \\/ \\u0001 \\ud83d\\ude00 \\u0041"}\n' "$(words 30 12)"
	printf '{"text":"%s"}\n' "$(words 30 13)"
} > "$T/esc.jsonl"
check "escaped texts run" $DM -q -j1 "$T/esc.jsonl"
cp "$T/.out" "$T/esc-kept.jsonl"
$DM -q -j1 --verify --removed "$T/esc-rm.jsonl" "$T/esc.jsonl" > "$T/esc-verify.jsonl"
same "kept texts copied undecoded are what decoding and encoding gives" "$T/esc-kept.jsonl" "$T/esc-verify.jsonl"
grep -qF '\"q\" back\\slash\nnew\tline \b\f\r caf'"$(printf '\303\251')"'","source"' "$T/esc-kept.jsonl" &&
	ok "a text in lmt's escaped form comes out as it went in" || notok "escaped form kept"
grep -qF ' '"$(printf '\303\251')"' / \u0001 '"$(printf '\360\237\230\200')"' A","source"' "$T/esc-kept.jsonl" &&
	ok "\\u and \\/ escapes are decoded and written as lmt writes them" || notok "\\u escapes"
# the edges of the documented ranges: each end runs (exit 0), just outside is a
# usage error naming the option (exit 2)
while read -r opt lo hi below above with; do
	for v in $lo $hi; do
		check "dedup-minhash --$opt $v runs" $DM -q --$opt "$v" $with "$T/a.jsonl"
	done
	for v in $below $above; do
		check_fail "dedup-minhash --$opt $v is out of range" 2 "option '--$opt'" $DM -q --$opt "$v" $with "$T/a.jsonl"
	done
done <<RANGES
threshold 0.01 1 0.0099 1.000001
num-perm 1 1024 0 1025
shingle 1 64 0 65
ngram 63 63 0 64 --ngram-min 1 --against $T/eval.jsonl
RANGES
finish
