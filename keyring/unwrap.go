package keyring

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/singleflight"

	"github.com/stateseal/stateseal/backends"
)

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
