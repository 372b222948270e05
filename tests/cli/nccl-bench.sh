#!/bin/sh
# nccl-bench.sh: the collective sweep, on one process (the self communicator)
# and on 2 and 3 ranks under Open MPI's mpirun (the mpi communicator): the
# records the sweep must make, nccl-tests' formulas recomputed here from each
# record (algbw = size / time; busbw = algbw x 2(n-1)/n for all_reduce, x (n-1)/n
# for all_gather, reduce_scatter and alltoall, x 1 otherwise), the summary's
# average, zero wrong elements for every collective, dtype and op, a spoiled
# element counted (LMT_TEST_CORRUPT), --preflight naming every pair once, and
# the usage errors. The mpi part skips without mpirun or the mpi communicator.
. tests/cli/lib.sh

NB=$BIN/nccl-bench

# sizes MIN MAX FACTOR: how many sizes the sweep visits
sizes() { awk -v a="$1" -v e="$2" -v f="$3" 'BEGIN { for (s = a; s <= e; s *= f) n++; print n }'; }

# formulas FILE: every result record's algbw and busbw as nccl-tests defines
# them (relative 1e-9: the JSON numbers round-trip, the divisions do not), its
# size a whole number of elements split as the collective splits it, and the
# summary's average the mean of the records' busbw; prints the failures
formulas() {
	jq -r 'select(.event == "result") | [.collective, .size, .count, .type, .ranks, .time_us, .algbw_gbs,
		.busbw_gbs] | @tsv' "$1" | awk -F'\t' '
	BEGIN { ts["uint8"] = 1; ts["half"] = 2; ts["bfloat16"] = 2; ts["float"] = 4; ts["int32"] = 4
		ts["int64"] = 8; ts["double"] = 8 }
	function off(x, y) { d = x - y; if (d < 0) d = -d; return d > 1e-9 * (y < 0 ? -y : y) + 1e-300 }
	{
		c = $1; n = $5
		f = c == "all_reduce" ? 2 * (n - 1) / n : (c == "all_gather" || c == "reduce_scatter" || c == "alltoall") ? (n - 1) / n : 1
		alg = $2 / ($6 * 1e3)
		if (off($7, alg)) print "algbw " $0
		if (off($8, $7 * f)) print "busbw " $0
		if ($3 * ts[$4] != $2) print "count " $0
		split_ = c == "all_gather" || c == "reduce_scatter" || c == "alltoall"
		if (split_ && ($3 % n) != 0) print "split " $0
		sum += $8; k++
	}
	END { printf "mean %.17g\n", k ? sum / k : 0 }' > "$T/formulas"
	mean=$(sed -n 's/^mean //p' "$T/formulas")
	avg=$(jq -r 'select(.event == "summary") | .avg_busbw_gbs' "$1")
	awk -v m="$mean" -v a="$avg" 'BEGIN { d = m - a; if (d < 0) d = -d; exit !(a != "" && d <= 1e-9 * m + 1e-300) }' ||
		echo "summary avg_busbw_gbs $avg, mean of the records $mean"
	grep -v '^mean ' "$T/formulas"
}

# records FILE: result records and the summary's count of them
records() { jq -s '[.[] | select(.event == "result")] | length' "$1"; }

# ---- one process: self ----
"$NB" -b 8 -e 4K -f 4 -n 2 -w 1 > "$T/self.jsonl" 2> "$T/self.err"
rc=$?
want=$(( $(sizes 8 4096 4) * 6 ))
got=$(records "$T/self.jsonl")
[ $rc = 0 ] && [ "$got" = "$want" ] && ok "self: one record per collective and size ($want), JSONL when piped" ||
	notok "self: records" "exit $rc, $got of $want" "$(head -c 400 "$T/self.err")"
jq -e 'select(.event == "summary") | .comm == "self" and .ranks == 1 and .wrong == 0 and .records == '"$want" \
	"$T/self.jsonl" > /dev/null && ok "self: the summary names the communicator, the records, no wrong element" ||
	notok "self: summary" "$(tail -1 "$T/self.jsonl")"
