package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/internal/faulttest"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/stores"
	"github.com/stateseal/stateseal/stores/redis"
)

// TestSentinelFaults: a SENTINEL FAILOVER, then a kill -9 of the
// primary, mid-load: no acknowledged rotation lost, no state executed
// twice, and the loaders install a write made after the fault without
// waiting for their 30 s poll. docs/FLEET.md quotes its counts.
func TestSentinelFaults(t *testing.T) {
	s := testservers.StartRedisSentinel(t)
	g := guardFor(t, s.URL("max_retries=-1&dialer_retries=1&dial_timeout=200ms"))
	key := newKey()
	r := faulttest.Start(t, s.URL("key="+key+"&wait_timeout=1s"), "", faulttest.Loaders(), 30*time.Second)
	r.Fault("sentinel failover", g, faulttest.Warm(), s.Failover, nil)
	// The loaders' one subscription moved to the new primary.
	pc := goredis.NewClient(&goredis.Options{Addr: s.Primary().Addr()})
	defer pc.Close()
	testkit.WaitFor(t, "the subscription on the new primary", func() bool {
		m, err := pc.PubSubNumSub(context.Background(), key+":changed").Result()
		return err == nil && m[key+":changed"] == 1
	})

	// With one replica, writes need it back (min_replicas=1 behind
	// Sentinel): the killed primary restarts, as a supervisor would
	// restart it, and rejoins as a replica.
	r2 := faulttest.Start(t, s.URL("key="+newKey()+"&wait_timeout=1s"), "", faulttest.Loaders(), 30*time.Second)
	r2.Fault("sentinel kill -9 primary", g, faulttest.Warm(), func() {
		old := s.KillPrimary()
		s.WaitPromoted(old)
		s.Rejoin(old)
	}, nil)
}

// TestClusterFaults: a kill -9 of the master that holds the keyset
// mid-load, the loaders' slot map reloaded every second.
func TestClusterFaults(t *testing.T) {
	c := testservers.StartRedisCluster(t)
	key := newKey()
	g := guardFor(t, c.URL("max_retries=-1&dialer_retries=1&dial_timeout=200ms&cluster_state_reload_interval=1s"))
	r := faulttest.Start(t, c.URL("key="+key+"&wait_timeout=1s&cluster_state_reload_interval=1s"), "", faulttest.Loaders(), 30*time.Second)
	var m *testservers.Redis
	r.Fault("cluster kill -9 master", g, faulttest.Warm(), func() {
		m = c.MasterFor(key)
		m.Stop()
	}, func() { m.Start(); c.WaitOK() })
}

// TestClusterFailover: the replica of the master that holds the keyset
// (and a third of the guard's buckets) is told CLUSTER FAILOVER, a
// coordinated manual failover, mid-load.
func TestClusterFailover(t *testing.T) {
	c := testservers.StartRedisCluster(t)
	key := newKey()
	g := guardFor(t, c.URL("max_retries=-1&dialer_retries=1&dial_timeout=200ms&cluster_state_reload_interval=1s"))
	r := faulttest.Start(t, c.URL("key="+key+"&wait_timeout=1s&cluster_state_reload_interval=1s"), "", faulttest.Loaders(), 30*time.Second)
	r.Fault("cluster failover", g, faulttest.Warm(), func() { c.Failover(key, "") }, nil)

	// A write through a slot map from before a failover (another shard's,
	// go-redis's 60 s reload interval) is pinned to the old master, a
	// replica by then: it must go to the new master, not fail.
	other := newKey()
	for c.MasterFor(other) == c.MasterFor(key) {
		other = newKey()
	}
	cl, err := redis.NewClient(c.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	st := redis.New(cl, other, nil)
	ctx := context.Background()
	if _, _, err := st.Read(ctx); !errors.Is(err, stores.ErrNotFound) {
		t.Fatalf("reading a new key: %v", err)
	}
	c.Failover(other, "")
	if _, err := st.Write(ctx, []byte("after the failover"), ""); err != nil {
		t.Fatalf("a write on the slot map from before the failover: %v", err)
	}
}
