// Package vault wraps data keys with HashiCorp Vault's transit secrets
// engine. Importing it registers the "vault" scheme in backends.Default:
//
//	import _ "github.com/stateseal/stateseal/backends/vault"
//
//	kek, err := backends.Open(ctx, "vault://transit/keys/stateseal", nil)
//
// The URL is vault://MOUNT/keys/NAME: the transit mount (which may hold
// slashes) and the key's name. The server and credentials come from the
// environment, as for the vault CLI: VAULT_ADDR, VAULT_CACERT,
// VAULT_NAMESPACE and VAULT_TOKEN; or, for AppRole, VAULT_ROLE_ID and
// VAULT_SECRET_ID (with VAULT_APPROLE_MOUNT if the auth method is not
// mounted at approle/). A process makes one client per configuration (a
// session), logged in once, that every KEK and vault-kv store with that
// configuration shares: opening a KEK again makes no new client,
// connection or login. A KEK's Close gives its share of the session back.
// New builds a KEK from an *api.Client the caller made and keeps logged
// in; its Close leaves the client alone.
//
// Wrap is transit encrypt and Unwrap transit decrypt, each with the
// associated data as associated_data, so the key must be of an AEAD type
// (aes256-gcm96, the default, aes128-gcm96 or chacha20-poly1305). The
// wrapped bytes are the "vault:vN:..." ciphertext: after
// transit/keys/NAME/rotate, old wrapped keys still unwrap, and
// `sealctl rewrap` moves them to the newest version. The KEK implements
// backends.Generator: transit datakey/plaintext draws the key from Vault,
// then encrypt binds it to the associated data (datakey itself takes
// none). Calls honour the context and retry 5xx answers twice; errors name
// the URL, never key material.
package vault

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/hashicorp/vault/api"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/redact"
	"github.com/stateseal/stateseal/internal/vaultclient"
)

// Scheme is the URL scheme this package registers.
const Scheme = "vault"

func init() { backends.Default.Register(Scheme, Opener(nil)) }

// Opener returns an opener for vault URLs. With a nil client (what
// backends.Default has), KEKs use the process's session for the VAULT_*
// environment, logged in once, and a KEK's Close gives its share back.
// With a client the caller made, every URL goes through that client
// (built with New), which the caller keeps logged in, and the KEKs'
// Close leaves it alone.
func Opener(client *api.Client) backends.Opener {
	return func(ctx context.Context, u *url.URL, _ *backends.OpenOptions) (backends.KEK, error) {
		mount, name, err := parse(u)
		if err != nil {
			return nil, err
		}
		if client == nil {
			return open(ctx, u, mount, name, nil)
		}
		k := New(client, mount, name, nil)
		k.url = redact.URL(u.String())
		return k, nil
	}
}

// A KEK is a transit key.
type KEK struct {
	s           *vaultclient.Session
	mount, name string
	url         string // redacted, for errors
}

var (
	_ backends.KEK       = (*KEK)(nil)
	_ backends.Generator = (*KEK)(nil)
	_ io.Closer          = (*KEK)(nil)
)

// Options configure a KEK built by New. There are none yet; nil is the
// value to pass.
type Options struct{}

// New returns the KEK of the transit key name under mount ("transit")
// through client, which the caller made, logged in and owns: its address,
// token, namespace, TLS and retries apply, and the KEK's Close leaves it
// alone. o may be nil. Errors name the key as a vault URL.
func New(client *api.Client, mount, name string, o *Options) *KEK {
	return &KEK{s: vaultclient.Borrow(client), mount: mount, name: name,
		url: redact.URL("vault://" + mount + "/keys/" + name)}
}

// Close gives the KEK's share of the session back; a KEK built from the
// caller's client (New, or Opener with a client) leaves the client alone.
// The KEK is not used after Close.
func (k *KEK) Close() error { return k.s.Close() }

// parse returns the mount and key name of a vault URL.
func parse(u *url.URL) (mount, name string, err error) {
	full := strings.Trim(u.Host+u.Path, "/")
	mount, name, ok := strings.Cut(full, "/keys/")
	if !ok || mount == "" || name == "" || strings.Contains(name, "/") || u.RawQuery != "" {
		return "", "", fmt.Errorf("vault: %s is not vault://MOUNT/keys/NAME", redact.URL(u.String()))
	}
	return mount, name, nil
}