bad=$(formulas "$T/self.jsonl")
[ -z "$bad" ] && ok "self: algbw, busbw and the average as nccl-tests defines them" || notok "self: formulas" "$bad"
cols=$(jq -r 'select(.event == "result") | .collective' "$T/self.jsonl" | sort -u | tr '\n' ' ')
[ "$cols" = "all_gather all_reduce alltoall broadcast reduce_scatter sendrecv " ] &&
	ok "self: all six collectives by default" || notok "self: collectives" "$cols"

"$NB" -b 1K -e 4K -f 2 -n 1 -w 0 all_reduce > "$T/k.jsonl"
s=$(jq -r 'select(.event == "result") | .size' "$T/k.jsonl" | tr '\n' ' ')
[ "$s" = "1024 2048 4096 " ] && ok "K is 1024 as in nccl-tests; a collective named alone runs alone" ||
	notok "sizes with K" "$s"
"$NB" -b 1M -e 3M -i 1M -n 1 -w 0 broadcast > "$T/i.jsonl"
s=$(jq -r 'select(.event == "result") | .size' "$T/i.jsonl" | tr '\n' ' ')
[ "$s" = "1048576 2097152 3145728 " ] && ok "-i steps by bytes" || notok "-i" "$s"

"$NB" -b 8 -e 64 -f 8 -d all -o all -n 1 -w 0 > "$T/all.jsonl"
want=$(( 2 * (2 * 7 * 3 + 4 * 7) ))
got=$(records "$T/all.jsonl")
types=$(jq -r 'select(.event == "result") | .type' "$T/all.jsonl" | sort -u | tr '\n' ' ')
[ "$got" = "$want" ] && [ "$types" = "bfloat16 double float half int32 int64 uint8 " ] &&
	ok "-d all -o all: every type, and every op for the reductions ($want records)" ||
	notok "-d all -o all" "$got of $want records; types $types"

"$NB" -b 8 -e 64 -f 8 --table -n 1 -w 0 > "$T/table"
rows=$(grep -c '^ ' "$T/table")
grep -q '^# Avg bus bandwidth *: [0-9.e+-]*$' "$T/table" && grep -q '^# Out of bounds values : 0 OK$' "$T/table" &&
	[ "$rows" = 12 ] && ok "--table: 12 rows, the out of bounds count, '# Avg bus bandwidth' last" ||
	notok "--table" "$(cat "$T/table")"

LMT_TEST_CORRUPT=0 "$NB" -b 8 -e 64 -f 8 -n 1 -w 0 > "$T/spoil.jsonl" 2> "$T/spoil.err"
rc=$?
w=$(jq -r 'select(.event == "result") | .wrong' "$T/spoil.jsonl" | sort -u | tr '\n' ' ')
[ $rc = 1 ] && [ "$w" = "1 " ] && grep -q "12 wrong elements (first: all_reduce float sum at 8 bytes)" "$T/spoil.err" &&
	ok "a spoiled element is counted in each record, exit 1, the first named" ||
	notok "spoiled element" "exit $rc, wrong $w" "$(cat "$T/spoil.err")"
"$NB" -b 8 -e 64 -f 8 -c 0 -n 1 -w 0 > "$T/c0.jsonl"
jq -s -e '[.[] | select(.event == "result") | has("wrong")] | length == 12 and (any | not)' "$T/c0.jsonl" > /dev/null &&
	ok "-c 0: no wrong count in the records" || notok "-c 0" "$(head -1 "$T/c0.jsonl")"

"$NB" --preflight > "$T/pf1.jsonl"
jq -e '.event == "preflight" and .pairs == 0' "$T/pf1.jsonl" > /dev/null && ok "--preflight on one rank: no pairs" ||
	notok "--preflight self" "$(cat "$T/pf1.jsonl")"
