# tests/cli/lib.sh: TAP helpers for the shell tests of real binaries.
#
# Sourced by tests/cli/*.sh, which run from the repository root. Each check prints
# "ok N - desc" or "not ok N - desc" with diagnostics; finish prints the plan.
# $T is a scratch directory removed at exit; $BIN holds the built tools.

BIN=${LMT_BIN:-build/bin}
case $BIN in /*) ;; *) BIN=$(pwd)/$BIN ;; esac
DATA=$(pwd)/tests/data
T=$(mktemp -d "${TMPDIR:-/tmp}/lmt-cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
_n=0
_fail=0

ok() { _n=$((_n + 1)); echo "ok $_n - $1"; }
notok() {
	_n=$((_n + 1)); _fail=$((_fail + 1))
	echo "not ok $_n - $1"
	shift
	for l in "$@"; do echo "# $l"; done
}

# check DESC CMD...: passes if CMD exits 0
check() {
	d=$1; shift
	if "$@" > "$T/.out" 2> "$T/.err"; then ok "$d"
	else notok "$d" "exit status $?: $*" "$(head -c 600 "$T/.err")"; fi
}

# check_fail DESC STATUS NEEDLE CMD...: CMD must exit STATUS and say NEEDLE on stderr
check_fail() {
	d=$1; want=$2; needle=$3; shift 3
	"$@" > "$T/.out" 2> "$T/.err"
	rc=$?
	if [ "$rc" = "$want" ] && grep -qF -- "$needle" "$T/.err"; then ok "$d"
	else notok "$d" "want status $want and '$needle' on stderr; got $rc" "$(head -c 600 "$T/.err")"; fi
}

# same DESC FILE1 FILE2: byte-identical
same() {
	if cmp -s "$2" "$3"; then ok "$1"; else notok "$1" "$(cmp "$2" "$3" 2>&1 | head -1)"; fi
}

# nothing_left DESC DIR NAME: no NAME and no temporary of it in DIR
nothing_left() {
	left=$(ls -A "$2" 2>/dev/null | grep -F "$3" || true)
	if [ -z "$left" ]; then ok "$1"; else notok "$1" "left behind: $left"; fi
}

# reseal FILE: re-seal a JSON manifest edited on purpose, as 'ckpt-inspect
# --rehash' does (lib/core/jsonseal.h: the seal is the SHA-256 of the text before
# its member, closed with '}'), so a test can reach the checks behind the seal
reseal() {
	_pre=$(sed 's/,"[a-z_]*_sha256":"[0-9a-f]\{64\}"}$//; s/}$//' "$1" | tr -d '\n')
	_key=$(grep -o '"[a-z_]*_sha256":"[0-9a-f]\{64\}"}$' "$1" | cut -d'"' -f2)
	[ -n "$_key" ] || _key=manifest_sha256
	_h=$(printf '%s}' "$_pre" | sha256sum | cut -c1-64)
	printf '%s,"%s":"%s"}\n' "$_pre" "$_key" "$_h" > "$1.reseal" && mv "$1.reseal" "$1"
}

# edit_each SRC FILTER DEST REGEX CMD...: for each scalar of the JSON file SRC
# whose path the jq expression FILTER (over `.`, the path array) keeps, write SRC
# to DEST with that one value edited (a number + 1, a string + "x", a boolean
# negated) and run CMD, which must fail with REGEX (grep's basic regex) on
# stderr. Sets nf (the edits made), nbad (those not refused so) and firstbad.
edit_each() {
	_src=$1 _flt=$2 _dst=$3 _re=$4
	shift 4
	jq -c "[paths(scalars) | select($_flt)]" "$_src" | jq -c '.[]' > "$T/.paths"
	nf=0 nbad=0 firstbad=
	while read -r _p; do
		nf=$((nf + 1))
		jq -c --argjson p "$_p" 'setpath($p; getpath($p) | if type == "number" then . + 1
			elif type == "string" then . + "x" elif type == "boolean" then (. | not) else . end)' \
			"$_src" > "$_dst"
		if "$@" > /dev/null 2> "$T/.edit.err" || ! grep -q "$_re" "$T/.edit.err"; then
			nbad=$((nbad + 1)); [ -n "$firstbad" ] || firstbad="$_p: $(head -c 300 "$T/.edit.err")"
		fi
	done < "$T/.paths"
}

# tiny_data DOCS: the small fixture most train tests start from: a generated
# corpus of DOCS documents, a 300-token tokenizer ($T/t.lmtok) and a dataset of
# 32-token sequences with a tenth for validation ($T/d)
tiny_data() {
	"$BIN/gen-corpus" -q --docs "$1" --seed 7 -o "$T/c.jsonl" > /dev/null
	"$BIN/tok-train" -q -v 300 -o "$T/t.lmtok" "$T/c.jsonl" > /dev/null
	"$BIN/tok-encode" -q -t "$T/t.lmtok" -o "$T/s.lmtoks" "$T/c.jsonl" > /dev/null
	"$BIN/shard-pack" -q -L 32 --split val=0.1 -o "$T/d" "$T/s.lmtoks" > /dev/null
}

finish() {
	echo "1..$_n"
	[ "$_fail" = 0 ]
}

# need_mpi: the rest of the test wants ranks under Open MPI's mpirun: without
# mpirun on PATH, or with a build that has no mpi communicator, the whole test is
# one skip (TAP) and exits 0. Sets TC (the comm test binary, absolute) and MPIRUN
# (--oversubscribe: more ranks than cores; --allow-run-as-root as root).
need_mpi() {
	TC=${B:-build}/tests/test-comm
	case $TC in /*) ;; *) TC=$(pwd)/$TC ;; esac
	if ! command -v mpirun > /dev/null 2>&1; then
		echo "ok 1 # skip no mpirun on PATH (Debian: openmpi-bin)"
		echo "1..1"
		exit 0
	fi
	"$TC" --mpi > "$T/probe" 2>&1
	if grep -q "unknown communicator 'mpi'" "$T/probe"; then
		echo "ok 1 # skip this build has no mpi communicator (make config: mpi no)"
		echo "1..1"
		exit 0
	fi
	MPIRUN="mpirun --oversubscribe"
	[ "$(id -u)" = 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
}