// open makes a KEK on the session of the environment's configuration and
// hc (nil: the Vault client's own HTTP client).
func open(ctx context.Context, u *url.URL, mount, name string, hc *http.Client) (*KEK, error) {
	redacted := redact.URL(u.String())
	sess, err := vaultclient.Open(ctx, hc)
	if err != nil {
		return nil, fmt.Errorf("vault %s: %w", redacted, err)
	}
	return &KEK{s: sess, mount: mount, name: name, url: redacted}, nil
}

// write is a transit call through the session.
func (k *KEK) write(ctx context.Context, path string, data map[string]any) (*api.Secret, error) {
	var sec *api.Secret
	err := k.s.Do(ctx, func(c *api.Client) (err error) {
		sec, err = c.Logical().WriteWithContext(ctx, path, data)
		return err
	})
	return sec, err
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// Wrap encrypts plaintext with the key's newest version.
func (k *KEK) Wrap(ctx context.Context, plaintext, associatedData []byte) ([]byte, error) {
	s, err := k.write(ctx, k.mount+"/encrypt/"+k.name, map[string]any{
		"plaintext": b64(plaintext), "associated_data": b64(associatedData),
	})
	if err != nil {
		return nil, k.fail("encrypt", err)
	}
	ct, _ := s.Data["ciphertext"].(string)
	if !strings.HasPrefix(ct, "vault:v") {
		return nil, fmt.Errorf("vault %s: encrypt: no ciphertext in the answer", k.url)
	}
	return []byte(ct), nil
}

// Unwrap decrypts a "vault:vN:" ciphertext with the version it names.
func (k *KEK) Unwrap(ctx context.Context, wrapped, associatedData []byte) ([]byte, error) {
	if !strings.HasPrefix(string(wrapped), "vault:v") {
		return nil, fmt.Errorf("vault %s: decrypt: %w (not a transit ciphertext)", k.url, backends.ErrUnwrap)
	}
	s, err := k.write(ctx, k.mount+"/decrypt/"+k.name, map[string]any{
		"ciphertext": string(wrapped), "associated_data": b64(associatedData),
	})
	if err != nil {
		return nil, k.fail("decrypt", err)
	}
	return k.decode("decrypt", s)
}

// GenerateKey draws size bytes from Vault (transit datakey/plaintext) and
// wraps them with Wrap, since datakey binds no associated data.
func (k *KEK) GenerateKey(ctx context.Context, size int, associatedData []byte) (plaintext, wrapped []byte, err error) {
	s, err := k.write(ctx, k.mount+"/datakey/plaintext/"+k.name, map[string]any{"bits": size * 8})
	if err != nil {
		return nil, nil, k.fail("datakey", err)
	}
	if plaintext, err = k.decode("datakey", s); err != nil {
		return nil, nil, err
	}
	if wrapped, err = k.Wrap(ctx, plaintext, associatedData); err != nil {
		clear(plaintext)
		return nil, nil, err
	}
	return plaintext, wrapped, nil
}

func (k *KEK) decode(op string, s *api.Secret) ([]byte, error) {
	if s == nil {
		return nil, fmt.Errorf("vault %s: %s: empty answer", k.url, op)
	}
	p, _ := s.Data["plaintext"].(string)
	b, err := base64.StdEncoding.DecodeString(p)
	if err != nil {
		return nil, fmt.Errorf("vault %s: %s: the answer's plaintext is not base64", k.url, op)
	}
	return b, nil
}

// fail wraps err with the operation and the URL. Transit answers a
// ciphertext it cannot decrypt with 400 "cipher: message authentication
// failed" (or "invalid ciphertext"): that is backends.ErrUnwrap.
func (k *KEK) fail(op string, err error) error {
	var re *api.ResponseError
	var le *vaultclient.LoginError
	if errors.As(err, &le) {
		return fmt.Errorf("vault %s: %s: %w", k.url, op, err)
	}
	if op == "decrypt" && errors.As(err, &re) && re.StatusCode == http.StatusBadRequest {
		return fmt.Errorf("vault %s: %s: %w (%s)", k.url, op, backends.ErrUnwrap, strings.Join(re.Errors, "; "))
	}
	return fmt.Errorf("vault %s: %s: %w", k.url, op, err)
}
