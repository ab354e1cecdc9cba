package rotation

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
)

// SafeToRetire returns the moment from which key id can be retired
// without rejecting a token that is still valid: its successor's
// activation plus the maximum TTL plus the skew. Up to the successor's
// activation the key may still seal; a token sealed then lives for at most
// the maximum TTL, and openers accept it for the skew beyond. The
// successor is the first active key to win the choice of primary over this
// one: a later activation, or the same one and listed later. A key with
// no successor yet cannot be retired safely at any known time, and ok is
// false.
func SafeToRetire(ks *keyset.Keyset, id uint32) (at time.Time, ok bool) {
	pos := slices.IndexFunc(ks.Keys, func(k keyset.StoredKey) bool { return k.ID == id })
	if pos < 0 {
		return time.Time{}, false
	}
	k := &ks.Keys[pos]
	var succ *keyset.StoredKey
	for i := range ks.Keys {
		s := &ks.Keys[i]
		wins := s.Activation.After(k.Activation) || s.Activation.Equal(k.Activation) && i > pos
		if i == pos || s.State != keyring.Active || !wins {
			continue
		}
		if succ == nil || s.Activation.Before(succ.Activation) {
			succ = s
		}
	}
	if succ == nil {
		return time.Time{}, false
	}
	return succ.Activation.Add(ks.Policy.MaxTTL + ks.Policy.Skew), true
}

// RetireOptions shape a retirement. A nil *RetireOptions means the zero
// value: retire only once it is safe.
type RetireOptions struct {
	// Force retires the key even while tokens it may have sealed can still
	// be valid, rejecting them from the next reload on: after a key leak.
	Force bool
}

// Retire retires key id: from the next reload on, its tokens are rejected.
// It refuses while tokens the key may have sealed can still be valid (see
// SafeToRetire) unless ro.Force is set, as after a key leak. It never
// retires the last key able to seal, forced or not.
func Retire(ctx context.Context, location string, id uint32, ro *RetireOptions, o *Options) (Result, error) {
	force := ro != nil && ro.Force
	now := o.now()
	return editKey(ctx, location, id, o, func(ks *keyset.Keyset, k *keyset.StoredKey) (Result, error) {
		var res Result
		at, ok := SafeToRetire(ks, id)
		switch {
		case ok && !now.Before(at):
		case !force && !ok && k.State == keyring.DecryptOnly:
			return Result{}, fmt.Errorf("rotation: key %s is decrypt-only and no key activated after it, so when it last sealed is not recorded; "+
				"retire it with --force once the maximum TTL (%s) plus skew (%s) have passed since it was demoted",
				keyring.FormatID(id), ks.Policy.MaxTTL, ks.Policy.Skew)
		case !force && !ok:
			return Result{}, fmt.Errorf("rotation: key %s has no successor yet: tokens it seals now would be rejected; rotate first (or --force)", keyring.FormatID(id))
		case !force:
			return Result{}, fmt.Errorf("rotation: key %s may have sealed tokens valid until %s (successor's activation + max TTL + skew); retire after that, or --force",
				keyring.FormatID(id), at.Format(time.RFC3339))
		default:
			res.Warnings = append(res.Warnings,
				fmt.Sprintf("forced: tokens sealed by key %s that were still valid are rejected from now on", keyring.FormatID(id)),
				"if the key leaked, this is not enough: a copy of the keyset from before this version still opens its tokens wherever it loads; "+
					"next: prune, rewrap to a new KEK version, and disable the old KEK version in the KMS (docs/ROTATION.md, \"A leaked key\")")
		}
		k.State = keyring.Retired
		if err := usable(ks, now); err != nil {
			return Result{}, fmt.Errorf("%w; retiring key %s would leave it so", err, keyring.FormatID(id))
		}
		return res, nil
	})
}
