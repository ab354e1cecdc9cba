package testservers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// SentinelMaster is the name the sentinels of StartRedisSentinel monitor.
const SentinelMaster = "stateseal"

// A RedisSentinel is a primary, a replica and three sentinels, all on
// loopback, each Redis with an append-only file synced on every write.
// Which of Nodes is the primary changes with a failover.
type RedisSentinel struct {
	t         testing.TB
	Nodes     []*Redis // the primary first, when started
	Sentinels []*Process
}

// StartRedisSentinel starts the topology and waits until the sentinels
// know the replica and each other (a failover can then elect a leader).
func StartRedisSentinel(t testing.TB) *RedisSentinel {
	t.Helper()
	bin := findBinary(t, RedisBinary)
	s := &RedisSentinel{t: t}
	primary := startRedis(t, "")
	replica := startRedisArgs(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))
	s.Nodes = []*Redis{primary, replica}
	for range 3 {
		dir := t.TempDir()
		port := FreePort(t)
		conf := filepath.Join(dir, "sentinel.conf")
		// Short timeouts so that a test's failover takes seconds: a
		// primary is down after 1 s without an answer.
		os.WriteFile(conf, fmt.Appendf(nil, `port %d
bind 127.0.0.1
dir %s
sentinel monitor %s 127.0.0.1 %d 2
sentinel down-after-milliseconds %s 1000
sentinel failover-timeout %s 5000
sentinel parallel-syncs %s 1
`, port, dir, SentinelMaster, primary.Port, SentinelMaster, SentinelMaster, SentinelMaster), 0o600)
		s.Sentinels = append(s.Sentinels, start(t, "redis-sentinel", bin, port, nil, conf, "--sentinel"))
	}
	s.waitReady(primary.Addr())
	return s
}

// SentinelAddrs are the sentinels' addresses.
func (s *RedisSentinel) SentinelAddrs() []string {
	var a []string
	for _, p := range s.Sentinels {
		a = append(a, p.Addr())
	}
	return a
}

// URL is a store URL for the topology: the first sentinel's address,
// the others as addr=, and master=; query is added ("key=K", say).
func (s *RedisSentinel) URL(query string) string {
	a := s.SentinelAddrs()
	u := fmt.Sprintf("redis://%s/0?master=%s&addr=%s&addr=%s", a[0], SentinelMaster, a[1], a[2])
	if query != "" {
		u += "&" + query
	}
	return u
}

// Primary returns the node every sentinel names as the primary.
func (s *RedisSentinel) Primary() *Redis {
	s.t.Helper()
	var addr string
	// The sentinels may disagree for an instant, or one answer late.
	waitLong(s.t, 60*time.Second, "the sentinels to agree on the primary", func() bool {
		addr = s.masterAddr()
		return addr != ""
	})
	for _, n := range s.Nodes {
		if n.Addr() == addr {
			return n
		}
	}
	s.t.Fatalf("the sentinels name %s, none of the nodes", addr)
	return nil
}

// masterAddr asks each sentinel for the primary and returns it once all
// three agree ("" if they do not).
func (s *RedisSentinel) masterAddr() string {
	seen := ""
	for _, p := range s.Sentinels {
		c := goredis.NewSentinelClient(&goredis.Options{Addr: p.Addr(), MaxRetries: -1})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		a, err := c.GetMasterAddrByName(ctx, SentinelMaster).Result()
		cancel()
		c.Close()
		if err != nil || len(a) != 2 {
			return ""
		}
		addr := a[0] + ":" + a[1]
		if seen != "" && seen != addr {
			return ""
		}
		seen = addr
	}
	return seen
}

// waitReady waits until every sentinel names primary, sees the replica and
// the two other sentinels, and the replica's link is up.
func (s *RedisSentinel) waitReady(primary string) {
	s.t.Helper()
	// Sentinels take a while to agree after a failover and a rejoin,
	// longer on a loaded machine (a CI rehearsal waited over a minute).
	waitLong(s.t, 2*time.Minute, "the sentinel topology to be ready", func() bool {
		if s.masterAddr() != primary {
			return false
		}
		for _, p := range s.Sentinels {
			c := goredis.NewSentinelClient(&goredis.Options{Addr: p.Addr(), MaxRetries: -1})
			m, err := c.Master(context.Background(), SentinelMaster).Result()
			c.Close()
			if err != nil || m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" || strings.Contains(m["flags"], "down") {
				return false
			}
		}
		for _, n := range s.Nodes {
			if n.Addr() != primary && !linkUp(n) {
				return false
			}
		}
		return replicasOnline(primary) == len(s.Nodes)-1
	})
}

