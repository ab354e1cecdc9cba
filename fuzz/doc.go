// Package fuzz holds the go test -fuzz targets over everything in stateseal
// that parses untrusted input. CI runs each for a bounded time:
//
//	go test ./fuzz -run '^$' -fuzz '^FuzzOpen$' -fuzztime 30s
//
// Seed corpora live under testdata/fuzz; a failing input the fuzzer finds
// is written there and becomes a regression test of the ordinary test run.
package fuzz
