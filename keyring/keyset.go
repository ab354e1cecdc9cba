package keyring

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/keysetjson"
)

// A Keyset is the stored form of a keyring: a versioned document of keys
// whose data keys are wrapped by a key-encryption key (KEK). Every edit
// increments Version; writes are compare-and-swap on it. docs/KEYSET.md
// specifies the file.
type Keyset struct {
	ID      string // random; binds the wrapped keys to this keyset
	Version uint64
	// KEK names the KEK that wraps the data keys, as an identity without
	// transport settings (backends.Identity), such as local:stateseal.kek.
	// A loader opens the KEK its own configuration names and refuses a
	// keyset naming another: this field is checked, never trusted.
	KEK string
	// Expires, when Policy.Freshness is set, is when this version stops
	// loading: every write sets it to the write's time plus the freshness
	// window, and the scheduler rewrites the keyset before it passes, so
	// a copy rolled back further than the window does not load.
	Expires time.Time
	Policy  Policy
	Keys    []StoredKey
	// Auth authenticates everything above under the KEK; see Authenticate.
	Auth Auth
}

// A StoredKey is a key as a keyset holds it: its data key wrapped.
type StoredKey struct {
	ID         uint32
	Algorithm  Algorithm
	State      State
	Created    time.Time
	Activation time.Time
	Wrapped    []byte
}

// Policy holds the timing every instance and the CLI must agree on, so it
// lives in the keyset.
type Policy struct {
	// PropagationDelay is how long a new key waits before it seals: longer
	// than any instance takes to reload the keyset.
	PropagationDelay time.Duration
	// MaxTTL is the longest token lifetime; seal caps TTLs at it.
	MaxTTL time.Duration
	// Skew is the clock disagreement tolerated between instances.
	Skew time.Duration
	// RotationInterval is how often the scheduler rotates.
	RotationInterval time.Duration
	// Freshness bounds how old a keyset may be and still load: every write
	// sets Keyset.Expires to its time plus Freshness, and the scheduler
	// refreshes the keyset when less than half of it is left. It is the
	// bound on a rollback of the store that a fresh instance accepts.
	// Zero turns it off (docs/KEYSET.md says what that costs).
	Freshness time.Duration
}

// DefaultPolicy returns the policy of a new keyset.
func DefaultPolicy() Policy {
	return Policy{
		PropagationDelay: 10 * time.Minute,
		MaxTTL:           time.Hour,
		Skew:             30 * time.Second,
		RotationInterval: 30 * 24 * time.Hour,
		Freshness:        7 * 24 * time.Hour,
	}
}

// Freshness bounds: shorter windows make every missed refresh an outage,
// and longer ones a weaker rollback bound than the rotation interval.
const (
	MinFreshness = time.Hour
	MaxFreshness = 366 * 24 * time.Hour
)

// Validate checks the policy's values.
func (p Policy) Validate() error {
	switch {
	case p.PropagationDelay < 0:
		return errors.New("keyring: negative propagation delay")
	case p.MaxTTL < time.Second || p.MaxTTL > (1<<24-1)*time.Second:
		return fmt.Errorf("keyring: maximum TTL %v is outside [1s, 194 days]", p.MaxTTL)
	case p.Skew < 0 || p.Skew > 10*time.Minute:
		return fmt.Errorf("keyring: clock skew %v is outside [0, 10m]", p.Skew)
	case p.RotationInterval < 0:
		return errors.New("keyring: negative rotation interval")
	case p.RotationInterval > 0 && p.RotationInterval <= p.PropagationDelay:
		return fmt.Errorf("keyring: rotation interval %v must exceed the propagation delay %v", p.RotationInterval, p.PropagationDelay)
	case p.Freshness != 0 && (p.Freshness < MinFreshness || p.Freshness > MaxFreshness):
		return fmt.Errorf("keyring: freshness %v is outside [%v, %v] (or 0: off)", p.Freshness, MinFreshness, MaxFreshness)
	}
	for _, d := range []time.Duration{p.PropagationDelay, p.MaxTTL, p.Skew, p.RotationInterval, p.Freshness} {
		if d%time.Second != 0 {
			return fmt.Errorf("keyring: policy duration %v is not whole seconds", d)
		}
	}
	return nil
}

// NewKeysetID returns a random keyset id.
func NewKeysetID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "ks-" + hex.EncodeToString(b)
}

// WrapAD is the associated data a data key is wrapped with: the keyset id
// and the key id. A wrapped key copied into another slot or another keyset
// does not unwrap there.
func WrapAD(keysetID string, keyID uint32) []byte {
	return fmt.Appendf(nil, "%s\x00%s\x00%s", keysetjson.WrapDomain, keysetID, FormatID(keyID))
}

