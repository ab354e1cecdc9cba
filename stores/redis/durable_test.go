package redis_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/stores"
)

// TestDurableWrite: a write reports success only once the primary's
// replica holds it; a replica that does not answer, or fewer replicas
// than min_replicas, make the write fail with stores.ErrNotDurable.
func TestDurableWrite(t *testing.T) {
	ctx := context.Background()
	primary := testservers.StartRedis(t)
	replica := testservers.StartRedisVolatile(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))
	rc := goredis.NewClient(&goredis.Options{Addr: replica.Addr()})
	defer rc.Close()
	// The primary's view, not the replica's: a write WAITs for the
	// replicas the primary lists, which it lists a moment after the
	// replica reports its link up (the CI failure of 2026-12-02).
	testkit.WaitFor(t, "the primary to list its replica", func() bool {
		return primary.ReplicasOnline() == 1
	})
	key := newKey()
	open := func(query string) stores.Store {
		s, err := stores.Default.Open(ctx, primary.URL()+"?key="+key+query)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stores.Close(s) })
		return s
	}
	s := open("&wait_timeout=300ms")
	rev := ""
	for i := range 20 {
		doc := "doc " + strconv.Itoa(i)
		next, err := s.Write(ctx, []byte(doc), rev)
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		rev = next
		// Acknowledged means on the replica now, not soon.
		if got := testkit.Must(rc.HGet(ctx, key, "doc").Result()); got != doc {
			t.Fatalf("write %d acknowledged, the replica holds %q", i, got)
		}
	}

	// Two replicas required, one connected: refused before it is made.
	_, err := open("&min_replicas=2").Write(ctx, []byte("two"), rev)
	if !errors.Is(err, stores.ErrNotDurable) || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("min_replicas=2 with one replica: %v", err)
	}
	if got, r := testkit.Must2(s.Read(ctx)); string(got) != "doc 19" || r != rev {
		t.Fatalf("after a refused write the store holds %q at %s", got, r)
	}

	// A replica that stops answering: the write is made on the primary
	// but not acknowledged, and says so.
	replica.Freeze()
	start := time.Now()
	_, err = s.Write(ctx, []byte("frozen"), rev)
	replica.Thaw()
	if !errors.Is(err, stores.ErrNotDurable) || !strings.Contains(err.Error(), "0 of its 1 replicas") || !strings.Contains(err.Error(), "read the keyset again") {
		t.Fatalf("write with the replica frozen: %v", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Fatalf("the refused write took %v, want about wait_timeout (300ms)", d)
	}
}

// TestDurableSingle: a Redis without replicas takes writes by default
// and refuses them when min_replicas asks for one.
func TestDurableSingle(t *testing.T) {
	ctx := context.Background()
	r := testservers.StartRedis(t)
	key := newKey()
	s, err := stores.Default.Open(ctx, r.URL()+"?key="+key)
	if err != nil {
		t.Fatal(err)
	}
	defer stores.Close(s)
	if _, err := s.Write(ctx, []byte("one"), ""); err != nil {
		t.Fatal(err)
	}
	s2, err := stores.Default.Open(ctx, r.URL()+"?key="+key+"&min_replicas=1")
	if err != nil {
		t.Fatal(err)
	}
	defer stores.Close(s2)
	_, rev := testkit.Must2(s2.Read(ctx))
	if _, err := s2.Write(ctx, []byte("two"), rev); !errors.Is(err, stores.ErrNotDurable) {
		t.Fatalf("min_replicas=1 on a single Redis: %v", err)
	}
	if got, _ := testkit.Must2(s.Read(ctx)); string(got) != "one" {
		t.Fatalf("the refused write changed the store: %q", got)
	}
}
