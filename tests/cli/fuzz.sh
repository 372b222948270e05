#!/bin/sh
# tests/cli/fuzz.sh: every fuzz target (tests/fuzz/) runs a few seconds on its seeds.
#
# The targets are built by make check (make fuzz-build) where clang has libFuzzer;
# where it has not, or they were not built (make -j2 tests && tests/run), this test
# says so and skips. Each target first replays every committed seed (valid files
# from scripts/gen-fuzz-seeds and the inputs of bugs found before, so each of
# those stays fixed), then mutates them for FUZZ_CHECK_SECONDS (2; about 3 s a target in all). A crash, a
# leak, a sanitizer report or a timeout fails the target's line, with the report.
. tests/cli/lib.sh
FB=$(dirname "$BIN")/fuzz
secs=${FUZZ_CHECK_SECONDS:-2}
names=$(cd tests/fuzz && ls fuzz-*.c | sed 's/^fuzz-//; s/\.c$//')

if ! command -v clang > /dev/null 2>&1; then
	echo "1..0 # SKIP no clang: the fuzz targets need clang with libFuzzer"
	exit 0
fi
missing=
for n in $names; do [ -x "$FB/fuzz-$n" ] || missing="$missing $n"; done
if [ -n "$missing" ]; then
	echo "1..0 # SKIP fuzz targets not built ($FB/fuzz-*; make fuzz-build, or make check, builds them):$missing"
	exit 0
fi

mkdir "$T/work"
for n in $names; do
	# -runs bounds a target that is slow to start; -max_total_time is what ends it
	# at the lowest priority: the suite runs two tests at a time, and the kill-and-
	# resume tests beside this one time their signals against training steps
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	nice -n 19 "$FB/fuzz-$n" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
		-artifact_prefix="$T/work/$n-" -close_fd_mask=1 "$T/work" "tests/fuzz/seeds/$n" \
		> "$T/$n.log" 2>&1
	rc=$?
	rm -f "$T"/work/[0-9a-f]*
	if [ "$rc" = 0 ]; then
		ok "fuzz-$n: $(sed -n 's/^#[0-9]*[[:space:]]*DONE[[:space:]]*\(cov: [0-9]*\).*/\1/p' "$T/$n.log"), \
$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$T/$n.log") runs in ${secs} s"
	else
		notok "fuzz-$n (exit status $rc)" "$(grep -E 'ERROR|SUMMARY|Test unit written|^    #[0-9]' "$T/$n.log" | head -20)"
	fi
done
finish
