#!/usr/bin/env bash
# Runs the round-trip benchmarks five times and prints the median of each,
# with its ratio to the anchors of the same run. docs/BENCHMARKS.md is
# written from its output.
#
#   bash scripts/bench.sh            # about three minutes on two cores
set -euo pipefail
cd "$(dirname "$0")/../bench"
out=$(mktemp)
go test -run '^$' -bench 'RoundTrip' -benchmem -count "${COUNT:-5}" | tee "$out"
awk '
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	for (i = 2; i <= NF; i++) {
		if ($i == "ns/op") ns[name] = ns[name] " " $(i-1)
		if ($i == "allocs/op") al[name] = $(i-1)
		if ($i == "B/op") by[name] = $(i-1)
		if ($i == "tokenB") tk[name] = $(i-1)
	}
	if (!(name in seen)) { seen[name] = 1; order[n++] = name }
}
function median(s,   a, k, i, j, t) {
	k = split(s, a, " ")
	for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
END {
	for (i = 0; i < n; i++) med[order[i]] = median(ns[order[i]])
	x = "BenchmarkRoundTrip/raw-xchacha-b64"; h = "BenchmarkRoundTrip/raw-hmac-b64"
	printf "\n%-48s %10s %7s %7s %7s %10s\n", "median of " COUNT " runs", "ns/op", "B/op", "allocs", "tokenB", "/floor"
	for (i = 0; i < n; i++) {
		b = order[i]; floor = (b ~ /mac|hmac/) ? h : x
		printf "%-48s %10.1f %7s %7s %7s %9.2fx\n", b, med[b], by[b], al[b], tk[b], med[b] / med[floor]
	}
	a = med["BenchmarkRoundTrip/stateseal-aead"]; m = med["BenchmarkRoundTrip/stateseal-mac"]
	printf "\nstateseal-aead / raw-xchacha-b64 = %.3f (target <= 1.15)\n", a / med[x]
	printf "stateseal-mac  / raw-hmac-b64    = %.3f (target <= 1.15)\n", m / med[h]
	printf "tink-xchacha    / stateseal-aead = %.2fx (target >= 1.8)\n", med["BenchmarkRoundTrip/tink-xchacha"] / a
	printf "hmac-json       / stateseal-mac  = %.2fx (target >= 8)\n", med["BenchmarkRoundTrip/hmac-json"] / m
	printf "securecookie    / stateseal-aead = %.2fx (target >= 8)\n", med["BenchmarkRoundTrip/securecookie"] / a
	printf "paseto-v4-local / stateseal-aead = %.2fx (target >= 20)\n", med["BenchmarkRoundTrip/paseto-v4-local"] / a
}' COUNT="${COUNT:-5}" "$out"
rm -f "$out"
