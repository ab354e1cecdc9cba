package vaultkv_test

import (
	"testing"
	"time"

	"github.com/hashicorp/vault/api"

	_ "github.com/stateseal/stateseal/backends/vault"

	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/rotation/faulttest"
)

// TestVaultRaftFaults: a three-node Vault cluster on integrated storage
// (raft), the keyset in KV v2 wrapped by a transit key, the client on a
// standby (which forwards to the leader), and the leader killed (SIGKILL)
// mid-load: every rotation Vault acknowledged is in the store after (raft
// commits a write on a majority before the leader answers), and the
// loaders follow again once a new leader is elected. docs/FLEET.md quotes
// its counts.
func TestVaultRaftFaults(t *testing.T) {
	c := testservers.StartVaultCluster(t)
	standby := c.Standby()
	t.Setenv("VAULT_CLIENT_TIMEOUT", "5s")
	client := mountKV(t, standby) // VAULT_ADDR: the standby
	if err := client.Sys().Mount("transit", &api.MountInput{Type: "transit"}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Logical().Write("transit/keys/stateseal", nil); err != nil {
		t.Fatal(err)
	}
	r := faulttest.Start(t, "vault-kv://secret/stateseal/raft", "vault://transit/keys/stateseal", faulttest.Loaders(), 100*time.Millisecond)
	var old *testservers.Vault
	r.Fault("vault raft kill -9 leader", nil, faulttest.Warm(), func() {
		old = c.KillLeader()
	}, func() { c.Rejoin(old) })
}
