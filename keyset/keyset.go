package keyset

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/keymaterial"
	"github.com/stateseal/stateseal/internal/keysetjson"
	"github.com/stateseal/stateseal/keyring"
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
	// Expires, when keyring.Policy.Freshness is set, is when this version stops
	// loading: every write sets it to the write's time plus the freshness
	// window, and the scheduler rewrites the keyset before it passes, so
	// a copy rolled back further than the window does not load.
	Expires time.Time
	Policy  keyring.Policy
	Keys    []StoredKey
	// Auth authenticates everything above under the KEK; see Authenticate.
	Auth Auth
}

// A StoredKey is a key as a keyset holds it: its data key wrapped.
type StoredKey struct {
	ID         uint32
	Algorithm  keyring.Algorithm
	State      keyring.State
	Created    time.Time
	Activation time.Time
	Wrapped    []byte
}

// NewID returns a random keyset id.
func NewID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "ks-" + hex.EncodeToString(b)
}

// wrapAD is the associated data a data key is wrapped with: the keyset id
// and the key id. A wrapped key copied into another slot or another keyset
// does not unwrap there.
func wrapAD(keysetID string, keyID uint32) []byte {
	return fmt.Appendf(nil, "%s\x00%s\x00%s", keysetjson.WrapDomain, keysetID, keyring.FormatID(keyID))
}

// Parse reads a keyset document strictly and validates it. Unknown
// fields, unknown formats and invalid values are errors. It does not check
// the keyset's authentication, which needs the KEK: see Verify.
func Parse(data []byte) (*Keyset, error) {
	d, err := keysetjson.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("keyset: %w", err)
	}
	return fromDoc(d)
}

