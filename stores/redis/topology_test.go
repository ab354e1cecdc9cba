package redis_test

import (
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testservers"
)

// warm is how long the load runs before a fault.
func warm() time.Duration {
	if longFaults {
		return 20 * time.Second
	}
	return 2 * time.Second
}

// TestSentinelFaults: a SENTINEL FAILOVER, then a kill -9 of the
// primary, mid-load: no acknowledged rotation lost, no state executed
// twice, and the loaders install a write made after the fault without
// waiting for their 30 s poll.
func TestSentinelFaults(t *testing.T) {
	s := testservers.StartRedisSentinel(t)
	key := newKey()
	loc := s.URL("key=" + key + "&wait_timeout=1s")
	r := startFault(t, loc, loaderCount())
	g := guardFor(t, s.URL("max_retries=-1&dialer_retries=1&dial_timeout=200ms"))
	r.run("sentinel failover", g, warm(), s.Failover, nil)

	r2 := startFault(t, s.URL("key="+newKey()+"&wait_timeout=1s"), loaderCount())
	// With one replica, writes need it back (min_replicas=1 behind
	// Sentinel): the killed primary restarts, as a supervisor would
	// restart it, and rejoins as a replica.
	r2.run("sentinel kill -9 primary", g, warm(), func() {
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
	r := startFault(t, c.URL("key="+key+"&wait_timeout=1s&cluster_state_reload_interval=1s"), loaderCount())
	g := guardFor(t, c.URL("max_retries=-1&dialer_retries=1&dial_timeout=200ms&cluster_state_reload_interval=1s"))
	var m *testservers.Redis
	r.run("cluster kill -9 master", g, warm(), func() {
		m = c.MasterFor(key)
		m.Stop()
	}, func() { m.Start(); c.WaitOK() })
}
