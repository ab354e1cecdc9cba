package vault_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/vault/api"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/backends/kektest"
	_ "github.com/stateseal/stateseal/backends/vault"
	"github.com/stateseal/stateseal/internal/testservers"
)

type harness struct {
	v      *testservers.Vault
	client *api.Client
}

func newHarness(t *testing.T) *harness {
	v := testservers.StartVault(t)
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

// StoppedURL points VAULT_ADDR, for this subtest, at a port nothing
// listens on.
func (h *harness) StoppedURL(ctx context.Context, t *testing.T) string {
	t.Setenv("VAULT_ADDR", fmt.Sprintf("http://127.0.0.1:%d", testservers.FreePort(t)))
	return "vault://transit/keys/stopped"
}

func TestConformance(t *testing.T) {
	kektest.Run(t, newHarness(t))
}

// TestLeastPrivilegeAppRole logs in with AppRole under the policy
// docs/BACKENDS.md gives: encrypt, decrypt and datakey on one transit key.
// The KEK works on that key and is refused on another.
func TestLeastPrivilegeAppRole(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	url := h.NewKey(ctx, t)
	n := url[strings.LastIndex(url, "/")+1:]
	other := h.NewKey(ctx, t)
	policy := fmt.Sprintf(`path "transit/encrypt/%[1]s" { capabilities = ["update"] }
path "transit/decrypt/%[1]s" { capabilities = ["update"] }
path "transit/datakey/plaintext/%[1]s" { capabilities = ["update"] }
`, n)
	if err := h.client.Sys().PutPolicy("stateseal", policy); err != nil {
		t.Fatal(err)
	}
	if err := h.client.Sys().EnableAuthWithOptions("approle", &api.EnableAuthOptions{Type: "approle"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.Logical().Write("auth/approle/role/stateseal", map[string]any{"token_policies": "stateseal"}); err != nil {
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
	k, err := backends.Open(ctx, url)
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
	ko, err := backends.Open(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ko.Wrap(ctx, secret, []byte("ad"))
	var re *api.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 403 {
		t.Fatalf("another key under the policy: %v, want 403", err)
	}
	t.Setenv("VAULT_SECRET_ID", "wrong")
	if _, err := backends.Open(ctx, url); err == nil || !strings.Contains(err.Error(), "approle") {
		t.Fatalf("a wrong secret id: %v", err)
	}
}

func TestURLs(t *testing.T) {
	for _, bad := range []string{"vault://transit", "vault://transit/keys/", "vault://transit/keys/a/b", "vault://transit/keys/a?x=1"} {
		if _, err := backends.Open(context.Background(), bad); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
}
