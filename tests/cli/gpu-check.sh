#!/bin/sh
# tests/cli/gpu-check.sh: scripts/gpu-check on a machine without a GPU: it says
# plainly that it skips and why, and exits 0; and, with a stand-in nvidia-smi and
# probe that claim two GPUs (GPU_FACTS), that it runs every step, prints the table
# and writes its JSON, the nccl steps failing here (no GPU behind them) and the
# cuda backend's steps skipped, saying why (no cuda backend in the build, or one
# that finds no GPU). Where a real GPU
# answers nvidia-smi, the test is one skip: run scripts/gpu-check itself.
. tests/cli/lib.sh
GC=$LMT_TOP/scripts/gpu-check
if nvidia-smi -L > /dev/null 2>&1; then
	echo "ok 1 # skip a GPU is here: run scripts/gpu-check"
	echo "1..1"
	exit 0
fi

out=$("$GC" 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q '^gpu-check: skipped: no GPU (.\+)$' && ok "no GPU: one plain skip line, exit 0" ||
	notok "no GPU" "status $rc: $out"

mkdir -p "$T/path"
printf '#!/bin/sh\ncase "$*" in *query*) echo "Stand-in GPU, 1.0";; *) echo "GPU 0: Stand-in";; esac\n' \
	> "$T/path/nvidia-smi"
printf '#!/bin/sh\n[ "${1:-}" = --count ] && { echo 2; exit 0; }\n%s\n' \
	"echo '{\"devices\":2,\"name\":\"Stand-in GPU\",\"bf16_gemm\":{\"tflops\":1.5}}'" > "$T/facts"
chmod +x "$T/path/nvidia-smi" "$T/facts"

# nvidia-smi answers but the build's own probe finds no device: still a skip, naming the probe's reason
if [ -x "$B/scripts/gpu-facts" ]; then
	out=$(PATH="$T/path:$PATH" "$GC" 2>&1); rc=$?
	[ $rc = 0 ] && echo "$out" | grep -q '^gpu-check: skipped: no GPU (gpu-facts: no GPU' &&
		ok "nvidia-smi answers, the probe finds no device: a skip naming the probe's reason" ||
		notok "probe finds none" "status $rc: $out"
fi

PATH="$T/path:$PATH" GPU_FACTS="$T/facts" GPU_CHECK_OUT="$T/gc" "$GC" > "$T/gc.out" 2> "$T/gc.err"
rc=$?
J=$T/gc/gpu-check.json
[ $rc = 1 ] && jq -e '.facts.name == "Stand-in GPU" and .gpus == 2 and .nvidia_smi == "Stand-in GPU, 1.0"' "$J" \
	> /dev/null && ok "two claimed GPUs: the facts in the JSON, exit 1 as the nccl steps fail" ||
	notok "claimed GPUs" "status $rc: $(cat "$J" 2>&1 | head -c 400)"
steps=$(jq -r '[.steps[] | .step + "=" + .status] | join(" ")' "$J" 2>&1)
want="facts=passed comm-1=failed bench-1=failed"
command -v mpirun > /dev/null 2>&1 && want="$want comm-2=failed bench-2=failed" || want="$want comm-2=skipped"
want="$want ops=skipped cuda-train=skipped train=skipped"
[ "$steps" = "$want" ] && ok "every step ran and is in the JSON: $steps" || notok "steps" "got '$steps', want '$want'"
jq -e '[.steps[] | select(.step == "ops" or .step == "cuda-train" or .step == "train") | .detail |
	test("no cuda backend|no GPU")] | length == 3 and all' "$J" > /dev/null &&
	ok "the cuda steps say plainly why they skip: no cuda backend, or no GPU" || notok "cuda steps" "$(jq -c '.steps' "$J")"
# (nccl-bench's own reason: "nccl: no GPU", or an unknown communicator in a build without NCCL)
grep -q '^bench-1  failed  exit [12], wrong ?: nccl-bench: .*nccl' "$T/gc.out" && grep -q '^step ' "$T/gc.out" &&
	ok "the table: a header and a row per step, a failure's reason in it" || notok "table" "$(cat "$T/gc.out")"
finish
