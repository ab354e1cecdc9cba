package rotation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/keysetjson"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/stores"
)

// Init creates a keyset at location (a file path or a store URL) with one
// key of alg, active at once (no instance can hold an older keyset, so
// there is nothing to wait for), wrapped by the KEK at kekURL. It fails if
// a keyset is there already.
func Init(ctx context.Context, location, kekURL string, alg keyring.Algorithm, p keyring.Policy, o *Options) (Result, error) {
	if err := p.Validate(); err != nil {
		return Result{}, err
	}
	if o != nil && o.KEK != "" && o.KEK != kekURL {
		return Result{}, errors.New("rotation: Init takes the KEK URL as its argument; Options.KEK names another")
	}
	id, err := backends.Identity(kekURL)
	if err != nil {
		return Result{}, fmt.Errorf("rotation: %w", err)
	}
	ks := &keyset.Keyset{ID: keyset.NewID(), Version: 1, KEK: id, Policy: p}
	kek, err := openKEK(ctx, kekURL, location, o)
	if err != nil {
		return Result{}, err
	}
	defer closeKEK(kek)
	now := o.now()
	sk, err := ks.NewStoredKey(ctx, kek, alg, now, now)
	if err != nil {
		return Result{}, err
	}
	ks.Keys = []keyset.StoredKey{sk}
	ks.Refresh(now)
	if err := ks.Authenticate(ctx, kek); err != nil {
		return Result{}, err
	}
	s, err := keyset.OpenStore(ctx, location, o.loadOptions())
	if err != nil {
		return Result{}, err
	}
	defer stores.Close(s)
	if _, err := keyset.Write(ctx, s, ks, ""); err != nil {
		return Result{}, err
	}
	o.logger().Info("stateseal keyset created", "store", stores.Redact(location), "keyset", ks.ID, "key", keyring.FormatID(sk.ID), "algorithm", alg)
	return Result{Keyset: ks, Key: sk.ID}, nil
}

// RotateOptions shape a rotation. A nil *RotateOptions means the zero
// value: a key of the primary's algorithm, after the propagation delay.
type RotateOptions struct {
	// Algorithm of the new key; 0 means the current primary's.
	Algorithm keyring.Algorithm
	// Immediate activates the new key now instead of after the propagation
	// delay. Instances that have not reloaded cannot open its tokens until
	// they do: for emergencies only.
	Immediate bool
}

// Rotate adds a new active key whose activation is now plus the keyset's
// propagation delay. Older keys stay as they are and keep opening tokens.
// Rotating again while a rotation is still propagating works, and warns.
func Rotate(ctx context.Context, location string, ro *RotateOptions, o *Options) (Result, error) {
	return rotate(ctx, location, ro, o, nil)
}

// errNotDue stops a scheduled rotation that another instance made first.
var errNotDue = errors.New("rotation: not due")

// rotate is Rotate; when, if set, is checked on the keyset the edit
// starts from, so the decision and the write are one compare-and-swap.
func rotate(ctx context.Context, location string, ro *RotateOptions, o *Options, when func(*keyset.Keyset, time.Time) bool) (Result, error) {
	if ro == nil {
		ro = &RotateOptions{}
	}
	now := o.now()
	res, err := edit(ctx, location, o, func(ks *keyset.Keyset, kek backends.KEK) (Result, error) {
		var res Result
		if when != nil && !when(ks, now) {
			return res, errNotDue
		}
		alg := ro.Algorithm
		if alg == 0 {
			p, ok := ks.Primary(now)
			if !ok {
				return res, fmt.Errorf("rotation: keyset %s has no primary key to take the algorithm from; name one", ks.ID)
			}
			alg = p.Algorithm
		}
		for _, k := range ks.Keys {
			if k.State == keyring.Active && k.Activation.After(now) {
				res.Warnings = append(res.Warnings, fmt.Sprintf(
					"key %s, from an earlier rotation, is not active until %s: rotating again inside the propagation delay",
					keyring.FormatID(k.ID), k.Activation.Format(time.RFC3339)))
			}
		}
		activation := now.Add(ks.Policy.PropagationDelay)
		if ro.Immediate {
			activation = now
			res.Warnings = append(res.Warnings, "the new key seals at once: instances that have not reloaded the keyset reject its tokens until they do")
		}
		sk, err := ks.NewStoredKey(ctx, kek, alg, now, activation)
		if err != nil {
			return res, err
		}
		ks.Keys = append(ks.Keys, sk)
		res.Key = sk.ID
		return res, nil
	})
	if err == nil {
		o.logger().Info("stateseal key rotated", "store", stores.Redact(location), "key", keyring.FormatID(res.Key),
			"activation", res.Keyset.Keys[len(res.Keyset.Keys)-1].Activation, "version", res.Keyset.Version)
	}
	return res, err
}

