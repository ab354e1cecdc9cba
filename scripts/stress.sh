#!/usr/bin/env bash
# Proves a test is not flaky, or shows that it is: builds the package's
# test binary once with the race detector, runs the test N times alone,
# then M times beside a CPU-bound process on every core, and prints the
# failures out of each. Every failed run's output is kept in a directory
# it names.
#
#   bash scripts/stress.sh PACKAGE TEST N [M]
#   bash scripts/stress.sh ./replay/redisguard TestDurableMixedGuards 50 20
#
# TEST is a -run pattern, anchored (^TEST$) unless it holds a '|', '/' or
# '^'. M defaults to N; M=0 skips the loaded runs. It exits non-zero if
# any run failed. The tests start their own servers (scripts/install-servers.sh
# installs them), as under scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 3 ]; then
	sed -n '2,14p' "$0" >&2
	exit 2
fi
pkg=$1 test=$2 n=$3 m=${4:-$3}
case "$test" in
*'|'* | */* | *'^'*) run=$test ;;
*) run="^$test\$" ;;
esac

out=$(mktemp -d "${TMPDIR:-/tmp}/stress.XXXXXX")
bin="$out/test.bin"
go test -race -c -o "$bin" "$pkg"
dir=$(go list -f '{{.Dir}}' "$pkg")

hogs=()
stop_hogs() {
	for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	hogs=()
}
trap stop_hogs EXIT

# runs LABEL COUNT: runs the test COUNT times, prints the failures.
runs() {
	local label=$1 count=$2 fail=0 i start
	start=$(date +%s)
	for ((i = 1; i <= count; i++)); do
		if ! (cd "$dir" && "$bin" -test.run "$run" -test.count 1 -test.timeout 10m) >"$out/$label-$i.log" 2>&1; then
			fail=$((fail + 1))
			echo "  $label run $i failed: $out/$label-$i.log"
			grep -m 5 -E -- '--- FAIL|panic:|_test.go:[0-9]+:' "$out/$label-$i.log" | sed 's/^/    /' || true
		elif grep -q '^testing: warning: no tests to run' "$out/$label-$i.log"; then
			echo "stress: $run matches no test in $pkg" >&2
			exit 2
		else
			rm "$out/$label-$i.log"
		fi
	done
	echo "$pkg $test $label: $fail failures out of $count ($(($(date +%s) - start)) s)"
	total=$((total + fail))
}

total=0
runs idle "$n"
if [ "$m" -gt 0 ]; then
	for ((c = 0; c < $(nproc); c++)); do
		(while :; do :; done) &
		hogs+=($!)
	done
	runs loaded "$m"
	stop_hogs
fi
[ "$total" -eq 0 ] && rm -rf "$out"
exit $((total > 0))
