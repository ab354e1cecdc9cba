// Package backends holds key-encryption keys (KEKs): the keys that wrap a
// keyset's data keys at rest.
//
// A [KEK] has two methods, Wrap and Unwrap, like age's Recipient and
// Identity. Each backend opens a KEK from a URL; [Open] picks the backend by
// the URL's scheme from a [Registry]. The local backend (in this
// package, scheme "local") is always registered in [Default]: it needs no
// cloud and is the embedded default. Cloud backends register
// their schemes when their packages are imported.
//
// KEKs are called when a keyset is loaded, reloaded or edited, never when a
// token is sealed or opened. Every KEK this module opens is an io.Closer:
// open one per URL and keep it, and Close it (or call [Close]) when done,
// or the connections and clients it holds stay until the process exits.
package backends

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/stateseal/stateseal/internal/redact"
	"github.com/stateseal/stateseal/internal/schemes"
)

// A KEK wraps and unwraps data keys. associatedData is authenticated but
// not stored: Unwrap succeeds only with the associatedData Wrap was given,
// which keyrings use to bind a wrapped key to its keyset and key id.
// Implementations are safe for concurrent use.
type KEK interface {
	Wrap(ctx context.Context, plaintext, associatedData []byte) ([]byte, error)
	Unwrap(ctx context.Context, wrapped, associatedData []byte) ([]byte, error)
}

// A Generator is a KEK whose service creates data keys itself (AWS KMS
// GenerateDataKey, Vault transit datakey): GenerateKey returns a new key of
// size bytes and its wrapped form, bound to associatedData as Wrap binds
// it. The keyring uses it, when a KEK has it, for every new key, so the
// key is born in the KMS's random source; other KEKs wrap a key from
// crypto/rand.
type Generator interface {
	GenerateKey(ctx context.Context, size int, associatedData []byte) (plaintext, wrapped []byte, err error)
}

// ErrUnwrap reports wrapped bytes that do not unwrap: changed, wrapped by
// another KEK, or bound to other associated data.
var ErrUnwrap = errors.New("backends: wrapped key does not unwrap with this KEK and associated data")

// ErrKeyDisabled reports a KMS that refuses to unwrap because the key,
// or the key version, the bytes are under is disabled or destroyed: an
// operator's act (the leaked-key procedure disables the old version),
// not an outage, so a retry at every poll changes nothing until someone
// enables it again, which that procedure forbids.
var ErrKeyDisabled = errors.New("backends: the KMS key or key version the wrapped key is under is disabled")

// An Opener opens the KEK a URL names. o may be nil: the defaults.
type Opener func(ctx context.Context, u *url.URL, o *OpenOptions) (KEK, error)

// OpenOptions carry what an Opener may need besides the URL. A nil
// *OpenOptions means the zero value.
type OpenOptions struct {
	// Dir is the directory that relative paths in the URL resolve against:
	// the keyset's directory. "" means the working directory.
	Dir string
	// AbsoluteOnly refuses relative paths: a keyset in a replicated store
	// has no directory, and each host's working directory differs.
	AbsoluteOnly bool
}

// A Registry maps URL schemes to openers.
type Registry struct{ m schemes.Map[Opener] }

// Default is the registry Open uses.
var Default = new(Registry)

// Register makes scheme open with o. It panics if the scheme is taken, as
// two backends claiming one scheme is a build mistake.
func (r *Registry) Register(scheme string, o Opener) { r.m.Register("backends", scheme, o) }

// Schemes lists the registered schemes, sorted.
func (r *Registry) Schemes() []string { return r.m.Schemes() }

// Open opens the KEK named by rawURL; o may be nil. Its errors show the
// URL redacted (credentials hidden), and a key value passed where a URL
// belongs is never echoed.
func (r *Registry) Open(ctx context.Context, rawURL string, o *OpenOptions) (KEK, error) {
	if redact.LooksLikeKey(rawURL) {
		return nil, redact.ErrKeyValue
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("backends: KEK URL %s does not parse", redact.URL(rawURL))
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("backends: KEK URL %s has no scheme (registered: %s)", redact.URL(rawURL), strings.Join(r.Schemes(), ", "))
	}
	open, ok := r.m.Lookup(u.Scheme)
	if !ok {
		return nil, fmt.Errorf("backends: KEK URL %s: no backend for scheme %q (registered: %s)", redact.URL(rawURL), u.Scheme, strings.Join(r.Schemes(), ", "))
	}
	return open(ctx, u, o)
}

// Open opens rawURL with the Default registry; o may be nil.
func Open(ctx context.Context, rawURL string, o *OpenOptions) (KEK, error) {
	return Default.Open(ctx, rawURL, o)
}

// Close releases what k holds (connections, a client), if it holds any:
// every KEK this module's backends open is an io.Closer; Close calls it,
// and does nothing for a KEK that is not. A KEK is not used after Close.
func Close(k KEK) error {
	if c, ok := k.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
