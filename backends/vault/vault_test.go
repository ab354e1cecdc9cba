package vault_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/backends/kektest"
	"github.com/stateseal/stateseal/backends/vault"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/internal/vaultclient"
)

// harness opens vault URLs with the backend's own session
// (backends.Default), the server and token from the environment.
type harness struct {
	v      *testservers.Vault
	client *api.Client // root
}

// newHarness sets the test's Vault environment for v and mounts transit.
func newHarness(t *testing.T, v *testservers.Vault) *harness {
	v.Env(t)
	c, err := api.NewClient(&api.Config{Address: v.URL()})
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(v.Token)
	if err := c.Sys().Mount("transit", &api.MountInput{Type: "transit"}); err != nil {
		t.Fatal(err)
	}
	return &harness{v: v, client: c}
}

func (h *harness) Registry() *backends.Registry { return backends.Default }

func name() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "k-" + hex.EncodeToString(b)
}

func (h *harness) NewKey(ctx context.Context, t *testing.T) string {
	n := name()
	if _, err := h.client.Logical().Write("transit/keys/"+n, nil); err != nil {
		t.Fatal(err)
	}
	return "vault://transit/keys/" + n
}

func (h *harness) RotatableKey(ctx context.Context, t *testing.T) (string, func(), bool) {
	url := h.NewKey(ctx, t)
	n := url[strings.LastIndex(url, "/")+1:]
	return url, func() {
		if _, err := h.client.Logical().Write("transit/keys/"+n+"/rotate", nil); err != nil {
			t.Fatal(err)
		}
	}, true
}

func (h *harness) Stop(*testing.T) bool { h.v.Stop(); return true }
func (h *harness) Start(*testing.T)     { h.v.Resume() }

// clientHarness opens vault URLs through a client the test made
// (vault.Opener(client), which builds each KEK with vault.New).
type clientHarness struct {
	*harness
	reg *backends.Registry
}

func (h *clientHarness) Registry() *backends.Registry { return h.reg }

// TestConformance runs the suite against a Vault server that keeps its
// data (so that it comes back from a stop with its keys), with the
// backend's own session and with KEKs built from the test's client.
func TestConformance(t *testing.T) {
	h := newHarness(t, testservers.StartVaultServer(t))
	t.Run("URL", func(t *testing.T) { kektest.Run(t, h) })
	t.Run("Client", func(t *testing.T) {
		c, err := api.NewClient(&api.Config{Address: h.v.URL()})
		if err != nil {
			t.Fatal(err)
		}
		c.SetToken(h.v.Token)
		ch := &clientHarness{harness: h, reg: new(backends.Registry)}
		ch.reg.Register(vault.Scheme, vault.Opener(c))
		kektest.Run(t, ch)
	})
}