// Failover makes the sentinels promote the replica (SENTINEL FAILOVER) and
// waits until the old primary follows the new one.
func (s *RedisSentinel) Failover() {
	s.t.Helper()
	old := s.Primary()
	c := goredis.NewSentinelClient(&goredis.Options{Addr: s.Sentinels[0].Addr()})
	defer c.Close()
	if err := c.Failover(context.Background(), SentinelMaster).Err(); err != nil {
		s.t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	s.waitReady(s.waitNewPrimary(old, "the failover"))
}

// waitNewPrimary waits until the sentinels agree on a primary other than
// old, and returns it. The address comes from the wait, not from another
// question: masterAddr answers "" while any sentinel is slow to answer
// (a loaded machine) or not yet reconfigured, and a wait for "" to be the
// primary would never end.
func (s *RedisSentinel) waitNewPrimary(old *Redis, what string) string {
	s.t.Helper()
	var a string
	waitLong(s.t, 60*time.Second, what, func() bool {
		a = s.masterAddr()
		return a != "" && a != old.Addr()
	})
	return a
}

// KillPrimary kills the primary (SIGKILL) and returns it, stopped, with
// its append-only file kept; WaitPromoted waits for the sentinels to
// promote the replica, Restart brings the old primary back (it rejoins as
// a replica once the sentinels reconfigure it).
func (s *RedisSentinel) KillPrimary() *Redis {
	s.t.Helper()
	p := s.Primary()
	p.Stop()
	return p
}

// WaitPromoted waits until the sentinels name a primary other than old.
func (s *RedisSentinel) WaitPromoted(old *Redis) {
	s.t.Helper()
	s.waitNewPrimary(old, "the sentinels to promote the replica")
}

// Rejoin starts old again and waits until it follows the new primary.
func (s *RedisSentinel) Rejoin(old *Redis) {
	s.t.Helper()
	old.Start()
	s.waitReady(s.waitNewPrimary(old, "the sentinels to name the primary"))
}

// ReplicasOnline is the number of replicas r, a primary, lists in ROLE:
// those a write's WAIT counts. It lags the replica's own view of its
// link (master_link_status:up): wait on this one before a write that
// must reach the replica.
func (r *Redis) ReplicasOnline() int { return replicasOnline(r.Addr()) }

func replicasOnline(addr string) int {
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	role, err := c.Do(context.Background(), "ROLE").Slice()
	if err != nil || len(role) < 3 || role[0] != "master" {
		return -1
	}
	list, _ := role[2].([]any)
	return len(list)
}

func linkUp(n *Redis) bool {
	c := goredis.NewClient(&goredis.Options{Addr: n.Addr(), MaxRetries: -1})
	defer c.Close()
	info, err := c.Info(context.Background(), "replication").Result()
	return err == nil && strings.Contains(info, "master_link_status:up")
}

// startRedisArgs starts a persistent redis-server as StartRedis does,
// with more options.
func startRedisArgs(t testing.TB, args ...string) *Redis {
	t.Helper()
	bin := findBinary(t, RedisBinary)
	dir := t.TempDir()
	for attempt := 1; ; attempt++ {
		// The ports are chosen free, but another test's server may take
		// one before this one binds it: then new ports, a few times.
		port := FreePort(t)
		full := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "yes", "--appendfsync", "always", "--dir", dir}, args...)
		for i := range full {
			if full[i] == "--cluster-port" && i+1 < len(full) {
				full[i+1] = strconv.Itoa(FreePort(t))
			}
		}
		log, err := os.CreateTemp(t.TempDir(), "redis-*.log")
		if err != nil {
			t.Fatal(err)
		}
		p := &Process{t: t, name: "redis", path: bin, args: full, Port: port, log: log}
		err = p.tryStart()
		if err == nil {
			t.Cleanup(p.Stop)
			return &Redis{Process: p}
		}
		if !errors.Is(err, errPortTaken) || attempt == 5 {
			t.Fatal(err)
		}
	}
}

