package keyset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/keymaterial"
	"github.com/stateseal/stateseal/internal/keysetjson"
	"github.com/stateseal/stateseal/keyring"
)

// load parses, checks, authenticates and unwraps the keyset in data. Every
// check that needs no key comes first, so a keyset this instance does not
// trust (another KEK, another id, an older version, expired) costs no KMS
// call: the store cannot make the instance talk to a KMS of its choosing.
//
// Parsing, authenticating and unwrapping are shared by the loaders of the
// process that read the same bytes under the same KEK (shared.go); every
// check that depends on this loader runs here, on every load. The
// snapshot returned is this loader's own copy; the Keyset is the shared
// document's, read only: whatever hands it out clones it. The document
// is what the loader holds once it installs them.
func (l *Loader) load(ctx context.Context, data []byte) (*keyring.Snapshot, *Keyset, *document, error) {
	// The configuration first, whatever the document: a loader given a
	// Store skipped openStore's check.
	if _, err := trustedKEKs(l.Path, &l.Options); err != nil {
		return nil, nil, nil, err
	}
	doc, err := parseShared(data)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w (in %s)", err, l.name())
	}
	ks := doc.ks // shared: everything below only reads it
	kekURL, err := l.trust(ks)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w (in %s)", err, l.name())
	}
	kk, err := l.kek(ctx, kekURL)
	if err != nil {
		return nil, nil, nil, transient(fmt.Errorf("keyset: keyset %s: %w", ks.ID, err))
	}
	prev := l.material(kk)
	fresh := l.ring == nil // a first load proves everything with the KMS itself
	a, err := doc.once(ctx, stageAuth, kk, prev, fresh, func(ctx context.Context) (result, error) {
		return verifyShared(ctx, ks, kk, prev)
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w (in %s)", l.unopened(ks, err), l.name())
	}
	auth := a.(*verified)
	if auth.kms.After(l.kmsSeen) {
		l.kmsSeen = auth.kms
	}
	// Authentic from here on: a document that does not descend from the
	// one installed is refused (admit refused one reviving a retired key).
	if err := l.follows(ks); err != nil {
		return nil, nil, nil, fmt.Errorf("%w (in %s)", err, l.name())
	}
	v, err := doc.once(ctx, stageKeys, kk, prev, fresh, func(ctx context.Context) (result, error) {
		return unwrapKeys(ctx, ks, kk, auth, prev)
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w (in %s)", l.unopened(ks, err), l.name())
	}
	u := v.(*unwrapped)
	if u.kms.After(l.kmsSeen) {
		l.kmsSeen = u.kms
	}
	snap := u.snap.Clone() // this loader's own keys
	if _, err := snap.Primary(l.Options.now()); err != nil {
		return nil, nil, nil, fmt.Errorf("keyset: keyset %s in %s has no usable primary: %w", ks.ID, l.name(), err)
	}
	return snap, ks, doc, nil
}

// material returns the unwrapped material of the document this loader
// holds, under k: a key whose wrapped bytes did not change costs no KMS
// call to load again, and a result of another loader's made of it stands
// for this one (result). Read only.
func (l *Loader) material(k *sharedKEK) map[cacheKey]part {
	if l.held == nil {
		return nil
	}
	l.held.mu.Lock()
	defer l.held.mu.Unlock()
	if u, ok := l.held.results[resultKey{stageKeys, k}].(*unwrapped); ok {
		return u.material
	}
	return nil
}

// verified is a document whose tag checked under a KEK: its
// authentication key, unwrapped. Read only: every loader of the document
// reads it.
type verified struct {
	ck  cacheKey
	key part      // its at: when the KMS answered for it, here or for prev
	kms time.Time // when the KMS answered for it here; zero if it was not asked
}

func (v *verified) stands(prev map[cacheKey]part, now time.Time) bool {
	return v.key.stands(v.ck, prev, now)
}

// unwrapped is a document's keys that may open tokens, as a snapshot
// (which each loader clones), and their material by cacheKey (the
// authentication key's under id 0), for the next document's load. Read
// only, like verified.
type unwrapped struct {
	snap     *keyring.Snapshot
	material map[cacheKey]part
	kms      time.Time // the last KMS answer here; zero if it was not asked
}

// stands checks the data keys only: the authentication key (id 0, which
// no data key has: validate refuses it) is the one the loader's own
// stageAuth result, which stood, already gave.
func (u *unwrapped) stands(prev map[cacheKey]part, now time.Time) bool {
	for ck, p := range u.material {
		if ck.id != 0 && !p.stands(ck, prev, now) {
			return false
		}
	}
	return true
}

// verifyShared unwraps ks's authentication key (from prev if its
// wrapped bytes are unchanged) and checks the tag with it.
func verifyShared(ctx context.Context, ks *Keyset, kk *sharedKEK, prev map[cacheKey]part) (*verified, error) {
	v := &verified{ck: cacheKey{ks.ID, kk, 0, string(ks.Auth.Wrapped)}}
	var ok bool
	if v.key, ok = prev[v.ck]; !ok {
		m, err := unwrapShared(ctx, v.ck, func() ([]byte, error) { return ks.unwrapAuth(ctx, keysetjson.Format, kk.Value()) })
		if err != nil {
			return nil, transient(err)
		}
		v.kms = time.Now()
		v.key = part{m, v.kms}
	}
	if err := ks.verifyWith(keysetjson.Format, v.key.m); err != nil {
		return nil, err
	}
	return v, nil
}

// unwrapKeys unwraps every key of ks that may open tokens (from prev
// where its wrapped bytes are unchanged) and imports it.
func unwrapKeys(ctx context.Context, ks *Keyset, kk *sharedKEK, auth *verified, prev map[cacheKey]part) (*unwrapped, error) {
	u := &unwrapped{material: map[cacheKey]part{auth.ck: auth.key}}
	var keys []keyring.Key
	for _, sk := range ks.Keys {
		if sk.State == keyring.Retired {
			continue
		}
		ck := cacheKey{ks.ID, kk, sk.ID, string(sk.Wrapped)}
		p, ok := prev[ck] // keeps the time the KMS answered it
		if !ok {
			m, err := unwrapShared(ctx, ck, func() ([]byte, error) {
				k, err := ks.UnwrapKey(ctx, kk.Value(), sk)
				return keymaterial.Of(&k), err
			})
			if err != nil {
				return nil, transient(err)
			}
			u.kms = time.Now()
			p = part{m, u.kms}
		}
		u.material[ck] = p
		k, err := keyring.ImportKey(sk.ID, sk.Algorithm, sk.State, sk.Created, sk.Activation, p.m)
		if err != nil {
			return nil, fmt.Errorf("keyset: keyset %s: %w", ks.ID, err)
		}
		keys = append(keys, k)
	}
	snap, err := keyring.NewSnapshot(keys)
	if err != nil {
		return nil, fmt.Errorf("keyset: keyset %s: %w", ks.ID, err)
	}
	u.snap = snap.WithPolicy(ks.Policy, ks.Version)
	return u, nil
}

// admit refuses, before any KMS call, a keyset this loader must not
// install: another id than the pinned one, a version below the floor, an
// expired freshness window. Its values are not authenticated yet; each
// check can only refuse.
func (l *Loader) admit(ks *Keyset) error {
	o := &l.Options
	pinned := o.KeysetID
	if pinned == "" && !o.AllowKeysetChange {
		pinned = l.pinned
	}
	if pinned != "" && ks.ID != pinned {
		return fmt.Errorf("%w: found %s, pinned %s (LoadOptions.KeysetID, or the first keyset loaded; restart, or set AllowKeysetChange, to change keysets on purpose)", ErrOtherKeyset, ks.ID, pinned)
	}
	if ks.Version < o.MinVersion {
		return fmt.Errorf("%w: keyset %s is at version %d, below the configured minimum %d", ErrRollback, ks.ID, ks.Version, o.MinVersion)
	}
	if v, ok := l.seen[ks.ID]; ok && ks.Version < v.version {
		return fmt.Errorf("%w: keyset %s went back from version %d to %d; an older copy may hold keys retired since", ErrRollback, ks.ID, v.version, ks.Version)
	}
	if v, ok := l.seen[ks.ID]; ok {
		for _, k := range ks.Keys {
			if !v.retired[k.ID] || k.State == keyring.Retired {
				continue
			}
			err := fmt.Errorf("%w: keyset %s version %d has key %s %s, which this instance saw retired: retired keys never come back", ErrRollback, ks.ID, ks.Version, keyring.FormatID(k.ID), k.State)
			if !ks.Extends(v.version, v.tag) {
				// As it claims: authenticated or not, it is no descendant.
				err = fmt.Errorf("%w, and %w: it does not descend from version %d, which this instance installed (docs/ROTATION.md, \"Forks\")", err, ErrFork, v.version)
			}
			return err
		}
	}
	now := l.Options.now()
	if ks.Policy.Freshness != 0 && !now.Before(ks.Expires) {
		return fmt.Errorf("%w: keyset %s version %d expired at %s (freshness %v): run 'sealctl refresh' or a rotation.Scheduler, or the store was rolled back", ErrStale, ks.ID, ks.Version, ks.Expires.Format(time.RFC3339), ks.Policy.Freshness)
	}
	// An expiry further ahead than a write now would set was written by a
	// clock running ahead; kept, it would stretch the rollback bound by as
	// much as that clock was wrong.
	if ks.Policy.Freshness != 0 && ks.Expires.After(now.Add(ks.Policy.Freshness+ks.Policy.Skew)) {
		return fmt.Errorf("%w: keyset %s version %d expires at %s, further ahead than the freshness window (%v) plus the skew from now: its writer's clock runs ahead; fix that clock, then rewrite the keyset (sealctl refresh)", ErrStale, ks.ID, ks.Version, ks.Expires.Format(time.RFC3339), ks.Policy.Freshness)
	}
	return nil
}

// unwraps lets concurrent loads of one keyset (several Loaders in one
// process, or Load calls racing at start) share each KMS call.
var unwraps singleflight.Group

func unwrapShared(ctx context.Context, ck cacheKey, unwrap func() ([]byte, error)) ([]byte, error) {
	v, err, _ := unwraps.Do(fmt.Sprintf("%q %p %d %x", ck.keyset, ck.kek, ck.id, ck.wrapped), func() (any, error) {
		return unwrap()
	})
	if err != nil {
		return nil, err
	}
	// Every caller gets its own copy: nothing writes it, but a shared
	// slice must not be written by one and read by another.
	return bytes.Clone(v.([]byte)), nil
}

// A transientError is a failed KMS call: the KMS unreachable, throttling,
// a timeout. The same keyset may load once the KMS answers again.
type transientError struct{ error }

func (e transientError) Unwrap() error { return e.error }

// transient marks err as transient unless the KMS answered that the bytes
// do not unwrap, or that their key is disabled, which no retry changes.
func transient(err error) error {
	if errors.Is(err, backends.ErrUnwrap) || errors.Is(err, backends.ErrKeyDisabled) || errors.Is(err, ErrUnauthenticated) || errors.Is(err, ErrUntrustedKEK) {
		return err
	}
	return transientError{err}
}

// follows refuses a keyset that does not descend from the version of
// its id this loader installed: the same tag, or a history link to it. A
// store writer cannot make one that passes: the history is authenticated.
func (l *Loader) follows(ks *Keyset) error {
	v, ok := l.seen[ks.ID]
	if !ok {
		return nil
	}
	if ks.Version > v.version && !ks.Extends(v.version, v.tag) {
		oldest := ks.Version
		if len(ks.History) > 0 {
			oldest = ks.History[len(ks.History)-1].Version
		}
		if v.version < oldest {
			return fmt.Errorf("%w: keyset %s version %d links back only to version %d, and this instance installed version %d: it cannot tell whether it descends from it; restart this instance if it does (docs/ROTATION.md, \"Forks\")", ErrFork, ks.ID, ks.Version, oldest, v.version)
		}
		return fmt.Errorf("%w: keyset %s version %d does not descend from version %d, which this instance installed: it was edited from another copy (a rollback or a lost write, extended); find the lost write, then write the keyset that should win at a higher version (docs/ROTATION.md, \"Forks\")", ErrFork, ks.ID, ks.Version, v.version)
	}
	if ks.Version == v.version && !ks.Extends(v.version, v.tag) {
		return fmt.Errorf("%w: keyset %s version %d is not the one this instance loaded; find which write was lost, then write the keyset that should win at a higher version (docs/ROTATION.md, \"Forks\")", ErrFork, ks.ID, ks.Version)
	}
	return nil
}
