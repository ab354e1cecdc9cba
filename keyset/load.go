package keyset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/stores"
)

// LoadOptions configure loading a keyset. Trust comes from here, never
// from the keyset: whoever can write the store but cannot use the KEK
// gains nothing (docs/KEYSET.md, "Who can do what").
type LoadOptions struct {
	// KEK is the URL of the KEK this instance trusts, with whatever
	// transport settings reach it (an endpoint, Vault's address from the
	// environment). A keyset that names another KEK does not load, and
	// causes no KMS call. Required for a keyset in a store; for a keyset
	// file "" means DefaultFileKEK, the local key file beside it.
	KEK string
	// PreviousKEK, if set, is trusted too: set it to the old KEK while a
	// rewrap moves the keyset from it to KEK, and remove it after.
	PreviousKEK string
	// KeysetID, if set, is the only keyset id that loads. Unset, the id of
	// the first keyset loaded is pinned for the Loader's life; set it so
	// that a fresh instance cannot be given another keyset under the same
	// KEK (another tenant's, a test one).
	KeysetID string
	// MinVersion refuses keyset versions below it, on fresh loads too:
	// raise it after an emergency so that no copy from before it loads.
	MinVersion uint64
	// Backends opens the KEK; nil means backends.Default.
	Backends *backends.Registry
	// Stores opens a keyset location that is a URL; nil means
	// stores.Default.
	Stores *stores.Registry
	// Now is the clock that decides whether a primary key is usable and
	// whether the keyset is fresh; nil means time.Now.
	Now func() time.Time
	// AllowKeysetChange lets a Loader's reload install a keyset with
	// another id than the one it pinned (never one that KeysetID does not
	// name, nor one under an untrusted KEK, nor a version below one seen).
	AllowKeysetChange bool
}

func (o *LoadOptions) now() time.Time {
	if o == nil || o.Now == nil {
		return time.Now()
	}
	return o.Now()
}

// OpenKEK opens the KEK that a keyset at location (a file path or a store
// URL) names by identity (Keyset.KEK), if o trusts it: it opens the URL o
// configures, with its transport settings; the name only selects among
// o's KEKs, and one o does not name is refused (ErrUntrustedKEK) before
// anything is opened. Relative local KEK paths resolve against a keyset
// file's directory; a keyset in a replicated store needs an absolute path
// or an environment variable. The caller closes the KEK (backends.Close).
func OpenKEK(ctx context.Context, location, name string, o *LoadOptions) (backends.KEK, error) {
	trusted, err := trustedKEKs(location, o)
	if err != nil {
		return nil, err
	}
	url, err := matchKEK(name, trusted, nil)
	if err != nil {
		return nil, err
	}
	return openKEKURL(ctx, url, location, o)
}

func openKEKURL(ctx context.Context, url, location string, o *LoadOptions) (backends.KEK, error) {
	reg := backends.Default
	if o != nil && o.Backends != nil {
		reg = o.Backends
	}
	return reg.Open(ctx, url, kekDir(location))
}

func kekDir(location string) *backends.OpenOptions {
	if stores.IsURL(location) {
		if path, ok := strings.CutPrefix(location, "file://"); ok {
			return &backends.OpenOptions{Dir: keysetDir(path)}
		}
		return &backends.OpenOptions{AbsoluteOnly: true}
	}
	return &backends.OpenOptions{Dir: keysetDir(location)}
}

// OpenStore opens the store at location with o's registry.
func OpenStore(ctx context.Context, location string, o *LoadOptions) (stores.Store, error) {
	reg := stores.Default
	if o != nil && o.Stores != nil {
		reg = o.Stores
	}
	return reg.Open(ctx, location)
}

// Load reads the keyset at location (a file path, or a store URL such
// as vault-kv://... or redis://...), unwraps every key that may open
// tokens (retired keys stay wrapped), and returns the snapshot. A keyset
// with no active key whose activation has passed is an error here, not a
// surprise at the first Seal.
func Load(ctx context.Context, location string, o *LoadOptions) (*keyring.Snapshot, *Keyset, error) {
	l := &Loader{Path: location}
	if o != nil {
		l.Options = *o
	}
	defer l.Close()
	s, err := l.openStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	data, _, err := s.Read(ctx)
	if err != nil {
		return nil, nil, storeError(s.String(), err)
	}
	snap, ks, _, err := l.load(ctx, data)
	if err != nil {
		return nil, nil, err
	}
	return snap, ks.Clone(), nil // the caller's own
}

