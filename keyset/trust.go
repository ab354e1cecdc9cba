package keyset

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/redact"
	"github.com/stateseal/stateseal/stores"
)

// Errors a loader reports when a keyset is not one this instance trusts.
// None of them costs a KMS call: each is decided before any unwrap.
var (
	// ErrUntrustedKEK reports a keyset naming a KEK that the loader's
	// configuration does not name.
	ErrUntrustedKEK = errors.New("keyset: the keyset names a KEK this instance does not trust")
	// ErrOtherKeyset reports a keyset whose id is not the pinned one.
	ErrOtherKeyset = errors.New("keyset: the store holds another keyset than the pinned one")
	// ErrRollback reports a keyset version below one this instance has
	// seen (or below LoadOptions.MinVersion): an older copy may hold keys
	// retired since.
	ErrRollback = errors.New("keyset: the keyset went back to an older version")
	// ErrFork reports a keyset that does not descend from the version a
	// loader installed: another document at the same version, or one at a
	// higher version whose history does not name the installed one (an
	// old copy put back and edited, a failover that lost a write, a
	// restore followed by an edit). The installed keyset keeps serving.
	ErrFork = errors.New("keyset: the keyset does not descend from the one installed")
	// ErrStale reports a keyset whose freshness window has passed: nothing
	// rewrote it in time, or the store was rolled back further than the
	// window allows.
	ErrStale = errors.New("keyset: the keyset has expired; refresh it")
	// ErrConfig reports a loader's configuration that is refused whatever
	// the store holds: a configured KEK URL, the KEK or the previous one,
	// that is not plain (docs/KEYSET-FORMAT.md, "KEK URLs and identity"),
	// that is a local URL with a '?', or whose scheme no backend of
	// LoadOptions.Backends opens; or a keyset in a store with no KEK
	// configured. It is decided before any document is read. A KEK that
	// is configured well but does not open (a local key file missing or
	// refused) is not ErrConfig: it is reported, and retried, as a KMS
	// that does not answer.
	ErrConfig = errors.New("keyset: configuration refused")
)

// DefaultFileKEK is the KEK a loader trusts for a keyset file when its
// configuration names none: the local key file that sealctl init makes
// beside the keyset. A keyset in a replicated store has no such default.
const DefaultFileKEK = "local:stateseal.kek"

// trustedKEKs returns the KEK URLs o trusts for location: o.KEK and
// o.PreviousKEK, or, for a keyset file only, DefaultFileKEK.
func trustedKEKs(location string, o *LoadOptions) ([]string, error) {
	var urls []string
	if o != nil {
		for _, u := range []string{o.KEK, o.PreviousKEK} {
			if u != "" {
				urls = append(urls, u)
			}
		}
	}
	if len(urls) > 0 {
		// Every configured URL is checked, not only the one a document
		// matches: a configuration is refused as a whole, before any
		// document is read.
		reg := backends.Default
		if o.Backends != nil {
			reg = o.Backends
		}
		for _, u := range urls {
			if _, err := kekIdentity(u); err != nil {
				return nil, fmt.Errorf("%w: configured KEK: %w", ErrConfig, err)
			}
			// A scheme no backend opens can never authenticate anything:
			// refused now, with the schemes that would do, rather than
			// reported at every load as a KMS that does not answer.
			scheme, _, _ := strings.Cut(u, ":")
			if known := reg.Schemes(); !slices.Contains(known, scheme) {
				return nil, fmt.Errorf("%w: configured KEK: no backend for scheme %q (registered: %s)", ErrConfig, scheme, strings.Join(known, ", "))
			}
		}
		return urls, nil
	}
	if stores.IsURL(location) && !strings.HasPrefix(location, "file://") {
		return nil, fmt.Errorf("%w: a keyset in a store needs the KEK it is trusted under in the configuration (LoadOptions.KEK; -kek for sealgate and the example server; sealctl --kek or $STATESEAL_KEK): the store is not trusted to name it", ErrConfig)
	}
	return []string{DefaultFileKEK}, nil
}

// matchKEK returns the configured URL whose identity is name, the KEK a
// keyset names. ids, if not nil, keeps the identities computed, by URL
// (an identity is a function of the URL alone): a loader computes its
// KEKs' once, not at every load.
func matchKEK(name string, trusted []string, ids map[string]string) (string, error) {
	var names []string
	for _, u := range trusted {
		id, ok := ids[u]
		if !ok {
			var err error
			if id, err = kekIdentity(u); err != nil {
				return "", fmt.Errorf("keyset: configured KEK: %w", err)
			}
			if ids != nil {
				ids[u] = id
			}
		}
		if id == name {
			return u, nil
		}
		names = append(names, redact.URL(id))
	}
	return "", fmt.Errorf("%w: the keyset names %s; this instance trusts %s (the KEK comes from configuration: LoadOptions.KEK or PreviousKEK; -kek or -previous-kek for sealgate and the example server; sealctl --kek or $STATESEAL_KEK; names are compared as written)", ErrUntrustedKEK, redact.URL(name), strings.Join(names, " and "))
}

// kekIdentity is a KEK URL without its transport settings: the form a
// keyset names its KEK by (backends.Identity).
func kekIdentity(raw string) (string, error) { return backends.Identity(raw) }

// Check reports whether a loader configured with o would consider
// ks for location, deciding without any KMS call: ks must name a KEK that
// o trusts, have the pinned id if o pins one, a version of at least
// o.MinVersion, and, if it has a freshness window, not be expired. It does
// not check the authentication: Verify does, under the KEK that OpenKEK
// opens. Editors (package rotation, sealctl) call it before they edit.
func Check(ks *Keyset, location string, o *LoadOptions) error {
	l := &Loader{Path: location}
	if o != nil {
		l.Options = *o
	}
	_, err := l.trust(ks)
	return err
}