// TestNew: a KEK built by New from a caller's client names the key in its
// errors, and its Close leaves the client alone.
func TestNew(t *testing.T) {
	h := newHarness(t, testservers.StartVault(t))
	ctx := context.Background()
	url := h.NewKey(ctx, t)
	n := url[strings.LastIndex(url, "/")+1:]
	k := vault.New(h.client, "transit", n, nil)
	w, err := k.Wrap(ctx, []byte("0123456789abcdef0123456789abcdef"), []byte("ad"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Unwrap(ctx, w, []byte("other")); !errors.Is(err, backends.ErrUnwrap) || !strings.Contains(err.Error(), url) {
		t.Errorf("Unwrap under other associated data: %v", err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.Logical().Read("transit/keys/" + n); err != nil {
		t.Fatalf("the caller's client after the KEK's Close: %v", err)
	}
}

// TestLeastPrivilegeAppRole logs in with AppRole under the policy
// docs/BACKENDS.md gives: encrypt, decrypt and datakey on one transit key.
// The KEK works on that key and is refused on another.
func TestLeastPrivilegeAppRole(t *testing.T) {
	h := newHarness(t, testservers.StartVault(t))
	ctx := context.Background()
	url := h.NewKey(ctx, t)
	n := url[strings.LastIndex(url, "/")+1:]
	other := h.NewKey(ctx, t)
	policy := fmt.Sprintf(`path "transit/encrypt/%[1]s" { capabilities = ["update"] }
path "transit/decrypt/%[1]s" { capabilities = ["update"] }
path "transit/datakey/plaintext/%[1]s" { capabilities = ["update"] }
`, n)
	h.appRole(t, policy, nil)
	k, err := backends.Open(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("0123456789abcdef0123456789abcdef")
	w, err := k.Wrap(ctx, secret, []byte("ad"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := k.Unwrap(ctx, w, []byte("ad")); err != nil || string(got) != string(secret) {
		t.Fatalf("Unwrap under AppRole: %q %v", got, err)
	}
	if g, ok := k.(backends.Generator); !ok {
		t.Fatal("no Generator")
	} else if _, _, err := g.GenerateKey(ctx, 32, []byte("ad")); err != nil {
		t.Fatalf("GenerateKey under the policy: %v", err)
	}
	ko, err := backends.Open(ctx, other, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ko.Wrap(ctx, secret, []byte("ad"))
	var re *api.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 403 {
		t.Fatalf("another key under the policy: %v, want 403", err)
	}
	t.Setenv("VAULT_SECRET_ID", "wrong")
	if _, err := backends.Open(ctx, url, nil); err == nil || !strings.Contains(err.Error(), "approle") {
		t.Fatalf("a wrong secret id: %v", err)
	}
}

// appRole enables AppRole with a role under policy (and the role's other
// settings), and sets VAULT_ROLE_ID and VAULT_SECRET_ID for the test in
// place of VAULT_TOKEN.
func (h *harness) appRole(t *testing.T, policy string, role map[string]any) {
	if err := h.client.Sys().PutPolicy("stateseal", policy); err != nil {
		t.Fatal(err)
	}
	if err := h.client.Sys().EnableAuthWithOptions("approle", &api.EnableAuthOptions{Type: "approle"}); err != nil {
		t.Fatal(err)
	}
	settings := map[string]any{"token_policies": "stateseal"}
	for k, v := range role {
		settings[k] = v
	}
	if _, err := h.client.Logical().Write("auth/approle/role/stateseal", settings); err != nil {
		t.Fatal(err)
	}
	rid, err := h.client.Logical().Read("auth/approle/role/stateseal/role-id")
	if err != nil {
		t.Fatal(err)
	}
	sid, err := h.client.Logical().Write("auth/approle/role/stateseal/secret-id", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("VAULT_TOKEN", "")
	t.Setenv("VAULT_ROLE_ID", rid.Data["role_id"].(string))
	t.Setenv("VAULT_SECRET_ID", sid.Data["secret_id"].(string))
}

// counter counts the requests that reach Vault, the AppRole logins among
// them, and remembers the last token a transit call carried.
type counter struct {
	calls, logins atomic.Int64
	token         atomic.Value // string
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	if strings.HasSuffix(r.URL.Path, "/auth/approle/login") {
		c.logins.Add(1)
	} else if tok := r.Header.Get("X-Vault-Token"); tok != "" {
		c.token.Store(tok)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// counted is a registry whose vault KEKs send requests through c.
func counted(c *counter) *backends.Registry {
	reg := new(backends.Registry)
	reg.Register(vault.Scheme, vault.OpenerHTTP(&http.Client{Transport: c}))
	return reg
}

// TestAppRoleLogsInOnce (finding 8): opening, using and closing a KEK 200
// times under AppRole logs in once: the process keeps one session per
// configuration, not one per open.
func TestAppRoleLogsInOnce(t *testing.T) {
	h := newHarness(t, testservers.StartVault(t))
	ctx := context.Background()
	url := h.NewKey(ctx, t)
	n := url[strings.LastIndex(url, "/")+1:]
	h.appRole(t, fmt.Sprintf(`path "transit/encrypt/%[1]s" { capabilities = ["update"] }
path "transit/decrypt/%[1]s" { capabilities = ["update"] }
`, n), nil)
	c := new(counter)
	reg := counted(c)
	secret := []byte("0123456789abcdef0123456789abcdef")
	const cycles = 200
	for range cycles {
		k, err := reg.Open(ctx, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		w, err := k.Wrap(ctx, secret, []byte("ad"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Unwrap(ctx, w, []byte("ad")); err != nil {
			t.Fatal(err)
		}
		if err := backends.Close(k); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d open/wrap/unwrap/close cycles under AppRole: %d logins, %d requests", cycles, c.logins.Load(), c.calls.Load())
	if got := c.logins.Load(); got != 1 {
		t.Errorf("%d AppRole logins for %d opens, want 1", got, cycles)
	}
}

// TestAppRoleLogsInAgain: a session whose AppRole token expires logs in
// again before it does, and one whose token was revoked logs in again on
// Vault's 403; the KEK keeps working throughout.
func TestAppRoleLogsInAgain(t *testing.T) {
	h := newHarness(t, testservers.StartVault(t))
	ctx := context.Background()
	url := h.NewKey(ctx, t)
	n := url[strings.LastIndex(url, "/")+1:]
	h.appRole(t, fmt.Sprintf(`path "transit/encrypt/%[1]s" { capabilities = ["update"] }
`, n), map[string]any{"token_ttl": "3s", "token_max_ttl": "3s"})
	defer vaultclient.SetRelogin403(0)()
	c := new(counter)
	k, err := counted(c).Open(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer backends.Close(k)
	secret := []byte("0123456789abcdef0123456789abcdef")
	if _, err := k.Wrap(ctx, secret, nil); err != nil {
		t.Fatal(err)
	}
	first := c.token.Load().(string)
	// Wait until Vault no longer knows the first token: its TTL is over.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := h.client.Logical().Write("auth/token/lookup", map[string]any{"token": first}); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the AppRole token did not expire")
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
	if _, err := k.Wrap(ctx, secret, nil); err != nil {
		t.Fatalf("Wrap after the token's TTL: %v", err)
	}
	if got := c.logins.Load(); got != 2 {
		t.Errorf("%d logins after the TTL, want 2", got)
	}
	// A revoked token: Vault answers 403, and the session logs in again.
	if _, err := h.client.Logical().Write("auth/token/revoke", map[string]any{"token": c.token.Load().(string)}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Wrap(ctx, secret, nil); err != nil {
		t.Fatalf("Wrap after the token was revoked: %v", err)
	}
	if got := c.logins.Load(); got != 3 {
		t.Errorf("%d logins after a revocation, want 3", got)
	}
}

func TestURLs(t *testing.T) {
	for _, bad := range []string{"vault://transit", "vault://transit/keys/", "vault://transit/keys/a/b", "vault://transit/keys/a?x=1"} {
		if _, err := backends.Open(context.Background(), bad, nil); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
}
