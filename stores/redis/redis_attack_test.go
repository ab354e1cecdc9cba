package redis_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/backends/kektest"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/stores"
)

// TestAttackRevisionCannotBeKept: a store writer changes the document by
// hand and arranges the hash's other fields so that the revision a
// loader polls stays what it was. Every such change still changes the
// revision (or makes Revision fail): the loader reads it.
func TestAttackRevisionCannotBeKept(t *testing.T) {
	r := testservers.StartRedis(t)
	ctx := context.Background()
	key := newKey()
	s, err := stores.Open(ctx, r.URL()+"?key="+key)
	if err != nil {
		t.Fatal(err)
	}
	const old, evil = `{"v":1}`, `{"v":"evil"}`
	r1, err := s.Write(ctx, []byte(old), "")
	if err != nil {
		t.Fatal(err)
	}
	rv := s.(stores.Revisioner)
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr()})
	defer c.Close()
	counter, sum, _ := strings.Cut(r1, ":")
	sh := sha1.Sum([]byte(evil))
	evilSum := hex.EncodeToString(sh[:])
	for name, f := range map[string]func(){
		"doc only":                 func() { c.HSet(ctx, key, "doc", evil) },
		"rev = old counter":        func() { c.HSet(ctx, key, "doc", evil, "rev", counter) },
		"rev = whole old revision": func() { c.HSet(ctx, key, "doc", evil, "rev", r1) },
		"rev contains colon":       func() { c.HSet(ctx, key, "doc", evil, "rev", counter+":"+sum+":"+evilSum) },
		"rev deleted":              func() { c.HSet(ctx, key, "doc", evil); c.HDel(ctx, key, "rev") },
		"key recreated":            func() { c.Del(ctx, key); c.HSet(ctx, key, "doc", evil, "rev", counter) },
		"doc with trailing NUL":    func() { c.HSet(ctx, key, "doc", old+"\x00", "rev", counter) },
		"key becomes a string":     func() { c.Del(ctx, key); c.Set(ctx, key, old, 0) },
		"doc field renamed":        func() { c.HDel(ctx, key, "doc"); c.HSet(ctx, key, "Doc", evil, "rev", counter) },
	} {
		c.Del(ctx, key)
		c.HSet(ctx, key, "doc", old, "rev", counter)
		if got, err := rv.Revision(ctx); err != nil || got != r1 {
			t.Fatalf("reset: %q %v", got, err)
		}
		f()
		got, err := rv.Revision(ctx)
		if err == nil && got == r1 {
			data, _ := testkit.Must2(s.Read(ctx))
			if string(data) != old {
				t.Errorf("%s: the document is now %q and the revision is unchanged (%q)", name, data, got)
			}
		}
	}
}

// TestAttackRevFieldSizeBomb: the store bounds the document (HSTRLEN of
// "doc", inside Redis, before anything is sent), and says the revision
// a loader polls is "about fifty bytes, whatever the document's size".
// The revision is built from the hash's "rev" field too, which a store
// writer sets to a string of any size: every poll of every instance then
// transfers and allocates it.
func TestAttackRevFieldSizeBomb(t *testing.T) {
	r := testservers.StartRedis(t)
	ctx := context.Background()
	key := newKey()
	s, err := stores.Open(ctx, r.URL()+"?key="+key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, []byte(`{"v":1}`), ""); err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr()})
	defer c.Close()
	const big = 32 << 20
	if err := c.HSet(ctx, key, "rev", strings.Repeat("9", big)).Err(); err != nil {
		t.Fatal(err)
	}
	allocated := func(f func()) uint64 {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		f()
		runtime.ReadMemStats(&m1)
		return m1.TotalAlloc - m0.TotalAlloc
	}
	var rev string
	var readErr, revErr error
	revBytes := allocated(func() { rev, revErr = s.(stores.Revisioner).Revision(ctx) })
	readBytes := allocated(func() { _, _, readErr = s.Read(ctx) })
	t.Logf("a %d-byte rev field: Revision allocated %d bytes (answer %d bytes, %v), Read %d bytes (%v)", big, revBytes, len(rev), revErr, readBytes, readErr)
	if revBytes > 1<<20 || readBytes > 4<<20 {
		t.Errorf("FINDING: a %d MiB \"rev\" field makes every Revision poll allocate %d MiB and every Read %d MiB: the size bound covers only \"doc\"",
			big>>20, revBytes>>20, readBytes>>20)
	}
}

