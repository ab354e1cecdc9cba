package redisguard_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/replay"
	"github.com/stateseal/stateseal/replay/redisguard"
)

// TestDurableFailover: with MinReplicas, a use counts only once the
// replica holds its record, so a failover to that replica keeps the
// epoch: a state issued before it and not used yet goes through, one
// used before it is still refused as replayed. A use the replica did
// not acknowledge (it was stopped) is not counted. Beside it, a guard
// without MinReplicas on the same servers (another prefix) moves its
// epoch and refuses the states issued before the failover as unvouched.
func TestDurableFailover(t *testing.T) {
	primary := testservers.StartRedisVolatile(t, "--repl-diskless-sync-delay", "0")
	host, port := testkit.Must2(net.SplitHostPort(primary.Addr()))
	replica := testservers.StartRedisVolatile(t, "--replicaof", host, port)
	pc, rc := newClient(t, primary.Addr()), newClient(t, replica.Addr())
	durable := redisguard.Options{MinReplicas: 1, Prefix: "d:"}
	plain := redisguard.Options{Prefix: "p:"}
	eventually(t, 10*time.Second, "the replica's first sync", func() error {
		n, err := pc.Do(ctx, "WAIT", 1, 100).Int64()
		if err != nil || n != 1 {
			return fmt.Errorf("%d replicas acknowledged: %v", n, err)
		}
		return nil
	})
	g, gp := newGuard(t, pc, durable), newGuard(t, pc, plain)
	at := later(issued(t, g), issued(t, gp))
	epoch := testkit.Must(g.Epoch(ctx))
	l := newLedger()
	for _, id := range []string{"used", "p-used"} {
		gg := g
		if id == "p-used" {
			gg = gp
		}
		if ok, err := l.flow(gg, id, at, 5*time.Second); !ok {
			t.Fatal(err)
		}
		usedOnce(t, l, gg, id, at)
	}
	// The replica stops: a durable use cannot count, and nothing runs.
	replica.Freeze()
	err := g.Use(ctx, []byte("unreplicated"), at, time.Now().Add(time.Minute))
	if !errors.Is(err, replay.ErrUnavailable) {
		t.Fatalf("a use the replica could not hold: %v, want unavailable", err)
	}
	t.Logf("with the replica stopped: %v", err)
	replica.Thaw()
	// Wait until the replica has everything the primary has: a graceful
	// failover promotes an up-to-date replica.
	eventually(t, 10*time.Second, "the replica to catch up", func() error {
		if n, err := pc.Do(ctx, "WAIT", 1, 100).Int64(); err != nil || n != 1 {
			return fmt.Errorf("%d replicas acknowledged: %v", n, err)
		}
		return nil
	})
	heartbeat(t, rc, "d:epoch")
	primary.Stop()
	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	g2, gp2 := newGuard(t, rc, durable), newGuard(t, rc, plain)
	if e := testkit.Must(g2.Epoch(ctx)); !e.Equal(epoch) {
		t.Fatalf("the durable guard's epoch moved from %v to %v in a failover that lost nothing", epoch, e)
	}
	if err := l.replay(t, g2, "used", at); !errors.Is(err, replay.ErrReplayed) {
		t.Fatalf("a state used before the failover: %v, want replayed", err)
	}
	// The promoted replica has no replica of its own: a durable use
	// waits for one, the way a write of the keyset store does.
	if err := g2.Use(ctx, []byte("fresh"), at, time.Now().Add(time.Minute)); !errors.Is(err, replay.ErrUnavailable) {
		t.Fatalf("a durable use on a primary without replicas: %v, want unavailable", err)
	}
	rhost, rport := testkit.Must2(net.SplitHostPort(replica.Addr()))
	primary.Start()
	pc2 := newClient(t, primary.Addr())
	if err := pc2.Do(ctx, "REPLICAOF", rhost, rport).Err(); err != nil {
		t.Fatal(err)
	}
	// Issued before the failover, not used: it runs, once.
	if ok, err := l.flow(g2, "fresh", at, 15*time.Second); !ok {
		t.Fatalf("a state issued before a failover that lost nothing: %v", err)
	}
	usedOnce(t, l, g2, "fresh", at)
	// The guard without MinReplicas cannot vouch for it.
	if err := gp2.Use(ctx, []byte("p-fresh"), at, time.Now().Add(time.Minute)); !errors.Is(err, replay.ErrUnvouched) {
		t.Fatalf("without MinReplicas, a state issued before the failover: %v, want unvouched", err)
	}
	if err := l.replay(t, gp2, "p-used", at); err == nil {
		t.Fatal("p-used ran again")
	}
	l.check(t, "used", "fresh", "p-used")
	t.Log(l)
}

