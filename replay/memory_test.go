package replay

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var ctx = context.Background()

// fresh is the issued-at of the tokens these tests use: after every
// guard's start, whatever clock the test gives it.
var fresh = time.Now().Add(24 * time.Hour)

func TestMemoryOnce(t *testing.T) {
	m := NewMemory(0)
	now := time.Unix(1785240000, 0)
	m.now = func() time.Time { return now }
	exp := now.Add(time.Minute)
	if err := m.Use(ctx, []byte("a"), fresh, exp); err != nil {
		t.Fatal(err)
	}
	if err := m.Use(ctx, []byte("a"), fresh, exp); !errors.Is(err, ErrReplayed) {
		t.Fatalf("second use: %v, want ErrReplayed", err)
	}
	if err := m.Use(ctx, []byte("b"), fresh, exp); err != nil {
		t.Fatalf("another token: %v", err)
	}
	// Through its last second the token is still refused; after, the id is
	// free (Open refuses the token itself by then).
	now = exp
	if err := m.Use(ctx, []byte("a"), fresh, exp); !errors.Is(err, ErrReplayed) {
		t.Fatalf("at expiry: %v, want ErrReplayed", err)
	}
	now = exp.Add(2 * time.Second)
	if err := m.Use(ctx, []byte("a"), fresh, now.Add(time.Minute)); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}

// TestMemoryBound: a flood of distinct tokens never grows the guard past
// its bound. Expired entries make room; unexpired ones are never
// forgotten, so at the bound new tokens are refused, not old ones let
// through again.
func TestMemoryBound(t *testing.T) {
	const max = 64 * 10
	m := NewMemory(max)
	now := time.Unix(1785240000, 0)
	m.now = func() time.Time { return now }
	refused := 0
	for i := range 10 * max {
		err := m.Use(ctx, fmt.Appendf(nil, "t%d", i), fresh, now.Add(time.Minute))
		if errors.Is(err, ErrUnavailable) {
			refused++
		} else if err != nil {
			t.Fatal(err)
		}
		if n := m.Len(); n > shards*(max/shards+1) {
			t.Fatalf("%d entries, over the bound %d", n, max)
		}
	}
	if refused == 0 {
		t.Fatal("a full guard accepted every new token")
	}
	// Every token accepted so far is still refused: none was forgotten.
	for i := range 10 * max {
		id := fmt.Appendf(nil, "t%d", i)
		k := m.Use(ctx, id, fresh, now.Add(time.Minute))
		if k == nil {
			t.Fatalf("token %d went through a second time", i)
		}
	}
	// Once they expire, the flood's entries are swept for new tokens.
	now = now.Add(2 * time.Minute)
	if err := m.Use(ctx, []byte("fresh"), fresh, now.Add(time.Minute)); err != nil {
		t.Fatalf("after the flood expired: %v", err)
	}
	if n := m.Len(); n > shards*(max/shards+1) {
		t.Fatalf("%d entries after a sweep, over the bound", n)
	}
}

// TestMemoryConcurrent: many goroutines present one token at once; one
// wins.
func TestMemoryConcurrent(t *testing.T) {
	m := NewMemory(0)
	exp := time.Now().Add(time.Minute)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			if m.Use(ctx, []byte("same"), fresh, exp) == nil {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d uses of one token won, want 1", wins.Load())
	}
}

// TestMemoryRefillAfterSweep is the case that used to fail: a sweep that
// empties a full shard left it never to be swept again, so once refilled
// it refused every new token for good, expired entries or not.
func TestMemoryRefillAfterSweep(t *testing.T) {
	m := NewMemory(1) // one entry per shard
	now := time.Unix(1785240000, 0)
	m.now = func() time.Time { return now }
	ids := sameShard(3)
	use := func(id []byte) error { return m.Use(ctx, id, fresh, now.Add(time.Minute)) }
	if err := use(ids[0]); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute) // ids[0] expired: its sweep empties the shard
	if err := use(ids[1]); err != nil {
		t.Fatalf("after the first entry expired: %v", err)
	}
	now = now.Add(2 * time.Minute) // ids[1] expired too
	if err := use(ids[2]); err != nil {
		t.Fatalf("after the refill expired: %v, want room", err)
	}
	// And the bound still holds against live entries.
	if err := m.Use(ctx, sameShardAs(ids[2], 1)[0], fresh, now.Add(time.Minute)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a full shard of live entries: %v, want ErrUnavailable", err)
	}
}