// ParseKeyset reads a keyset document strictly and validates it. Unknown
// fields, unknown formats and invalid values are errors. It does not check
// the keyset's authentication, which needs the KEK: see Verify.
func ParseKeyset(data []byte) (*Keyset, error) {
	d, err := keysetjson.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	return fromDoc(d)
}

func fromDoc(d *keysetjson.Doc) (*Keyset, error) {
	ks := &Keyset{
		ID: d.ID, Version: d.Version, KEK: d.KEK,
		Policy: Policy{
			PropagationDelay: seconds(d.Policy.PropagationDelay),
			MaxTTL:           seconds(d.Policy.MaxTTL),
			Skew:             seconds(d.Policy.Skew),
			RotationInterval: seconds(d.Policy.RotationInterval),
			Freshness:        seconds(d.Policy.Freshness),
		},
	}
	var err error
	if d.Expires != "" {
		if ks.Expires, err = keysetjson.ParseTime(d.Expires); err != nil {
			return nil, fmt.Errorf("keyring: keyset %s: expires: %w", d.ID, err)
		}
	}
	if ks.Auth.Wrapped, err = keysetjson.ParseWrapped(d.Auth.Wrapped); err != nil {
		return nil, fmt.Errorf("keyring: keyset %s: auth: %w", d.ID, err)
	}
	if ks.Auth.Tag, err = keysetjson.ParseWrapped(d.Auth.Tag); err != nil || len(ks.Auth.Tag) != 32 {
		return nil, fmt.Errorf("keyring: keyset %s: auth: the tag is not 32 bytes of unpadded base64url", d.ID)
	}
	for _, k := range d.Keys {
		sk, err := parseStoredKey(k)
		if err != nil {
			return nil, fmt.Errorf("keyring: keyset %s: %w", d.ID, err)
		}
		ks.Keys = append(ks.Keys, sk)
	}
	if err := ks.Validate(); err != nil {
		return nil, err
	}
	return ks, nil
}

// seconds converts a policy value, refusing none: Validate bounds them, and
// a value so large it overflows becomes negative, which Validate refuses.
func seconds(n int64) time.Duration {
	if n > int64(1<<63-1)/int64(time.Second) || n < 0 {
		return -1
	}
	return time.Duration(n) * time.Second
}

func parseStoredKey(k keysetjson.Key) (StoredKey, error) {
	id, err := keysetjson.ParseKeyID(k.ID)
	if err != nil {
		return StoredKey{}, err
	}
	alg, err := ParseAlgorithm(k.Algorithm)
	if err != nil {
		return StoredKey{}, fmt.Errorf("key %s: %w", k.ID, err)
	}
	st, err := ParseState(k.State)
	if err != nil {
		return StoredKey{}, fmt.Errorf("key %s: %w", k.ID, err)
	}
	created, err := keysetjson.ParseTime(k.Created)
	if err != nil {
		return StoredKey{}, fmt.Errorf("key %s: created: %w", k.ID, err)
	}
	activation, err := keysetjson.ParseTime(k.Activation)
	if err != nil {
		return StoredKey{}, fmt.Errorf("key %s: activation: %w", k.ID, err)
	}
	w, err := keysetjson.ParseWrapped(k.Wrapped)
	if err != nil {
		return StoredKey{}, fmt.Errorf("key %s: %w", k.ID, err)
	}
	return StoredKey{ID: id, Algorithm: alg, State: st, Created: created, Activation: activation, Wrapped: w}, nil
}