// A Loader keeps a keyring.Ring in step with a keyset in a store. Load it once,
// then call Reload, or Run to follow changes. A keyset that cannot be
// read, parsed, authenticated or unwrapped never replaces the ring's keys:
// the last good snapshot keeps serving and the error goes to slog and
// OnError.
//
// Loaders of one process that load the same document bytes share its
// parse, and, if they open their KEK the same way (one URL, one
// Options.Backends, one keyset directory: they then share one KEK
// client), its authentication and unwrap, for as long as a KMS answer
// may stand (seconds; a first load asks the KMS itself). Every check that
// depends on the loader (its trusted KEKs, pinned id, MinVersion, what it
// installed before, its clock) runs for each loader at every load, and
// each serves keys of its own (docs/FLEET.md, "Loaders of one process
// share the work").
type Loader struct {
	// Path is the keyset's location: a file path, or a store URL
	// (vault-kv://..., redis://...) that Options.Stores opens.
	Path string
	// Store, if set, is used instead of opening Path.
	Store   stores.Store
	Options LoadOptions
	// Logger receives reload events; nil means slog.Default().
	Logger *slog.Logger
	// OnError, if set, is called with every failed reload that is
	// reported (once per failure while polling).
	OnError func(error)
	// OnReload, if set, is called with every keyset a reload installs: a
	// copy of its own, which it may keep or change without changing what
	// this loader (or any other) installed.
	OnReload func(*Keyset)

	mu            sync.Mutex
	ring          *keyring.Ring
	current       *Keyset                // installed; shared with the loaders of the same document: read only
	rev           string                 // the store's revision as last read
	retry         bool                   // the last read failed on a KMS call: read again even if rev is the same
	last          []byte                 // the document as last loaded
	failed        []byte                 // the document as it last failed to load for good
	reported      string                 // the last failure reported
	staleReported string                 // the installed keyset's expiry, as last reported
	outage        bool                   // a transient failure was reported, and no success since
	held          *document              // the document last loaded, shared with the process's loaders of the same bytes
	ids           map[string]string      // the identities of the configured KEK URLs, by URL
	keks          map[string]*sharedKEK  // opened once per configured URL; released by Close
	ownStore      bool                   // the loader opened Store from Path: Close closes it
	pinned        string                 // the keyset id that loads
	seen          map[string]seenVersion // the highest version installed, per keyset id

	// For the recovery and countdown lines (countdown.go).
	failingSince  time.Time // when lastErr was last set after none
	countdownMark string    // the expiry and days or hours left, as last warned

	// For Health.
	installed, lastCheck, storeSeen, kmsSeen time.Time
	lastErr                                  error
	polls                                    uint64
}

// seenVersion is the highest version of a keyset a loader installed, its
// tag, to tell a descendant from a fork, and every key id it has seen
// retired in that keyset, which never opens again.
type seenVersion struct {
	version uint64
	tag     []byte
	retired map[uint32]bool
}

// A cacheKey names unwrapped material by what it is a function of: the
// keyset, the KEK, the key and its wrapped bytes.
type cacheKey struct {
	keyset  string
	kek     *sharedKEK
	id      uint32
	wrapped string
}

// Close closes the KEK clients the loader opened (a Cloud KMS connection,
// say; one that other loaders of the process share is closed by the last
// of them) and the store it opened from Path (a Redis client), never a Store
// it was given, and stops nothing else: cancel Run's context first. The
// loader is not used after Close.
func (l *Loader) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	if l.ownStore {
		errs = append(errs, stores.Close(l.Store))
		l.ownStore = false
	}
	for url, k := range l.keks {
		errs = append(errs, releaseKEK(k))
		delete(l.keks, url)
	}
	l.held = nil // the process's table lets it go once no loader holds it
	return errors.Join(errs...)
}

// kek returns the KEK at the configured url, opened once for the loader's
// life: the process's loaders that would open url the same way share one
// (kek.go).
func (l *Loader) kek(ctx context.Context, url string) (*sharedKEK, error) {
	if k, ok := l.keks[url]; ok {
		return k, nil
	}
	reg := backends.Default
	if l.Options.Backends != nil {
		reg = l.Options.Backends
	}
	k, err := acquireKEK(kekKey{url: url, reg: reg, dir: *kekDir(l.Path)}, func() (backends.KEK, error) {
		return openKEKURL(ctx, url, l.Path, &l.Options)
	})
	if err != nil {
		return nil, err
	}
	if l.keks == nil {
		l.keks = map[string]*sharedKEK{}
	}
	l.keks[url] = k
	return k, nil
}