// Promote makes key id active from now: the primary at once, for an
// emergency in which waiting out the propagation delay is worse than
// instances that have not reloaded rejecting its tokens for a while. The
// key moves to the end of the keyset, so it wins over a key that activated
// in the same second. A pending key that activates later still takes over
// when it does: Promote warns of it. Promoting the key that is the primary
// already writes nothing, and says so in a warning.
func Promote(ctx context.Context, location string, id uint32, o *Options) (Result, error) {
	now := o.now()
	return editKey(ctx, location, id, o, func(ks *keyset.Keyset, k *keyset.StoredKey) (Result, error) {
		res := Result{Warnings: []string{"instances that have not reloaded the keyset reject this key's tokens until they do"}}
		if p, ok := ks.Primary(now); ok && p.ID == id {
			// Every instance that loaded this version seals with it already:
			// a new version would change nothing but the version, and
			// the warning above would be false.
			res.Warnings = []string{fmt.Sprintf("key %s is already the primary; nothing written", keyring.FormatID(id))}
			pendingWarnings(ks, id, now, &res)
			return res, errNoChange
		}
		k.State = keyring.Active
		k.Activation = now
		moved := *k
		ks.Keys = slices.DeleteFunc(ks.Keys, func(sk keyset.StoredKey) bool { return sk.ID == id })
		ks.Keys = append(ks.Keys, moved)
		pendingWarnings(ks, id, now, &res)
		return res, nil
	})
}

// pendingWarnings warns of each key pending after now, which will take
// over from key id when it activates.
func pendingWarnings(ks *keyset.Keyset, id uint32, now time.Time, res *Result) {
	for _, p := range ks.Keys {
		if p.State == keyring.Active && p.Activation.After(now) {
			res.Warnings = append(res.Warnings, fmt.Sprintf("key %s becomes the primary at %s, superseding key %s; demote it to keep key %s",
				keyring.FormatID(p.ID), p.Activation.Format(time.RFC3339), keyring.FormatID(id), keyring.FormatID(id)))
		}
	}
}

// Demote makes key id decrypt-only: it keeps opening tokens but never
// seals again. The current primary cannot be demoted (rotate first), nor
// the last key able to seal.
func Demote(ctx context.Context, location string, id uint32, o *Options) (Result, error) {
	now := o.now()
	return editKey(ctx, location, id, o, func(ks *keyset.Keyset, k *keyset.StoredKey) (Result, error) {
		if k.State != keyring.Active {
			return Result{}, fmt.Errorf("rotation: key %s is %s, not active", keyring.FormatID(id), k.State)
		}
		if p, ok := ks.Primary(now); ok && p.ID == id {
			return Result{}, fmt.Errorf("rotation: key %s is the primary; rotate (or promote another key) before demoting it", keyring.FormatID(id))
		}
		k.State = keyring.DecryptOnly
		return Result{}, usable(ks, now)
	})
}

// Prune removes retired keys from the keyset. Their tokens were already
// rejected; pruning only shortens the keyset. With no retired key it
// writes nothing and says so in a warning.
func Prune(ctx context.Context, location string, o *Options) (Result, error) {
	return editRetry(ctx, location, o, func(ks *keyset.Keyset, _ backends.KEK) (Result, error) {
		if !slices.ContainsFunc(ks.Keys, func(k keyset.StoredKey) bool { return k.State == keyring.Retired }) {
			// Still authenticated and checked: the keyset returned is one
			// the caller may trust, and record.
			return Result{Warnings: []string{"no retired key to prune; nothing written"}}, errNoChange
		}
		ks.Keys = slices.DeleteFunc(ks.Keys, func(k keyset.StoredKey) bool { return k.State == keyring.Retired })
		return Result{}, nil
	})
}