// Validate checks the keyset: an id and a KEK URL, a valid policy, unique
// non-zero key ids, known algorithms and states, sane times, and at least
// one active key.
func (ks *Keyset) Validate() error {
	if ks.ID == "" {
		return errors.New("keyring: keyset has no id")
	}
	if ks.KEK == "" {
		return fmt.Errorf("keyring: keyset %s names no KEK", ks.ID)
	}
	if ks.Version == 0 {
		return fmt.Errorf("keyring: keyset %s has version 0; versions start at 1", ks.ID)
	}
	if err := ks.Policy.Validate(); err != nil {
		return fmt.Errorf("keyring: keyset %s: %w", ks.ID, err)
	}
	if (ks.Policy.Freshness != 0) != !ks.Expires.IsZero() {
		return fmt.Errorf("keyring: keyset %s: an expiry goes with a freshness window, and only with one", ks.ID)
	}
	if !wholeUTC(ks.Expires) {
		return fmt.Errorf("keyring: keyset %s: expiry is not UTC whole seconds", ks.ID)
	}
	seen := map[uint32]bool{}
	active := 0
	for _, k := range ks.Keys {
		switch {
		case k.ID == 0:
			return fmt.Errorf("keyring: keyset %s: key id 00000000 is reserved", ks.ID)
		case seen[k.ID]:
			return fmt.Errorf("keyring: keyset %s: key %s appears twice", ks.ID, FormatID(k.ID))
		case k.Algorithm != MAC && k.Algorithm != AEAD:
			return fmt.Errorf("keyring: keyset %s: key %s: unknown algorithm", ks.ID, FormatID(k.ID))
		case k.State != Active && k.State != DecryptOnly && k.State != Retired:
			return fmt.Errorf("keyring: keyset %s: key %s: unknown state", ks.ID, FormatID(k.ID))
		case k.Created.IsZero() || k.Activation.IsZero():
			return fmt.Errorf("keyring: keyset %s: key %s: missing created or activation time", ks.ID, FormatID(k.ID))
		case !wholeUTC(k.Created) || !wholeUTC(k.Activation):
			return fmt.Errorf("keyring: keyset %s: key %s: times are not UTC whole seconds", ks.ID, FormatID(k.ID))
		case k.Activation.Before(k.Created):
			return fmt.Errorf("keyring: keyset %s: key %s: activation %s is before creation %s", ks.ID, FormatID(k.ID),
				k.Activation.Format(time.RFC3339), k.Created.Format(time.RFC3339))
		case len(k.Wrapped) == 0:
			return fmt.Errorf("keyring: keyset %s: key %s: no wrapped data key", ks.ID, FormatID(k.ID))
		}
		seen[k.ID] = true
		if k.State == Active {
			active++
		}
	}
	if active == 0 {
		return fmt.Errorf("keyring: keyset %s has no active key", ks.ID)
	}
	return nil
}

// wholeUTC reports a time the document can hold exactly: zero, or UTC in
// whole seconds. A fraction or another zone would be lost in the document
// or read differently by another implementation.
func wholeUTC(t time.Time) bool {
	return t.IsZero() || t.Location() == time.UTC && t.Nanosecond() == 0
}

// Refresh sets Expires to now plus the freshness window (nothing if the
// window is off). Every writer calls it before Authenticate.
func (ks *Keyset) Refresh(now time.Time) {
	ks.Expires = time.Time{}
	if ks.Policy.Freshness != 0 {
		ks.Expires = now.UTC().Truncate(time.Second).Add(ks.Policy.Freshness)
	}
}

// Marshal encodes the keyset as its JSON document. Call Authenticate
// first: a keyset without authentication cannot be marshaled.
func (ks *Keyset) Marshal() ([]byte, error) {
	if err := ks.Validate(); err != nil {
		return nil, err
	}
	if len(ks.Auth.Wrapped) == 0 || len(ks.Auth.Tag) == 0 {
		return nil, fmt.Errorf("keyring: keyset %s is not authenticated; call Authenticate before writing it", ks.ID)
	}
	d := &keysetjson.Doc{
		Format: keysetjson.Format, ID: ks.ID, Version: ks.Version, KEK: ks.KEK,
		Policy: keysetjson.Policy{
			PropagationDelay: int64(ks.Policy.PropagationDelay / time.Second),
			MaxTTL:           int64(ks.Policy.MaxTTL / time.Second),
			Skew:             int64(ks.Policy.Skew / time.Second),
			RotationInterval: int64(ks.Policy.RotationInterval / time.Second),
			Freshness:        int64(ks.Policy.Freshness / time.Second),
		},
		Keys: []keysetjson.Key{},
		Auth: keysetjson.Auth{Wrapped: keysetjson.FormatWrapped(ks.Auth.Wrapped), Tag: keysetjson.FormatWrapped(ks.Auth.Tag)},
	}
	if !ks.Expires.IsZero() {
		d.Expires = keysetjson.FormatTime(ks.Expires)
	}
	for _, k := range ks.Keys {
		d.Keys = append(d.Keys, keysetjson.Key{
			ID: FormatID(k.ID), Algorithm: k.Algorithm.String(), State: k.State.String(),
			Created: keysetjson.FormatTime(k.Created), Activation: keysetjson.FormatTime(k.Activation), Wrapped: keysetjson.FormatWrapped(k.Wrapped),
		})
	}
	return keysetjson.Marshal(d)
}

