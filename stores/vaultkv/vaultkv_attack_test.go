package vaultkv_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"

	_ "github.com/stateseal/stateseal/backends/vault"
	"github.com/stateseal/stateseal/internal/keysetjson"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/seal"
)

// tap is the network between an instance and its Vault: it relays
// connections to the server and keeps what the instance sent.
type tap struct {
	mu   sync.Mutex
	sent bytes.Buffer
}

func (tp *tap) Write(p []byte) (int, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.sent.Write(p)
}

func startTap(t *testing.T, listenHost, server string) (string, *tap) {
	ln, err := net.Listen("tcp", net.JoinHostPort(listenHost, "0"))
	if err != nil {
		t.Skip("no address to listen on:", err)
	}
	t.Cleanup(func() { ln.Close() })
	tp := new(tap)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s, err := net.Dial("tcp", server)
				if err != nil {
					return
				}
				defer s.Close()
				go io.Copy(c, s)
				io.Copy(io.MultiWriter(s, tp), c)
			}()
		}
	}()
	return ln.Addr().String(), tp
}

// nonLoopback returns an address of this host that is not loopback.
func nonLoopback(t *testing.T) string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback address")
	return ""
}

// TestAttackPlaintextVaultToken: a keyset in Vault KV under a Vault
// transit KEK, with VAULT_ADDR http:// to a host across the network.
// docs/KEYSET.md: the network "cannot [do more than] the same as a store
// writer at most". But the one Vault token the process uses for the KV
// store is also its transit token: whoever sees the store traffic can
// decrypt every data key and forge tokens. The Cloud KMS backend refuses
// insecure=1 unless the endpoint is loopback; the Vault session should
// likewise refuse a plaintext VAULT_ADDR that is not loopback.
func TestAttackPlaintextVaultToken(t *testing.T) {
	v := testservers.StartVault(t)
	root, _ := api.NewClient(&api.Config{Address: v.URL()})
	root.SetToken(v.Token)
	if err := root.Sys().Mount("transit", &api.MountInput{Type: "transit"}); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Logical().Write("transit/keys/k", nil); err != nil {
		t.Fatal(err)
	}
	// The instance's token: KV and transit, as any server needs.
	if err := root.Sys().PutPolicy("server", `
path "secret/data/stateseal/*"     { capabilities = ["create", "read", "update"] }
path "secret/metadata/stateseal/*" { capabilities = ["read"] }
path "transit/encrypt/k"           { capabilities = ["update"] }
path "transit/decrypt/k"           { capabilities = ["update"] }
path "transit/datakey/plaintext/k" { capabilities = ["update"] }`); err != nil {
		t.Fatal(err)
	}
	sec, err := root.Auth().Token().Create(&api.TokenCreateRequest{Policies: []string{"server"}})
	if err != nil {
		t.Fatal(err)
	}
	serverToken := sec.Auth.ClientToken
	addr, tp := startTap(t, nonLoopback(t), v.Addr())
	t.Setenv("VAULT_ADDR", "http://"+addr)
	t.Setenv("VAULT_TOKEN", serverToken)
	ctx := context.Background()
	const loc, kek = "vault-kv://secret/stateseal/plain", "vault://transit/keys/k"
	_, initErr := rotation.Init(ctx, loc, kek, keyring.AEAD, keyring.DefaultPolicy(), &rotation.Options{KEK: kek, Logger: slog.New(slog.DiscardHandler)})
	l := &keyset.Loader{Path: loc, Options: keyset.LoadOptions{KEK: kek}, Logger: slog.New(slog.DiscardHandler)}
	ring, loadErr := l.Load(ctx)
	defer l.Close()
	tp.mu.Lock()
	m := regexp.MustCompile(`(?i)X-Vault-Token: (\S+)`).FindSubmatch(tp.sent.Bytes())
	tp.mu.Unlock()
	if m == nil {
		t.Logf("held: no token crossed the plaintext link (init: %v; load: %v)", initErr, loadErr)
		return
	}
	captured := string(m[1])
	t.Errorf("FINDING: VAULT_ADDR=http://%s (not loopback) was used; the network saw the token %s…", addr, captured[:8])
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	// The network attacker, with the captured token, straight to Vault.
	evil, _ := api.NewClient(&api.Config{Address: v.URL()})
	evil.SetToken(captured)
	data, err := evil.Logical().ReadWithContext(ctx, "secret/data/stateseal/plain")
	if err != nil || data == nil {
		t.Fatalf("read with the captured token: %v", err)
	}
	doc := data.Data["data"].(map[string]any)["keyset"].(string)
	ks, err := keyset.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	sk := ks.Keys[0]
	ad := keysetjson.WrapDomain + "\x00" + ks.ID + "\x00" + keyring.FormatID(sk.ID)
	out, err := evil.Logical().WriteWithContext(ctx, "transit/decrypt/k", map[string]any{
		"ciphertext":      string(sk.Wrapped),
		"associated_data": base64.StdEncoding.EncodeToString([]byte(ad)),
	})
	if err != nil {
		t.Fatalf("transit/decrypt with the captured token: %v", err)
	}
	material, _ := base64.StdEncoding.DecodeString(out.Data["plaintext"].(string))
	k, _ := keyring.ImportKey(sk.ID, sk.Algorithm, keyring.Active, sk.Created, sk.Activation, material)
	snap, _ := keyring.NewSnapshot([]keyring.Key{k})
	er, _ := keyring.NewRing(snap)
	forger, _ := seal.New(er, nil)
	b := seal.Binding{Method: "tools/call", Target: "transfer", Principal: "mallory"}
	tok, err := forger.Seal(b, []byte("forged from the network"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	victim, _ := seal.New(ring, nil)
	if _, err := victim.Open(b, tok); err == nil {
		t.Errorf("FINDING: the instance opens a token forged with a data key decrypted by the token seen on the network")
	}
}