// Rewrap re-encrypts every data key under the KEK at newKEK and makes it the
// keyset's KEK. The data keys do not change, so no token breaks. Every key
// is unwrapped with the old KEK first: a key that does not unwrap stops the
// rewrap and nothing is written.
func Rewrap(ctx context.Context, location, newKEK string, o *Options) (Result, error) {
	id, err := backends.Identity(newKEK)
	if err != nil {
		return Result{}, fmt.Errorf("rotation: new KEK: %w", err)
	}
	return editRetry(ctx, location, o, func(ks *keyset.Keyset, old backends.KEK) (Result, error) {
		next, err := openKEK(ctx, newKEK, location, o)
		if err != nil {
			return Result{}, fmt.Errorf("new KEK: %w", err)
		}
		for i, sk := range ks.Keys {
			k, err := ks.UnwrapKey(ctx, old, sk)
			if err != nil {
				closeKEK(next)
				return Result{}, err
			}
			w, err := ks.Wrap(ctx, next, k)
			k.Zero()
			if err != nil {
				closeKEK(next)
				return Result{}, err
			}
			ks.Keys[i].Wrapped = w.Wrapped
		}
		ks.KEK = id
		return Result{signer: next}, nil
	})
}

// ErrUnvouched reports a refresh by an editor that cannot tell the keyset
// it read from a copy rolled back inside the freshness window: no Loader,
// no record of the keyset (Options.Vouch), no Options.Current. Renewing
// such a copy would keep it loadable on fresh instances for good.
var ErrUnvouched = errors.New("rotation: this editor cannot tell whether the keyset is the newest")

// Refresh rewrites the keyset unchanged but for its version and a new
// expiry (now plus the policy's freshness window), so that it keeps
// loading; the Scheduler does it on its own. Edits by an editor that
// vouches for the keyset refresh too. Refresh by an editor that does not
// (Options.Vouch) fails with ErrUnvouched and writes nothing.
func Refresh(ctx context.Context, location string, o *Options) (Result, error) {
	return editRetry(ctx, location, o, func(ks *keyset.Keyset, _ backends.KEK) (Result, error) {
		if ks.Policy.Freshness == 0 {
			return Result{}, fmt.Errorf("rotation: keyset %s has no freshness window; there is nothing to refresh", ks.ID)
		}
		if !o.vouches(ks) {
			return Result{}, fmt.Errorf("%w: not refreshing keyset %s version %d: it has no Loader, no record of the keyset and no operator's word "+
				"(Options.Current, sealctl refresh --current) that this is the newest copy, and renewing a copy rolled back inside the window "+
				"would keep it loadable; check the version against a running instance (its /healthz) first", ErrUnvouched, ks.ID, ks.Version)
		}
		return Result{}, nil
	})
}

// usable fails if ks has no key that seals at now.
func usable(ks *keyset.Keyset, now time.Time) error {
	if _, ok := ks.Primary(now); !ok {
		return fmt.Errorf("rotation: keyset %s would have no key able to seal", ks.ID)
	}
	return nil
}

