package replay

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"
)

// DefaultMemoryEntries bounds a Memory guard made with max <= 0: at about
// 100 bytes an entry, 1,048,576 entries take about 100 MiB.
const DefaultMemoryEntries = 1 << 20

// shards spread the guard over as many locks, so that concurrent uses
// rarely wait for each other: there is no global lock.
const shards = 64

// A Memory guard keeps used ids in this process. It holds at most max
// entries. An entry lives until its token expires; expired entries are
// swept when a shard fills up, so a full shard refuses a new token only
// when every entry in it is still unexpired. Then Use refuses with
// ErrUnavailable rather than forget a live entry (which would let that
// token be replayed): a flood of valid single-use tokens makes single-use
// tools unavailable, never replayable.
//
// A Memory guard is Local: it knows nothing of the uses before it was
// made or in another process. Use refuses, with ErrUnvouched, a token
// issued in a second before the guard was made (a restart of its server
// must not let a state used before it run again), and package mrtr
// refuses a state sealed under another guard's Instance. A token sealed
// by another process in the very second this guard was made passes the
// first check: only the second one tells it apart.
type Memory struct {
	perShard int
	now      func() time.Time
	start    int64 // Unix seconds: tokens issued before are unvouched
	instance [InstanceSize]byte
	shard    [shards]struct {
		mu sync.Mutex
		// id hash -> expiry, Unix seconds; negated for a use in doubt
		// (Doubt).
		used map[[sha256.Size]byte]int64
		// sweepAt is at or before the expiry of every entry: a full shard
		// is not swept before it, so a flood costs at most one sweep per
		// second, not one per token. Every insertion lowers it, so no
		// entry can expire unseen behind it.
		sweepAt int64
	}
}

// NewMemory returns a Memory guard holding at most max entries
// (DefaultMemoryEntries if max <= 0).
func NewMemory(max int) *Memory {
	if max <= 0 {
		max = DefaultMemoryEntries
	}
	m := &Memory{perShard: max/shards + 1, now: time.Now, start: time.Now().Unix()}
	rand.Read(m.instance[:]) // never fails (crypto/rand)
	for i := range m.shard {
		m.shard[i].used = map[[sha256.Size]byte]int64{}
	}
	return m
}

// Instance returns the guard's random id (replay.Local).
func (m *Memory) Instance() [InstanceSize]byte { return m.instance }

// Use records id until expires. A token issued before the guard's first
// second is refused (ErrUnvouched): it may have been used before.
func (m *Memory) Use(_ context.Context, id []byte, issuedAt, expires time.Time) error {
	if issuedAt.Unix() < m.start {
		return fmt.Errorf("%w: the state was issued at %s, before this process's single-use records begin (%s): a restart",
			ErrUnvouched, issuedAt.UTC().Format(time.RFC3339), time.Unix(m.start, 0).UTC().Format(time.RFC3339))
	}
	k := sha256.Sum256(id) // a fixed-size key, whatever the tag's size
	now := m.now().Unix()
	s := &m.shard[k[0]%shards]
	s.mu.Lock()
	defer s.mu.Unlock()
	if exp, ok := s.used[k]; ok && abs(exp) > now {
		if exp < 0 {
			return ErrUndetermined
		}
		return ErrReplayed
	}
	exp := expires.Unix() + 1 // a token is valid through its last second
	if exp <= now {
		return nil // nothing left to remember: it could not be replayed
	}
	if len(s.used) >= m.perShard && now >= s.sweepAt {
		s.sweepAt = 1<<63 - 1
		for id, exp := range s.used {
			if exp = abs(exp); exp <= now {
				delete(s.used, id)
			} else {
				s.sweepAt = min(s.sweepAt, exp)
			}
		}
	}
	if len(s.used) >= m.perShard {
		return fmt.Errorf("%w: the in-memory guard holds %d unexpired tokens in this shard, its bound", ErrUnavailable, len(s.used))
	}
	s.used[k] = exp
	s.sweepAt = min(s.sweepAt, exp)
	return nil
}

// Release forgets the use of id (replay.Releaser).
func (m *Memory) Release(_ context.Context, id []byte) error {
	k := sha256.Sum256(id)
	s := &m.shard[k[0]%shards]
	s.mu.Lock()
	delete(s.used, k)
	s.mu.Unlock()
	return nil
}

// Doubt marks the use of id as in doubt (replay.Doubter): a later use is
// refused with ErrUndetermined.
func (m *Memory) Doubt(_ context.Context, id []byte) error {
	k := sha256.Sum256(id)
	s := &m.shard[k[0]%shards]
	s.mu.Lock()
	if exp, ok := s.used[k]; ok && exp > 0 {
		s.used[k] = -exp
	}
	s.mu.Unlock()
	return nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// Len returns the number of entries held, expired ones not yet swept
// included.
func (m *Memory) Len() int {
	n := 0
	for i := range m.shard {
		m.shard[i].mu.Lock()
		n += len(m.shard[i].used)
		m.shard[i].mu.Unlock()
	}
	return n
}
