//go:build tools

// Package vault pins the HashiCorp Vault server that the tests run as a dev
// server. scripts/install-servers.sh builds it once per machine into a cache
// outside the work tree; it is never part of the library's module.
package vault

import _ "github.com/hashicorp/vault"
