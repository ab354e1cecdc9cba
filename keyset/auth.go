package keyset

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/keysetjson"
	"github.com/stateseal/stateseal/internal/redact"
	"github.com/stateseal/stateseal/keyring"
)

// ErrUnauthenticated reports a keyset whose metadata does not authenticate
// under its KEK: it was changed by something that does not hold the KEK
// (an edit by hand, a tampered file or store entry), or its KEK is not the
// one that wrote it. Such a keyset does not load and is not edited.
var ErrUnauthenticated = errors.New("keyset: keyset does not authenticate under its KEK")

// An Auth authenticates a keyset's metadata: Tag is HMAC-SHA256 over the
// whole keyset (ids, version, KEK URL, policy, every key's algorithm,
// state, times and wrapped bytes) under a random key that Wrapped holds,
// wrapped by the keyset's KEK. Without the KEK nobody can recompute it.
type Auth struct {
	Wrapped []byte
	Tag     []byte
}

// authAD is the associated data of the wrapped authentication key.
func authAD(format, keysetID string) []byte {
	return fmt.Appendf(nil, "%s\x00%s\x00auth", format, keysetID)
}

// Authenticate sets ks.Auth under kek, with a fresh authentication key.
// Every writer calls it last, after its edit: the tag covers the keyset as
// it will be stored.
func (ks *Keyset) Authenticate(ctx context.Context, kek backends.KEK) error {
	key := make([]byte, 32)
	rand.Read(key)
	defer clear(key)
	w, err := kek.Wrap(ctx, key, authAD(keysetjson.Format, ks.ID))
	if err != nil {
		return fmt.Errorf("keyset: keyset %s: wrapping the authentication key: %w", ks.ID, err)
	}
	ks.Auth = Auth{Wrapped: w}
	ks.keepRetired()
	ks.Auth.Tag = ks.tag(keysetjson.Format, key)
	return nil
}

// keepRetired adds every key listed as retired to RetiredKeys.
func (ks *Keyset) keepRetired() {
	for _, k := range ks.Keys {
		if k.State == keyring.Retired && !ks.retired(k.ID) {
			ks.RetiredKeys = append(ks.RetiredKeys, k.ID)
			slices.Sort(ks.RetiredKeys)
		}
	}
}

// Verify checks ks.Auth under kek. It fails with ErrUnauthenticated when
// the tag does not match or the authentication key does not unwrap (the
// wrong KEK); a KMS that does not answer is another error.
func (ks *Keyset) Verify(ctx context.Context, kek backends.KEK) error {
	return ks.verify(ctx, keysetjson.Format, kek)
}

func (ks *Keyset) verify(ctx context.Context, format string, kek backends.KEK) error {
	key, err := ks.unwrapAuth(ctx, format, kek)
	if err != nil {
		return err
	}
	defer clear(key)
	return ks.verifyWith(format, key)
}

func (ks *Keyset) unwrapAuth(ctx context.Context, format string, kek backends.KEK) ([]byte, error) {
	key, err := kek.Unwrap(ctx, ks.Auth.Wrapped, authAD(format, ks.ID))
	if errors.Is(err, backends.ErrUnwrap) {
		return nil, fmt.Errorf("%w: keyset %s: the authentication key does not unwrap (not the keyset's KEK, or the file was changed): %w", ErrUnauthenticated, ks.ID, err)
	}
	if err != nil {
		// The KMS did not answer: nothing is known about the keyset yet.
		return nil, fmt.Errorf("keyset: keyset %s: unwrapping the authentication key: %w", ks.ID, err)
	}
	return key, nil
}

func (ks *Keyset) verifyWith(format string, key []byte) error {
	// An empty key is refused though HMAC takes one: no writer makes it,
	// and WebCrypto's HMAC import refuses it, so a TypeScript reader could
	// not say the same of the document (docs/KEYSET-FORMAT.md).
	if len(key) == 0 {
		return fmt.Errorf("%w: keyset %s: the authentication key is empty", ErrUnauthenticated, ks.ID)
	}
	if !hmac.Equal(ks.tag(format, key), ks.Auth.Tag) {
		return fmt.Errorf("%w: keyset %s: its contents were changed without the KEK", ErrUnauthenticated, ks.ID)
	}
	return nil
}

