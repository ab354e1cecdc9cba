package redisguard

import (
	"sync/atomic"
	"testing"
	"time"
)

// SetNow sets the clock g sends to Redis with each claim.
func SetNow(g *Guard, now func() time.Time) { g.now = now }

// Verified counts the claims whose reply was lost and whose retry found
// the claim's own record; Released, the unsettled records taken back.
func Verified(g *Guard) *atomic.Int64 { return &g.verified }
func Released(g *Guard) *atomic.Int64 { return &g.released }

// PolicyEvery sets how often the background work reads the eviction
// policy, until the test ends: call it before making guards, so that they
// are closed before it is restored.
func PolicyEvery(t testing.TB, d time.Duration) {
	old := policyEvery
	policyEvery = d
	t.Cleanup(func() { policyEvery = old })
}

// EpochEvery sets how often the background work of guards made after it
// refreshes the epoch, until the test ends.
func EpochEvery(t testing.TB, d time.Duration) {
	old := epochEvery
	epochEvery = d
	t.Cleanup(func() { epochEvery = old })
}
