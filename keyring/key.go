package keyring

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/stateseal/stateseal/internal/envelope"
	"github.com/stateseal/stateseal/internal/keymaterial"
)

// KeySize is the size of a key's secret material.
const KeySize = envelope.KeySize

// Algorithm is the envelope a key seals. It is fixed when the key is made.
type Algorithm uint8

const (
	// MAC seals with HMAC-SHA256: the client can read the state but cannot
	// change it.
	MAC Algorithm = 1
	// AEAD seals with XChaCha20-Poly1305 and a random 192-bit nonce: the
	// client can neither read nor change the state.
	AEAD Algorithm = 2
)

func (a Algorithm) String() string {
	switch a {
	case MAC:
		return "mac"
	case AEAD:
		return "aead"
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// ParseAlgorithm parses "mac" or "aead".
func ParseAlgorithm(s string) (Algorithm, error) {
	switch s {
	case "mac":
		return MAC, nil
	case "aead":
		return AEAD, nil
	}
	return 0, fmt.Errorf("keyring: unknown algorithm %q (want mac or aead)", s)
}

// State says what a key may do.
type State uint8

const (
	// Active keys open tokens, and the newest one whose activation time has
	// passed seals them.
	Active State = 1
	// DecryptOnly keys open tokens but never seal.
	DecryptOnly State = 2
	// Retired keys do nothing: tokens they sealed are rejected as made with
	// an unknown key. They stay in a keyset until pruned.
	Retired State = 3
)

func (s State) String() string {
	switch s {
	case Active:
		return "active"
	case DecryptOnly:
		return "decrypt-only"
	case Retired:
		return "retired"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// ParseState parses "active", "decrypt-only" or "retired".
func ParseState(s string) (State, error) {
	switch s {
	case "active":
		return Active, nil
	case "decrypt-only":
		return DecryptOnly, nil
	case "retired":
		return Retired, nil
	}
	return 0, fmt.Errorf("keyring: unknown key state %q (want active, decrypt-only or retired)", s)
}

// A Key is one data key and what the keyring knows about it.
type Key struct {
	ID         uint32 // random, never 0, unique within a keyset
	Algorithm  Algorithm
	State      State
	Created    time.Time
	Activation time.Time // the key may seal from this moment on

	// material is the secret key. No exported API returns it: it is never
	// logged or printed, keysets store it only wrapped by a KEK, and only
	// the module's own packages reach it (internal/keymaterial).
	material []byte
}

func init() {
	keymaterial.Of = func(k any) []byte { return k.(*Key).material }
	keymaterial.Set = func(k any, m []byte) { k.(*Key).material = bytes.Clone(m) }
}

// ImportKey returns a key with the given material (copied): a key that
// exists elsewhere, such as one unwrapped from a keyset. It checks the
// key as a Snapshot would.
func ImportKey(id uint32, alg Algorithm, state State, created, activation time.Time, material []byte) (Key, error) {
	k := Key{ID: id, Algorithm: alg, State: state, Created: created, Activation: activation, material: bytes.Clone(material)}
	if err := k.validate(); err != nil {
		return Key{}, err
	}
	return k, nil
}

// Zero overwrites the key's material, for a caller done with a copy.
func (k *Key) Zero() { clear(k.material) }

// ErrInvalidKey reports a key that cannot be used: bad id, algorithm, state
// or material.
var ErrInvalidKey = errors.New("keyring: invalid key")

// NewKey returns a key with fresh random material and a random id that is
// not 0 and not the id of any key in existing. created is recorded as the
// key's creation time.
func NewKey(alg Algorithm, created, activation time.Time, existing []Key) (Key, error) {
	if alg != MAC && alg != AEAD {
		return Key{}, fmt.Errorf("%w: unknown algorithm %v", ErrInvalidKey, alg)
	}
	k := Key{
		ID:         newID(existing),
		Algorithm:  alg,
		State:      Active,
		Created:    created,
		Activation: activation,
		material:   make([]byte, KeySize),
	}
	rand.Read(k.material)
	return k, nil
}

func newID(existing []Key) uint32 {
	var b [4]byte
	for {
		rand.Read(b[:])
		id := binary.BigEndian.Uint32(b[:])
		if id != 0 && !hasID(existing, id) {
			return id
		}
	}
}

func hasID(keys []Key, id uint32) bool {
	for i := range keys {
		if keys[i].ID == id {
			return true
		}
	}
	return false
}

func (k *Key) validate() error {
	switch {
	case k.ID == 0:
		return fmt.Errorf("%w: key id 0 is reserved", ErrInvalidKey)
	case k.Algorithm != MAC && k.Algorithm != AEAD:
		return fmt.Errorf("%w: key %s: unknown algorithm %v", ErrInvalidKey, FormatID(k.ID), k.Algorithm)
	case k.State != Active && k.State != DecryptOnly && k.State != Retired:
		return fmt.Errorf("%w: key %s: unknown state %v", ErrInvalidKey, FormatID(k.ID), k.State)
	case len(k.material) != KeySize:
		return fmt.Errorf("%w: key %s: material is %d bytes, want %d", ErrInvalidKey, FormatID(k.ID), len(k.material), KeySize)
	}
	return nil
}

// FormatID formats a key id the way logs, the CLI and keysets show it:
// eight lower-case hex digits.
func FormatID(id uint32) string { return fmt.Sprintf("%08x", id) }

// ParseID parses a key id as FormatID writes it: eight lower-case hex
// digits, not 00000000.
func ParseID(s string) (uint32, error) {
	if len(s) != 8 {
		return 0, fmt.Errorf("keyring: key id %q is not 8 lower-case hex digits", s)
	}
	var id uint32
	for _, c := range []byte(s) {
		switch {
		case c >= '0' && c <= '9':
			id = id<<4 | uint32(c-'0')
		case c >= 'a' && c <= 'f':
			id = id<<4 | uint32(c-'a'+10)
		default:
			return 0, fmt.Errorf("keyring: key id %q is not 8 lower-case hex digits", s)
		}
	}
	if id == 0 {
		return 0, fmt.Errorf("keyring: key id %q is reserved", s)
	}
	return id, nil
}
