package keyring

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ErrNoPrimary reports that no active key's activation time has passed, so
// nothing can seal yet.
var ErrNoPrimary = errors.New("keyring: no active key has reached its activation time")

// A Snapshot is an immutable, validated set of keys. Its methods are safe for
// concurrent use.
type Snapshot struct {
	keys    []Key // sorted by ID; deep copies owned by the snapshot
	sealers []int // indexes of active keys, newest activation first
	policy  *Policy
	version uint64
}

// NewSnapshot validates keys and returns a snapshot holding copies of them.
// Ids must be unique and not 0, material 32 bytes, algorithm and state
// known, and at least one key active. A key whose activation lies in the
// future is allowed: that is how a rotation is announced to a fleet.
func NewSnapshot(keys []Key) (*Snapshot, error) {
	s := &Snapshot{keys: make([]Key, len(keys))}
	listed := make(map[uint32]int, len(keys)) // a key's place in keys breaks ties
	for i, k := range keys {
		if err := k.validate(); err != nil {
			return nil, err
		}
		k.material = bytes.Clone(k.material)
		s.keys[i] = k
		listed[k.ID] = i
	}
	slices.SortFunc(s.keys, func(a, b Key) int { return cmpID(a.ID, b.ID) })
	for i := 1; i < len(s.keys); i++ {
		if s.keys[i].ID == s.keys[i-1].ID {
			return nil, fmt.Errorf("%w: duplicate key id %s", ErrInvalidKey, FormatID(s.keys[i].ID))
		}
	}
	for i := range s.keys {
		if s.keys[i].State == Active {
			s.sealers = append(s.sealers, i)
		}
	}
	if len(s.sealers) == 0 {
		return nil, errors.New("keyring: no active key")
	}
	// Latest activation first; of two activated in the same second, the
	// one listed later, which is the one added (or promoted) later.
	slices.SortFunc(s.sealers, func(a, b int) int {
		ka, kb := &s.keys[a], &s.keys[b]
		if c := kb.Activation.Compare(ka.Activation); c != 0 {
			return c
		}
		return listed[kb.ID] - listed[ka.ID]
	})
	return s, nil
}

func cmpID(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Primary returns the key that seals at now: the active key with the
// latest activation not after now; of two that activated in the same
// second, the one listed later in the keyset. The key must not be modified.
func (s *Snapshot) Primary(now time.Time) (*Key, error) {
	for _, i := range s.sealers {
		if !s.keys[i].Activation.After(now) {
			return &s.keys[i], nil
		}
	}
	return nil, ErrNoPrimary
}

// Lookup returns the key with the given id if it may open tokens: active or
// decrypt-only, whatever its activation time, so that a token sealed by an
// instance that switched a moment earlier still opens. Retired keys are
// never returned. The key must not be modified.
func (s *Snapshot) Lookup(id uint32) (*Key, bool) {
	i, ok := slices.BinarySearchFunc(s.keys, id, func(k Key, id uint32) int { return cmpID(k.ID, id) })
	if !ok || s.keys[i].State == Retired {
		return nil, false
	}
	return &s.keys[i], true
}

// Keys returns copies of every key, retired ones included, sorted by id.
func (s *Snapshot) Keys() []Key {
	out := make([]Key, len(s.keys))
	for i, k := range s.keys {
		k.material = bytes.Clone(k.material)
		out[i] = k
	}
	return out
}

// Clone returns a deep copy of s: the same keys, policy and version,
// with key material of its own. Nothing done to one (through the *Key
// that Primary or Lookup return, which must not be modified anyway)
// reaches the other. It costs a copy, no validation and no sort.
func (s *Snapshot) Clone() *Snapshot {
	c := &Snapshot{keys: make([]Key, len(s.keys)), sealers: slices.Clone(s.sealers), version: s.version}
	n := 0
	for _, k := range s.keys {
		n += len(k.material)
	}
	buf := make([]byte, 0, n) // one allocation, each key's part capped at its length
	for i, k := range s.keys {
		j := len(buf)
		buf = append(buf, k.material...)
		k.material = buf[j:len(buf):len(buf)]
		c.keys[i] = k
	}
	if s.policy != nil {
		p := *s.policy
		c.policy = &p
	}
	return c
}

// Policy returns the policy of the keyset the snapshot was loaded from, if
// it was loaded from one.
func (s *Snapshot) Policy() (Policy, bool) {
	if s.policy == nil {
		return Policy{}, false
	}
	return *s.policy, true
}

// WithPolicy returns a copy of s that reports p and version as the policy
// and version of the keyset it was loaded from. Package keyset sets them.
func (s *Snapshot) WithPolicy(p Policy, version uint64) *Snapshot {
	c := *s
	c.policy, c.version = &p, version
	return &c
}

// Version returns the version of the keyset the snapshot was loaded from,
// or 0.
func (s *Snapshot) Version() uint64 { return s.version }

// Len returns the number of keys, retired ones included.
func (s *Snapshot) Len() int { return len(s.keys) }