// TestDurableMixedGuards: a record made by a guard without MinReplicas
// under a durable epoch makes the epoch an ordinary one, which the next
// failover moves: that record was never waited for.
func TestDurableMixedGuards(t *testing.T) {
	primary, _, pc, rc := replicated(t)
	var logs syncBuffer
	g := newGuard(t, pc, redisguard.Options{MinReplicas: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	// The durable guard makes the epoch before the other guard exists:
	// made by a guard without MinReplicas, the epoch would be an ordinary
	// one from the start, and no heartbeat would ever be written into it
	// (the test failed so about one run in ten, when the plain guard's
	// background work made the epoch first).
	at := issued(t, g)
	epoch := testkit.Must(g.Epoch(ctx))
	if d := testkit.Must(pc.HGet(ctx, "stateseal:used:epoch", "d").Result()); d != "1" {
		t.Fatalf("the durable guard's epoch: d=%q, want 1", d)
	}
	gp := newGuard(t, pc, redisguard.Options{})
	heartbeat(t, rc, "stateseal:used:epoch") // so that only the record below moves the epoch
	if strings.Contains(logs.String(), "without min_replicas") {
		t.Fatalf("warned of a guard without min_replicas before it recorded: %s", logs.String())
	}
	if err := gp.Use(ctx, []byte("undurable"), at, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if d := testkit.Must(pc.HGet(ctx, "stateseal:used:epoch", "d").Result()); d != "0" {
		t.Fatalf("after a record nobody waited for: d=%q, want 0", d)
	}
	eventually(t, 10*time.Second, "the durable guard's warning", func() error {
		if !strings.Contains(logs.String(), "a guard without min_replicas shares this Redis") {
			return fmt.Errorf("no warning yet: %q", logs.String())
		}
		return nil
	})
	eventually(t, 10*time.Second, "replication", func() error {
		if n, err := pc.Do(ctx, "WAIT", 1, 100).Int64(); err != nil || n != 1 {
			return fmt.Errorf("%d replicas acknowledged: %v", n, err)
		}
		return nil
	})
	primary.Stop()
	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	g2 := newGuard(t, rc, redisguard.Options{MinReplicas: 1})
	if e := testkit.Must(g2.Epoch(ctx)); !e.After(epoch) {
		t.Fatalf("the epoch stayed at %v through a failover after a record nobody waited for", e)
	}
}

// TestDurableQuiet: a durable guard that records nothing still moves
// the heartbeat (its epoch refresh writes it every second), so a failover
// after a quiet spell keeps the epoch: the heartbeat does not depend on
// traffic.
func TestDurableQuiet(t *testing.T) {
	primary, _, pc, rc := replicated(t)
	g := newGuard(t, pc, redisguard.Options{MinReplicas: 1})
	epoch := testkit.Must(g.Epoch(ctx))
	h0 := testkit.Must(pc.HGet(ctx, "stateseal:used:epoch", "h").Int64())
	// No use at all: only the background refresh can move it, on the
	// replica too, by 3 s.
	eventually(t, 15*time.Second, "a heartbeat 3 s later on the replica", func() error {
		h, err := rc.HGet(ctx, "stateseal:used:epoch", "h").Int64()
		if err != nil || h < h0+3000 {
			return fmt.Errorf("heartbeat %d, first %d: %v", h, h0, err)
		}
		return nil
	})
	if n := testkit.Must(pc.DBSize(ctx).Result()); n != 1 {
		t.Fatalf("%d keys on the primary, want the epoch alone: the guard was not quiet", n)
	}
	heartbeat(t, rc, "stateseal:used:epoch")
	primary.Stop()
	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	g2 := newGuard(t, rc, redisguard.Options{MinReplicas: 1})
	if e := testkit.Must(g2.Epoch(ctx)); !e.Equal(epoch) {
		t.Fatalf("a quiet durable guard's epoch moved from %v to %v in a failover that lost nothing", epoch, e)
	}
}

// TestSealFrom: on a Redis that just started, a state sealed at
// SealFrom (issued-at in whole seconds) is vouched for, and one sealed a
// second before it is refused as unvouched: a readiness check that waits
// for SealFrom dooms no state.
func TestSealFrom(t *testing.T) {
	r := testservers.StartRedisVolatile(t)
	g := newGuard(t, newClient(t, r.Addr()), redisguard.Options{})
	epoch := testkit.Must(g.Epoch(ctx))
	from := testkit.Must(g.SealFrom(ctx))
	if !from.Equal(from.Truncate(time.Second)) || from.Before(epoch.Add(redisguard.DefaultClockMargin)) ||
		!from.Add(-time.Second).Before(epoch.Add(redisguard.DefaultClockMargin)) {
		t.Fatalf("SealFrom %v for epoch %v: want the first whole second at or after epoch+margin", from, epoch)
	}
	t.Logf("epoch %v, seal from %v", epoch, from)
	// Use's issued-at as a token carries it: whole seconds.
	if err := g.Use(ctx, []byte("early"), from.Add(-time.Second), time.Now().Add(time.Minute)); !errors.Is(err, replay.ErrUnvouched) {
		t.Fatalf("a state issued the second before SealFrom: %v, want unvouched", err)
	}
	if err := g.Use(ctx, []byte("at"), from, time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("a state issued at SealFrom: %v, want nil", err)
	}
}

// TestDurableRestartFromSnapshot: a primary killed and restarted from an
// RDB snapshot keeps the replication id it saved there as its
// master_replid2, as a promoted replica does, but lacks the records made
// after the snapshot (its replica, resynced from it, loses them too):
// the epoch moves, and a state used after the snapshot does not run
// again.
func TestDurableRestartFromSnapshot(t *testing.T) {
	primary := testservers.StartRedisVolatile(t, "--repl-diskless-sync-delay", "0")
	host, port := testkit.Must2(net.SplitHostPort(primary.Addr()))
	replica := testservers.StartRedisVolatile(t, "--replicaof", host, port)
	_ = replica
	pc := newClient(t, primary.Addr())
	eventually(t, 10*time.Second, "the replica's first sync", func() error {
		if n, err := pc.Do(ctx, "WAIT", 1, 100).Int64(); err != nil || n != 1 {
			return fmt.Errorf("%d replicas acknowledged: %v", n, err)
		}
		return nil
	})
	o := redisguard.Options{MinReplicas: 1}
	g := newGuard(t, pc, o)
	at := issued(t, g)
	epoch := testkit.Must(g.Epoch(ctx))
	l := newLedger()
	if ok, err := l.flow(g, "before", at, 5*time.Second); !ok {
		t.Fatal(err)
	}
	heartbeat(t, pc, "stateseal:used:epoch")
	if err := pc.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := l.flow(g, "after-snapshot", at, 5*time.Second); !ok {
		t.Fatal(err)
	}
	usedOnce(t, l, g, "after-snapshot", at)
	primary.Stop()
	primary.Start()
	pc2 := newClient(t, primary.Addr())
	info := testkit.Must(pc2.Info(ctx, "replication").Result())
	t.Logf("restarted from the snapshot: %s", strings.Join(strings.Fields(info)[3:6], " "))
	g2 := newGuard(t, pc2, o)
	if e := testkit.Must(g2.Epoch(ctx)); !e.After(epoch) {
		t.Fatalf("the epoch stayed at %v through a restart from a snapshot that lost a record", e)
	}
	if err := l.replay(t, g2, "after-snapshot", at); err == nil {
		t.Fatal("a state used after the snapshot ran again after the restart")
	} else if !errors.Is(err, replay.ErrUnvouched) && !errors.Is(err, replay.ErrUnavailable) {
		t.Fatalf("a state used after the snapshot: %v", err)
	}
	l.check(t, "before", "after-snapshot")
}

// replicated starts a primary with one replica, each without
// persistence, and returns them and a client of each once the replica
// has had its first sync.
func replicated(t *testing.T) (primary, replica *testservers.Redis, pc, rc goredis.UniversalClient) {
	t.Helper()
	primary = testservers.StartRedisVolatile(t, "--repl-diskless-sync-delay", "0")
	host, port := testkit.Must2(net.SplitHostPort(primary.Addr()))
	replica = testservers.StartRedisVolatile(t, "--replicaof", host, port)
	pc, rc = newClient(t, primary.Addr()), newClient(t, replica.Addr())
	eventually(t, 10*time.Second, "the replica's first sync", func() error {
		if n, err := pc.Do(ctx, "WAIT", 1, 100).Int64(); err != nil || n != 1 {
			return fmt.Errorf("%d replicas acknowledged: %v", n, err)
		}
		return nil
	})
	return primary, replica, pc, rc
}

// heartbeat waits until the durable guards' heartbeat in the epoch key,
// as c's server holds it, is from 2 s after that server started: a
// server promoted then was running when it received it.
func heartbeat(t *testing.T, c goredis.UniversalClient, key string) {
	t.Helper()
	eventually(t, 15*time.Second, "a heartbeat after the server's start", func() error {
		h, err := c.HGet(ctx, key, "h").Int64()
		if err != nil {
			return err
		}
		srv, err := c.Info(ctx, "server").Result()
		if err != nil {
			return err
		}
		var up, us int64
		for line := range strings.Lines(srv) {
			if v, ok := strings.CutPrefix(line, "uptime_in_seconds:"); ok {
				up = testkit.Must(strconv.ParseInt(strings.TrimSpace(v), 10, 64))
			}
			if v, ok := strings.CutPrefix(line, "server_time_usec:"); ok {
				us = testkit.Must(strconv.ParseInt(strings.TrimSpace(v), 10, 64))
			}
		}
		if start := us/1e6 - up; (start+2)*1000 >= h {
			return fmt.Errorf("heartbeat %d, server started at %d s", h, start)
		}
		return nil
	})
}

// TestSplitURL: the guard's parameters come out of the URL, the rest is
// left for the client.
func TestSplitURL(t *testing.T) {
	c, o, err := redisguard.SplitURL("redis://127.0.0.1:6379/0?guard_timeout=300ms&min_replicas=1&max_retries=-1")
	if err != nil || o.Timeout != 300*time.Millisecond || o.MinReplicas != 1 || c != "redis://127.0.0.1:6379/0?max_retries=-1" {
		t.Fatalf("%q %+v %v", c, o, err)
	}
	for _, bad := range []string{"min_replicas=-1", "min_replicas=all", "guard_timeout=0s"} {
		if _, _, err := redisguard.SplitURL("redis://127.0.0.1:6379/0?" + bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// BenchmarkUseDurable: first uses from parallel callers through one
// guard, on a primary with one replica, without and with MinReplicas:
// what durable records cost per single-use state (docs/FLEET.md).
func BenchmarkUseDurable(b *testing.B) {
	primary := testservers.StartRedisVolatile(b, "--repl-diskless-sync-delay", "0")
	host, port := testkit.Must2(net.SplitHostPort(primary.Addr()))
	testservers.StartRedisVolatile(b, "--replicaof", host, port)
	pc := newClient(b, primary.Addr())
	eventually(b, 10*time.Second, "the replica's first sync", func() error {
		if n, err := pc.Do(ctx, "WAIT", 1, 100).Int64(); err != nil || n != 1 {
			return fmt.Errorf("%d replicas acknowledged: %v", n, err)
		}
		return nil
	})
	for _, mode := range []struct {
		name string
		n    int
	}{{"min_replicas=0", 0}, {"min_replicas=1", 1}} {
		var n atomic.Int64 // across the rounds of b.Run: each id is used once
		b.Run(mode.name, func(b *testing.B) {
			g := newGuard(b, pc, redisguard.Options{Timeout: 5 * time.Second, MinReplicas: mode.n, Prefix: mode.name + ":"})
			at := issued(b, g)
			before := commands(b, pc)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := g.Use(ctx, fmt.Appendf(nil, "bench-%d", n.Add(1)), at, time.Now().Add(time.Minute)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			g.Close() // its confirmations sent
			after := commands(b, pc)
			b.ReportMetric(float64(after[0]-before[0])/float64(b.N), "sent/use")
			b.ReportMetric(float64(after[1]-before[1])/float64(b.N), "run/use")
		})
	}
}

// commands counts the commands the guard sends the primary (EVALSHA,
// EVAL, WAIT: a script once) and all it runs there (INFO stats: a
// script's own calls too, and the replica's acknowledgements).
func commands(b *testing.B, c goredis.UniversalClient) [2]int64 {
	info, err := c.Info(ctx, "stats", "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var n [2]int64
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
			n[1] = testkit.Must(strconv.ParseInt(strings.TrimSpace(v), 10, 64))
		}
		for _, cmd := range []string{"evalsha", "eval", "wait"} {
			if v, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
				v, _, _ = strings.Cut(v, ",")
				k := testkit.Must(strconv.ParseInt(v, 10, 64))
				n[0] += k
			}
		}
	}
	return n
}

// TestDurableLostReply: a durable claim whose reply is lost with its
// connection is sent again on another connection, finds its own record,
// writes it again there, and WAITs for it: the use counts once, and the
// replica holds it.
func TestDurableLostReply(t *testing.T) {
	primary, _, _, rc := replicated(t)
	p := startProxy(t, primary.Addr())
	g := newGuard(t, newClient(t, p.Addr()), redisguard.Options{Timeout: 5 * time.Second, MinReplicas: 1})
	at := issued(t, g)
	l := newLedger()
	p.mode.Store(cutClaim)
	if err := g.Use(ctx, []byte("cut"), at, time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("a durable claim whose reply was lost with its connection: %v, want nil", err)
	}
	l.runs["cut"]++
	if p.mode.Load() != pass || redisguard.Verified(g).Load() != 1 {
		t.Fatalf("the reply was not cut (mode %d), or the guard did not find its own record (%d)", p.mode.Load(), redisguard.Verified(g).Load())
	}
	if n := testkit.Must(rc.Exists(ctx, "stateseal:used:"+fmt.Sprintf("%x", "cut")).Result()); n != 1 {
		t.Fatal("the replica does not hold the record of a use that counted")
	}
	usedOnce(t, l, g, "cut", at)
	l.check(t, "cut")
}

// syncBuffer is a log a test reads while a guard's background work
// writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
