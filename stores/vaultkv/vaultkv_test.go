package vaultkv_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/stores/storetest"
	_ "github.com/stateseal/stateseal/stores/vaultkv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

type harness struct{ v *testservers.Vault }

func (h *harness) Name() string { return "vault-kv" }

func (h *harness) NewLocation(context.Context, *testing.T) string {
	b := make([]byte, 6)
	rand.Read(b)
	return "vault-kv://secret/stateseal/keyset-" + hex.EncodeToString(b)
}

func (h *harness) Stop(*testing.T) bool        { h.v.Stop(); return true }
func (h *harness) Start(*testing.T)            { h.v.Resume() }
func (h *harness) PollInterval() time.Duration { return 100 * time.Millisecond }
func (h *harness) MaxDelay() time.Duration     { return time.Second }

// TestConformance runs the suite against a Vault server that keeps its
// data, so that it comes back from a stop with the keyset, and KV v2
// mounted at secret/.
func TestConformance(t *testing.T) {
	v := testservers.StartVaultServer(t)
	v.Env(t)
	c, err := api.NewClient(&api.Config{Address: v.URL()})
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(v.Token)
	if err := c.Sys().Mount("secret", &api.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		t.Fatal(err)
	}
	// KV v2 upgrades its storage in the background after a mount.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := c.Logical().Read("secret/config"); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	storetest.Run(t, &harness{v: v})
}