// name is the keyset's location as logs and errors show it: credentials
// redacted, made once.
func (l *Loader) name() string {
	if l.Store != nil {
		return l.Store.String()
	}
	return stores.Redact(l.Path)
}

func (l *Loader) openStore(ctx context.Context) (stores.Store, error) {
	if l.Store == nil {
		if _, err := trustedKEKs(l.Path, &l.Options); err != nil {
			return nil, err // before the store is even opened
		}
		s, err := OpenStore(ctx, l.Path, &l.Options)
		if err != nil {
			return nil, fmt.Errorf("keyset: %w", err)
		}
		l.Store, l.ownStore = s, true
	}
	if l.Path == "" {
		l.Path = l.Store.String()
	}
	return l.Store, nil
}

// Load reads the keyset and returns a ring holding it. It fails if the
// first load fails: a store or KMS that does not answer, or a keyset that
// does not load, is an error naming it.
func (l *Loader) Load(ctx context.Context) (*keyring.Ring, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, err := l.openStore(ctx)
	if err != nil {
		return nil, err
	}
	data, rev, err := s.Read(ctx)
	if err != nil {
		return nil, storeError(s.String(), err)
	}
	snap, ks, doc, err := l.load(ctx, data)
	if err != nil {
		return nil, err
	}
	ring, err := keyring.NewRing(snap)
	if err != nil {
		return nil, err
	}
	l.ring, l.current, l.last, l.rev, l.held = ring, ks, data, rev, doc
	l.install(ks)
	now := time.Now()
	l.installed, l.lastCheck, l.storeSeen, l.kmsSeen, l.lastErr = now, now, now, now, nil
	return ring, nil
}

// Reload reads the keyset again and, if its version changed, installs it.
// On failure the ring keeps its keys, and the error is logged, passed to
// OnError and returned.
func (l *Loader) Reload(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ring == nil {
		return errors.New("keyset: Reload before Load")
	}
	return l.reload(ctx, true)
}

// pollTimeout bounds one poll of Run.
const pollTimeout = 30 * time.Second

// Run follows the keyset until ctx is done. It polls every interval,
// and, where the store can tell of a change (stores.Watcher: Redis
// publishes one on every write), reloads as soon as it is told; polling
// goes on beside, in case the notification is lost. A poll asks a store
// that has a cheap revision check (stores.Revisioner: Vault KV's
// metadata) for it and reads only on a change; otherwise it reads the
// document (a few kilobytes) and parses it only if its bytes changed
// (file times are too coarse to tell two quick edits apart). Keys are
// unwrapped only when their wrapped bytes changed.
func (l *Loader) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return errors.New("keyset: poll interval must be positive")
	}
	var changed <-chan struct{}
	if w, ok := l.Store.(stores.Watcher); ok {
		changed = w.Watch(ctx)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	// The first poll comes at once: a change made between Load and the
	// watch's start would otherwise wait a whole interval.
	first := true
	for {
		if !first {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			case _, ok := <-changed:
				if !ok {
					changed = nil // the watch ended: polling carries on
				}
			}
		}
		first = false
		l.mu.Lock()
		if l.ring != nil {
			// A store or KMS that hangs must not hold the loader forever.
			c, cancel := context.WithTimeout(ctx, pollTimeout)
			l.reload(c, false) // reported inside
			cancel()
		}
		l.mu.Unlock()
	}
}

// reload reads the keyset once. A poll (not forced) skips a revision or
// bytes it has already loaded, or bytes that failed for good (they do not
// parse or authenticate). Bytes that failed on a KMS call are tried again
// at every poll, since the KMS may come back. A failure is reported once,
// until the next success or another failure, not at every tick; Reload
// reports every time.
func (l *Loader) reload(ctx context.Context, force bool) error {
	defer l.afterReload(l.lastErr)
	err := l.read(ctx, force)
	// The installed keyset is checked at every poll, whether or not the
	// store changed or answered: a store writer who keeps putting back the
	// bytes this instance installed (a freeze) must not keep it serving
	// an old keyset silently past its expiry.
	serr := l.stale()
	if serr == nil {
		l.staleReported = ""
		return err
	}
	if force || l.staleReported != serr.Error() {
		l.staleReported = serr.Error()
		l.report(serr)
	}
	if err != nil {
		return errors.Join(err, serr) // lastErr stays the poll's own failure
	}
	l.lastErr = serr
	return serr
}

