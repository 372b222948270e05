#!/bin/sh
# tests/cli/comm-choice.sh: train --comm, the communicator by name (auto: mpi for
# the cpu backend's ranks, nccl for the cuda backend's): an unknown name and a
# communicator that cannot carry the backend's buffers (nccl with cpu, mpi with
# cuda) are usage errors, exit 2, before any run directory is made; self under a
# launcher of 2 processes is refused; --comm mpi on 2 ranks is the auto choice,
# bitwise (the same losses in every update record).
. tests/cli/lib.sh
TR=$BIN/train
tiny_data 200
M="--data $T/d --layers 1 --heads 2 --channels 16 --micro-batch 4 --updates 3 --eval-every 0 --threads 1"
ver=$("$TR" --version 2>&1)

skip() { _n=$((_n + 1)); echo "ok $_n # skip $1"; }

check_fail "--comm bogus: a usage error naming the build's communicators" 2 \
	"option '--comm': 'bogus' is not available in this build (self" $TR $M -o "$T/r1" --comm bogus
names=$(sed -n 's/.*not available in this build (\(.*\))$/\1/p' "$T/.err")
if echo "$names" | grep -q "nccl"; then
	check_fail "--comm nccl with the cpu backend: exit 2, nccl needs device buffers" 2 \
		"the nccl communicator reduces device buffers; it needs the cuda backend" $TR $M -o "$T/r2" --comm nccl
	[ ! -e "$T/r2" ] && ok "... and no run directory made" || notok "run directory after a usage error" "$(ls "$T/r2")"
else
	skip "this build has no nccl communicator"
	skip "this build has no nccl communicator"
fi
if echo "$ver" | grep -q '^backends:.* cuda' && echo "$names" | grep -q "mpi"; then
	check_fail "--comm mpi with the cuda backend: exit 2, mpi reduces host buffers" 2 \
		"the mpi communicator reduces host buffers" $TR $M -o "$T/r3" --comm mpi --backend cuda
else
	skip "this build has no cuda backend or no mpi communicator"
fi
check "--comm self on one process" $TR $M --no-save --comm self
if command -v mpirun > /dev/null 2>&1 && echo "$names" | grep -q "mpi"; then
	MR="mpirun --oversubscribe"
	[ "$(id -u)" = 0 ] && MR="$MR --allow-run-as-root"
	$MR -n 2 $TR $M --no-save --jsonl > "$T/auto.out" 2> "$T/auto.err"
	$MR -n 2 $TR $M --no-save --jsonl --comm mpi > "$T/mpi.out" 2> "$T/mpi.err"
	jq -c 'select(.event == "update") | [.update, .loss, .grad_norm]' "$T/auto.out" > "$T/auto.l"
	jq -c 'select(.event == "update") | [.update, .loss, .grad_norm]' "$T/mpi.out" > "$T/mpi.l"
	[ "$(wc -l < "$T/auto.l")" = 3 ] && same "2 ranks: --comm mpi is the auto choice, bitwise" "$T/auto.l" "$T/mpi.l" \
		|| notok "2 ranks, --comm mpi" "$(tail -c 300 "$T/mpi.err")"
	$MR -n 2 $TR $M --no-save --comm self > /dev/null 2> "$T/self.err"
	rc=$?
	[ "$rc" = 2 ] && grep -q "the launcher started 2 processes; the self communicator is one" "$T/self.err" \
		&& ok "--comm self under a launcher of 2: exit 2, saying why" \
		|| notok "self under mpirun (exit $rc)" "$(head -c 400 "$T/self.err")"
else
	skip "no mpirun or no mpi communicator"
	skip "no mpirun or no mpi communicator"
fi
finish
