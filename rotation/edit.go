package rotation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/stores"
)

// Options configure every operation. The zero value is usable.
type Options struct {
	// KEK, if set, overrides the keyset's KEK URL for unwrapping and
	// wrapping (Rewrap's target is its own argument).
	KEK string
	// Backends opens KEKs; nil means backends.Default.
	Backends *backends.Registry
	// Stores opens a keyset location that is a URL; nil means
	// stores.Default.
	Stores *stores.Registry
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives what the operations did; nil means slog.Default().
	Logger *slog.Logger
}

func (o *Options) now() time.Time {
	if o == nil || o.Now == nil {
		return time.Now().UTC().Truncate(time.Second)
	}
	return o.Now().UTC().Truncate(time.Second)
}

func (o *Options) logger() *slog.Logger {
	if o == nil || o.Logger == nil {
		return slog.Default()
	}
	return o.Logger
}

func (o *Options) loadOptions() *keyring.LoadOptions {
	if o == nil {
		return nil
	}
	return &keyring.LoadOptions{KEK: o.KEK, Backends: o.Backends, Stores: o.Stores, Now: o.Now}
}

func (o *Options) backends() *backends.Registry {
	if o == nil {
		return nil
	}
	return o.Backends
}

// A Result says what an edit did.
type Result struct {
	Keyset   *keyring.Keyset // as written
	Key      uint32          // the key the operation was about, if any
	Warnings []string        // things an operator should know; the edit was made
}

// edit reads the keyset at location (a file path or a store URL), checks
// its authentication under its KEK, applies fn to a copy, authenticates
// the result and writes it with the next version, compare-and-swap on the
// store's revision. A keyset changed without the KEK is never edited: an
// edit would authenticate whatever was changed (a retired key revived,
// say). fn gets the opened KEK; a Rewrap that changes ks.KEK
// authenticates the result under the new one.
func edit(ctx context.Context, location string, o *Options, fn func(ks *keyring.Keyset, kek backends.KEK) (Result, error)) (Result, error) {
	lo := o.loadOptions()
	s, err := keyring.OpenStore(ctx, location, lo)
	if err != nil {
		return Result{}, err
	}
	cur, rev, err := keyring.ReadKeyset(ctx, s)
	if err != nil {
		return Result{}, err
	}
	kek, err := keyring.OpenKEK(ctx, cur, location, lo)
	if err != nil {
		return Result{}, fmt.Errorf("rotation: keyset %s: %w", cur.ID, err)
	}
	if err := cur.Verify(ctx, kek); err != nil {
		return Result{}, fmt.Errorf("rotation: %w (in %s)", err, s)
	}
	ks := cur.Clone()
	res, err := fn(ks, kek)
	if err != nil {
		return Result{}, err
	}
	ks.Version = cur.Version + 1
	signer := kek
	if ks.KEK != cur.KEK {
		if signer, err = openKEK(ctx, ks.KEK, location, o); err != nil {
			return Result{}, err
		}
	}
	if err := ks.Authenticate(ctx, signer); err != nil {
		return Result{}, err
	}
	if _, err := keyring.WriteKeyset(ctx, s, ks, rev); err != nil {
		return Result{}, err
	}
	res.Keyset = ks
	return res, nil
}

// retries bounds editRetry.
const retries = 5

// editRetry is edit for operations that decide again on the keyset they
// edit (promote, demote, retire, prune, rewrap): when another writer got
// there first, doing the edit again on its keyset is what the operator
// asked for, so a lost compare-and-swap is retried. Rotate is not: a
// second rotation would add a second key.
func editRetry(ctx context.Context, location string, o *Options, fn func(ks *keyring.Keyset, kek backends.KEK) (Result, error)) (Result, error) {
	for i := 0; ; i++ {
		res, err := edit(ctx, location, o, fn)
		if !errors.Is(err, keyring.ErrConflict) || i == retries-1 {
			return res, err
		}
		o.logger().Info("stateseal keyset changed during an edit; editing again", "keyset", location)
	}
}

// openKEK opens the KEK at url for the keyset at location.
func openKEK(ctx context.Context, url, location string, o *Options) (backends.KEK, error) {
	k, err := keyring.OpenKEK(ctx, &keyring.Keyset{KEK: url}, location, &keyring.LoadOptions{Backends: o.backends()})
	if err != nil {
		return nil, fmt.Errorf("rotation: %w", err)
	}
	return k, nil
}

// editKey is edit for an operation on one key that is not retired.
func editKey(ctx context.Context, path string, id uint32, o *Options, fn func(ks *keyring.Keyset, k *keyring.StoredKey) (Result, error)) (Result, error) {
	return editRetry(ctx, path, o, func(ks *keyring.Keyset, _ backends.KEK) (Result, error) {
		k, err := find(ks, id)
		if err != nil {
			return Result{}, err
		}
		if k.State == keyring.Retired {
			return Result{}, fmt.Errorf("rotation: key %s is already retired; retired keys do not come back", keyring.FormatID(id))
		}
		res, err := fn(ks, k)
		res.Key = id
		return res, err
	})
}

// find returns the key with id, or an error naming the keyset.
func find(ks *keyring.Keyset, id uint32) (*keyring.StoredKey, error) {
	k, ok := ks.Key(id)
	if !ok {
		return nil, fmt.Errorf("rotation: keyset %s has no key %s", ks.ID, keyring.FormatID(id))
	}
	return k, nil
}
