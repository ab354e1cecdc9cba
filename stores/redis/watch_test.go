package redis_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/stores"
)

// TestWatchShared: every store of a URL shares one subscription, which
// signals each watcher of a write, and signals them again when it is made
// anew after Redis came back (writes meanwhile were not announced).
func TestWatchShared(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := testservers.StartRedis(t)
	key := newKey()
	var watches []<-chan struct{}
	var first stores.Store
	for i := range 5 {
		s, err := stores.Default.Open(ctx, r.URL()+"?key="+key)
		if err != nil {
			t.Fatal(err)
		}
		defer stores.Close(s)
		if i == 0 {
			first = s
		}
		watches = append(watches, s.(stores.Watcher).Watch(ctx))
	}
	admin := goredis.NewClient(&goredis.Options{Addr: r.Addr()})
	defer admin.Close()
	if m := testkit.Must(admin.PubSubNumSub(ctx, key+":changed").Result()); m[key+":changed"] != 1 {
		t.Fatalf("%d subscriptions for five watchers, want 1", m[key+":changed"])
	}
	if _, err := first.Write(ctx, []byte("one"), ""); err != nil {
		t.Fatal(err)
	}
	for i, w := range watches {
		select {
		case <-w:
		case <-time.After(5 * time.Second):
			t.Fatalf("watcher %d not told of the write", i)
		}
	}
	r.Stop()
	r.Start()
	for i, w := range watches {
		select {
		case <-w:
		case <-time.After(10 * time.Second):
			t.Fatalf("watcher %d not told of the resubscription", i)
		}
	}
}

// TestReadsCoalescedFresh: reads that share a Redis call still see every
// write made before they were called.
func TestReadsCoalescedFresh(t *testing.T) {
	ctx := context.Background()
	r := testservers.StartRedis(t)
	key := newKey()
	s, err := stores.Default.Open(ctx, r.URL()+"?key="+key)
	if err != nil {
		t.Fatal(err)
	}
	defer stores.Close(s)
	var acked atomic.Int64
	rev, err := s.Write(ctx, []byte("0"), "")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var stale atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				want := acked.Load()
				doc, _, err := s.Read(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if got := testkit.Must(strconv.ParseInt(string(doc), 10, 64)); got < want {
					stale.Add(1)
				}
			}
		}()
	}
	for i := int64(1); i <= 300; i++ {
		if rev, err = s.Write(ctx, []byte(strconv.FormatInt(i, 10)), rev); err != nil {
			t.Fatal(err)
		}
		acked.Store(i)
	}
	close(done)
	wg.Wait()
	if n := stale.Load(); n > 0 {
		t.Fatalf("%d reads returned a document older than one written before they were called", n)
	}
}
