package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/rotation/faulttest"
	"github.com/stateseal/stateseal/stores"
	"github.com/stateseal/stateseal/stores/redis"
)

// The fault tests use the URLs a user would write: no timeout, retry or
// reload parameter, so that the defaults are what they measure (issue
// 35). The guards are two, on the same servers under two prefixes: the
// default one, and one with durable records (min_replicas=1).

// guards are the default guard (bounded: it loses no flow more than
// faulttest.Bound after the promotion) and the durable one.
func guards(t *testing.T, url func(string) string) []faulttest.Guard {
	return []faulttest.Guard{
		{Name: "guard", Guard: guardFor(t, url(""), "stateseal:used:"), Bounded: true},
		{Name: "durable guard (min_replicas=1)", Guard: guardFor(t, url("min_replicas=1"), "stateseal:durable:")},
	}
}

// windows watches the replica at addr through the fault: it records in
// r when the replica was promoted and, if the subscription's node dies
// (moves), when the loaders' subscription to channel reached it; wait
// blocks until what it records is known (or the watch gave up).
func windows(t *testing.T, r *faulttest.Run, addr, channel string, moves bool) (wait func()) {
	p, s := testservers.WatchPromotion(t, addr, channel)
	return func() {
		if at, ok := <-p; ok {
			r.Promoted(at, moves)
		}
		if !moves {
			return
		}
		if at, ok := <-s; ok {
			r.Subscribed(at)
		}
	}
}

// TestSentinelFaults: a SENTINEL FAILOVER, then a kill -9 of the
// primary, mid-load: no acknowledged rotation lost, no state executed
// twice, and the loaders install a write made after the fault without
// waiting for their 30 s poll. docs/FLEET.md quotes its counts.
func TestSentinelFaults(t *testing.T) {
	s := testservers.StartRedisSentinel(t)
	gs := guards(t, s.URL)
	key := newKey()
	r := faulttest.Start(t, s.URL("key="+key), "", faulttest.Loaders(), 30*time.Second)
	r.FaultGuards("sentinel failover", gs, faulttest.Warm(), func() {
		wait := windows(t, r, replicaOf(s).Addr(), key+":changed", true)
		s.Failover()
		wait()
	}, nil)
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
	key2 := newKey()
	r2 := faulttest.Start(t, s.URL("key="+key2), "", faulttest.Loaders(), 30*time.Second)
	r2.FaultGuards("sentinel kill -9 primary", gs, faulttest.Warm(), func() {
		wait := windows(t, r2, replicaOf(s).Addr(), key2+":changed", true)
		old := s.KillPrimary()
		s.WaitPromoted(old)
		s.Rejoin(old)
		wait()
	}, nil)
}

// replicaOf is the Sentinel topology's node that is not the primary.
func replicaOf(s *testservers.RedisSentinel) *testservers.Redis {
	p := s.Primary()
	for _, n := range s.Nodes {
		if n != p {
			return n
		}
	}
	return nil
}

// clusterKey is a keyset key whose channel hashes to a slot of the
// same master: the fault on that master hits the store, its
// subscription and a third of the guards' buckets at once.
func clusterKey(c *testservers.RedisCluster) string {
	for {
		k := newKey()
		if c.MasterFor(k) == c.MasterFor(k+":changed") {
			return k
		}
	}
}

// TestClusterFaults: a kill -9 of the master that holds the keyset and
// its channel mid-load, restarted as a supervisor would restart it.
func TestClusterFaults(t *testing.T) {
	c := testservers.StartRedisCluster(t)
	key := clusterKey(c)
	gs := guards(t, c.URL)
	r := faulttest.Start(t, c.URL("key="+key), "", faulttest.Loaders(), 30*time.Second)
	r.FaultGuards("cluster kill -9 master", gs, faulttest.Warm(), func() {
		m := c.MasterFor(key)
		wait := windows(t, r, c.ReplicaOf(m).Addr(), key+":changed", true)
		m.Stop()
		wait()
		m.Start()
		c.WaitOK()
	}, nil)
}

// TestClusterFailover: the replica of the master that holds the keyset,
// its channel and a third of the guards' buckets is told CLUSTER
// FAILOVER, a coordinated manual failover, mid-load.
func TestClusterFailover(t *testing.T) {
	c := testservers.StartRedisCluster(t)
	key := clusterKey(c)
	gs := guards(t, c.URL)
	r := faulttest.Start(t, c.URL("key="+key), "", faulttest.Loaders(), 30*time.Second)
	r.FaultGuards("cluster failover", gs, faulttest.Warm(), func() {
		// The old master, a replica now, keeps the subscription and
		// still delivers every PUBLISH: the Cluster broadcasts them.
		wait := windows(t, r, c.ReplicaOf(c.MasterFor(key)).Addr(), key+":changed", false)
		c.Failover(key, "")
		wait()
	}, nil)

	// A write through a slot map from before a failover (another shard's,
	// and a reload interval longer than the test) is pinned to the old
	// master, a replica by then: it must go to the new master, not fail.
	other := newKey()
	for c.MasterFor(other) == c.MasterFor(key) {
		other = newKey()
	}
	cl, err := redis.NewClient(c.URL("cluster_state_reload_interval=10m"))
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
