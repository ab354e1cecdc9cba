package rotation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/stores"
)

// Options configure every operation. The zero value is usable for a
// keyset file under the local KEK beside it.
type Options struct {
	// KEK is the KEK the editor trusts, as keyset.LoadOptions.KEK: a
	// keyset naming another is not edited. Required for a keyset in a
	// store. Rewrap's target is its own argument.
	KEK string
	// PreviousKEK is trusted too, as keyset.LoadOptions.PreviousKEK.
	PreviousKEK string
	// KeysetID and MinVersion refuse, as a loader does, another keyset or
	// one rolled back below the minimum.
	KeysetID   string
	MinVersion uint64
	// Loader, if set, is the loader of the instance this editor runs in
	// (a Scheduler's): an edit refuses a keyset the loader would refuse, so
	// a store rolled back below what the instance loaded is never written
	// back at a new version.
	Loader *keyset.Loader
	// Check, if set, is called with the keyset an edit starts from once it
	// authenticated; an error stops the edit and nothing is written.
	// sealctl passes its record of the newest version it saw, so that a
	// store swapped between its own check and the edit is still refused.
	Check func(*keyset.Keyset) error
	// AllowStale lets an edit start from a keyset whose freshness window
	// has passed, or whose expiry its writer's clock put too far ahead.
	// Refresh uses it when an operator has checked that the expired keyset
	// is the latest (sealctl refresh --stale). It implies Current.
	AllowStale bool
	// Current says that the operator has checked that the keyset the edit
	// starts from is the newest (against a running instance's health, or
	// a backup): the edit then renews the keyset's expiry, as an edit by
	// an editor that knows the keyset does (below).
	Current bool
	// Vouch, if set, reports whether the editor knew, before this edit,
	// a version of the keyset that ks descends from (sealctl passes its
	// record). An edit renews the keyset's expiry (now plus the freshness
	// window) only when the editor vouches for the keyset it starts from:
	// with Loader set, Current or AllowStale, or Vouch true. Otherwise
	// the edit keeps the expiry it read: an editor with no memory of the
	// keyset (a CronJob, a new machine) cannot tell a copy rolled back
	// inside the window from the newest, and renewing it would keep the
	// copy loadable on fresh instances for good (docs/KEYSET.md, "Trust").
	Vouch func(*keyset.Keyset) bool
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

func (o *Options) loadOptions() *keyset.LoadOptions {
	if o == nil {
		return nil
	}
	return &keyset.LoadOptions{KEK: o.KEK, PreviousKEK: o.PreviousKEK, KeysetID: o.KeysetID, MinVersion: o.MinVersion,
		Backends: o.Backends, Stores: o.Stores, Now: o.Now}
}

// check refuses a keyset that a loader configured like o would refuse,
// before any KMS call.
func (o *Options) check(ks *keyset.Keyset, location string) error {
	var err error
	if o != nil && o.Loader != nil {
		err = o.Loader.Check(ks)
	} else {
		err = keyset.Check(ks, location, o.loadOptions())
	}
	if errors.Is(err, keyset.ErrStale) && o != nil && o.AllowStale {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rotation: not editing: %w", err)
	}
	return nil
}

// closeKEK closes k if it holds connections.
func closeKEK(k backends.KEK) {
	if c, ok := k.(io.Closer); ok {
		c.Close()
	}
}

func (o *Options) backends() *backends.Registry {
	if o == nil {
		return nil
	}
	return o.Backends
}

// A Result says what an edit did.
type Result struct {
	Keyset   *keyset.Keyset // as written
	Key      uint32         // the key the operation was about, if any
	Warnings []string       // things an operator should know; the edit was made
	// OldPolicy is, for SetPolicy, the policy the edit replaced.
	OldPolicy keyring.Policy
	// Replaced is, for Import, the version it wrote over; 0 for a
	// location that held no keyset.
	Replaced uint64

	signer backends.KEK // set by Rewrap: the KEK the edited keyset is under
}

// edit reads the keyset at location (a file path or a store URL), checks
// its authentication under its KEK, applies fn to a copy, authenticates
// the result and writes it with the next version, compare-and-swap on the
// store's revision. A keyset changed without the KEK is never edited: an
// edit would authenticate whatever was changed (a retired key revived,
// say). fn gets the opened KEK; a Rewrap that changes ks.KEK
// authenticates the result under the new one.
func edit(ctx context.Context, location string, o *Options, fn func(ks *keyset.Keyset, kek backends.KEK) (Result, error)) (Result, error) {
	lo := o.loadOptions()
	s, err := keyset.OpenStore(ctx, location, lo)
	if err != nil {
		return Result{}, err
	}
	defer stores.Close(s)
	cur, rev, err := keyset.Read(ctx, s)
	if err != nil {
		return Result{}, err
	}
	if err := o.check(cur, location); err != nil {
		return Result{}, err
	}
	kek, err := keyset.OpenKEK(ctx, location, cur.KEK, lo)
	if err != nil {
		return Result{}, fmt.Errorf("rotation: keyset %s: %w", cur.ID, err)
	}
	defer closeKEK(kek)
	if err := cur.Verify(ctx, kek); err != nil {
		return Result{}, fmt.Errorf("rotation: %w (in %s)", err, s)
	}
	if o != nil && o.Check != nil {
		if err := o.Check(cur); err != nil {
			return Result{}, fmt.Errorf("rotation: not editing: %w", err)
		}
	}
	vouched := o.vouches(cur)
	ks := cur.Clone()
	res, err := fn(ks, kek)
	if errors.Is(err, errNoChange) {
		res.Keyset = cur // authenticated and checked, and left as it is
		return res, nil
	}
	if err != nil {
		return Result{}, err
	}
	ks.Follow(cur)
	signer := kek
	if res.signer != nil {
		signer = res.signer
		defer closeKEK(signer)
	}
	if w := renew(ks, cur, vouched, o.now()); w != "" {
		res.Warnings = append(res.Warnings, w)
	}
	if err := ks.Authenticate(ctx, signer); err != nil {
		return Result{}, err
	}
	if _, err := keyset.Write(ctx, s, ks, rev); err != nil {
		return Result{}, err
	}
	res.Keyset, res.signer = ks, nil
	return res, nil
}

// vouches reports whether the editor o configures knows that cur is the
// newest keyset it can be: see Options.Vouch.
func (o *Options) vouches(cur *keyset.Keyset) bool {
	return o != nil && (o.Loader != nil || o.Current || o.AllowStale || o.Vouch != nil && o.Vouch(cur))
}

// renew sets the expiry of ks, an edit of cur: now plus the window if the
// editor vouched for cur; otherwise cur's expiry, never later than now
// plus the window, and a warning saying so. A window turned on by this
// edit starts now: the keyset had no bound to keep.
func renew(ks, cur *keyset.Keyset, vouched bool, now time.Time) string {
	ks.Refresh(now)
	if vouched || ks.Policy.Freshness == 0 || cur.Expires.IsZero() || !cur.Expires.Before(ks.Expires) {
		return ""
	}
	ks.Expires = cur.Expires
	return fmt.Sprintf("keyset %s still expires at %s: this editor has no record of the keyset (no Loader, no sealctl record), "+
		"so it cannot tell a copy rolled back inside the freshness window from the newest, and does not renew it; "+
		"a scheduler given its instance's Loader, or sealctl with its record, renews it (sealctl refresh; docs/KEYSET.md, \"Trust\")",
		ks.ID, ks.Expires.Format(time.RFC3339))
}

// errNoChange, from an edit's function, ends the edit without a write
// and without an error: there was nothing to do.
var errNoChange = errors.New("rotation: nothing to change")

// retries bounds editRetry.
const retries = 5

// editRetry is edit for operations that decide again on the keyset they
// edit (promote, demote, retire, prune, rewrap): when another writer got
// there first, doing the edit again on its keyset is what the operator
// asked for, so a lost compare-and-swap is retried. Rotate is not: a
// second rotation would add a second key.
func editRetry(ctx context.Context, location string, o *Options, fn func(ks *keyset.Keyset, kek backends.KEK) (Result, error)) (Result, error) {
	for i := 0; ; i++ {
		res, err := edit(ctx, location, o, fn)
		if !errors.Is(err, keyset.ErrConflict) || i == retries-1 {
			return res, err
		}
		o.logger().Info("stateseal keyset changed during an edit; editing again", "store", stores.Redact(location))
	}
}

// openKEK opens the KEK at url, which comes from the operator or the
// configuration, for the keyset at location.
func openKEK(ctx context.Context, url, location string, o *Options) (backends.KEK, error) {
	name, err := backends.Identity(url)
	if err != nil {
		return nil, fmt.Errorf("rotation: %w", err)
	}
	k, err := keyset.OpenKEK(ctx, location, name, &keyset.LoadOptions{KEK: url, Backends: o.backends()})
	if err != nil {
		return nil, fmt.Errorf("rotation: %w", err)
	}
	return k, nil
}

// editKey is edit for an operation on one key that is not retired.
func editKey(ctx context.Context, location string, id uint32, o *Options, fn func(ks *keyset.Keyset, k *keyset.StoredKey) (Result, error)) (Result, error) {
	return editRetry(ctx, location, o, func(ks *keyset.Keyset, _ backends.KEK) (Result, error) {
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
func find(ks *keyset.Keyset, id uint32) (*keyset.StoredKey, error) {
	k, ok := ks.Key(id)
	if !ok {
		return nil, fmt.Errorf("rotation: keyset %s has no key %s", ks.ID, keyring.FormatID(id))
	}
	return k, nil
}