// Upgrade rewrites a keyset in format version 2 or 3 as format version 4,
// at the next version, after checking its authentication under
// Options.KEK (which must be the KEK the keyset names). The data keys and
// their wrapping do not change, so no token breaks; the keyset gains a
// history and the record of its retired keys, and a version-2 keyset the
// default freshness window (docs/KEYSET.md). The expiry is renewed only
// by an editor that vouches for the keyset (Options.Vouch, Current, a
// Loader); a version-2 keyset, which has no expiry to keep, is upgraded
// only by one (ErrUnvouched otherwise).
func Upgrade(ctx context.Context, location string, o *Options) (Result, error) {
	lo := o.loadOptions()
	s, err := keyset.OpenStore(ctx, location, lo)
	if err != nil {
		return Result{}, err
	}
	defer stores.Close(s)
	data, rev, err := s.Read(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("rotation: %s: %w", s, err)
	}
	url := DefaultKEK(location, o)
	if url == "" {
		return Result{}, errors.New("rotation: upgrading a keyset in a store needs Options.KEK")
	}
	kek, err := openKEK(ctx, url, location, o)
	if err != nil {
		return Result{}, err
	}
	defer closeKEK(kek)
	ks, err := keyset.Upgrade(ctx, data, kek, url, o.now())
	if err != nil {
		return Result{}, fmt.Errorf("%w (in %s)", err, s)
	}
	// A version-2 document carries no expiry: nothing in it tells the
	// newest copy from one superseded a year ago, and its upgrade starts a
	// whole window. Only an editor that vouches for it may start one.
	if d, err := keysetjson.ParseOld(data); err == nil && d.Format == keysetjson.FormatV2 && !o.vouches(ks) {
		return Result{}, fmt.Errorf("%w: not upgrading keyset %s version %d: a format-2 keyset has no expiry, so a copy of any age looks the same, "+
			"and its upgrade would make it load for a whole freshness window; check its version against a running instance (its /healthz) "+
			"or the store's history, then upgrade with sealctl upgrade --current (Options.Current)", ErrUnvouched, ks.ID, ks.Version-1)
	}
	// The upgraded keyset meets every check an edit makes, the old
	// document's expiry included (the upgrade keeps it): an old copy put
	// back in the store after the fleet moved on is a rollback, and
	// upgrading it would launder it.
	if err := o.check(ks, location); err != nil {
		return Result{}, err
	}
	if o != nil && o.Check != nil {
		if err := o.Check(ks); err != nil {
			return Result{}, fmt.Errorf("rotation: not upgrading: %w", err)
		}
	}
	if o.vouches(ks) && ks.Policy.Freshness != 0 {
		ks.Refresh(o.now())
		if err := ks.Authenticate(ctx, kek); err != nil {
			return Result{}, err
		}
	}
	if _, err := keyset.Write(ctx, s, ks, rev); err != nil {
		return Result{}, err
	}
	o.logger().Info("stateseal keyset upgraded", "store", stores.Redact(location), "keyset", ks.ID, "version", ks.Version)
	return Result{Keyset: ks}, nil
}

// DefaultKEK is the KEK an editor of the keyset at location trusts: o.KEK,
// or for a keyset file keyset.DefaultFileKEK; "" for a store without one.
func DefaultKEK(location string, o *Options) string {
	if o != nil && o.KEK != "" {
		return o.KEK
	}
	if stores.IsURL(location) && !strings.HasPrefix(location, "file://") {
		return ""
	}
	return keyset.DefaultFileKEK
}

// PolicyChange names the policy values SetPolicy changes; a nil field
// keeps its value. A nil *PolicyChange changes nothing.
type PolicyChange struct {
	PropagationDelay, MaxTTL, Skew, RotationInterval, Freshness *time.Duration
	// Force lowers the maximum TTL or the skew even though instances then
	// refuse tokens already sealed under the old values (SetPolicy says
	// which, and until when).
	Force bool
}

// errUnchanged stops an edit that would change nothing.
var errUnchanged = errors.New("rotation: policy unchanged")