// tag is HMAC-SHA256 over an unambiguous encoding of everything in the
// keyset but the tag itself: each field length-prefixed, times in Unix
// seconds, durations in nanoseconds (whole seconds, by Validate). Format 3
// adds the freshness window and the expiry (0 when off) after the policy;
// format 4 the history and the retired key ids after those.
func (ks *Keyset) tag(format string, key []byte) []byte {
	b := appendField(nil, []byte(format+" auth"))
	b = appendField(b, []byte(ks.ID))
	b = binary.BigEndian.AppendUint64(b, ks.Version)
	b = appendField(b, []byte(ks.KEK))
	for _, d := range []int64{int64(ks.Policy.PropagationDelay), int64(ks.Policy.MaxTTL), int64(ks.Policy.Skew), int64(ks.Policy.RotationInterval)} {
		b = binary.BigEndian.AppendUint64(b, uint64(d))
	}
	if format != keysetjson.FormatV2 {
		b = binary.BigEndian.AppendUint64(b, uint64(ks.Policy.Freshness))
		var exp int64
		if !ks.Expires.IsZero() {
			exp = ks.Expires.Unix()
		}
		b = binary.BigEndian.AppendUint64(b, uint64(exp))
	}
	if format == keysetjson.Format {
		b = binary.BigEndian.AppendUint32(b, uint32(len(ks.History)))
		for _, h := range ks.History {
			b = binary.BigEndian.AppendUint64(b, h.Version)
			b = appendField(b, h.Tag)
		}
		b = binary.BigEndian.AppendUint32(b, uint32(len(ks.RetiredKeys)))
		for _, id := range ks.RetiredKeys {
			b = binary.BigEndian.AppendUint32(b, id)
		}
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(ks.Keys)))
	for _, k := range ks.Keys {
		b = binary.BigEndian.AppendUint32(b, k.ID)
		b = appendField(b, []byte(k.Algorithm.String()))
		b = appendField(b, []byte(k.State.String()))
		b = binary.BigEndian.AppendUint64(b, uint64(k.Created.Unix()))
		b = binary.BigEndian.AppendUint64(b, uint64(k.Activation.Unix()))
		b = appendField(b, k.Wrapped)
	}
	b = appendField(b, ks.Auth.Wrapped)
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return m.Sum(nil)
}

func appendField(b, f []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
	return append(b, f...)
}

// Upgrade reads a keyset document in format version 2 or 3, checks its
// authentication under kek (the KEK at kekURL, which the caller trusts: a
// version-2 document names its KEK with its transport settings, and must
// name kekURL exactly or its identity), and returns it as a version-4
// keyset at the next version, authenticated under kek: its history links
// to the old document, and every key it lists as retired is recorded as
// retired for good. The wrapped data keys are unchanged. The old
// document's expiry is kept (a version-2 document gets the default window
// from now): the upgrade is an edit, and says nothing about whether the
// old document is the newest. The caller checks the result's freshness
// as for any edit.
func Upgrade(ctx context.Context, data []byte, kek backends.KEK, kekURL string, now time.Time) (*Keyset, error) {
	d, err := keysetjson.ParseOld(data)
	if err != nil {
		return nil, fmt.Errorf("keyset: %w", err)
	}
	format := d.Format
	d.Format = keysetjson.Format
	old, err := fromDocLax(d)
	if err != nil {
		return nil, err
	}
	id, err := kekIdentity(kekURL)
	if err != nil {
		return nil, fmt.Errorf("keyset: %w", err)
	}
	if old.KEK != kekURL && old.KEK != id {
		return nil, fmt.Errorf("%w: keyset %s names %s, not %s", ErrUntrustedKEK, old.ID, redact.URL(old.KEK), redact.URL(kekURL))
	}
	if err := old.verify(ctx, format, kek); err != nil {
		return nil, err
	}
	ks := old.Clone()
	ks.KEK = id
	ks.Follow(old)
	if format == keysetjson.FormatV2 {
		ks.Policy.Freshness = keyring.DefaultPolicy().Freshness
		ks.Refresh(now)
	}
	if err := ks.Authenticate(ctx, kek); err != nil {
		return nil, err
	}
	return ks, nil
}
