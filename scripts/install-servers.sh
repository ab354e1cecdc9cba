#!/usr/bin/env bash
# Installs the servers the tests run against, into a cache outside the work
# tree ($STATESEAL_SERVERS, else $XDG_CACHE_HOME/stateseal/bin, else
# ~/.cache/stateseal/bin), each pinned and each built at most once per
# machine:
#
#   vault      HashiCorp Vault v1.21.0, built from the Go module proxy with
#              the pinned tools/vault module (about 10 minutes on 2 cores)
#   local-kms  the AWS KMS API, from the Go module proxy
#   redis      Debian's redis-server
#
# The tests start and stop the servers themselves (internal/testservers).
#
#   bash scripts/install-servers.sh
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${STATESEAL_SERVERS:-${XDG_CACHE_HOME:-$HOME/.cache}/stateseal/bin}
mkdir -p "$dir"

vault="$dir/vault-v1.21.0"
if [ ! -x "$vault" ]; then
	echo "== building Vault v1.21.0 into $vault (about 10 minutes, once)"
	start=$(date +%s)
	(cd tools/vault && go build -o "$vault.tmp" github.com/hashicorp/vault)
	mv "$vault.tmp" "$vault"
	echo "built Vault in $(( $(date +%s) - start )) s"
fi
"$vault" version

kms="$dir/local-kms-v0.0.0-20260228092603-2a5e92d09ab6"
if [ ! -x "$kms" ]; then
	echo "== installing local-kms into $kms"
	tmp=$(mktemp -d)
	GOBIN="$tmp" go install github.com/nsmithuk/local-kms@v0.0.0-20260228092603-2a5e92d09ab6
	mv "$tmp/local-kms" "$kms"
	rm -rf "$tmp"
fi
echo "local-kms: $kms"

if ! command -v redis-server >/dev/null; then
	echo "== installing redis-server from Debian"
	if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >/dev/null
	# The tests start their own servers; the package's service is not needed.
	$sudo systemctl disable --now redis-server >/dev/null 2>&1 || true
fi
redis-server --version
