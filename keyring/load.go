package keyring

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/stateseal/stateseal/backends"
)

// LoadOptions configure loading a keyset file. The zero value is usable.
type LoadOptions struct {
	// KEK, if set, overrides the keyset's KEK URL.
	KEK string
	// Backends opens the KEK; nil means backends.Default.
	Backends *backends.Registry
	// Now is the clock that decides whether a primary key is usable;
	// nil means time.Now.
	Now func() time.Time
	// AllowKeysetChange lets a Loader's reload install a keyset with
	// another id or another KEK URL than the one it loaded first. Off, such
	// a reload is refused and the last good keys keep serving: whoever can
	// replace the file could otherwise point the fleet at a keyset and KEK
	// of their own.
	AllowKeysetChange bool
}

func (o *LoadOptions) now() time.Time {
	if o == nil || o.Now == nil {
		return time.Now()
	}
	return o.Now()
}

// OpenKEK opens the KEK of ks: the override in o if set, else ks.KEK,
// with relative local paths resolved against the keyset's directory.
func OpenKEK(ctx context.Context, ks *Keyset, path string, o *LoadOptions) (backends.KEK, error) {
	url, reg := ks.KEK, backends.Default
	if o != nil && o.KEK != "" {
		url = o.KEK
	}
	if o != nil && o.Backends != nil {
		reg = o.Backends
	}
	return reg.Open(ctx, url, backends.RelativeTo(KeysetDir(path)))
}

// LoadFile reads the keyset at path, unwraps every key that may open
// tokens (retired keys stay wrapped), and returns the snapshot. A keyset
// with no active key whose activation has passed is an error here, not a
// surprise at the first Seal.
func LoadFile(ctx context.Context, path string, o *LoadOptions) (*Snapshot, *Keyset, error) {
	l := &Loader{Path: path}
	if o != nil {
		l.Options = *o
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("keyring: %w", err)
	}
	return l.load(ctx, data)
}

// A Loader keeps a Ring in step with a keyset file. Load it once, then
// call Reload, or Run to poll. A keyset that cannot be read, parsed or
// unwrapped never replaces the ring's keys: the last good snapshot keeps
// serving and the error goes to slog and OnError.
type Loader struct {
	Path    string
	Options LoadOptions
	// Logger receives reload events; nil means slog.Default().
	Logger *slog.Logger
	// OnError, if set, is called with every failed reload.
	OnError func(error)

	mu       sync.Mutex
	ring     *Ring
	current  *Keyset
	last     []byte              // the file as last loaded
	failed   []byte              // the file as it last failed to load for good
	reported string              // the last failure reported
	cache    map[cacheKey][]byte // unwrapped material by keyset, KEK, key, wrapped bytes
}

type cacheKey struct {
	keyset, kek string
	id          uint32
	wrapped     string
}

// Load reads the keyset and returns a ring holding it. It fails if the
// first load fails.
func (l *Loader) Load(ctx context.Context) (*Ring, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	data, err := os.ReadFile(l.Path)
	if err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	snap, ks, err := l.load(ctx, data)
	if err != nil {
		return nil, err
	}
	ring, err := NewRing(snap)
	if err != nil {
		return nil, err
	}
	l.ring, l.current, l.last = ring, ks, data
	return ring, nil
}

// Reload reads the keyset again and, if its version changed, installs it.
// On failure the ring keeps its keys, and the error is logged, passed to
// OnError and returned.
func (l *Loader) Reload(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ring == nil {
		return errors.New("keyring: Reload before Load")
	}
	return l.reload(ctx, true)
}

// Run polls the keyset file every interval until ctx is done. A poll
// reads the file (a few kilobytes) and parses it only if its bytes
// changed; file times are too coarse to tell two quick edits apart. Keys
// are unwrapped only when their wrapped bytes changed.
func (l *Loader) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return errors.New("keyring: poll interval must be positive")
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			l.mu.Lock()
			if l.ring != nil {
				l.reload(ctx, false) // reported inside
			}
			l.mu.Unlock()
		}
	}
}

// reload reads the file once. A poll (not forced) skips bytes it has
// already loaded, or that failed for good (they do not parse or
// authenticate). Bytes that failed on a KMS call are tried again at every
// poll, since the KMS may come back. A failure is reported once, until
// the next success or another failure, not at every tick; Reload reports
// every time.
func (l *Loader) reload(ctx context.Context, force bool) error {
	data, err := os.ReadFile(l.Path)
	if err != nil {
		err = fmt.Errorf("keyring: %w", err)
		l.fail(err, force)
		return err
	}
	if !force && (bytes.Equal(data, l.last) || l.failed != nil && bytes.Equal(data, l.failed)) {
		return nil
	}
	snap, ks, err := l.load(ctx, data)
	if err == nil && !l.Options.AllowKeysetChange && (ks.ID != l.current.ID || ks.KEK != l.current.KEK) {
		err = fmt.Errorf("keyring: %s now holds keyset %s under KEK %s, not keyset %s under KEK %s; refused (set LoadOptions.AllowKeysetChange, or restart, to change keysets on purpose)",
			l.Path, ks.ID, backends.Redact(ks.KEK), l.current.ID, backends.Redact(l.current.KEK))
	}
	if err == nil && ks.ID == l.current.ID && ks.Version < l.current.Version {
		// An older copy of the keyset may hold keys retired since.
		err = fmt.Errorf("keyring: keyset %s in %s went back from version %d to %d; restart to load an older version on purpose",
			ks.ID, l.Path, l.current.Version, ks.Version)
	}
	if err != nil {
		var te transientError
		if !errors.As(err, &te) {
			l.failed = data
		}
		l.fail(err, force)
		return err
	}
	l.last, l.failed, l.reported = data, nil, ""
	if ks.ID == l.current.ID && ks.Version == l.current.Version {
		return nil
	}
	if ks.ID != l.current.ID {
		l.logger().Warn("stateseal keyset replaced by another keyset", "path", l.Path, "old", l.current.ID, "new", ks.ID)
	}
	l.ring.Store(snap)
	l.logger().Info("stateseal keyset reloaded", "path", l.Path, "keyset", ks.ID, "version", ks.Version, "keys", len(ks.Keys))
	l.current = ks
	return nil
}

