package seal

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stateseal/stateseal/internal/envelope"
	"github.com/stateseal/stateseal/internal/keymaterial"
	"github.com/stateseal/stateseal/keyring"
)

// A cipherCache holds the ciphers of one keyring snapshot. It is rebuilt
// once when the ring's snapshot changes, so Seal and Open never derive key
// state per call.
type cipherCache struct {
	cur atomic.Pointer[cipherSet]
}

type cipherSet struct {
	snap    *keyring.Snapshot
	ids     []uint32 // sorted; keys that may open, that is, not retired
	ciphers []*envelope.Cipher
	limits
}

// limits are the time bounds in force for one snapshot: the Sealer's
// options, tightened by the keyset's policy.
type limits struct {
	defaultTTL, maxTTL time.Duration
	maxTTLSec, skewSec int64
}

func (cc *cipherCache) get(snap *keyring.Snapshot, cfg *config) *cipherSet {
	if cs := cc.cur.Load(); cs != nil && cs.snap == snap {
		return cs
	}
	cs := &cipherSet{snap: snap, limits: cfg.limits(snap)}
	for _, k := range snap.Keys() {
		if k.State != keyring.Retired {
			c, err := envelope.NewCipher(version(k.Algorithm), keymaterial.Of(&k))
			if err != nil {
				// The snapshot validated the key, so this is a bug.
				panic("seal: " + err.Error())
			}
			cs.ids = append(cs.ids, k.ID)
			cs.ciphers = append(cs.ciphers, c)
		}
		k.Zero()
	}
	// Concurrent rebuilds for one snapshot are equivalent; any may win.
	cc.cur.Store(cs)
	return cs
}

func (cs *cipherSet) find(id uint32) *envelope.Cipher {
	if i, ok := slices.BinarySearch(cs.ids, id); ok {
		return cs.ciphers[i]
	}
	return nil
}

func version(a keyring.Algorithm) byte {
	if a == keyring.AEAD {
		return envelope.VersionAEAD
	}
	return envelope.VersionMAC
}

// scratch is the working buffer of one call: the associated data and the
// envelope. It never holds a secret (an AEAD payload is written only to the
// caller's buffer), so it goes back to the pool without wiping.
type scratch struct {
	buf []byte
}

var scratchPool = sync.Pool{New: func() any { return &scratch{buf: make([]byte, 0, 1024)} }}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

func putScratch(sc *scratch) { scratchPool.Put(sc) }
