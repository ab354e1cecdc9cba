// Package share holds the clients a process opens once per configuration
// and shares among everything that uses that configuration (a Redis
// client, a Redis subscription, a KEK, a Vault session), counting their
// holders so that the last one to let go closes what they shared.
//
// One Map per kind of client replaces a table, a lock and a count written
// out by hand each time; the part such tables got wrong, which entry the
// last holder may delete, is decided here once (Share.Release).
package share

import "sync"

// A Map holds one shared value per key while that value has holders.
// The zero Map is empty and ready to use; a Map is not copied after first
// use.
type Map[K comparable, V any] struct {
	// Keep leaves a value in the map after its last holder releases it,
	// for the next Acquire of its key to share again: a Vault session
	// whose login is worth more than the connections it idles. By
	// default the last release forgets it, and the next Acquire opens a
	// new one.
	Keep bool

	mu sync.Mutex
	m  map[K]*Share[K, V]
}

// A Share is one value of a Map and the count of its holders. Its
// pointer names the value for as long as anyone holds it: two Shares are
// two values, even under one key.
type Share[K comparable, V any] struct {
	m     *Map[K, V]
	key   K
	value V
	refs  int // guarded by m.mu
}

// Value returns the shared value.
func (s *Share[K, V]) Value() V { return s.value }

// Acquire returns the share of key, counting one more holder. If the map
// has none, open makes the value outside the map's lock (a slow server
// holds up no other key). Two Acquires that both found none both open: the
// value stored first is shared, and discard, if not nil, is given the
// other one (after the lock is let go).
func (m *Map[K, V]) Acquire(key K, open func() (V, error), discard func(V)) (*Share[K, V], error) {
	if s := m.hold(key); s != nil {
		return s, nil
	}
	v, err := open()
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	s := m.m[key]
	ours := s == nil
	if ours {
		s = &Share[K, V]{m: m, key: key, value: v}
		if m.m == nil {
			m.m = map[K]*Share[K, V]{}
		}
		m.m[key] = s
	}
	s.refs++
	m.mu.Unlock()
	if !ours && discard != nil {
		discard(v)
	}
	return s, nil
}

// hold counts one more holder of key's share, if the map has one.
func (m *Map[K, V]) hold(key K) *Share[K, V] {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.m[key]
	if s != nil {
		s.refs++
	}
	return s
}

// Release drops one holder and reports whether it was the last: the
// caller then closes the value (or, in a Map that keeps its values, lets
// go of what it can open again). The last release removes the share from
// the map only if the map still holds this very share: once a share has
// been forgotten (Forget), its key may name another, which its holders'
// releases must leave alone. Release panics if s has no holder left, as
// a sync.WaitGroup does below zero.
func (s *Share[K, V]) Release() (last bool) {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.refs <= 0 {
		panic("share: Release of a share with no holder")
	}
	s.refs--
	if s.refs > 0 {
		return false
	}
	if !m.Keep && m.m[s.key] == s {
		delete(m.m, s.key)
	}
	return true
}

// Forget removes s from the map if the map still holds it, without
// counting a holder: the next Acquire of its key opens a new value, while
// s's holders keep theirs until they release it. A share found broken
// (a subscription that failed) is forgotten.
func (s *Share[K, V]) Forget() {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m[s.key] == s {
		delete(m.m, s.key)
	}
}