// stale reports the installed keyset once its freshness window has
// passed: the moment a fresh instance would refuse it.
func (l *Loader) stale() error {
	ks := l.current
	if ks == nil || ks.Policy.Freshness == 0 || l.Options.now().Before(ks.Expires) {
		return nil
	}
	return fmt.Errorf("%w: the installed keyset %s version %d expired at %s and the store holds nothing newer that loads: nothing refreshed it (is the scheduler running?) or the store is frozen or rolled back; this instance keeps serving its keys but is not ready (docs/KEYSET.md, \"Trust\": a freeze)", ErrStale, ks.ID, ks.Version, ks.Expires.Format(time.RFC3339))
}

// read is one poll or reload of the store; see reload.
func (l *Loader) read(ctx context.Context, force bool) error {
	l.polls++
	if r, ok := l.Store.(stores.Revisioner); ok && !force && !l.retry {
		rev, err := r.Revision(ctx)
		if err != nil {
			err = transientError{storeError(l.name(), err)}
			l.fail(err, force)
			return err
		}
		l.storeSeen = time.Now()
		if rev == l.rev {
			l.reported, l.outage = "", false // the store answers again
			if l.failed == nil {
				l.lastCheck, l.lastErr = l.storeSeen, nil
			}
			return nil
		}
	}
	data, rev, err := l.Store.Read(ctx)
	if err != nil {
		if errors.Is(err, stores.ErrNotFound) {
			err = fmt.Errorf("keyset: %s: %w: the keyset this instance loaded (%s version %d) is gone from its store; restore it from a backup, never create a new one, which would split the fleet", l.name(), err, l.current.ID, l.current.Version)
		} else {
			err = transientError{storeError(l.name(), err)}
		}
		l.retry = true
		l.fail(err, force)
		return err
	}
	l.storeSeen = time.Now()
	if !force && (bytes.Equal(data, l.last) || l.failed != nil && bytes.Equal(data, l.failed)) {
		l.rev, l.retry = rev, false
		if bytes.Equal(data, l.last) {
			l.lastCheck, l.lastErr, l.failed = l.storeSeen, nil, nil
		}
		return nil
	}
	snap, ks, doc, err := l.load(ctx, data)
	if err != nil {
		var te transientError
		l.retry = errors.As(err, &te)
		if !l.retry {
			l.failed, l.rev = data, rev
		}
		l.fail(err, force)
		return err
	}
	l.last, l.failed, l.reported, l.outage, l.rev, l.retry, l.held = data, nil, "", false, rev, false, doc
	l.lastCheck, l.lastErr = time.Now(), nil
	if ks.ID == l.current.ID && ks.Version == l.current.Version {
		return nil
	}
	if ks.ID != l.current.ID {
		l.logger().Warn("stateseal keyset replaced by another keyset", "store", l.name(), "old", l.current.ID, "new", ks.ID)
	}
	l.ring.Store(snap)
	l.install(ks)
	l.logger().Info("stateseal keyset reloaded", "store", l.name(), "keyset", ks.ID, "version", ks.Version, "tag", ks.TagText(), "keys", len(ks.Keys))
	l.current = ks
	if l.OnReload != nil {
		l.OnReload(ks.Clone())
	}
	return nil
}

// install records ks as seen: its version becomes the floor for its id,
// the version a later one must descend from, and its retired keys stay
// retired.
func (l *Loader) install(ks *Keyset) {
	l.installed = time.Now()
	if l.seen == nil {
		l.seen = map[string]seenVersion{}
	}
	v, ok := l.seen[ks.ID]
	if !ok {
		v.retired = map[uint32]bool{}
	}
	if !ok || ks.Version > v.version {
		v.version, v.tag = ks.Version, bytes.Clone(ks.Auth.Tag)
	}
	for _, id := range ks.RetiredKeys {
		v.retired[id] = true
	}
	l.seen[ks.ID] = v
	l.pinned = ks.ID
	if l.Options.KeysetID != "" {
		l.pinned = l.Options.KeysetID
	}
}

// fail reports err unless the same failure was reported last.
//
// A failure of the store or the KMS (transient: the same keyset may load
// when it answers again) is reported once per outage, however its error
// text varies from poll to poll (a dropped connection, then a refused
// one); the next success ends the outage.
func (l *Loader) fail(err error, force bool) {
	l.lastErr = err
	var te transientError
	transient := errors.As(err, &te)
	switch {
	case force:
	case transient && l.outage:
		return
	case !transient && err.Error() == l.reported:
		return
	}
	l.reported, l.outage = err.Error(), transient
	l.report(err)
}

func (l *Loader) report(err error) {
	l.logger().Error("stateseal keyset reload failed; keeping the last good keys", "store", l.name(), "err", err)
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