// Clone returns a deep copy, for editing.
func (ks *Keyset) Clone() *Keyset {
	c := *ks
	c.Auth = Auth{Wrapped: bytes.Clone(ks.Auth.Wrapped), Tag: bytes.Clone(ks.Auth.Tag)}
	c.Keys = make([]StoredKey, len(ks.Keys))
	for i, k := range ks.Keys {
		k.Wrapped = append([]byte(nil), k.Wrapped...)
		c.Keys[i] = k
	}
	return &c
}

// Key returns the stored key with the given id.
func (ks *Keyset) Key(id uint32) (*StoredKey, bool) {
	for i := range ks.Keys {
		if ks.Keys[i].ID == id {
			return &ks.Keys[i], true
		}
	}
	return nil, false
}

// Primary returns the key that seals at now, by the rule of
// Snapshot.Primary: the active key with the latest activation that has
// passed; of two that activated in the same second, the one listed later.
func (ks *Keyset) Primary(now time.Time) (*StoredKey, bool) {
	var best *StoredKey
	for i := range ks.Keys {
		k := &ks.Keys[i]
		if k.State != Active || k.Activation.After(now) {
			continue
		}
		if best == nil || !k.Activation.Before(best.Activation) {
			best = k
		}
	}
	return best, best != nil
}

// Wrap wraps k's material under kek for this keyset and returns the stored
// form. Times are truncated to seconds, the resolution of the document.
func (ks *Keyset) Wrap(ctx context.Context, kek backends.KEK, k Key) (StoredKey, error) {
	w, err := kek.Wrap(ctx, k.Material, WrapAD(ks.ID, k.ID))
	if err != nil {
		return StoredKey{}, fmt.Errorf("keyring: wrapping key %s: %w", FormatID(k.ID), err)
	}
	return StoredKey{
		ID: k.ID, Algorithm: k.Algorithm, State: k.State,
		Created: k.Created.UTC().Truncate(time.Second), Activation: k.Activation.UTC().Truncate(time.Second),
		Wrapped: w,
	}, nil
}

// UnwrapKey unwraps one stored key.
func (ks *Keyset) UnwrapKey(ctx context.Context, kek backends.KEK, sk StoredKey) (Key, error) {
	m, err := kek.Unwrap(ctx, sk.Wrapped, WrapAD(ks.ID, sk.ID))
	if err != nil {
		return Key{}, fmt.Errorf("keyring: keyset %s: key %s: %w", ks.ID, FormatID(sk.ID), err)
	}
	if len(m) != KeySize {
		return Key{}, fmt.Errorf("keyring: keyset %s: key %s: unwrapped to %d bytes, want %d", ks.ID, FormatID(sk.ID), len(m), KeySize)
	}
	return Key{ID: sk.ID, Algorithm: sk.Algorithm, State: sk.State, Created: sk.Created, Activation: sk.Activation, Material: m}, nil
}

// IDs returns the stored keys as Keys that carry only their ids, for
// NewKey to draw an id none of them has.
func (ks *Keyset) IDs() []Key {
	out := make([]Key, len(ks.Keys))
	for i, k := range ks.Keys {
		out[i] = Key{ID: k.ID}
	}
	return out
}

// NewStoredKey creates an active key of alg with an id new to ks and
// returns it wrapped under kek. If kek is a backends.Generator (AWS KMS,
// Vault transit), the key is generated inside the KMS; otherwise it comes
// from crypto/rand and is wrapped. Times are truncated to seconds.
func (ks *Keyset) NewStoredKey(ctx context.Context, kek backends.KEK, alg Algorithm, created, activation time.Time) (StoredKey, error) {
	k, err := NewKey(alg, created, activation, ks.IDs())
	if err != nil {
		return StoredKey{}, err
	}
	defer clear(k.Material)
	g, ok := kek.(backends.Generator)
	if !ok {
		return ks.Wrap(ctx, kek, k)
	}
	material, wrapped, err := g.GenerateKey(ctx, KeySize, WrapAD(ks.ID, k.ID))
	if err != nil {
		return StoredKey{}, fmt.Errorf("keyring: generating key %s: %w", FormatID(k.ID), err)
	}
	clear(material)
	if len(material) != KeySize {
		return StoredKey{}, fmt.Errorf("keyring: the KMS generated a %d-byte key, want %d", len(material), KeySize)
	}
	return StoredKey{
		ID: k.ID, Algorithm: alg, State: Active,
		Created: created.UTC().Truncate(time.Second), Activation: activation.UTC().Truncate(time.Second),
		Wrapped: wrapped,
	}, nil
}
