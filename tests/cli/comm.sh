#!/bin/sh
# comm.sh: the mpi communicator and the PMIx wire-up across processes, by
# build/tests/test-comm under Open MPI's mpirun (a PMIx server): every rank of
# -n 2 and -n 3 checks every op and dtype against values it computes itself
# (tests/unit/test-comm.c), each rank's TAP in its own file; the mpi
# communicator alone (Open MPI's singleton); and the timeout: rank 1 sleeps past
# rank 0's 1 s before the all-reduce, so rank 0 must fail in about 1 s naming the
# operation, and the job end non-zero.
. tests/cli/lib.sh

need_mpi

# tap_of DESC FILE: FILE is a passing TAP run (its plan met, no "not ok")
tap_of() {
	p=$(grep -c '^ok ' "$2"); f=$(grep -c '^not ok ' "$2")
	plan=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$2")
	if [ "$f" = 0 ] && [ -n "$plan" ] && [ "$p" = "$plan" ]; then ok "$1 ($p checks)"
	else notok "$1" "$p passed, $f failed, plan ${plan:-missing}" "$(grep -E '^(not ok|#)' "$2" | head -20)"; fi
}

tap_of "mpi communicator alone: a world of one" "$T/probe"

for n in 2 3; do
	timeout 60 $MPIRUN -n $n sh -c "exec '$TC' > '$T/r$n.'\$OMPI_COMM_WORLD_RANK 2>&1" > "$T/job$n" 2>&1
	rc=$?
	if [ $rc = 0 ]; then ok "mpirun -n $n: the job exits 0"; else notok "mpirun -n $n: exit status $rc" "$(tail -5 "$T/job$n")"; fi
	r=0
	while [ $r -lt $n ]; do
		if [ -f "$T/r$n.$r" ]; then tap_of "mpirun -n $n, rank $r: every op and dtype" "$T/r$n.$r"
		else notok "mpirun -n $n, rank $r: no output" "$(tail -5 "$T/job$n")"; fi
		r=$((r + 1))
	done
	grep -q "auto chose mpi for a job of $n" "$T/r$n.0" && ok "-n $n: auto chose mpi" ||
		notok "-n $n: auto chose mpi" "$(grep auto "$T/r$n.0")"
done

# the timeout: rank 0 fails after about 1 s (at most 3), naming the operation
start=$(date +%s)
timeout 30 $MPIRUN -n 2 sh -c "exec '$TC' --timeout > '$T/to.'\$OMPI_COMM_WORLD_RANK 2>&1" > "$T/tojob" 2>&1
rc=$?
secs=$(( $(date +%s) - start ))
if [ $rc != 0 ] && [ $rc != 124 ]; then ok "timeout: the job exits non-zero ($rc)"
else notok "timeout: the job exits non-zero" "exit status $rc" "$(tail -5 "$T/tojob")"; fi
[ $secs -lt 20 ] && ok "timeout: the job ends in ${secs} s (rank 1 alone sleeps 6)" || notok "timeout: job took $secs s"
line=$(grep '^rank 0: rc' "$T/to.0" 2>/dev/null)
t=$(echo "$line" | sed -n 's/^rank 0: rc -[0-9]* after \([0-9.]*\) s: .*/\1/p')
if [ -n "$t" ] && awk "BEGIN { exit !($t >= 0.9 && $t < 3) }"; then ok "timeout: rank 0 fails after $t s (1 s set)"
else notok "timeout: rank 0 fails after 1 to 3 s" "$line"; fi
echo "$line" | grep -q "all-reduce (sum, 1 fp32 element) timed out after 1 s on rank 0 of 2: a peer may have died" &&
	ok "timeout: the message names the operation and the peer" || notok "timeout: message" "$line"
grep -q "^rank 0: then a barrier: rc -1: .*an earlier operation timed out" "$T/to.0" &&
	ok "timeout: the communicator refuses the next call" || notok "timeout: next call" "$(cat "$T/to.0")"
finish
