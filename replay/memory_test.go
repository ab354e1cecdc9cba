package replay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var ctx = context.Background()

func TestMemoryOnce(t *testing.T) {
	m := NewMemory(0)
	now := time.Unix(1785240000, 0)
	m.now = func() time.Time { return now }
	exp := now.Add(time.Minute)
	if err := m.Use(ctx, []byte("a"), time.Time{}, exp); err != nil {
		t.Fatal(err)
	}
	if err := m.Use(ctx, []byte("a"), time.Time{}, exp); !errors.Is(err, ErrReplayed) {
		t.Fatalf("second use: %v, want ErrReplayed", err)
	}
	if err := m.Use(ctx, []byte("b"), time.Time{}, exp); err != nil {
		t.Fatalf("another token: %v", err)
	}
	// Through its last second the token is still refused; after, the id is
	// free (Open refuses the token itself by then).
	now = exp
	if err := m.Use(ctx, []byte("a"), time.Time{}, exp); !errors.Is(err, ErrReplayed) {
		t.Fatalf("at expiry: %v, want ErrReplayed", err)
	}
	now = exp.Add(2 * time.Second)
	if err := m.Use(ctx, []byte("a"), time.Time{}, now.Add(time.Minute)); err != nil {
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
		err := m.Use(ctx, fmt.Appendf(nil, "t%d", i), time.Time{}, now.Add(time.Minute))
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
		k := m.Use(ctx, id, time.Time{}, now.Add(time.Minute))
		if k == nil {
			t.Fatalf("token %d went through a second time", i)
		}
	}
	// Once they expire, the flood's entries are swept for new tokens.
	now = now.Add(2 * time.Minute)
	if err := m.Use(ctx, []byte("fresh"), time.Time{}, now.Add(time.Minute)); err != nil {
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
			if m.Use(ctx, []byte("same"), time.Time{}, exp) == nil {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d uses of one token won, want 1", wins.Load())
	}
}