// A RedisCluster is three masters with one replica each, on loopback.
type RedisCluster struct {
	t     testing.TB
	Nodes []*Redis
}

// StartRedisCluster starts six nodes (a node is down after 1 s without an
// answer: cluster-node-timeout), joins them with redis-cli --cluster
// create, and waits until every node reports the cluster ok.
func StartRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	cli := findBinary(t, "redis-cli")
	c := &RedisCluster{t: t}
	var addrs []string
	for range 6 {
		// The bus port is chosen too: port+10000 may be taken or past 65535.
		n := startRedisArgs(t, "--cluster-enabled", "yes", "--cluster-node-timeout", "1000",
			"--cluster-port", strconv.Itoa(FreePort(t)), "--cluster-config-file", "nodes.conf")
		c.Nodes = append(c.Nodes, n)
		addrs = append(addrs, n.Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitOK()
	return c
}

// Addrs are the nodes' addresses.
func (c *RedisCluster) Addrs() []string {
	var a []string
	for _, n := range c.Nodes {
		a = append(a, n.Addr())
	}
	return a
}

// URL is a store URL for the cluster: the first node's address and the
// others as addr=; query is added.
func (c *RedisCluster) URL(query string) string {
	a := c.Addrs()
	u := "redis://" + a[0] + "/0?addr=" + strings.Join(a[1:], "&addr=")
	if query != "" {
		u += "&" + query
	}
	return u
}

// WaitOK waits until every running node reports cluster_state:ok and
// every slot served, and every running replica's link to its master is up
// (a replica that never synced cannot take over).
func (c *RedisCluster) WaitOK() {
	c.t.Helper()
	waitLong(c.t, 60*time.Second, "the cluster to be ok", func() bool {
		replicas, listed := 0, 0
		for _, n := range c.Nodes {
			if n.cmd == nil {
				continue
			}
			cl := goredis.NewClient(&goredis.Options{Addr: n.Addr(), MaxRetries: -1})
			info, err := cl.ClusterInfo(context.Background()).Result()
			repl, err2 := cl.Info(context.Background(), "replication").Result()
			cl.Close()
			if err != nil || err2 != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
				return false
			}
			if strings.Contains(repl, "role:slave") {
				if !strings.Contains(repl, "master_link_status:up") {
					return false
				}
				replicas++
			} else {
				listed += max(n.ReplicasOnline(), 0)
			}
		}
		// Every replica is listed by its master too: a write WAITs for
		// those, and the master lists a replica a moment after the
		// replica reports its link up.
		return listed == replicas
	})
}

// MasterFor returns the node that serves key as a master: the master
// that answers EXISTS key instead of redirecting it (MOVED).
func (c *RedisCluster) MasterFor(key string) *Redis {
	c.t.Helper()
	for _, n := range c.Nodes {
		if n.cmd == nil {
			continue
		}
		cl := goredis.NewClient(&goredis.Options{Addr: n.Addr(), MaxRetries: -1})
		role, err := cl.Do(context.Background(), "ROLE").Slice()
		if err == nil && len(role) > 0 && role[0] == "master" {
			err = cl.Exists(context.Background(), key).Err()
		}
		cl.Close()
		if err == nil && len(role) > 0 && role[0] == "master" {
			return n
		}
	}
	c.t.Fatalf("no master serves %s", key)
	return nil
}