// Check is the package's Check with what this loader installed too: a
// keyset older than one it installed, not the keyset it pinned, not
// descending from the version it installed (a fork, at any version), or
// in which a key it saw retired is not retired, is refused. A scheduler
// running beside a loader uses it, so that it never extends a rolled-back
// or forked keyset. Its values are not authenticated here: it can only
// refuse, and the editor checks the authentication next.
func (l *Loader) Check(ks *Keyset) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.trust(ks); err != nil {
		return err
	}
	return l.follows(ks)
}

// trust makes every decision about ks that needs no key: the KEK it names
// is one the configuration trusts (whose URL it returns), and admit's
// checks. Load, Check and the editors all decide through it.
func (l *Loader) trust(ks *Keyset) (kekURL string, err error) {
	trusted, err := trustedKEKs(l.Path, &l.Options)
	if err != nil {
		return "", err
	}
	if l.ids == nil {
		l.ids = map[string]string{}
	}
	if kekURL, err = matchKEK(ks.KEK, trusted, l.ids); err != nil {
		floor, why := l.floor(ks.ID)
		if ks.Version < floor {
			return "", RollbackKEKError(ks, floor, why, err)
		}
		if floor > 0 || len(l.seen) > 0 {
			// The copy's version and id are claims no KEK checked yet:
			// raised by a store writer, a copy from before a KEK change
			// would pass the test above.
			return "", UnverifiedKEKError(ks, err)
		}
		return "", fmt.Errorf("%w (keyset %s)", err, ks.ID)
	}
	return kekURL, l.admit(ks)
}

// unopened is err, the trusted KEK not opening ks (it does not
// authenticate, a key does not unwrap, or the KMS refuses its key version
// as disabled), said as trust says an untrusted KEK once this loader has a
// floor: a rollback below it, else the warning against a retired KEK
// first, since the version ks claims is not authenticated. The
// leaked-key procedure for a KMS with key versions disables the old one:
// a copy from before it fails here, not in trust.
func (l *Loader) unopened(ks *Keyset, err error) error {
	if errors.Is(err, ErrRollback) || !errors.Is(err, backends.ErrKeyDisabled) && !errors.Is(err, backends.ErrUnwrap) && !errors.Is(err, ErrUnauthenticated) {
		return err
	}
	floor, why := l.floor(ks.ID)
	if ks.Version < floor {
		return RollbackKEKError(ks, floor, why, err)
	}
	if floor > 0 || len(l.seen) > 0 {
		return UnverifiedKEKError(ks, err)
	}
	return err
}

// floor is the lowest version of keyset id this loader accepts, and
// whence: the version it installed, or the configured minimum.
func (l *Loader) floor(id string) (uint64, string) {
	v, why := l.Options.MinVersion, "the configured minimum version (LoadOptions.MinVersion, -min-version)"
	if s, ok := l.seen[id]; ok && s.version > v {
		v, why = s.version, "the version this instance installed"
	}
	return v, why
}

// UnverifiedKEKError is the error for a keyset the configured KEK does
// not open (err), read by a reader that has installed or recorded a
// keyset, or has a minimum version, when the copy claims a version at or
// above what it knows. That claim (and the copy's id) is not
// authenticated: a store writer can raise the version of a copy from
// before a KEK change, which is then a rollback reading as a newer
// keyset. So the retired KEK is warned against first, and configuring a
// KEK comes second, for a rewrap the configuration has not caught up
// with. It is whatever err is.
func UnverifiedKEKError(ks *Keyset, err error) error {
	return fmt.Errorf("keyset %s claims version %d, but the configured KEK does not open it, so neither that version nor its id is authenticated. "+
		"If the KEK it names is one you retired (a leaked-key procedure, a rewrap away from it, a KMS key version disabled), this is a copy from before that change put back with its version edited, a rollback: "+
		"do not trust the old KEK again (-previous-kek, --kek OLD, an old KMS version enabled), which would undo the procedure; put the newest copy back (docs/ROTATION.md, \"A rolled-back store\"). "+
		"Only a KEK you moved to and have not configured here yet is to be configured. The KEK check said: %w",
		ks.ID, ks.Version, err)
}

// RollbackKEKError is the error for a keyset below a version its reader
// knows was reached (floor: what whence says) that the configured KEK does
// not open (err: it names a KEK not trusted, or does not authenticate or
// unwrap under the one trusted). That is a copy from before a KEK change
// put back: the rollback is named first, since the cure the KEK error
// alone suggests, trusting the old KEK again, would undo a leaked-key
// procedure. It is ErrRollback, and whatever err is. sealctl uses it with
// its record of what it saw.
func RollbackKEKError(ks *Keyset, floor uint64, whence string, err error) error {
	return fmt.Errorf("%w: keyset %s is at version %d, below version %d (%s), and the configured KEK does not open it: "+
		"a copy from before a KEK change (a rewrap, a KMS key version disabled) was put back in the store, or one written without the KEK. "+
		"Do not trust the old KEK again (-previous-kek, --kek OLD, an old KMS version enabled): that would undo the leaked-key procedure; "+
		"put the newest copy back (docs/ROTATION.md, \"A rolled-back store\"). The KEK check said: %w",
		ErrRollback, ks.ID, ks.Version, floor, whence, err)
}
