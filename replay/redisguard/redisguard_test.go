package redisguard_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
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

var ctx = context.Background()

// patient is for guards whose single calls must succeed on a loaded
// machine; the others keep the default timeout and retry like clients.
var patient = redisguard.Options{Timeout: 5 * time.Second}

// quiet drops go-redis's own log lines (its failed dials while a test
// keeps Redis down).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func init() { goredis.SetLogger(quiet{}) }

// newClient returns a client of addr that honours contexts, as
// stores/redis.NewClient makes them.
func newClient(t testing.TB, addr string) goredis.UniversalClient {
	c := goredis.NewUniversalClient(&goredis.UniversalOptions{Addrs: []string{addr}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

func newGuard(t testing.TB, c goredis.UniversalClient, o redisguard.Options) *redisguard.Guard {
	g := redisguard.New(c, &o)
	t.Cleanup(func() { g.Close() })
	return g
}

// issued returns an issue time the guard vouches for: past its epoch and
// the clock margin.
func issued(t testing.TB, g *redisguard.Guard) time.Time {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		et, err := g.Epoch(ctx)
		if err == nil {
			return et.Add(redisguard.DefaultClockMargin)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no epoch: %v", err)
		}
	}
}

// eventually retries f until it returns nil, for at most d.
func eventually(t testing.TB, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A ledger plays the client and the handler of single-use flows: it
// presents a state until the guard lets it through (and the handler
// runs) or refuses it as replayed, retrying while the guard answers
// unavailable. Every state is presented by one client only, so a
// "replayed" before the handler ran for it is a false one.
type ledger struct {
	mu            sync.Mutex
	runs          map[string]int // handler executions per state
	falseReplayed int
	unavailable   int // answers "unavailable" on the way
}

func newLedger() *ledger { return &ledger{runs: map[string]int{}} }

// flow presents state id until it runs or is refused as replayed, for at
// most d; it reports whether the handler ran.
func (l *ledger) flow(g replay.Guard, id string, issuedAt time.Time, d time.Duration) (bool, error) {
	keep := time.Now().Add(time.Minute)
	deadline := time.Now().Add(d)
	for {
		err := g.Use(ctx, []byte(id), issuedAt, keep)
		l.mu.Lock()
		switch {
		case err == nil:
			l.runs[id]++
			l.mu.Unlock()
			return true, nil
		case errors.Is(err, replay.ErrReplayed):
			if l.runs[id] == 0 {
				l.falseReplayed++
			}
			l.mu.Unlock()
			return false, err
		case errors.Is(err, replay.ErrUnavailable):
			l.unavailable++
		default:
			l.mu.Unlock()
			return false, fmt.Errorf("unexpected error: %w", err)
		}
		l.mu.Unlock()
		if time.Now().After(deadline) {
			return false, err
		}
		time.Sleep(10 * time.Millisecond) // a client's pause before it tries again
	}
}

// replay presents a state that ran: it must never run again.
func (l *ledger) replay(t testing.TB, g replay.Guard, id string, issuedAt time.Time) error {
	t.Helper()
	err := g.Use(ctx, []byte(id), issuedAt, time.Now().Add(time.Minute))
	if err == nil {
		l.mu.Lock()
		l.runs[id]++
		l.mu.Unlock()
	}
	return err
}

// check fails unless every state in ids ran exactly once, and none was
// falsely refused as replayed.
func (l *ledger) check(t testing.TB, ids ...string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	doubles := 0
	for _, n := range l.runs {
		if n > 1 {
			doubles++
		}
	}
	for _, id := range ids {
		if l.runs[id] != 1 {
			t.Errorf("state %s ran %d times, want 1", id, l.runs[id])
		}
	}
	if doubles > 0 || l.falseReplayed > 0 {
		t.Errorf("%d states ran twice, %d refused as replayed before they ran", doubles, l.falseReplayed)
	}
}

func (l *ledger) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	total := 0
	for _, n := range l.runs {
		total += n
	}
	return fmt.Sprintf("states run %d (%d executions), false replayed %d, unavailable answers on the way %d",
		len(l.runs), total, l.falseReplayed, l.unavailable)
}

// usedOnce presents a state that ran until the guard says replayed: it
// may say unavailable until the first use is acknowledged, never nil.
func usedOnce(t testing.TB, l *ledger, g replay.Guard, id string, issuedAt time.Time) {
	t.Helper()
	l.mu.Lock()
	ran := l.runs[id]
	l.mu.Unlock()
	if ran != 1 {
		t.Errorf("%s ran %d times before its replay, want 1", id, ran)
		return
	}
	eventually(t, 5*time.Second, "a replay of "+id, func() error {
		err := l.replay(t, g, id, issuedAt)
		if err == nil {
			t.Fatalf("%s ran a second time", id)
		}
		if errors.Is(err, replay.ErrReplayed) {
			return nil
		}
		return err
	})
}

func TestGuard(t *testing.T) {
	r := testservers.StartRedis(t)
	client := newClient(t, r.Addr())
	g := newGuard(t, client, redisguard.Options{})
	at := issued(t, g)
	l := newLedger()
	if ok, err := l.flow(g, "tag-1", at, 0); !ok {
		t.Fatal(err)
	}
	usedOnce(t, l, g, "tag-1", at)
	// The record expires with the token.
	ttl, err := client.PTTL(ctx, "stateseal:used:7461672d31").Result()
	if err != nil || ttl <= 50*time.Second || ttl > time.Minute {
		t.Fatalf("TTL %v, %v; want about a minute", ttl, err)
	}
	// A second guard (another instance) sees the first use.
	other := newGuard(t, newClient(t, r.Addr()), redisguard.Options{})
	usedOnce(t, l, other, "tag-1", at)

	// Redis down: fail closed by default, open only when configured.
	r.Stop()
	if err := g.Use(ctx, []byte("tag-2"), at, time.Now().Add(time.Minute)); !errors.Is(err, replay.ErrUnavailable) {
		t.Fatalf("Redis down: %v, want ErrUnavailable", err)
	}
	open := newGuard(t, client, redisguard.Options{FailOpen: true})
	if err := open.Use(ctx, []byte("tag-3"), at, time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("Redis down, FailOpen: %v", err)
	}
	// Back (append-only file, synced on every write): uses recorded before
	// still hold. A restart changes Redis's replication id, so states
	// issued before it are refused as unvouched; new ones go through.
	r.Start()
	usedOnce(t, l, g, "tag-1", at)
	if err := g.Use(ctx, []byte("tag-2"), at, time.Now().Add(time.Minute)); !errors.Is(err, replay.ErrUnvouched) || errors.Is(err, replay.ErrUnavailable) {
		t.Fatalf("after a restart, a state issued before: %v, want ErrUnvouched", err)
	}
	after := issued(t, g)
	if !after.After(at) {
		t.Fatalf("the epoch did not move with the restart: %v, then %v", at, after)
	}
	if ok, err := l.flow(g, "tag-4", after, 5*time.Second); !ok {
		t.Fatalf("after a restart, a new state: %v", err)
	}
	l.check(t, "tag-1", "tag-4")
}

// TestConcurrent: many instances present one state at once; it runs once.
func TestConcurrent(t *testing.T) {
	r := testservers.StartRedis(t)
	var guards []*redisguard.Guard
	for range 4 {
		guards = append(guards, newGuard(t, newClient(t, r.Addr()), patient))
	}
	at := issued(t, guards[0])
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			err := guards[i%4].Use(ctx, []byte("same"), at, time.Now().Add(time.Minute))
			if err == nil {
				wins.Add(1)
			} else if !errors.Is(err, replay.ErrReplayed) && !errors.Is(err, replay.ErrUnavailable) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d uses of one state won, want 1", wins.Load())
	}
}

// A proxy stands between a guard and Redis on loopback and loses what
// Redis sends back, to lose replies of commands Redis did run.
type proxy struct {
	ln     net.Listener
	target string
	mode   atomic.Int32
	mu     sync.Mutex
	conns  []net.Conn
}

const (
	pass      = iota
	cutClaim  // close the connection instead of passing the next successful claim's reply, then pass
	holdClaim // swallow the next successful claim's reply and all that follows on its connection, which stays open
)

func startProxy(t testing.TB, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		go func() { io.Copy(u, c); u.Close() }()
		go func() {
			defer c.Close()
			buf := make([]byte, 64<<10)
			hung := false
			for {
				n, err := u.Read(buf)
				if err != nil {
					return
				}
				if hung {
					continue
				}
				claimed := bytes.Contains(buf[:n], []byte("\r\nok\r\n"))
				switch {
				case claimed && p.mode.CompareAndSwap(cutClaim, pass):
					u.Close()
					return
				case claimed && p.mode.CompareAndSwap(holdClaim, pass):
					hung = true
					continue
				}
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
		}()
	}
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// TestLostReply: Redis runs the claim and its reply is lost. The guard
// finds out that the recorded use is its own, and the handler runs once;
// the state is never refused as replayed before it ran.
func TestLostReply(t *testing.T) {
	r := testservers.StartRedis(t)
	p := startProxy(t, r.Addr())
	g := newGuard(t, newClient(t, p.Addr()), patient)
	at := issued(t, g)
	l := newLedger()

	// The connection drops with the reply: the guard asks again, on
	// another connection, and finds its own record.
	p.mode.Store(cutClaim)
	if err := g.Use(ctx, []byte("cut"), at, time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("a claim whose reply was lost with its connection: %v, want nil", err)
	}
	l.runs["cut"]++
	if p.mode.Load() != pass || redisguard.Verified(g).Load() != 1 {
		t.Fatalf("the reply was not cut (mode %d), or the guard did not find its own record (%d)", p.mode.Load(), redisguard.Verified(g).Load())
	}
	usedOnce(t, l, g, "cut", at)

	// The claim's reply, and the connection with it, hang for longer than
	// the guard waits: it answers unavailable, although Redis recorded the
	// use. That answer is true:
	// the record is not confirmed, so the retry on another instance is
	// never told replayed; the guard takes its record back once Redis
	// answers, and the retry then runs.
	other := newGuard(t, newClient(t, r.Addr()), redisguard.Options{})
	g = newGuard(t, newClient(t, p.Addr()), redisguard.Options{Timeout: 200 * time.Millisecond})
	p.mode.Store(holdClaim)
	err := g.Use(ctx, []byte("held"), at, time.Now().Add(time.Minute))
	if !errors.Is(err, replay.ErrUnavailable) {
		t.Fatalf("no reply: %v, want ErrUnavailable", err)
	}
	// Another instance waits, within its timeout, for the unsettled
	// record to be confirmed or taken back: it is taken back, then or
	// later, and the retry runs once.
	switch err := other.Use(ctx, []byte("held"), at, time.Now().Add(time.Minute)); {
	case err == nil:
		l.runs["held"]++
	case errors.Is(err, replay.ErrUnavailable):
		if ok, err := l.flow(other, "held", at, 10*time.Second); !ok {
			t.Fatalf("the retry after the replies came back: %v", err)
		}
	default:
		t.Fatalf("another instance, while the first one's claim is unsettled: %v, want nil or ErrUnavailable, not replayed", err)
	}
	// The record's removal reaches Redis before its reply reaches the
	// guard (through the proxy): the other instance may run first.
	eventually(t, 5*time.Second, "the record taken back", func() error {
		if n := redisguard.Released(g).Load(); n != 1 {
			return fmt.Errorf("the guard took back %d records, want 1", n)
		}
		return nil
	})
	usedOnce(t, l, g, "held", at)
	l.check(t, "cut", "held")
	t.Log(l)
}

// TestStopped: Redis hung (SIGSTOP) before the claim reaches it, and
// hung while it holds the claim unrun (CLIENT PAUSE, then SIGSTOP): the
// guard answers unavailable within its timeout, the claim that runs
// after SIGCONT does nothing, and the retry runs the handler once.
func TestStopped(t *testing.T) {
	redisguard.EpochEvery(t, time.Hour) // the claim is the only script the pause holds
	r := testservers.StartRedis(t)
	admin := newClient(t, r.Addr())
	g := newGuard(t, newClient(t, r.Addr()), redisguard.Options{Timeout: 200 * time.Millisecond})
	other := newGuard(t, newClient(t, r.Addr()), redisguard.Options{})
	at := issued(t, g)
	l := newLedger()
	keep := time.Now().Add(time.Minute)

	// Before the claim: it waits in the socket.
	r.Freeze()
	start := time.Now()
	err := g.Use(ctx, []byte("stopped"), at, keep)
	took := time.Since(start)
	if !errors.Is(err, replay.ErrUnavailable) || took > time.Second+200*time.Millisecond {
		t.Fatalf("Redis stopped: %v after %v, want ErrUnavailable about the 200 ms timeout", err, took)
	}
	r.Thaw()
	if ok, err := l.flow(other, "stopped", at, 10*time.Second); !ok {
		t.Fatalf("after SIGCONT, the retry: %v", err)
	}

	// Read, not run: CLIENT PAUSE holds the claim inside Redis, and
	// Redis stops before the pause ends.
	if err := admin.Do(ctx, "CLIENT", "PAUSE", 300, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Use(ctx, []byte("paused-stopped"), at, keep) }()
	eventually(t, 5*time.Second, "the claim held by the pause", func() error {
		list, err := admin.ClientList(ctx).Result()
		for line := range strings.Lines(list) {
			if strings.Contains(line, " flags=b ") && strings.Contains(line, " cmd=evalsha ") {
				return nil
			}
		}
		return fmt.Errorf("no claim held yet: %v", err)
	})
	r.Freeze()
	if err := <-done; !errors.Is(err, replay.ErrUnavailable) {
		t.Fatalf("claim held, Redis stopped: %v, want ErrUnavailable", err)
	}
	r.Thaw()
	if ok, err := l.flow(other, "paused-stopped", at, 10*time.Second); !ok {
		t.Fatalf("after SIGCONT, the retry: %v", err)
	}
	usedOnce(t, l, g, "stopped", at)
	usedOnce(t, l, g, "paused-stopped", at)
	l.check(t, "stopped", "paused-stopped")
	t.Log(l)
}

// TestPaused: CLIENT PAUSE longer than the guard waits, while flows run:
// the claims held run late and do nothing; every flow runs once.
func TestPaused(t *testing.T) {
	r := testservers.StartRedis(t)
	admin := newClient(t, r.Addr())
	g := newGuard(t, newClient(t, r.Addr()), redisguard.Options{Timeout: 100 * time.Millisecond})
	at := issued(t, g)
	l := newLedger()
	var wg sync.WaitGroup
	var ids []string
	for i := range 16 {
		id := fmt.Sprintf("paused-%d", i)
		ids = append(ids, id)
		wg.Go(func() {
			if ok, err := l.flow(g, id, at, 20*time.Second); !ok {
				t.Errorf("%s: %v", id, err)
			}
		})
		if i%4 == 0 {
			if err := admin.Do(ctx, "CLIENT", "PAUSE", 300, "WRITE").Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
	for _, id := range ids {
		usedOnce(t, l, g, id, at)
	}
	l.check(t, ids...)
	t.Log(l)
}

// TestClientKill: flows from four instances while another client kills
// their connections over and over (CLIENT KILL TYPE normal): a kill
// between a claim and its reply loses the reply. Every flow runs once,
// none is refused as replayed before it ran.
func TestClientKill(t *testing.T) {
	r := testservers.StartRedis(t)
	admin := newClient(t, r.Addr())
	var guards []*redisguard.Guard
	for range 4 {
		guards = append(guards, newGuard(t, newClient(t, r.Addr()), redisguard.Options{}))
	}
	at := issued(t, guards[0])
	l := newLedger()
	stop := make(chan struct{})
	var killed atomic.Int64
	var killer sync.WaitGroup
	killer.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			n := testkit.Must(admin.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Int64())
			killed.Add(n)
		}
	})
	var wg sync.WaitGroup
	var ids []string
	var mu sync.Mutex
	for w := range 8 {
		wg.Go(func() {
			for i := range 10 {
				id := fmt.Sprintf("kill-%d-%d", w, i)
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
				if ok, err := l.flow(guards[(w+i)%4], id, at, 20*time.Second); !ok {
					t.Errorf("%s: %v", id, err)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	killer.Wait()
	for _, id := range ids {
		usedOnce(t, l, guards[0], id, at)
	}
	l.check(t, ids...)
	verified := int64(0)
	for _, g := range guards {
		verified += redisguard.Verified(g).Load()
	}
	t.Logf("%s; connections killed %d, lost replies found to be the guard's own use %d", l, killed.Load(), verified)
}

// TestRestartWithoutPersistence: Redis restarts empty. States issued
// before are refused as unvouched (used ones included: the guard
// cannot tell), never run twice; states issued after run.
func TestRestartWithoutPersistence(t *testing.T) {
	r := testservers.StartRedisVolatile(t)
	g := newGuard(t, newClient(t, r.Addr()), redisguard.Options{})
	at := issued(t, g)
	l := newLedger()
	for _, id := range []string{"a", "b", "c"} {
		if ok, err := l.flow(g, id, at, 5*time.Second); !ok {
			t.Fatal(err)
		}
	}
	usedOnce(t, l, g, "a", at)
	r.Stop()
	r.Start()
	for _, id := range []string{"a", "b", "c", "unused"} {
		err := l.replay(t, g, id, at)
		if !errors.Is(err, replay.ErrUnvouched) {
			t.Fatalf("after a restart without persistence, %s issued before: %v, want ErrUnvouched (start again), not a retry", id, err)
		}
	}
	after := issued(t, g)
	if ok, err := l.flow(g, "new", after, 5*time.Second); !ok {
		t.Fatalf("a state issued after the restart: %v", err)
	}
	usedOnce(t, l, g, "new", after)
	l.check(t, "a", "b", "c", "new")

	// The epoch is the restart, not the guards' first contact after it:
	// states sealed between the two are not refused.
	g.Close()
	r.Stop()
	r.Start()
	upFor3s(t, newClient(t, r.Addr()))
	fresh := newGuard(t, newClient(t, r.Addr()), redisguard.Options{})
	if et := issued(t, fresh).Add(-redisguard.DefaultClockMargin); time.Since(et) < time.Second {
		t.Fatalf("epoch %v, after Redis had been up 3 s: the guard's first contact, not the restart", et)
	}
}

// upFor3s waits until Redis has been up for 3 s by its own count, so that
// its start and the present differ.
func upFor3s(t testing.TB, admin goredis.UniversalClient) {
	t.Helper()
	eventually(t, 10*time.Second, "Redis up for 3 s", func() error {
		info, err := admin.Info(ctx, "server").Result()
		for _, up := range []string{"0", "1", "2"} {
			if err != nil || strings.Contains(info, "uptime_in_seconds:"+up+"\r") {
				return fmt.Errorf("not yet: %v", err)
			}
		}
		return nil
	})
}

// TestFlush: FLUSHALL forgets every use. The epoch is then the flush, and
// states issued before it, used or not, are refused as unvouched.
func TestFlush(t *testing.T) {
	r := testservers.StartRedis(t)
	admin := newClient(t, r.Addr())
	upFor3s(t, admin) // else Redis's start and the flush are one moment
	g := newGuard(t, newClient(t, r.Addr()), redisguard.Options{})
	at := issued(t, g)
	l := newLedger()
	if ok, err := l.flow(g, "a", at, 5*time.Second); !ok {
		t.Fatal(err)
	}
	usedOnce(t, l, g, "a", at)
	flushed := time.Now()
	if err := admin.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "unused"} {
		if err := l.replay(t, g, id, at); !errors.Is(err, replay.ErrUnvouched) {
			t.Fatalf("after FLUSHALL, %s issued before: %v, want ErrUnvouched", id, err)
		}
	}
	if after := issued(t, g); after.Before(flushed) {
		t.Fatalf("epoch %v, before the flush at %v", after, flushed)
	}
	l.check(t, "a")
}

// TestFailover: a replica that missed the last writes becomes the
// primary. Its replication id differs from the one the epoch was set
// under, so states issued before are refused as unvouched; a state
// used on the old primary and lost in the failover does not run again.
func TestFailover(t *testing.T) {
	primary := testservers.StartRedisVolatile(t, "--repl-diskless-sync-delay", "0")
	host, port := testkit.Must2(net.SplitHostPort(primary.Addr()))
	replica := testservers.StartRedisVolatile(t, "--replicaof", host, port)
	pc, rc := newClient(t, primary.Addr()), newClient(t, replica.Addr())
	g := newGuard(t, pc, redisguard.Options{})
	// A primary's first replica gives it a new replication id (Redis
	// makes its backlog then), which moves the epoch: issue after it.
	eventually(t, 10*time.Second, "the replica's first sync", func() error {
		n, err := pc.Do(ctx, "WAIT", 1, 100).Int64()
		if err != nil || n != 1 {
			return fmt.Errorf("%d replicas acknowledged: %v", n, err)
		}
		return nil
	})
	at := issued(t, g)
	l := newLedger()
	if ok, err := l.flow(g, "before", at, 5*time.Second); !ok {
		t.Fatal(err)
	}
	usedOnce(t, l, g, "before", at)
	eventually(t, 10*time.Second, "replication", func() error {
		n, err := pc.Do(ctx, "WAIT", 1, 100).Int64()
		if err != nil || n != 1 {
			return fmt.Errorf("%d replicas acknowledged: %v", n, err)
		}
		return nil
	})
	// The replica misses the next use.
	replica.Freeze()
	if ok, err := l.flow(g, "lost", at, 5*time.Second); !ok {
		t.Fatal(err)
	}
	primary.Stop()
	replica.Thaw()
	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	g2 := newGuard(t, rc, redisguard.Options{})
	for _, id := range []string{"lost", "before"} {
		if err := l.replay(t, g2, id, at); err == nil {
			t.Fatalf("%s ran again after the failover", id)
		}
	}
	after := issued(t, g2)
	if !after.After(at) {
		t.Fatalf("the epoch did not move with the failover")
	}
	if ok, err := l.flow(g2, "new", after, 5*time.Second); !ok {
		t.Fatalf("a state issued after the failover: %v", err)
	}
	l.check(t, "before", "lost", "new")
}

// TestEviction: a Redis that may evict keys is refused, with the reason;
// set to noeviction, it is used again.
func TestEviction(t *testing.T) {
	redisguard.PolicyEvery(t, 10*time.Millisecond)
	r := testservers.StartRedisVolatile(t)
	admin := newClient(t, r.Addr())
	for _, kv := range [][2]string{{"maxmemory", "1gb"}, {"maxmemory-policy", "volatile-lru"}} {
		if err := admin.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	g := newGuard(t, newClient(t, r.Addr()), patient)
	if err := g.Policy(ctx); !errors.Is(err, replay.ErrUnavailable) || !strings.Contains(err.Error(), "noeviction") {
		t.Fatalf("Policy of an evicting Redis: %v, want ErrUnavailable naming noeviction", err)
	}
	at := issued(t, g)
	err := g.Use(ctx, []byte("x"), at, time.Now().Add(time.Minute))
	if !errors.Is(err, replay.ErrUnavailable) || !strings.Contains(err.Error(), "noeviction") {
		t.Fatalf("an evicting Redis: %v, want ErrUnavailable naming noeviction", err)
	}
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := g.Policy(ctx); err != nil {
		t.Fatalf("Policy of a Redis set to noeviction: %v", err)
	}
	eventually(t, 5*time.Second, "after noeviction", func() error {
		return g.Use(ctx, []byte("x"), at, time.Now().Add(time.Minute))
	})
}

// TestClock: a host whose clock runs ahead of Redis's by more than the
// margin is refused single use, saying why; one behind it is not.
func TestClock(t *testing.T) {
	r := testservers.StartRedis(t)
	g := newGuard(t, newClient(t, r.Addr()), patient)
	at := issued(t, g)
	redisguard.SetNow(g, func() time.Time { return time.Now().Add(2 * time.Second) })
	err := g.Use(ctx, []byte("x"), at, time.Now().Add(time.Minute))
	if !errors.Is(err, replay.ErrUnavailable) || !strings.Contains(err.Error(), "clock") {
		t.Fatalf("a clock 2 s ahead: %v, want ErrUnavailable about the clock", err)
	}
	redisguard.SetNow(g, func() time.Time { return time.Now().Add(-2 * time.Second) })
	if err := g.Use(ctx, []byte("x"), at, time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("a clock 2 s behind: %v", err)
	}
}

// TestLatency: how long Use takes with Redis hung (SIGSTOP) and with
// Redis refusing connections, with the default timeout, through a client
// with go-redis's defaults (context timeouts off, 3 retries, 5 dials per
// connection) and through one that fails fast (what stores/redis.NewClient
// makes of ?max_retries=-1&dialer_retries=1).
func TestLatency(t *testing.T) {
	r := testservers.StartRedis(t)
	clients := []struct {
		name string
		o    goredis.UniversalOptions
	}{
		{"go-redis defaults", goredis.UniversalOptions{Addrs: []string{r.Addr()}}},
		{"max_retries=-1&dialer_retries=1", goredis.UniversalOptions{Addrs: []string{r.Addr()}, MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true}},
	}
	var guards []*redisguard.Guard
	for _, c := range clients {
		client := goredis.NewUniversalClient(&c.o)
		t.Cleanup(func() { client.Close() })
		guards = append(guards, newGuard(t, client, redisguard.Options{}))
	}
	at := issued(t, guards[0])
	for i, g := range guards {
		if err := g.Use(ctx, fmt.Appendf(nil, "warm-%d", i), at, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err) // connections in the pool, the policy read
		}
	}
	measure := func(what string, limit time.Duration) {
		for i, g := range guards {
			var ds []time.Duration
			for n := range 5 {
				start := time.Now()
				err := g.Use(ctx, fmt.Appendf(nil, "%s-%d-%d", what, i, n), at, time.Now().Add(time.Minute))
				ds = append(ds, time.Since(start))
				if !errors.Is(err, replay.ErrUnavailable) {
					t.Fatalf("%s: %v, want ErrUnavailable", what, err)
				}
			}
			slices.Sort(ds)
			t.Logf("Redis %s, client %s: unavailable in median %v, max %v (guard timeout %v)", what, clients[i].name,
				ds[len(ds)/2].Round(time.Microsecond), ds[len(ds)-1].Round(time.Microsecond), redisguard.DefaultTimeout)
			if ds[len(ds)-1] > limit {
				t.Errorf("Redis %s, client %s: a call took %v, over %v", what, clients[i].name, ds[len(ds)-1], limit)
			}
		}
	}
	r.Freeze()
	// Bounds with room for a loaded machine; the log has the numbers.
	measure("hung (SIGSTOP)", redisguard.DefaultTimeout+time.Second)
	r.Thaw()
	r.Stop()
	measure("refusing connections", redisguard.DefaultTimeout+time.Second)
}

// BenchmarkUse: first uses from parallel callers through one guard.
func BenchmarkUse(b *testing.B) {
	r := testservers.StartRedisVolatile(b)
	g := newGuard(b, newClient(b, r.Addr()), patient)
	at := issued(b, g)
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := g.Use(ctx, fmt.Appendf(nil, "bench-%d", n.Add(1)), at, time.Now().Add(time.Minute)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestRelease: a released use can be made again, once, on any instance;
// the first use's confirmation, on its way, does not bring it back.
func TestRelease(t *testing.T) {
	r := testservers.StartRedisVolatile(t)
	c := newClient(t, r.Addr())
	g, other := newGuard(t, c, redisguard.Options{}), newGuard(t, c, redisguard.Options{})
	at := issued(t, g)
	var rel replay.Releaser = g
	keep := time.Now().Add(time.Minute)
	if err := rel.Use(ctx, []byte("r"), at, keep); err != nil {
		t.Fatal(err)
	}
	if err := rel.Release(ctx, []byte("r")); err != nil {
		t.Fatal(err)
	}
	if err := other.Use(ctx, []byte("r"), at, keep); err != nil {
		t.Fatalf("after release, on another instance: %v", err)
	}
	eventually(t, 5*time.Second, "replayed", func() error {
		if err := g.Use(ctx, []byte("r"), at, keep); !errors.Is(err, replay.ErrReplayed) {
			return fmt.Errorf("second use after release: %v", err)
		}
		return nil
	})
}

// TestDoubt: a use put in doubt, confirmed or not yet, is refused as
// undetermined on every instance, and the owner's late confirmation does
// not turn it back into replayed.
func TestDoubt(t *testing.T) {
	r := testservers.StartRedisVolatile(t)
	c := newClient(t, r.Addr())
	g, other := newGuard(t, c, redisguard.Options{}), newGuard(t, c, redisguard.Options{})
	at := issued(t, g)
	var d replay.Doubter = g
	keep := time.Now().Add(time.Minute)
	for _, id := range []string{"right-away", "after-its-confirmation"} {
		if err := d.Use(ctx, []byte(id), at, keep); err != nil {
			t.Fatal(err)
		}
		if id == "after-its-confirmation" {
			eventually(t, 5*time.Second, "confirmed", func() error {
				if err := other.Use(ctx, []byte(id), at, keep); !errors.Is(err, replay.ErrReplayed) {
					return fmt.Errorf("before doubt: %v", err)
				}
				return nil
			})
		}
		if err := d.Doubt(ctx, []byte(id)); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "undetermined", func() error {
			for _, h := range []*redisguard.Guard{g, other} {
				if err := h.Use(ctx, []byte(id), at, keep); !errors.Is(err, replay.ErrUndetermined) {
					return fmt.Errorf("%s: %v", id, err)
				}
			}
			return nil
		})
	}
	if err := d.Doubt(ctx, []byte("never-used")); err != nil {
		t.Fatal(err)
	}
	if err := other.Use(ctx, []byte("never-used"), at, keep); err != nil {
		t.Fatalf("an id doubted before any use: %v", err)
	}
}
