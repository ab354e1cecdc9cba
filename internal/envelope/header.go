package envelope

import (
	"encoding/binary"
	"errors"
)

// Version bytes. The first byte of a token names the format version and the
// envelope kind together, as "v4.local" does in PASETO. It is covered by the
// MAC or the AEAD, and a key opens only tokens of its own kind, so the byte
// can never choose a weaker algorithm for a key.
const (
	VersionMAC  byte = 0x01 // v1, HMAC-SHA256
	VersionAEAD byte = 0x02 // v1, XChaCha20-Poly1305
)

// Sizes in bytes.
const (
	HeaderSize  = 13 // version, key id, issued-at and lifetime
	MACTagSize  = 32
	NonceSize   = 24
	AEADTagSize = 16
)

// Field limits. Issued-at is 40 bits of Unix seconds (good until the year
// 36812) and the lifetime 24 bits of seconds (194 days), packed into one
// big-endian uint64, which keeps the header at 13 bytes.
const (
	MaxIssuedAt = 1<<40 - 1
	MaxLifetime = 1<<24 - 1
)

// ErrMalformed reports bytes that are not a token of a known version.
var ErrMalformed = errors.New("malformed envelope")

// Header is the authenticated, unencrypted start of every token.
type Header struct {
	Version  byte
	KeyID    uint32
	IssuedAt int64  // Unix seconds, 0..MaxIssuedAt
	Lifetime uint32 // seconds, 0..MaxLifetime
}

// Overhead returns the bytes a version adds to its payload, header included,
// or 0 for an unknown version.
func Overhead(version byte) int {
	switch version {
	case VersionMAC:
		return HeaderSize + MACTagSize
	case VersionAEAD:
		return HeaderSize + NonceSize + AEADTagSize
	}
	return 0
}

// AppendHeader appends the 13-byte encoding of h. The caller keeps the fields
// within their limits.
func AppendHeader(dst []byte, h Header) []byte {
	dst = append(dst, h.Version)
	dst = binary.BigEndian.AppendUint32(dst, h.KeyID)
	return binary.BigEndian.AppendUint64(dst, uint64(h.IssuedAt)<<24|uint64(h.Lifetime))
}

// ParseHeader reads the header of a decoded token and checks that the token
// is long enough for its version. It does not look at the body.
func ParseHeader(raw []byte) (Header, error) {
	if len(raw) < HeaderSize {
		return Header{}, ErrMalformed
	}
	h := Header{Version: raw[0]}
	over := Overhead(h.Version)
	if over == 0 || len(raw) < over {
		return Header{}, ErrMalformed
	}
	h.KeyID = binary.BigEndian.Uint32(raw[1:5])
	t := binary.BigEndian.Uint64(raw[5:13])
	h.IssuedAt = int64(t >> 24)
	h.Lifetime = uint32(t & MaxLifetime)
	return h, nil
}