// countingStore counts a store's reads and revision calls and forwards
// its watch.
type countingStore struct {
	stores.Store
	reads, revs atomic.Int64
}

func (c *countingStore) Read(ctx context.Context) ([]byte, string, error) {
	c.reads.Add(1)
	return c.Store.Read(ctx)
}
func (c *countingStore) Revision(ctx context.Context) (string, error) {
	c.revs.Add(1)
	return c.Store.(stores.Revisioner).Revision(ctx)
}
func (c *countingStore) Watch(ctx context.Context) <-chan struct{} {
	return c.Store.(stores.Watcher).Watch(ctx)
}

// TestAttackPublishFlood: the store writer floods the change channel.
// A loader coalesces the signals, asks only for the revision (which did
// not change), never reads the document again, never reports, and keeps
// serving; and a flood that alternates two broken documents is reported
// at most once per document, not at every write.
func TestAttackPublishFlood(t *testing.T) {
	const password = "flood-pw-91c2"
	r := testservers.StartRedisAuth(t, password)
	ctx := context.Background()
	key := newKey()
	loc := r.URL() + "?key=" + key
	kek := kektest.LocalKEK(t, t.TempDir())
	if _, err := rotation.Init(ctx, loc, kek, keyring.AEAD, keyring.DefaultPolicy(), &rotation.Options{KEK: kek, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	inner, err := stores.Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: inner}
	var reports atomic.Int64
	var lastErr atomic.Value
	l := &keyset.Loader{Store: cs, Options: keyset.LoadOptions{KEK: kek}, Logger: slog.New(slog.DiscardHandler),
		OnError: func(err error) { reports.Add(1); lastErr.Store(err.Error()) }}
	ring, err := l.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr(), Password: password})
	defer c.Close()
	rc, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { l.Run(rc, time.Hour); close(done) }()
	defer func() { cancel(); <-done }()
	time.Sleep(200 * time.Millisecond)
	reads0 := cs.reads.Load()
	start := time.Now()
	const n = 20000
	pipe := c.Pipeline()
	for i := range n {
		pipe.Publish(ctx, key+":changed", i)
		if i%1000 == 999 {
			pipe.Exec(ctx)
		}
	}
	pipe.Exec(ctx)
	time.Sleep(500 * time.Millisecond)
	t.Logf("%d publishes in %v: %d revision calls, %d reads, %d reports", n, time.Since(start), cs.revs.Load(), cs.reads.Load()-reads0, reports.Load())
	if cs.reads.Load() != reads0 || reports.Load() != 0 || ring.Current().Version() != 1 {
		t.Errorf("a flood of signals without a change: %d reads, %d reports", cs.reads.Load()-reads0, reports.Load())
	}
	// Alternate two broken documents, announcing each.
	for i := range 200 {
		doc := `{"format":"stateseal-keyset-v3","id":"a"`
		if i%2 == 1 {
			doc = `{"format":"stateseal-keyset-v3","id":"b"`
		}
		c.HSet(ctx, key, "doc", doc)
		c.Publish(ctx, key+":changed", i)
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	t.Logf("200 alternating broken documents: %d reports", reports.Load())
	if reports.Load() > 4 {
		t.Logf("note: each alternation of two broken documents is reported again (%d reports for 200 writes): a store writer sets the rate of every instance's error reports", reports.Load())
	}
	if e, _ := lastErr.Load().(string); strings.Contains(e, password) {
		t.Errorf("a report shows the Redis password: %s", e)
	}
	if ring.Current().Version() != 1 {
		t.Fatal("ring changed")
	}
	// Attacker-made failures name the store without its password.
	for _, f := range []func(){
		func() { c.Del(ctx, key); c.Set(ctx, key, "x", 0) },                             // WRONGTYPE
		func() { c.Del(ctx, key); c.HSet(ctx, key, "doc", strings.Repeat("x", 2<<20)) }, // too large
		func() { c.Del(ctx, key) },                                                      // gone
	} {
		f()
		err := l.Reload(ctx)
		if err == nil || strings.Contains(err.Error(), password) {
			t.Errorf("attacker-made failure: %v", err)
		}
		if errors.Is(err, stores.ErrNotFound) && !strings.Contains(err.Error(), "restore") {
			t.Errorf("gone: %v", err)
		}
	}
}
