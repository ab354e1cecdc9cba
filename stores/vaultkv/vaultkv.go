// Package vaultkv keeps a keyset in HashiCorp Vault's KV version 2 secrets
// engine. Importing it registers the "vault-kv" scheme in stores.Default:
//
//	import _ "github.com/stateseal/stateseal/stores/vaultkv"
//
//	l := &keyset.Loader{Path: "vault-kv://secret/stateseal/keyset"}
//
// The URL is vault-kv://MOUNT/PATH: the KV v2 mount and the secret's path.
// The keyset document is the secret's one field, "keyset". Its revision is
// the secret's version: writes set options.cas to the version read, so
// Vault refuses a write that lost a race (stores.ErrConflict), whichever
// host made it. A loader polls the secret's metadata, which is cheaper
// than reading the document, and reads only when the version changed.
//
// Reads are bounded: an answer longer than twice stores.MaxSize plus 64
// KiB (the document JSON-escaped, and the metadata) is refused by its
// Content-Length before its body is read, or (Vault sends large answers
// chunked) once that much has come, without decoding it; a document over
// stores.MaxSize in it is refused too.
//
// The server and credentials come from the environment, as for the vault
// backend (package backends/vault): VAULT_ADDR, VAULT_CACERT,
// VAULT_NAMESPACE, and VAULT_TOKEN or VAULT_ROLE_ID with VAULT_SECRET_ID.
// The store shares the vault backend's session: one client and one login
// per configuration in a process, shared with vault KEKs. Close gives its
// share back. New builds a store from an *api.Client the caller made and
// keeps logged in; its Close leaves the client alone.
package vaultkv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/hashicorp/vault/api"

	"github.com/stateseal/stateseal/internal/vaultclient"
	"github.com/stateseal/stateseal/stores"
)

// Scheme is the URL scheme this package registers.
const Scheme = "vault-kv"

func init() { stores.Default.Register(Scheme, Opener(nil)) }

// Opener returns an opener for vault-kv URLs. With a nil client (what
// stores.Default has), stores use the process's session for the VAULT_*
// environment, shared with vault KEKs, and a store's Close gives its
// share back. With a client the caller made, every URL goes through that
// client (New), which the caller keeps logged in, and the stores' Close
// leaves it alone.
func Opener(client *api.Client) stores.Opener {
	return func(ctx context.Context, u *url.URL) (stores.Store, error) {
		mount, path, err := parse(u)
		if err != nil {
			return nil, err
		}
		if client == nil {
			return open(ctx, u, mount, path)
		}
		s := New(client, mount, path, nil)
		s.name = stores.Redact(u.String())
		return s, nil
	}
}

// A Store is a keyset in a KV v2 secret.
type Store struct {
	s           *vaultclient.Session
	mount, path string
	name        string
}

var (
	_ stores.Store      = (*Store)(nil)
	_ stores.Revisioner = (*Store)(nil)
	_ io.Closer         = (*Store)(nil)
)

// Options configure a store built by New. There are none yet; nil is the
// value to pass.
type Options struct{}

// New returns the store for the keyset in the KV v2 secret path under
// mount ("secret"), through client, which the caller made, logged in and
// owns: its address, token, namespace, TLS and timeout apply, and the
// store's Close leaves it alone. o may be nil.
func New(client *api.Client, mount, path string, o *Options) *Store {
	return &Store{s: vaultclient.Borrow(client), mount: mount, path: path,
		name: stores.Redact("vault-kv://" + mount + "/" + path)}
}

// Close gives the store's share of the Vault session back; a store built
// from the caller's client (New, or Opener with a client) leaves the
// client alone. The store is not used after Close.
func (s *Store) Close() error { return s.s.Close() }

// maxAnswer bounds Vault's answer to a read: the document JSON-escaped
// (a keyset's quotes double) and the secret's metadata around it.
const maxAnswer = 2*stores.MaxSize + 64<<10

// errAnswerTooLarge is an answer over maxAnswer.
var errAnswerTooLarge = errors.New("answer too large")

// readJSON reads Vault's answer at path and decodes it into out; found is
// false if Vault answers 404. The answer goes into one buffer that grows
// to at most maxAnswer+1 bytes: a longer answer is refused by its
// Content-Length before any of it is read, or else once that much has
// come, and is never decoded. (The API client's own parsing would buffer
// it twice, whole.)
func (s *Store) readJSON(ctx context.Context, path string, out any) (found bool, err error) {
	err = s.s.Do(ctx, func(c *api.Client) error {
		if _, ok := ctx.Deadline(); !ok && c.ClientTimeout() > 0 {
			// The raw calls ignore the client's timeout; the others keep it.
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.ClientTimeout())
			defer cancel()
		}
		resp, err := c.Logical().ReadRawWithContext(ctx, path)
		if resp != nil {
			defer resp.Body.Close()
			if resp.StatusCode == http.StatusNotFound {
				found = false
				return nil
			}
		}
		if err != nil {
			return err
		}
		if resp.ContentLength > maxAnswer {
			return errAnswerTooLarge
		}
		body, err := readBounded(resp.Body, resp.ContentLength)
		if err != nil {
			return err
		}
		found = true
		return json.Unmarshal(body, out)
	})
	if errors.Is(err, errAnswerTooLarge) {
		return false, stores.TooLarge("vault-kv "+s.name, -1)
	}
	return found, err
}

