// Package stores holds keysets: the file on one host, or a replicated
// store (Vault KV version 2, Redis) that a fleet on many hosts shares.
// It is the sibling of package backends: backends wrap the data keys,
// stores keep the keyset document.
//
// A [Store] reads the document with its revision and writes it with
// compare-and-swap on that revision, so that two writers on any hosts
// cannot both win. [Open] picks the store by a location's URL scheme from
// a [Registry]; a location that is not a URL is a file path. The file
// store is always registered; importing stores/vaultkv or stores/redis
// registers theirs. Package keyset loads keysets from stores and package
// rotation edits them; neither needs to know which kind it has.
//
// A store is opened from a location (Open), or built from a client the
// caller made (redis.New, vaultkv.New). Whoever opened a store closes it
// ([Close]); a store never closes a client it was given.
package stores

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/stateseal/stateseal/internal/keysetjson"
	"github.com/stateseal/stateseal/internal/redact"
	"github.com/stateseal/stateseal/internal/schemes"
)

// A Store holds one keyset document. Implementations are safe for
// concurrent use.
type Store interface {
	// Read returns the document and its revision, an opaque string that
	// changes with every write. A store with no document returns an error
	// matching ErrNotFound.
	Read(ctx context.Context) (data []byte, rev string, err error)
	// Write replaces the document if the store still holds revision rev
	// ("" meaning no document), and returns the new revision. Otherwise
	// it returns an error matching ErrConflict and writes nothing.
	Write(ctx context.Context, data []byte, rev string) (string, error)
	// String names the store for errors and logs, credentials redacted
	// (as Redact does).
	String() string
}

// A Watcher is a Store that can tell when its document changes. Watch
// returns a channel that receives after every change (changes may be
// coalesced, and a signal may come for no change); it is closed when ctx
// is done. Watch returns once it is watching (or has failed to start, the
// store being down): a change made after it returns is signalled, unless
// the connection drops meanwhile. Signals are a hint: a loader still
// polls, since a subscription can drop unnoticed.
type Watcher interface {
	Watch(ctx context.Context) <-chan struct{}
}

// A Revisioner is a Store that can return its current revision more
// cheaply than Read: the revision Read would return, or "" if the store
// holds no document. A loader polls it and reads only on a change.
type Revisioner interface {
	Revision(ctx context.Context) (string, error)
}

// Close releases what s holds (a client and its connections), if it holds
// any: a Store that is an io.Closer is closed, others need nothing. Call
// it on every store you opened, once done with it; a store built from a
// client you made never closes that client.
func Close(s Store) error {
	if c, ok := s.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

var (
	// ErrConflict reports a compare-and-swap write that lost: the store
	// no longer holds the revision the edit started from. Nothing was
	// written; read again and redo the edit.
	ErrConflict = errors.New("keyset changed since it was read")
	// ErrNotFound reports a store that holds no keyset.
	ErrNotFound = errors.New("no keyset")
	// ErrTooLarge reports a document over MaxSize, which no store reads
	// or writes. Its message names the bound.
	ErrTooLarge = fmt.Errorf("keyset document over the %d-byte (1 MiB) limit, stores.MaxSize", MaxSize)
	// ErrNotDurable reports a write the store could not make as durable
	// as it requires (a Redis primary whose replicas did not acknowledge
	// it in time, or that has fewer replicas than the required minimum).
	// The write is not reported as done: it may be lost in a failover, or
	// may survive. Read the store again before another edit; if the write
	// was refused before it was made, the message says so.
	ErrNotDurable = errors.New("keyset write not acknowledged as durable")
)

// MaxSize bounds a keyset document in every store: a keyset holds a
// handful of keys, and a larger document is a mistake or an attack. Each
// store checks it before the document is transferred or read whole: the
// file's size before reading it, Redis's HSTRLEN inside the read script,
// Vault's answer as it is received.
const MaxSize = keysetjson.MaxSize

// TooLarge returns the error a store reports for a document of n bytes
// (n < 0: of a size not known, over the bound) in the store called name:
// it matches ErrTooLarge and names the bound.
func TooLarge(name string, n int64) error {
	if n < 0 {
		return fmt.Errorf("%s: %w", name, ErrTooLarge)
	}
	return fmt.Errorf("%s: %w: it holds %d bytes", name, ErrTooLarge, n)
}

// Redact returns location as it may appear in an error, a log or output:
// a file path as is, a URL without its password, a lone user name (often a
// token), credential-like query values or any local KEK value in it (as
// KEK URLs are in this module's errors). Every Store's String is redacted
// the same way.
func Redact(location string) string {
	if !IsURL(location) {
		return location
	}
	return redact.URL(location)
}

// An Opener opens the store a URL names.
type Opener func(ctx context.Context, u *url.URL) (Store, error)

// A Registry maps URL schemes to openers.
type Registry struct{ m schemes.Map[Opener] }

// Default is the registry Open uses. It has the file store.
var Default = new(Registry)

// FileScheme is the file store's URL scheme (file:///abs/path), always
// registered in Default. A location that is not a URL is a file path too.
const FileScheme = "file"

func init() {
	Default.Register(FileScheme, func(_ context.Context, u *url.URL) (Store, error) {
		if u.Host != "" {
			return nil, fmt.Errorf("stores: %s: a file URL names no host (file:///abs/path)", Redact(u.String()))
		}
		return NewFile(u.Path), nil
	})
}

// Register makes scheme open with o. It panics if the scheme is taken.
func (r *Registry) Register(scheme string, o Opener) { r.m.Register("stores", scheme, o) }

// Schemes lists the registered schemes, sorted.
func (r *Registry) Schemes() []string { return r.m.Schemes() }

// IsURL reports whether location names a store by URL (scheme://...)
// rather than a file path.
func IsURL(location string) bool {
	i := strings.Index(location, "://")
	return i > 0 && !strings.ContainsAny(location[:i], "/\\.")
}

// Open opens the store at location: a URL whose scheme is registered, or
// else a file path.
func (r *Registry) Open(ctx context.Context, location string) (Store, error) {
	if !IsURL(location) {
		return NewFile(location), nil
	}
	u, err := url.Parse(location)
	if err != nil {
		return nil, fmt.Errorf("stores: keyset URL %s does not parse", Redact(location))
	}
	o, ok := r.m.Lookup(u.Scheme)
	if !ok {
		return nil, fmt.Errorf("stores: keyset URL %s: no store for scheme %q (registered: %s)", Redact(location), u.Scheme, strings.Join(r.Schemes(), ", "))
	}
	return o(ctx, u)
}

// Open opens location with the Default registry.
func Open(ctx context.Context, location string) (Store, error) {
	return Default.Open(ctx, location)
}
