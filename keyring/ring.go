package keyring

import (
	"errors"
	"sync/atomic"
	"time"
)

// A Ring holds the current snapshot. Readers load it with one atomic read;
// [Ring.Store] replaces it whole, so a reader sees either the old keys or the
// new ones, never a mix.
type Ring struct {
	cur atomic.Pointer[Snapshot]
}

// NewRing returns a ring holding s.
func NewRing(s *Snapshot) (*Ring, error) {
	if s == nil {
		return nil, errors.New("keyring: nil snapshot")
	}
	r := new(Ring)
	r.cur.Store(s)
	return r, nil
}

// Generate returns a ring with one new key of the given algorithm, active
// from now on. The key lives only in this process's memory: tokens it seals
// do not survive a restart and no other instance can open them. It suits
// tests, single-process tools and the demo; fleets load a keyset instead.
func Generate(alg Algorithm) (*Ring, error) {
	now := time.Now()
	k, err := NewKey(alg, now, time.Time{}, nil)
	if err != nil {
		return nil, err
	}
	s, err := NewSnapshot([]Key{k})
	if err != nil {
		return nil, err
	}
	return NewRing(s)
}

// Current returns the snapshot in force.
func (r *Ring) Current() *Snapshot { return r.cur.Load() }

// Store makes s the snapshot in force. Tokens sealed under keys that s no
// longer holds, or holds retired, stop opening at once.
func (r *Ring) Store(s *Snapshot) error {
	if s == nil {
		return errors.New("keyring: nil snapshot")
	}
	r.cur.Store(s)
	return nil
}