check_fail "--preflight with -b: a usage error (it was ignored)" 2 "-b does not apply" "$NB" --preflight -b 1K

# --comm nccl: where the build has it (the unknown name's message lists it), exit 1
# saying "no GPU" on a machine without one, or a checked sweep on one GPU; else
# an unknown communicator, exit 2
if "$NB" --comm foo 2>&1 | grep -q "this build has: .*nccl"; then
	"$NB" --comm nccl -b 4K -e 4K all_reduce > "$T/nccl.jsonl" 2> "$T/nccl.err"
	rc=$?
	if [ $rc = 1 ] && grep -q "nccl: no GPU" "$T/nccl.err" && [ ! -s "$T/nccl.jsonl" ]; then
		ok "--comm nccl without a GPU: exit 1 saying so, nothing on stdout"
	elif [ $rc = 0 ] && jq -e 'select(.event == "summary") | .comm == "nccl" and .wrong == 0' "$T/nccl.jsonl" \
		> /dev/null; then
		ok "--comm nccl on a GPU: a checked all-reduce, no wrong element"
	else
		notok "--comm nccl" "status $rc: $(head -c 600 "$T/nccl.err")"
	fi
else
	check_fail "--comm nccl: this build has none, exit 2" 2 "unknown communicator 'nccl'" "$NB" --comm nccl
fi
check_fail "--comm unknown: exit 2, naming the ones there are" 2 "unknown communicator 'foo' (this build has: self" \
	"$NB" --comm foo
check_fail "-o prod: refused plainly" 2 "'prod' is not offered by lmt's communicators" "$NB" -o prod
check_fail "-o min: refused plainly" 2 "'min' is not offered" "$NB" -o min
check_fail "-g 2: one rank per process" 2 "option '-g': '2': nccl-bench runs one rank per process" "$NB" -g 2
check_fail "-t 4: one rank per process" 2 "option '-t': '4'" "$NB" -t 4
check_fail "-d unknown type" 2 "unknown type 'fp8'" "$NB" -d fp8
check_fail "-b with a unit nccl-tests lacks" 2 "'1X' is not a size" "$NB" -b 1X
check_fail "-b above -e" 2 "2097152 bytes is above -e's 1048576" "$NB" -b 2M -e 1M
check_fail "-c 2" 2 "option '--check'" "$NB" -c 2
check_fail "an unknown collective" 2 "unknown collective 'all_to_all'" "$NB" all_to_all
check_fail "-r beyond the ranks" 2 "root 1 is not a rank of 1" "$NB" -r 1
check_fail "--jsonl with --table" 2 "exclude each other" "$NB" --jsonl --table
check "-t 1 -g 1 are accepted" "$NB" -t 1 -g 1 -b 8 -e 8 -n 1 -w 0 all_reduce

# ---- 2 and 3 ranks: mpi ----
if ! command -v mpirun > /dev/null 2>&1; then
	ok "# skip no mpirun on PATH (Debian: openmpi-bin)"
	finish
	exit
fi
"$NB" --comm mpi --preflight > "$T/probe" 2>&1
if grep -q "unknown communicator 'mpi'" "$T/probe"; then
	ok "# skip this build has no mpi communicator (make config: mpi no)"
	finish
	exit
