#!/bin/sh
# tests/cli/cuda-backend.sh: `train --backend cuda` where it cannot run: in a build
# without CUDA a usage error (exit 2) naming the backends the build has; in a build
# with the cuda backend but no GPU, exit 1 saying "no GPU" and why, with nothing on
# stdout. Where a GPU is, one skip (tests/gpu runs it).
. tests/cli/lib.sh
ver=$("$BIN/train" --version 2>&1)
if echo "$ver" | grep -q 'cuda runtime.* [1-9][0-9]* device'; then
	echo "ok 1 # skip a GPU is visible: tests/gpu/cuda-train.sh runs the backend"
	echo "1..1"
	exit 0
fi
tiny_data 40
M="--data $T/d --layers 1 --heads 1 --channels 16 --updates 1 -o $T/run"
if echo "$ver" | grep -q '^backends:.* cuda'; then
	check_fail "--backend cuda without a GPU: exit 1, 'no GPU' and the runtime's reason" 1 \
		"cuda backend: no GPU (" "$BIN/train" $M --backend cuda
	[ ! -s "$T/.out" ] && ok "... nothing on stdout" || notok "stdout" "$(head -c 200 "$T/.out")"
else
	check_fail "--backend cuda in a build without CUDA: a usage error naming the build's backends" 2 \
		"is not available in this build (cpu)" "$BIN/train" $M --backend cuda
fi
# cuBLASLt is opened by the cuda backend when it opens, never linked: linked, its
# relocations cost every process of every tool about 200 MB of resident memory
linked=
for t in "$BIN"/*; do
	ldd "$t" 2> /dev/null | grep -q 'libcublasLt' && linked="$linked $(basename "$t")"
done
[ -z "$linked" ] && ok "no tool links cuBLASLt (the cuda backend opens it at run time)" \
	|| notok "cuBLASLt linked" "linked into:$linked"
finish
