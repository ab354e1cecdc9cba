package seal

import (
	"time"
	"unsafe"

	"github.com/stateseal/stateseal/internal/envelope"
	"github.com/stateseal/stateseal/keyring"
)

// Header is what a token says about itself. Nothing in it is verified.
type Header struct {
	Version    byte
	Algorithm  keyring.Algorithm
	KeyID      uint32
	IssuedAt   time.Time
	Expiry     time.Time
	TokenLen   int // characters
	PayloadLen int // bytes of payload (MAC) or ciphertext without tag (AEAD)
	// Tag is the token's authentication tag: 32 bytes (MAC) or 16 (AEAD).
	// It differs for every AEAD seal (the nonce is random), and for every
	// MAC seal that differs in payload, binding or second of issue, so it
	// identifies a token for single use (package replay). Two MAC seals
	// alike in all three are one token: package mrtr adds random bytes to
	// every single-use state so that its seals never are.
	Tag []byte
}

// Inspect decodes the header of a token without any key. It applies the
// same strict decoding as Open, with the default length bound, but checks
// no signature and no time: an attacker chooses every field it returns. It
// is for debugging and logs, never for decisions.
func Inspect(token string) (Header, error) { return inspect(token, DefaultMaxTokenLen) }

// Inspect is the package's Inspect with s's length bound (Options.MaxTokenLen)
// in place of the default, so that it decodes every token s accepts. On a
// token that s.Open accepted, its fields are authentic.
func (s *Sealer) Inspect(token string) (Header, error) { return inspect(token, s.cfg.maxLen) }

func inspect(token string, maxLen int) (Header, error) {
	if len(token) > maxLen {
		return Header{}, ErrTooLarge
	}
	raw, err := envelope.AppendDecode(nil, unsafe.Slice(unsafe.StringData(token), len(token)))
	if err != nil {
		return Header{}, ErrMalformed
	}
	h, err := envelope.ParseHeader(raw)
	if err != nil {
		return Header{}, ErrMalformed
	}
	alg := keyring.MAC
	if h.Version == envelope.VersionAEAD {
		alg = keyring.AEAD
	}
	iat := time.Unix(h.IssuedAt, 0).UTC()
	return Header{
		Version:    h.Version,
		Algorithm:  alg,
		KeyID:      h.KeyID,
		IssuedAt:   iat,
		Expiry:     iat.Add(time.Duration(h.Lifetime) * time.Second),
		TokenLen:   len(token),
		PayloadLen: len(raw) - envelope.Overhead(h.Version),
		Tag:        raw[len(raw)-tagSize(h.Version):],
	}, nil
}

func tagSize(version byte) int {
	if version == envelope.VersionAEAD {
		return envelope.AEADTagSize
	}
	return envelope.MACTagSize
}
