package envelope

import (
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"hash"
	"slices"
	"sync"

	"golang.org/x/crypto/chacha20poly1305"
)

// KeySize is the size of every data key.
const KeySize = 32

// ErrAuth reports a body that fails authentication under the key and
// associated data it was opened with.
var ErrAuth = errors.New("message authentication failed")

// A Cipher seals and opens envelope bodies under one data key. It is built
// once per key when a keyring snapshot is made and is safe for concurrent
// use.
type Cipher struct {
	version byte
	aead    cipher.AEAD
	macs    sync.Pool // of *macState, because a hash.Hash is not concurrency-safe
}

type macState struct {
	h   hash.Hash
	sum [MACTagSize]byte
}

// NewCipher returns the cipher for a key of the given version. The key is
// copied by the underlying primitives.
func NewCipher(version byte, key []byte) (*Cipher, error) {
	if len(key) != KeySize {
		return nil, errors.New("envelope: data key must be 32 bytes")
	}
	c := &Cipher{version: version}
	switch version {
	case VersionAEAD:
		aead, err := chacha20poly1305.NewX(key)
		if err != nil {
			return nil, err
		}
		c.aead = aead
	case VersionMAC:
		k := append([]byte(nil), key...)
		c.macs.New = func() any { return &macState{h: hmac.New(sha256.New, k)} }
	default:
		return nil, errors.New("envelope: unknown version")
	}
	return c, nil
}

// Version returns the version byte of the tokens this cipher seals.
func (c *Cipher) Version() byte { return c.version }

// Seal appends header ‖ body to dst. ad must start with the 13-byte header
// and continue with the binding encoding; the header is copied from it. AEAD
// bodies use a fresh random nonce.
func (c *Cipher) Seal(dst, ad, payload []byte) []byte {
	if c.aead == nil {
		return c.SealWithNonce(dst, ad, payload, nil)
	}
	// The nonce is drawn straight into dst: a local array would escape
	// through the cipher.AEAD interface and cost an allocation per call.
	dst = append(dst, ad[:HeaderSize]...)
	n := len(dst)
	dst = slices.Grow(dst, NonceSize+len(payload)+AEADTagSize)[:n+NonceSize]
	rand.Read(dst[n:])
	return c.aead.Seal(dst, dst[n:], payload, ad)
}

// SealWithNonce is Seal with a caller-chosen nonce. It exists for the test
// vectors; reusing a nonce under one key breaks XChaCha20-Poly1305. MAC
// ciphers ignore nonce.
func (c *Cipher) SealWithNonce(dst, ad, payload, nonce []byte) []byte {
	dst = append(dst, ad[:HeaderSize]...)
	if c.aead != nil {
		dst = append(dst, nonce...)
		return c.aead.Seal(dst, nonce, payload, ad)
	}
	m := c.macs.Get().(*macState)
	m.h.Reset()
	m.h.Write(ad)
	m.h.Write(payload)
	dst = append(dst, payload...)
	dst = m.h.Sum(dst)
	c.macs.Put(m)
	return dst
}

// Open authenticates body (the token after its header) under ad and appends
// the payload to dst. On failure dst is returned unchanged and nothing was
// written past its length.
func (c *Cipher) Open(dst, ad, body []byte) ([]byte, error) {
	if c.aead != nil {
		if len(body) < NonceSize+AEADTagSize {
			return dst, ErrAuth
		}
		out, err := c.aead.Open(dst, body[:NonceSize], body[NonceSize:], ad)
		if err != nil {
			return dst, ErrAuth
		}
		return out, nil
	}
	if len(body) < MACTagSize {
		return dst, ErrAuth
	}
	payload, tag := body[:len(body)-MACTagSize], body[len(body)-MACTagSize:]
	m := c.macs.Get().(*macState)
	m.h.Reset()
	m.h.Write(ad)
	m.h.Write(payload)
	ok := hmac.Equal(m.h.Sum(m.sum[:0]), tag)
	c.macs.Put(m)
	if !ok {
		return dst, ErrAuth
	}
	return append(dst, payload...), nil
}

// PayloadLen returns the payload length of a body of n bytes.
func (c *Cipher) PayloadLen(n int) int {
	return n - (Overhead(c.version) - HeaderSize)
}