// SetPolicy changes the keyset's policy, compare-and-swap and
// authenticated like every edit. The new policy must be valid
// (keyring.Policy.Validate). Lowering the maximum TTL or the skew is
// refused without pc.Force: tokens sealed before every instance loads the
// new version may carry a longer lifetime, or rely on the wider skew, and
// instances that have loaded it refuse them until they would have
// expired (the error names that moment). Raising the maximum TTL, or
// lowering the propagation delay, goes through with a warning. A change
// to the values the keyset already has writes nothing, and says so in a
// warning. Result.OldPolicy is the policy replaced.
func SetPolicy(ctx context.Context, location string, pc *PolicyChange, o *Options) (Result, error) {
	if pc == nil {
		pc = &PolicyChange{}
	}
	now := o.now()
	var same *keyset.Keyset
	res, err := editRetry(ctx, location, o, func(ks *keyset.Keyset, _ backends.KEK) (Result, error) {
		old := ks.Policy
		p := old
		for _, c := range []struct {
			v   *time.Duration
			dst *time.Duration
		}{{pc.PropagationDelay, &p.PropagationDelay}, {pc.MaxTTL, &p.MaxTTL}, {pc.Skew, &p.Skew},
			{pc.RotationInterval, &p.RotationInterval}, {pc.Freshness, &p.Freshness}} {
			if c.v != nil {
				*c.dst = *c.v
			}
		}
		if err := p.Validate(); err != nil {
			return Result{}, fmt.Errorf("rotation: keyset %s: %w", ks.ID, err)
		}
		if p == old {
			same = ks.Clone()
			return Result{}, errUnchanged
		}
		res := Result{OldPolicy: old}
		w, err := policyRisks(old, p, now, pc.Force)
		if err != nil {
			return Result{}, fmt.Errorf("rotation: keyset %s: %w", ks.ID, err)
		}
		res.Warnings = w
		ks.Policy = p
		return res, nil
	})
	if errors.Is(err, errUnchanged) {
		return Result{Keyset: same, OldPolicy: same.Policy, Warnings: []string{"the policy already has these values; nothing written"}}, nil
	}
	if err == nil {
		o.logger().Info("stateseal keyset policy changed", "store", stores.Redact(location), "keyset", res.Keyset.ID,
			"version", res.Keyset.Version, "old", fmt.Sprintf("%+v", res.OldPolicy), "new", fmt.Sprintf("%+v", res.Keyset.Policy))
	}
	return res, err
}

// policyRisks returns what a change from old to p costs tokens in flight:
// an error for what force must confirm, warnings for the rest.
func policyRisks(old, p keyring.Policy, now time.Time, force bool) ([]string, error) {
	// Until every instance has loaded the new version (within the larger
	// propagation delay), some still seal under the old values; their
	// tokens are accepted by the old rules until they expire.
	until := now.Add(max(old.PropagationDelay, p.PropagationDelay) + old.MaxTTL + old.Skew).Format(time.RFC3339)
	var lowered, warnings []string
	if p.MaxTTL < old.MaxTTL {
		lowered = append(lowered, fmt.Sprintf(
			"lowering the maximum TTL from %s to %s makes every instance that loads this version refuse, as invalid, tokens already sealed "+
				"with a lifetime over %s (Open refuses a longer claim), until %s (every instance reloaded within the propagation delay, "+
				"plus the old maximum TTL and skew); their clients start the request again. To break nothing, first make every server "+
				"seal shorter tokens (seal.Options.MaxTTL %s), wait out the old maximum TTL, then lower it",
			old.MaxTTL, p.MaxTTL, p.MaxTTL, until, p.MaxTTL))
	}
	if p.Skew < old.Skew {
		lowered = append(lowered, fmt.Sprintf(
			"lowering the skew from %s to %s makes every instance that loads this version refuse tokens issued more than %s ahead of its clock, "+
				"or more than %s past their expiry, which %s allowed: tokens in flight lose up to %s of grace until %s, and tokens from an "+
				"instance whose clock runs more than %s ahead are refused for as long as it does",
			old.Skew, p.Skew, p.Skew, p.Skew, old.Skew, old.Skew-p.Skew, until, p.Skew))
	}
	if len(lowered) > 0 {
		if !force {
			return nil, fmt.Errorf("not changing the policy: %s (force to do it anyway)", strings.Join(lowered, "; "))
		}
		for _, l := range lowered {
			warnings = append(warnings, "forced: "+l)
		}
	}
	if p.MaxTTL > old.MaxTTL {
		warnings = append(warnings, fmt.Sprintf(
			"instances that have not loaded this version yet refuse tokens with a lifetime over %s, which those that have may seal: "+
				"for up to the propagation delay (%s)", old.MaxTTL, old.PropagationDelay))
	}
	if p.PropagationDelay < old.PropagationDelay {
		warnings = append(warnings, fmt.Sprintf(
			"rotations from now on activate %s after they are made: every instance must reload the keyset within that, poll interval included",
			p.PropagationDelay))
	}
	if p.Freshness == 0 && old.Freshness != 0 {
		warnings = append(warnings, "freshness 0 turns the rollback bound off: a fresh instance then loads any older authentic copy of the keyset "+
			"unless its configuration sets a minimum version (docs/KEYSET.md, \"Trust\")")
	}
	return warnings, nil
}