// waitLong is testkit.WaitFor with a longer bound, for topologies that
// take seconds to converge (testkit imports nothing of ours either way).
func waitLong(t testing.TB, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Failover tells the replica of the master that serves key to take its
// place with CLUSTER FAILOVER and mode: "" (a coordinated manual
// failover: the master stops taking writes until the replica has caught
// up and been elected), "FORCE" (no coordination with the master) or
// "TAKEOVER" (no election either). It waits until the replica serves key
// as a master, the old master follows it and the cluster is ok, and
// returns both.
func (c *RedisCluster) Failover(key, mode string) (old, promoted *Redis) {
	c.t.Helper()
	old = c.MasterFor(key)
	promoted = c.ReplicaOf(old)
	args := []any{"CLUSTER", "FAILOVER"}
	if mode != "" {
		args = append(args, mode)
	}
	cl := goredis.NewClient(&goredis.Options{Addr: promoted.Addr(), MaxRetries: -1})
	defer cl.Close()
	send := func() {
		if err := cl.Do(context.Background(), args...).Err(); err != nil {
			c.t.Fatalf("%v on %s: %v", args, promoted.Addr(), err)
		}
	}
	send()
	deadline, sent := time.Now().Add(60*time.Second), time.Now()
	for role(promoted) != "master" || role(old) != "slave" {
		if time.Now().After(deadline) {
			c.t.Fatalf("%v: the replica did not take over within 60 s\n%s\n%s", args, old.logTail(), promoted.logTail())
		}
		// A manual failover that did not happen (Redis gives up after
		// 5 s; Redis 7.0 also lets a replica elected less than 4 s
		// before win again on its old votes, without a new epoch, and
		// step back) is asked again, as an operator would.
		if time.Since(sent) > 10*time.Second && role(promoted) == "slave" {
			c.t.Logf("%v on %s again: no takeover after 10 s", args, promoted.Addr())
			send()
			sent = time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.WaitOK()
	if m := c.MasterFor(key); m != promoted {
		c.t.Fatalf("after %v, %s serves the key, not the promoted %s", args, m.Addr(), promoted.Addr())
	}
	return old, promoted
}

// ReplicaOf returns the running node that replicates master.
func (c *RedisCluster) ReplicaOf(master *Redis) *Redis {
	c.t.Helper()
	for _, n := range c.Nodes {
		if n.cmd == nil || n == master {
			continue
		}
		cl := goredis.NewClient(&goredis.Options{Addr: n.Addr(), MaxRetries: -1})
		r, err := cl.Do(context.Background(), "ROLE").Slice()
		cl.Close()
		// A replica's ROLE: "slave", the master's host and port, ...
		if err == nil && len(r) >= 3 && r[0] == "slave" && fmt.Sprint(r[2]) == strconv.Itoa(master.Port) {
			return n
		}
	}
	c.t.Fatalf("no running replica of %s", master.Addr())
	return nil
}

// role is ROLE's first element ("master", "slave"), "" if n does not
// answer.
func role(n *Redis) string {
	if n.cmd == nil {
		return ""
	}
	cl := goredis.NewClient(&goredis.Options{Addr: n.Addr(), MaxRetries: -1})
	defer cl.Close()
	r, err := cl.Do(context.Background(), "ROLE").Slice()
	if err != nil || len(r) == 0 {
		return ""
	}
	s, _ := r[0].(string)
	return s
}

// logTail is the end of the process's log, for a failure message.
func (p *Process) logTail() string {
	b, _ := os.ReadFile(p.log.Name())
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return fmt.Sprintf("%s %s log:\n%s", p.name, p.Addr(), b)
}

// WatchPromotion watches the replica at addr (polled every 20 ms, from
// another goroutine: it reads no Process) and reports when it first
// answers ROLE as a master, then when the channel has a subscriber there
// (PUBSUB NUMSUB): the moment a failover promoted it, and the moment a
// subscription moved to it. It gives up after 90 s (zero times), or when
// the test ends.
func WatchPromotion(t testing.TB, addr, channel string) (promoted, subscribed <-chan time.Time) {
	p, s := make(chan time.Time, 1), make(chan time.Time, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		defer close(p)
		defer close(s)
		c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
		defer c.Close()
		poll := func(ok func() bool) bool {
			for ctx.Err() == nil {
				if ok() {
					return true
				}
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
			return false
		}
		if !poll(func() bool {
			r, err := c.Do(ctx, "ROLE").Slice()
			return err == nil && len(r) > 0 && r[0] == "master"
		}) {
			return
		}
		p <- time.Now()
		if poll(func() bool {
			m, err := c.PubSubNumSub(ctx, channel).Result()
			return err == nil && m[channel] > 0
		}) {
			s <- time.Now()
		}
	}()
	return p, s
}