func fromDoc(d *keysetjson.Doc) (*Keyset, error) {
	ks := &Keyset{
		ID: d.ID, Version: d.Version, KEK: d.KEK,
		Policy: keyring.Policy{
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
			return nil, fmt.Errorf("keyset: keyset %s: expires: %w", d.ID, err)
		}
	}
	if ks.Auth.Wrapped, err = keysetjson.ParseWrapped(d.Auth.Wrapped); err != nil {
		return nil, fmt.Errorf("keyset: keyset %s: auth: %w", d.ID, err)
	}
	if ks.Auth.Tag, err = keysetjson.ParseWrapped(d.Auth.Tag); err != nil || len(ks.Auth.Tag) != 32 {
		return nil, fmt.Errorf("keyset: keyset %s: auth: the tag is not 32 bytes of unpadded base64url", d.ID)
	}
	for _, k := range d.Keys {
		sk, err := parseStoredKey(k)
		if err != nil {
			return nil, fmt.Errorf("keyset: keyset %s: %w", d.ID, err)
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
	alg, err := keyring.ParseAlgorithm(k.Algorithm)
	if err != nil {
		return StoredKey{}, fmt.Errorf("key %s: %w", k.ID, err)
	}
	st, err := keyring.ParseState(k.State)
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
		return errors.New("keyset: keyset has no id")
	}
	if ks.KEK == "" {
		return fmt.Errorf("keyset: keyset %s names no KEK", ks.ID)
	}
	if ks.Version == 0 {
		return fmt.Errorf("keyset: keyset %s has version 0; versions start at 1", ks.ID)
	}
	if err := ks.Policy.Validate(); err != nil {
		return fmt.Errorf("keyset: keyset %s: %w", ks.ID, err)
	}
	if (ks.Policy.Freshness != 0) != !ks.Expires.IsZero() {
		return fmt.Errorf("keyset: keyset %s: an expiry goes with a freshness window, and only with one", ks.ID)
	}
	if !wholeUTC(ks.Expires) {
		return fmt.Errorf("keyset: keyset %s: expiry is not UTC whole seconds from 1970 on", ks.ID)
	}
	seen := map[uint32]bool{}
	active := 0
	for _, k := range ks.Keys {
		switch {
		case k.ID == 0:
			return fmt.Errorf("keyset: keyset %s: key id 00000000 is reserved", ks.ID)
		case seen[k.ID]:
			return fmt.Errorf("keyset: keyset %s: key %s appears twice", ks.ID, keyring.FormatID(k.ID))
		case k.Algorithm != keyring.MAC && k.Algorithm != keyring.AEAD:
			return fmt.Errorf("keyset: keyset %s: key %s: unknown algorithm", ks.ID, keyring.FormatID(k.ID))
		case k.State != keyring.Active && k.State != keyring.DecryptOnly && k.State != keyring.Retired:
			return fmt.Errorf("keyset: keyset %s: key %s: unknown state", ks.ID, keyring.FormatID(k.ID))
		case k.Created.IsZero() || k.Activation.IsZero():
			return fmt.Errorf("keyset: keyset %s: key %s: missing created or activation time", ks.ID, keyring.FormatID(k.ID))
		case !wholeUTC(k.Created) || !wholeUTC(k.Activation):
			return fmt.Errorf("keyset: keyset %s: key %s: times are not UTC whole seconds from 1970 on", ks.ID, keyring.FormatID(k.ID))
		case k.Activation.Before(k.Created):
			return fmt.Errorf("keyset: keyset %s: key %s: activation %s is before creation %s", ks.ID, keyring.FormatID(k.ID),
				k.Activation.Format(time.RFC3339), k.Created.Format(time.RFC3339))
		case len(k.Wrapped) == 0:
			return fmt.Errorf("keyset: keyset %s: key %s: no wrapped data key", ks.ID, keyring.FormatID(k.ID))
		}
		seen[k.ID] = true
		if k.State == keyring.Active {
			active++
		}
	}
	if active == 0 {
		return fmt.Errorf("keyset: keyset %s has no active key", ks.ID)
	}
	return nil
}

// wholeUTC reports a time the document can hold exactly: zero, or UTC in
// whole seconds from 1970 on. A fraction or another zone would be lost in
// the document or read differently by another implementation.
func wholeUTC(t time.Time) bool {
	return t.IsZero() || t.Location() == time.UTC && t.Nanosecond() == 0 && t.Unix() >= 0
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
		return nil, fmt.Errorf("keyset: keyset %s is not authenticated; call Authenticate before writing it", ks.ID)
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
			ID: keyring.FormatID(k.ID), Algorithm: k.Algorithm.String(), State: k.State.String(),
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

// keyring.Key returns the stored key with the given id.
func (ks *Keyset) Key(id uint32) (*StoredKey, bool) {
	for i := range ks.Keys {
		if ks.Keys[i].ID == id {
			return &ks.Keys[i], true
		}
	}
	return nil, false
}

// Primary returns the key that seals at now, by the rule of
// keyring.Snapshot.Primary: the active key with the latest activation that has
// passed; of two that activated in the same second, the one listed later.
func (ks *Keyset) Primary(now time.Time) (*StoredKey, bool) {
	var best *StoredKey
	for i := range ks.Keys {
		k := &ks.Keys[i]
		if k.State != keyring.Active || k.Activation.After(now) {
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
func (ks *Keyset) Wrap(ctx context.Context, kek backends.KEK, k keyring.Key) (StoredKey, error) {
	w, err := kek.Wrap(ctx, keymaterial.Of(&k), wrapAD(ks.ID, k.ID))
	if err != nil {
		return StoredKey{}, fmt.Errorf("keyset: wrapping key %s: %w", keyring.FormatID(k.ID), err)
	}
	return StoredKey{
		ID: k.ID, Algorithm: k.Algorithm, State: k.State,
		Created: k.Created.UTC().Truncate(time.Second), Activation: k.Activation.UTC().Truncate(time.Second),
		Wrapped: w,
	}, nil
}

// UnwrapKey unwraps one stored key.
func (ks *Keyset) UnwrapKey(ctx context.Context, kek backends.KEK, sk StoredKey) (keyring.Key, error) {
	m, err := kek.Unwrap(ctx, sk.Wrapped, wrapAD(ks.ID, sk.ID))
	if err != nil {
		return keyring.Key{}, fmt.Errorf("keyset: keyset %s: key %s: %w", ks.ID, keyring.FormatID(sk.ID), err)
	}
	if len(m) != keyring.KeySize {
		// As permanent as bytes that do not unwrap: the same document
		// never loads, and no retry of the KMS call changes it.
		clear(m)
		return keyring.Key{}, fmt.Errorf("keyset: keyset %s: key %s: unwrapped to %d bytes, want %d: %w", ks.ID, keyring.FormatID(sk.ID), len(m), keyring.KeySize, backends.ErrUnwrap)
	}
	k := keyring.Key{ID: sk.ID, Algorithm: sk.Algorithm, State: sk.State, Created: sk.Created, Activation: sk.Activation}
	keymaterial.Set(&k, m)
	clear(m)
	return k, nil
}

// IDs returns the stored keys as Keys that carry only their ids, for
// keyring.NewKey to draw an id none of them has.
func (ks *Keyset) ids() []keyring.Key {
	out := make([]keyring.Key, len(ks.Keys))
	for i, k := range ks.Keys {
		out[i] = keyring.Key{ID: k.ID}
	}
	return out
}

// NewStoredKey creates an active key of alg with an id new to ks and
// returns it wrapped under kek. If kek is a backends.Generator (AWS KMS,
// Vault transit), the key is generated inside the KMS; otherwise it comes
// from crypto/rand and is wrapped. Times are truncated to seconds.
func (ks *Keyset) NewStoredKey(ctx context.Context, kek backends.KEK, alg keyring.Algorithm, created, activation time.Time) (StoredKey, error) {
	k, err := keyring.NewKey(alg, created, activation, ks.ids())
	if err != nil {
		return StoredKey{}, err
	}
	defer k.Zero()
	g, ok := kek.(backends.Generator)
	if !ok {
		return ks.Wrap(ctx, kek, k)
	}
	material, wrapped, err := g.GenerateKey(ctx, keyring.KeySize, wrapAD(ks.ID, k.ID))
	if err != nil {
		return StoredKey{}, fmt.Errorf("keyset: generating key %s: %w", keyring.FormatID(k.ID), err)
	}
	clear(material)
	if len(material) != keyring.KeySize {
		return StoredKey{}, fmt.Errorf("keyset: the KMS generated a %d-byte key, want %d", len(material), keyring.KeySize)
	}
	return StoredKey{
		ID: k.ID, Algorithm: alg, State: keyring.Active,
		Created: created.UTC().Truncate(time.Second), Activation: activation.UTC().Truncate(time.Second),
		Wrapped: wrapped,
	}, nil
}
