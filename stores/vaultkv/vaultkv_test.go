package vaultkv_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/stores"
	"github.com/stateseal/stateseal/stores/storetest"
	"github.com/stateseal/stateseal/stores/vaultkv"
)

// harness opens vault-kv URLs with the store's own session
// (stores.Default), the server and token from the environment.
type harness struct{ v *testservers.Vault }

func (h *harness) Registry() *stores.Registry { return stores.Default }

func (h *harness) NewLocation(context.Context, *testing.T) string {
	b := make([]byte, 6)
	rand.Read(b)
	return "vault-kv://secret/stateseal/keyset-" + hex.EncodeToString(b)
}

func (h *harness) Stop(*testing.T) bool { h.v.Stop(); return true }
func (h *harness) Start(*testing.T)     { h.v.Resume() }

// clientHarness opens vault-kv URLs through a client the test made
// (vaultkv.Opener(client), which builds each store with vaultkv.New).
type clientHarness struct {
	harness
	reg *stores.Registry
}

func (h *clientHarness) Registry() *stores.Registry { return h.reg }

// TestConformance runs the suite against a Vault server that keeps its
// data, so that it comes back from a stop with the keyset, and KV v2
// mounted at secret/: with the store's own session, and with stores built
// from the test's client.
func TestConformance(t *testing.T) {
	v := testservers.StartVaultServer(t)
	root := mountKV(t, v)
	t.Run("URL", func(t *testing.T) { storetest.Run(t, &harness{v: v}) })
	t.Run("Client", func(t *testing.T) {
		h := &clientHarness{harness: harness{v: v}, reg: new(stores.Registry)}
		h.reg.Register(vaultkv.Scheme, vaultkv.Opener(root))
		storetest.Run(t, h)
	})
}

// TestNew: a store built by New from a caller's client names the secret
// in its errors, and its Close leaves the client alone.
func TestNew(t *testing.T) {
	v := testservers.StartVault(t) // a dev server: KV v2 at secret/
	c, err := api.NewClient(&api.Config{Address: v.URL()})
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(v.Token)
	ctx := context.Background()
	s := vaultkv.New(c, "secret", "stateseal/new", nil)
	if _, _, err := s.Read(ctx); !errors.Is(err, stores.ErrNotFound) || !strings.Contains(err.Error(), "vault-kv://secret/stateseal/new") {
		t.Fatalf("Read of an empty secret: %v", err)
	}
	if _, err := s.Write(ctx, []byte("doc"), ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Logical().Read("secret/data/stateseal/new"); err != nil {
		t.Fatalf("the caller's client after the store's Close: %v", err)
	}
}

// mountKV sets the test's Vault environment, mounts KV v2 at secret/ and
// returns a root client.
func mountKV(t *testing.T, v *testservers.Vault) *api.Client {
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
	return c
}

// TestSizeBound (finding 9): a 16 MiB document written into the secret
// behind the store's back (through a Vault whose listener accepts one:
// by default Vault refuses a JSON string over 1 MiB) is refused once the
// answer passes 2 MiB + 64 KiB: the read allocates far less than the
// document.
func TestSizeBound(t *testing.T) {
	v := testservers.StartVaultServer(t, "max_request_size = 67108864", "max_json_string_value_length = 33554432")
	c := mountKV(t, v)
	ctx := context.Background()
	s, err := stores.Open(ctx, "vault-kv://secret/stateseal/big")
	if err != nil {
		t.Fatal(err)
	}
	defer s.(io.Closer).Close()
	if _, err := s.Write(ctx, make([]byte, stores.MaxSize+1), ""); !errors.Is(err, stores.ErrTooLarge) {
		t.Fatalf("Write of MaxSize+1 bytes: %v, want ErrTooLarge", err)
	}
	if _, err := c.Logical().Write("secret/data/stateseal/big", map[string]any{
		"data": map[string]any{"keyset": strings.Repeat("x", 16<<20)},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.(stores.Revisioner).Revision(ctx); err != nil { // connections ready
		t.Fatal(err)
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	_, _, err = s.Read(ctx)
	runtime.ReadMemStats(&m1)
	if !errors.Is(err, stores.ErrTooLarge) || !strings.Contains(err.Error(), "1048576-byte") {
		t.Fatalf("Read of a 16 MiB document: %v, want ErrTooLarge naming the bound", err)
	}
	n := m1.TotalAlloc - m0.TotalAlloc
	// For scale: what the API client's own read of the document costs.
	runtime.GC()
	runtime.ReadMemStats(&m0)
	c.Logical().Read("secret/data/stateseal/big")
	runtime.ReadMemStats(&m1)
	t.Logf("16 MiB document refused after allocating %d bytes (the API client's read: %d bytes): %v", n, m1.TotalAlloc-m0.TotalAlloc, err)
	if n > 8<<20 {
		t.Errorf("refusing a 16 MiB document allocated %d bytes: it was read whole", n)
	}
	// A document at the bound is read, even of characters JSON escapes.
	if _, err := c.Logical().Write("secret/data/stateseal/big", map[string]any{
		"data": map[string]any{"keyset": strings.Repeat(`"`, stores.MaxSize)},
	}); err != nil {
		t.Fatal(err)
	}
	if data, _, err := s.Read(ctx); err != nil || len(data) != stores.MaxSize {
		t.Fatalf("Read of a MaxSize document of quotes: %d bytes, %v", len(data), err)
	}
}