// TestMemoryModel checks Use, step by step, against a model of the
// requirement: a token used before and unexpired is replayed; otherwise a
// shard refuses only when it holds perShard unexpired entries. Lifetimes
// vary, so entries expire out of the order they came in, and the clock
// jumps past some of them and not others.
func TestMemoryModel(t *testing.T) {
	const max = 64 * 2 // three entries per shard
	m := NewMemory(max)
	now := time.Unix(1785240000, 0)
	m.now = func() time.Time { return now }
	rng := rand.New(rand.NewPCG(1, 2))
	model := map[string]int64{}          // id -> expiry, as the guard counts it
	byShard := [shards]map[string]bool{} // the model's ids by shard
	live := func(shard byte) int {
		n := 0
		for id := range byShard[shard] {
			if model[id] > now.Unix() {
				n++
			}
		}
		return n
	}
	refused, replayed := 0, 0
	for step := range 5000 {
		var id []byte
		if rng.IntN(8) == 0 && len(model) > 0 {
			id = fmt.Appendf(nil, "t%d", rng.IntN(step)) // maybe seen before
		} else {
			id = fmt.Appendf(nil, "t%d", step)
		}
		expires := now.Add(time.Duration(1+rng.IntN(120)) * time.Second)
		var want error
		switch exp, ok := model[string(id)]; {
		case ok && exp > now.Unix():
			want = ErrReplayed
		case live(shardOf(id)) >= m.perShard:
			want = ErrUnavailable
		}
		err := m.Use(ctx, id, fresh, expires)
		if !errors.Is(err, want) || (want == nil && err != nil) {
			t.Fatalf("step %d: Use = %v, want %v (%d live in its shard, bound %d)", step, err, want, live(shardOf(id)), m.perShard)
		}
		if err == nil {
			model[string(id)] = expires.Unix() + 1
			if byShard[shardOf(id)] == nil {
				byShard[shardOf(id)] = map[string]bool{}
			}
			byShard[shardOf(id)][string(id)] = true
		}
		switch {
		case errors.Is(err, ErrUnavailable):
			refused++
		case errors.Is(err, ErrReplayed):
			replayed++
		}
		// About five uses a second against lifetimes of a minute on
		// average: more live tokens than the guard holds.
		now = now.Add(time.Duration(rng.IntN(5)) * 100 * time.Millisecond)
	}
	if refused == 0 || replayed == 0 {
		t.Fatalf("the run never filled a shard (%d refused) or replayed (%d): it tested nothing", refused, replayed)
	}
	t.Logf("%d refused as full, %d replayed", refused, replayed)
}

func shardOf(id []byte) byte {
	k := sha256.Sum256(id)
	return k[0] % shards
}

// sameShard returns n ids that fall in one shard.
func sameShard(n int) [][]byte { return sameShardAs([]byte("x"), n) }

// sameShardAs returns n ids other than id that fall in its shard.
func sameShardAs(id []byte, n int) [][]byte {
	var out [][]byte
	for i := 0; len(out) < n; i++ {
		c := fmt.Appendf(nil, "%s/%d", id, i)
		if shardOf(c) == shardOf(id) {
			out = append(out, c)
		}
	}
	return out
}

// TestMemoryUnvouched: a Memory guard refuses, as unvouched and not as
// unavailable, a token issued before its first second (a state sealed
// before a restart), and accepts one issued in it; each guard has an
// instance of its own.
func TestMemoryUnvouched(t *testing.T) {
	m := NewMemory(0)
	start := time.Unix(m.start, 0)
	exp := time.Now().Add(time.Minute)
	err := m.Use(ctx, []byte("old"), start.Add(-time.Second), exp)
	if !errors.Is(err, ErrUnvouched) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("issued before the start: %v, want ErrUnvouched only", err)
	}
	if err := m.Use(ctx, []byte("old"), start, exp); err != nil {
		t.Fatalf("issued in the start's second: %v", err)
	}
	if m.Instance() == NewMemory(0).Instance() || m.Instance() == [InstanceSize]byte{} {
		t.Fatalf("instance %x is not random", m.Instance())
	}
	var _ Local = m
}

// TestMemoryRelease: a released use can be made again, once.
func TestMemoryRelease(t *testing.T) {
	m := NewMemory(0)
	exp := time.Now().Add(time.Minute)
	var g Releaser = m
	if err := g.Use(ctx, []byte("a"), fresh, exp); err != nil {
		t.Fatal(err)
	}
	if err := g.Release(ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := g.Use(ctx, []byte("a"), fresh, exp); err != nil {
		t.Fatalf("after release: %v", err)
	}
	if err := g.Use(ctx, []byte("a"), fresh, exp); !errors.Is(err, ErrReplayed) {
		t.Fatalf("second use after release: %v", err)
	}
}

// TestMemoryDoubt: a use put in doubt is refused as undetermined, not
// replayed, until it expires; Doubt of an id never used does nothing.
func TestMemoryDoubt(t *testing.T) {
	g := NewMemory(0)
	var d Doubter = g
	now := time.Now()
	if err := d.Use(context.Background(), []byte("a"), now, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := d.Doubt(context.Background(), []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := d.Doubt(context.Background(), []byte("never")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := g.Use(context.Background(), []byte("a"), now, now.Add(time.Minute)); !errors.Is(err, ErrUndetermined) {
			t.Fatalf("after doubt: %v", err)
		}
	}
	if err := g.Use(context.Background(), []byte("never"), now, now.Add(time.Minute)); err != nil {
		t.Fatalf("an id doubted before its use: %v", err)
	}
}