// readBounded reads r to its end into one buffer of at most maxAnswer+1
// bytes, sized by size if it is known (> 0), and fails with
// errAnswerTooLarge beyond maxAnswer.
func readBounded(r io.Reader, size int64) ([]byte, error) {
	n := int64(64 << 10)
	if size > 0 {
		n = size + 1
	}
	buf := make([]byte, 0, n)
	for {
		if len(buf) == cap(buf) {
			if len(buf) > maxAnswer {
				return nil, errAnswerTooLarge
			}
			grown := make([]byte, len(buf), min(2*cap(buf), maxAnswer+1))
			copy(grown, buf)
			buf = grown
		}
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if errors.Is(err, io.EOF) {
			if len(buf) > maxAnswer {
				return nil, errAnswerTooLarge
			}
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// parse returns the mount and secret path of a vault-kv URL.
func parse(u *url.URL) (mount, path string, err error) {
	full := strings.Trim(u.Host+u.Path, "/")
	mount, path, ok := strings.Cut(full, "/")
	if !ok || mount == "" || path == "" || u.RawQuery != "" {
		return "", "", fmt.Errorf("vault-kv: %s is not vault-kv://MOUNT/PATH", stores.Redact(u.String()))
	}
	return mount, path, nil
}

// open makes a store on the session of the environment's configuration.
func open(ctx context.Context, u *url.URL, mount, path string) (*Store, error) {
	name := stores.Redact(u.String())
	sess, err := vaultclient.Open(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("vault-kv %s: %w", name, err)
	}
	return &Store{s: sess, mount: mount, path: path, name: name}, nil
}

// String is the store's URL.
func (s *Store) String() string { return s.name }

// Read returns the keyset and the secret's version.
func (s *Store) Read(ctx context.Context) ([]byte, string, error) {
	var a struct {
		Data struct {
			Data *struct {
				Keyset *string `json:"keyset"`
			} `json:"data"`
			Metadata struct {
				Version json.Number `json:"version"`
			} `json:"metadata"`
		} `json:"data"`
	}
	found, err := s.readJSON(ctx, s.mount+"/data/"+s.path, &a)
	if errors.Is(err, stores.ErrTooLarge) {
		return nil, "", err
	}
	if err != nil {
		return nil, "", fmt.Errorf("vault-kv %s: read: %w", s.name, err)
	}
	if !found || a.Data.Data == nil {
		return nil, "", fmt.Errorf("vault-kv %s: %w", s.name, stores.ErrNotFound)
	}
	if a.Data.Data.Keyset == nil {
		return nil, "", fmt.Errorf("vault-kv %s: the secret has no \"keyset\" field", s.name)
	}
	doc := *a.Data.Data.Keyset
	if len(doc) > stores.MaxSize {
		return nil, "", stores.TooLarge("vault-kv "+s.name, int64(len(doc)))
	}
	if a.Data.Metadata.Version == "" {
		return nil, "", fmt.Errorf("vault-kv %s: no version in the answer", s.name)
	}
	return []byte(doc), a.Data.Metadata.Version.String(), nil
}

func version(v any) (string, error) {
	switch n := v.(type) {
	case json.Number:
		return n.String(), nil
	case float64:
		return strconv.FormatInt(int64(n), 10), nil
	}
	return "", fmt.Errorf("no version in the answer")
}

// Revision returns the secret's current version from its metadata.
func (s *Store) Revision(ctx context.Context) (string, error) {
	var a struct {
		Data struct {
			CurrentVersion json.Number `json:"current_version"`
		} `json:"data"`
	}
	found, err := s.readJSON(ctx, s.mount+"/metadata/"+s.path, &a)
	if errors.Is(err, stores.ErrTooLarge) {
		return "", err
	}
	if err != nil {
		return "", fmt.Errorf("vault-kv %s: metadata: %w", s.name, err)
	}
	if !found {
		return "", nil
	}
	if a.Data.CurrentVersion == "" {
		return "", fmt.Errorf("vault-kv %s: metadata: no version in the answer", s.name)
	}
	return a.Data.CurrentVersion.String(), nil
}

// Write stores data as a new version if the secret is still at version
// rev ("": it must not exist; options.cas 0).
func (s *Store) Write(ctx context.Context, data []byte, rev string) (string, error) {
	if len(data) > stores.MaxSize {
		return "", stores.TooLarge("vault-kv "+s.name, int64(len(data)))
	}
	cas := 0
	if rev != "" {
		n, err := strconv.Atoi(rev)
		if err != nil {
			return "", fmt.Errorf("vault-kv %s: revision %q is not a version", s.name, rev)
		}
		cas = n
	}
	var sec *api.Secret
	err := s.s.Do(ctx, func(c *api.Client) (err error) {
		sec, err = c.Logical().WriteWithContext(ctx, s.mount+"/data/"+s.path, map[string]any{
			"options": map[string]any{"cas": cas},
			"data":    map[string]any{"keyset": string(data)},
		})
		return err
	})
	var re *api.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusBadRequest && strings.Contains(strings.Join(re.Errors, " "), "check-and-set") {
		return "", fmt.Errorf("vault-kv %s: %w (%s)", s.name, stores.ErrConflict, strings.Join(re.Errors, "; "))
	}
	if err != nil {
		return "", fmt.Errorf("vault-kv %s: write: %w", s.name, err)
	}
	if sec == nil {
		return "", fmt.Errorf("vault-kv %s: write: empty answer", s.name)
	}
	return version(sec.Data["version"])
}
