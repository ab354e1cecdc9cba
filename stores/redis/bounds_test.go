package redis_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/stores"
	_ "github.com/stateseal/stateseal/stores/redis"
)

func newKey() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "stateseal:keyset:" + hex.EncodeToString(b)
}

// TestRevisionFollowsDocument (finding 9): a store writer who changes the
// document by hand with HSET, leaving "rev" alone, changes the revision:
// a loader polling Revision reads the change, and a writer holding the old
// revision gets ErrConflict instead of overwriting it unseen.
func TestRevisionFollowsDocument(t *testing.T) {
	r := testservers.StartRedis(t)
	ctx := context.Background()
	key := newKey()
	s, err := stores.Open(ctx, r.URL()+"?key="+key)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := s.Write(ctx, []byte(`{"v":1}`), "")
	if err != nil {
		t.Fatal(err)
	}
	rv := s.(stores.Revisioner)
	if got, err := rv.Revision(ctx); err != nil || got != r1 {
		t.Fatalf("Revision = %q, %v; want %q", got, err, r1)
	}
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr()})
	defer c.Close()
	before := testkit.Must(c.HGet(ctx, key, "rev").Result())
	if err := c.HSet(ctx, key, "doc", `{"v":"planted"}`).Err(); err != nil {
		t.Fatal(err)
	}
	if after := testkit.Must(c.HGet(ctx, key, "rev").Result()); after != before {
		t.Fatalf("the hand-made HSET changed rev: %q → %q", before, after)
	}
	r2, err := rv.Revision(ctx)
	if err != nil || r2 == r1 {
		t.Fatalf("Revision after a hand-made change of the document = %q, %v; want other than %q", r2, err, r1)
	}
	t.Logf("rev field %q unchanged; Revision %q → %q", before, r1, r2)
	if data, rev, err := s.Read(ctx); err != nil || rev != r2 || string(data) != `{"v":"planted"}` {
		t.Fatalf("Read = %s, %q, %v; want the planted document at %q", data, rev, err, r2)
	}
	if _, err := s.Write(ctx, []byte(`{"v":2}`), r1); !errors.Is(err, stores.ErrConflict) {
		t.Fatalf("a write from the revision before the hand-made change: %v, want ErrConflict", err)
	}
	if _, err := s.Write(ctx, []byte(`{"v":2}`), r2); err != nil {
		t.Fatalf("a write from the current revision: %v", err)
	}
}

// TestSizeBound (finding 9): a 16 MiB document put in the hash by hand is
// refused by Read and Revision with an error naming the bound, inside
// Redis: the bytes this process allocates stay far below the document's
// size.
func TestSizeBound(t *testing.T) {
	r := testservers.StartRedis(t)
	ctx := context.Background()
	key := newKey()
	s, err := stores.Open(ctx, r.URL()+"?key="+key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, make([]byte, stores.MaxSize+1), ""); !errors.Is(err, stores.ErrTooLarge) {
		t.Fatalf("Write of MaxSize+1 bytes: %v, want ErrTooLarge", err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr()})
	defer c.Close()
	const big = 16 << 20
	if err := c.HSet(ctx, key, "doc", strings.Repeat("x", big), "rev", "1").Err(); err != nil {
		t.Fatal(err)
	}
	// Connections and scripts are ready before measuring.
	if _, _, err := s.Read(ctx); !errors.Is(err, stores.ErrTooLarge) {
		t.Fatalf("Read of a 16 MiB document: %v, want ErrTooLarge", err)
	}
	allocated := func(f func()) uint64 {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		f()
		runtime.ReadMemStats(&m1)
		return m1.TotalAlloc - m0.TotalAlloc
	}
	var readErr, revErr error
	readBytes := allocated(func() { _, _, readErr = s.Read(ctx) })
	revBytes := allocated(func() { _, revErr = s.(stores.Revisioner).Revision(ctx) })
	for name, err := range map[string]error{"Read": readErr, "Revision": revErr} {
		if !errors.Is(err, stores.ErrTooLarge) || !strings.Contains(err.Error(), "1048576-byte") || !strings.Contains(err.Error(), "16777216 bytes") {
			t.Errorf("%s of a 16 MiB document: %v, want ErrTooLarge naming the bound and the size", name, err)
		}
	}
	// For scale: what transferring the document costs.
	plain := allocated(func() { c.HGet(ctx, key, "doc").Result() })
	t.Logf("16 MiB document: Read allocated %d bytes, Revision %d bytes; a plain HGET %d bytes", readBytes, revBytes, plain)
	if readBytes > 64<<10 || revBytes > 64<<10 {
		t.Errorf("refusing a 16 MiB document allocated %d (Read) and %d (Revision) bytes: it was transferred", readBytes, revBytes)
	}
	// A document at the bound is read.
	if _, err := c.HSet(ctx, key, "doc", strings.Repeat("x", stores.MaxSize)).Result(); err != nil {
		t.Fatal(err)
	}
	if data, _, err := s.Read(ctx); err != nil || len(data) != stores.MaxSize {
		t.Fatalf("Read of a MaxSize document: %d bytes, %v", len(data), err)
	}
}

// TestClose: a store opened from a URL closes its client, and its
// connections with it.
func TestClose(t *testing.T) {
	r := testservers.StartRedis(t)
	ctx := context.Background()
	before := runtime.NumGoroutine()
	for range 200 {
		s, err := stores.Open(ctx, r.URL()+"?key="+newKey())
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Read(ctx); !errors.Is(err, stores.ErrNotFound) {
			t.Fatal(err)
		}
		if err := s.(io.Closer).Close(); err != nil {
			t.Fatal(err)
		}
	}
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr()})
	defer c.Close()
	// Redis sees a closed connection a moment after the client closes it.
	var clients string
	for deadline := time.Now().Add(10 * time.Second); ; {
		var err error
		if clients, err = c.ClientList(ctx).Result(); err != nil {
			t.Fatal(err)
		}
		if strings.Count(clients, "\n") <= 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	if n := strings.Count(clients, "\n"); n > 1 {
		t.Errorf("%d connections open after 200 stores were closed:\n%s", n, clients)
	}
	t.Logf("200 stores opened, read and closed: goroutines %d before, %d after; %d connection(s) to Redis left (this test's)", before, runtime.NumGoroutine(), strings.Count(clients, "\n"))
}
