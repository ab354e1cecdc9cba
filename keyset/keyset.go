package keyset

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
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
	// History links this version to the ones it was edited from, newest
	// first (at most keysetjson.MaxHistory): a loader installs a new
	// version only if it names the version installed, so a document from
	// another branch is a fork at any version. Follow sets it.
	History []Link
	// RetiredKeys are the ids of every key ever retired in this keyset,
	// ascending: those still listed (as retired) and those pruned. A key
	// id in it never opens again, nor is it drawn again. Follow keeps it.
	RetiredKeys []uint32
	// Auth authenticates everything above under the KEK; see Authenticate.
	Auth Auth
}

// A Link names an earlier version of a keyset by its version and tag
// (Auth.Tag), which identifies its content: nobody without the KEK can
// make another document with that tag.
type Link struct {
	Version uint64
	Tag     []byte
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
	ks, err := fromDocLax(d)
	if err != nil {
		return nil, err
	}
	if err := ks.validateHistory(); err != nil {
		return nil, err
	}
	return ks, nil
}

// fromDocLax is fromDoc without the checks of History and RetiredKeys,
// which a document in an older format, read to upgrade it, lacks.
func fromDocLax(d *keysetjson.Doc) (*Keyset, error) {
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
	for _, h := range d.History {
		tag, err := keysetjson.ParseWrapped(h.Tag)
		if err != nil || len(tag) != 32 {
			return nil, fmt.Errorf("keyset: keyset %s: history: version %d: the tag is not 32 bytes of unpadded base64url", d.ID, h.Version)
		}
		ks.History = append(ks.History, Link{Version: h.Version, Tag: tag})
	}
	for _, r := range d.RetiredKeys {
		id, err := keysetjson.ParseKeyID(r)
		if err != nil {
			return nil, fmt.Errorf("keyset: keyset %s: retired_keys: %w", d.ID, err)
		}
		ks.RetiredKeys = append(ks.RetiredKeys, id)
	}
	for _, k := range d.Keys {
		sk, err := parseStoredKey(k)
		if err != nil {
			return nil, fmt.Errorf("keyset: keyset %s: %w", d.ID, err)
		}
		ks.Keys = append(ks.Keys, sk)
	}
	if err := ks.validate(); err != nil {
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
// one active key, and History and RetiredKeys as docs/KEYSET-FORMAT.md
// specifies them.
func (ks *Keyset) Validate() error {
	if err := ks.validate(); err != nil {
		return err
	}
	return ks.validateHistory()
}

func (ks *Keyset) validate() error {
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

// validateHistory checks History and RetiredKeys: links to lower
// versions, newest first, one at least from version 2 on, at most
// keysetjson.MaxHistory; retired ids ascending, each listed key among
// them retired, and every retired key among them.
func (ks *Keyset) validateHistory() error {
	switch {
	case ks.Version == 1 && len(ks.History) != 0:
		return fmt.Errorf("keyset: keyset %s: version 1 has no history", ks.ID)
	case ks.Version > 1 && len(ks.History) == 0:
		return fmt.Errorf("keyset: keyset %s: version %d names no version it follows (history)", ks.ID, ks.Version)
	case len(ks.History) > keysetjson.MaxHistory:
		return fmt.Errorf("keyset: keyset %s: history has %d links, over %d", ks.ID, len(ks.History), keysetjson.MaxHistory)
	}
	below := ks.Version
	for _, h := range ks.History {
		if h.Version >= below || h.Version == 0 {
			return fmt.Errorf("keyset: keyset %s: history: version %d does not come before %d", ks.ID, h.Version, below)
		}
		if len(h.Tag) != 32 {
			return fmt.Errorf("keyset: keyset %s: history: version %d: the tag is not 32 bytes", ks.ID, h.Version)
		}
		below = h.Version
	}
	for i, id := range ks.RetiredKeys {
		if id == 0 || i > 0 && id <= ks.RetiredKeys[i-1] {
			return fmt.Errorf("keyset: keyset %s: retired_keys are not distinct non-zero ids in ascending order", ks.ID)
		}
	}
	for _, k := range ks.Keys {
		if (k.State == keyring.Retired) != ks.retired(k.ID) {
			return fmt.Errorf("keyset: keyset %s: key %s is %s, and retired_keys %s it", ks.ID, keyring.FormatID(k.ID), k.State,
				map[bool]string{true: "lists", false: "does not list"}[ks.retired(k.ID)])
		}
	}
	return nil
}

// retired reports whether id is among ks.RetiredKeys.
func (ks *Keyset) retired(id uint32) bool {
	_, found := slices.BinarySearch(ks.RetiredKeys, id)
	return found
}

// Follow makes ks, an edit of prev, the version after it: Version one
// more, History linking to prev, and RetiredKeys holding prev's and
// every key retired in ks. Every editor calls it before Authenticate.
func (ks *Keyset) Follow(prev *Keyset) {
	ks.Version = prev.Version + 1
	ks.History = append([]Link{{prev.Version, bytes.Clone(prev.Auth.Tag)}}, prev.History...)
	if len(ks.History) > keysetjson.MaxHistory {
		ks.History = ks.History[:keysetjson.MaxHistory]
	}
	retired := slices.Clone(prev.RetiredKeys)
	for _, k := range ks.Keys {
		if k.State == keyring.Retired {
			retired = append(retired, k.ID)
		}
	}
	slices.Sort(retired)
	ks.RetiredKeys = slices.Compact(retired)
}

// Extends reports whether ks is prev or descends from it: the same tag
// at the same version, or a link to prev's version with prev's tag.
func (ks *Keyset) Extends(version uint64, tag []byte) bool {
	if ks.Version == version {
		return bytes.Equal(ks.Auth.Tag, tag)
	}
	for _, h := range ks.History {
		if h.Version == version {
			return bytes.Equal(h.Tag, tag)
		}
	}
	return false
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
	return keysetjson.Marshal(ks.doc())
}

// TagText is the document's tag (Auth.Tag) as an operator compares it:
// unpadded base64url, as the document writes auth.tag. It is what
// instances (Health.Tag), sealctl verify and list show beside the
// version: the tag is a MAC of every value in the document under a key
// only a KEK holder has, so two instances that installed one document
// show one string (however its bytes were formatted), and another branch
// at the same version shows another (docs/KEYSET-FORMAT.md, "Fork state,
// exactly"). It identifies a document only once it authenticates.
func (ks *Keyset) TagText() string { return keysetjson.FormatWrapped(ks.Auth.Tag) }

// doc is the keyset as its document, unchecked.
func (ks *Keyset) doc() *keysetjson.Doc {
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
	for _, h := range ks.History {
		d.History = append(d.History, keysetjson.Link{Version: h.Version, Tag: keysetjson.FormatWrapped(h.Tag)})
	}
	for _, id := range ks.RetiredKeys {
		d.RetiredKeys = append(d.RetiredKeys, keyring.FormatID(id))
	}
	for _, k := range ks.Keys {
		d.Keys = append(d.Keys, keysetjson.Key{
			ID: keyring.FormatID(k.ID), Algorithm: k.Algorithm.String(), State: k.State.String(),
			Created: keysetjson.FormatTime(k.Created), Activation: keysetjson.FormatTime(k.Activation), Wrapped: keysetjson.FormatWrapped(k.Wrapped),
		})
	}
	return d
}

// Clone returns a deep copy, for editing. Its byte slices share one
// allocation (every loader clones what it hands out at every rotation),
// each capped at its length, so that an append to one never writes
// another.
func (ks *Keyset) Clone() *Keyset {
	n := len(ks.Auth.Wrapped) + len(ks.Auth.Tag)
	for _, h := range ks.History {
		n += len(h.Tag)
	}
	for _, k := range ks.Keys {
		n += len(k.Wrapped)
	}
	buf := make([]byte, 0, n)
	take := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		i := len(buf)
		buf = append(buf, b...)
		return buf[i:len(buf):len(buf)]
	}
	c := *ks
	c.Auth = Auth{Wrapped: take(ks.Auth.Wrapped), Tag: take(ks.Auth.Tag)}
	c.History = make([]Link, len(ks.History))
	for i, h := range ks.History {
		c.History[i] = Link{h.Version, take(h.Tag)}
	}
	c.RetiredKeys = slices.Clone(ks.RetiredKeys)
	c.Keys = make([]StoredKey, len(ks.Keys))
	for i, k := range ks.Keys {
		k.Wrapped = take(k.Wrapped)
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

// ids returns the stored keys, and the keys retired and pruned, as Keys
// that carry only their ids, for keyring.NewKey to draw an id none of
// them has: a retired id is never drawn again.
func (ks *Keyset) ids() []keyring.Key {
	out := make([]keyring.Key, 0, len(ks.Keys)+len(ks.RetiredKeys))
	for _, k := range ks.Keys {
		out = append(out, keyring.Key{ID: k.ID})
	}
	for _, id := range ks.RetiredKeys {
		out = append(out, keyring.Key{ID: id})
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