// fail reports err unless the same failure was reported last.
func (l *Loader) fail(err error, force bool) {
	if !force && err.Error() == l.reported {
		return
	}
	l.reported = err.Error()
	l.report(err)
}

// A transientError is a failed KMS call: the KMS unreachable, throttling,
// a timeout. The same keyset may load once the KMS answers again.
type transientError struct{ error }

func (e transientError) Unwrap() error { return e.error }

// transient marks err as transient unless the KMS answered that the bytes
// do not unwrap, which no retry changes.
func transient(err error) error {
	if errors.Is(err, backends.ErrUnwrap) || errors.Is(err, ErrUnauthenticated) {
		return err
	}
	return transientError{err}
}

func (l *Loader) report(err error) {
	l.logger().Error("stateseal keyset reload failed; keeping the last good keys", "path", l.Path, "err", err)
	if l.OnError != nil {
		l.OnError(err)
	}
}

func (l *Loader) logger() *slog.Logger {
	if l.Logger != nil {
		return l.Logger
	}
	return slog.Default()
}

// load parses, unwraps and checks the keyset in data, read from l.Path.
func (l *Loader) load(ctx context.Context, data []byte) (*Snapshot, *Keyset, error) {
	ks, err := ParseKeyset(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (in %s)", err, l.Path)
	}
	kek, err := OpenKEK(ctx, ks, l.Path, &l.Options)
	if err != nil {
		return nil, nil, transient(fmt.Errorf("keyring: keyset %s: %w", ks.ID, err))
	}
	kekURL := ks.KEK
	if l.Options.KEK != "" {
		kekURL = l.Options.KEK
	}
	// The authentication key is cached like the data keys, under the id 0
	// no key has: an unchanged keyset costs no KMS call to reload.
	next := map[cacheKey][]byte{}
	ak := cacheKey{ks.ID, kekURL, 0, string(ks.Auth.Wrapped)}
	authKey, ok := l.cache[ak]
	if !ok {
		if authKey, err = unwrapShared(ctx, ak, func() ([]byte, error) { return ks.unwrapAuth(ctx, kek) }); err != nil {
			return nil, nil, transient(fmt.Errorf("%w (in %s)", err, l.Path))
		}
	}
	if err := ks.verifyWith(authKey); err != nil {
		return nil, nil, fmt.Errorf("%w (in %s)", err, l.Path)
	}
	next[ak] = authKey
	var keys []Key
	for _, sk := range ks.Keys {
		if sk.State == Retired {
			continue
		}
		ck := cacheKey{ks.ID, kekURL, sk.ID, string(sk.Wrapped)}
		m, ok := l.cache[ck]
		if !ok {
			m, err = unwrapShared(ctx, ck, func() ([]byte, error) {
				k, err := ks.UnwrapKey(ctx, kek, sk)
				return k.Material, err
			})
			if err != nil {
				return nil, nil, transient(fmt.Errorf("%w (in %s)", err, l.Path))
			}
		}
		next[ck] = m
		keys = append(keys, Key{ID: sk.ID, Algorithm: sk.Algorithm, State: sk.State,
			Created: sk.Created, Activation: sk.Activation, Material: bytes.Clone(m)})
	}
	snap, err := NewSnapshot(keys)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (keyset %s in %s)", err, ks.ID, l.Path)
	}
	if _, err := snap.Primary(l.Options.now()); err != nil {
		return nil, nil, fmt.Errorf("keyring: keyset %s in %s has no usable primary: %w", ks.ID, l.Path, err)
	}
	p := ks.Policy
	snap.policy, snap.version = &p, ks.Version
	l.cache = next
	return snap, ks, nil
}

// unwraps lets concurrent loads of one keyset (several Loaders in one
// process, or LoadFile calls racing at start) share each KMS call.
var unwraps singleflight.Group

func unwrapShared(ctx context.Context, ck cacheKey, unwrap func() ([]byte, error)) ([]byte, error) {
	v, err, _ := unwraps.Do(fmt.Sprintf("%q %q %d %x", ck.keyset, ck.kek, ck.id, ck.wrapped), func() (any, error) {
		return unwrap()
	})
	if err != nil {
		return nil, err
	}
	// Every caller gets its own copy: the snapshot clears nothing, but a
	// shared slice must not be written by one and read by another.
	return bytes.Clone(v.([]byte)), nil
}