fi
MPIRUN="mpirun --oversubscribe"
[ "$(id -u)" = 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"

for n in 2 3; do
	timeout 60 $MPIRUN -n $n "$NB" -b 8 -e 16K -f 8 -d all -o all -n 1 -w 0 > "$T/m$n.jsonl" 2> "$T/m$n.err"
	rc=$?
	want=$(( $(sizes 8 16384 8) * (2 * 7 * 3 + 4 * 7) ))
	got=$(records "$T/m$n.jsonl")
	[ $rc = 0 ] && [ "$got" = "$want" ] && ok "-n $n: $want records from rank 0 alone" ||
		notok "-n $n: records" "exit $rc, $got of $want" "$(head -c 600 "$T/m$n.err")"
	w=$(jq -r 'select(.event == "result" and .wrong != 0) | [.collective, .type, .op, .size, .wrong] | @tsv' "$T/m$n.jsonl")
	[ -z "$w" ] && jq -e 'select(.event == "summary") | .wrong == 0 and .comm == "mpi" and .ranks == '$n \
		"$T/m$n.jsonl" > /dev/null && ok "-n $n: zero wrong elements for every collective, dtype and op" ||
		notok "-n $n: wrong elements" "$w"
	bad=$(formulas "$T/m$n.jsonl")
	[ -z "$bad" ] && ok "-n $n: algbw, busbw (factor of $n ranks), sizes split by $n, the average" ||
		notok "-n $n: formulas" "$(echo "$bad" | head -5)"

	timeout 60 $MPIRUN -n $n "$NB" --preflight --preflight-size 64K -n 2 -w 1 > "$T/pf$n.jsonl" 2> "$T/pf$n.err"
	pairs=$(jq -r 'select(.event == "link") | "\(.rank)-\(.peer)"' "$T/pf$n.jsonl" | tr '\n' ' ')
	wantp=$(awk -v n=$n 'BEGIN { for (a = 0; a < n; a++) for (b = a + 1; b < n; b++) printf "%d-%d ", a, b }')
	[ "$pairs" = "$wantp" ] && ok "-n $n --preflight: every pair once ($wantp)" || notok "-n $n preflight pairs" "$pairs"
	slow=$(jq -s -r '([.[] | select(.event == "link")] | min_by(.bw_gbs) | "\(.rank)-\(.peer)") + " " +
		([.[] | select(.event == "preflight")][0] | "\(.slowest.rank)-\(.slowest.peer) \(.pairs) \(.wrong)")' "$T/pf$n.jsonl")
	set -- $slow
	a=${1%-*}; b=${1#*-}
	[ "$1" = "$2" ] && [ "$3" = "$(( n * (n - 1) / 2 ))" ] && [ "$4" = 0 ] &&
		grep -q "slowest link: ranks $a and $b," "$T/pf$n.err" &&
		ok "-n $n --preflight: the slowest link named, on stderr too" || notok "-n $n slowest" "$slow" "$(cat "$T/pf$n.err")"
done

timeout 60 $MPIRUN -x LMT_TEST_CORRUPT=1 -n 2 "$NB" -b 8 -e 64 -f 8 -n 1 -w 0 > "$T/ms.jsonl" 2> "$T/ms.err"
rc=$?
w=$(jq -r 'select(.event == "summary") | .wrong' "$T/ms.jsonl")
[ $rc != 0 ] && [ "$w" = 12 ] && ok "-n 2: rank 1's spoiled elements counted on rank 0 (12), the job fails" ||
	notok "-n 2 spoiled" "exit $rc, wrong $w" "$(head -c 400 "$T/ms.err")"
# the README's benchmark, on sizes that take a second: a row per size with both
# columns and the ratio (what it writes, not how fast anything ran)
if command -v mpicc > /dev/null 2>&1; then
	RANKS=2 MIN=8 MAX=2K FACTOR=4 WARMUP=0 ITERS=1 scripts/bench/nccl-bench > "$T/bench.md" 2> "$T/bench.err"
	rows=$(grep -c '^| [0-9]* | [0-9.]* | [0-9.e+-]* | [0-9.]* | [0-9.e+-]* | [0-9.]*x |$' "$T/bench.md")
	[ "$rows" = "$(sizes 8 2048 4)" ] && ok "scripts/bench/nccl-bench: a row per size, both busbw and the ratio" ||
		notok "scripts/bench/nccl-bench" "$(cat "$T/bench.md" "$T/bench.err" | head -20)"
else
	ok "# skip scripts/bench/nccl-bench: no mpicc"
fi
finish
