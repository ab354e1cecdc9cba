package redis_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/backends/kektest"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
)

// proxy forwards TCP connections to a backend that a test switches, as a
// failover moves a service name from one Redis to another.
type proxy struct {
	ln      net.Listener
	backend atomic.Value // string
	mu      sync.Mutex
	conns   []net.Conn
}

func newProxy(t *testing.T, backend string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	p.backend.Store(backend)
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", p.backend.Load().(string))
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, b)
			p.mu.Unlock()
			go func() { io.Copy(b, c); b.Close() }()
			go func() { io.Copy(c, b); c.Close() }()
		}
	}()
	return p
}

// failover points new connections at backend and cuts the old ones.
func (p *proxy) failover(backend string) {
	p.backend.Store(backend)
	p.cut()
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestForkAfterFailover makes a fork the way production does: a write
// reaches the primary but not its replica, the replica is promoted, and
// an operator edits the keyset there. Two authentic version-2 keysets now
// exist; a running loader that holds one reports the other (ErrFork)
// instead of ignoring it, and keeps serving the one it has.
func TestForkAfterFailover(t *testing.T) {
	ctx := context.Background()
	primary, replica := testservers.StartRedis(t), testservers.StartRedis(t)
	rc := goredis.NewClient(&goredis.Options{Addr: replica.Addr()})
	defer rc.Close()
	host, port := testkit.Must2(net.SplitHostPort(primary.Addr()))
	if err := rc.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	px := newProxy(t, primary.Addr())
	loc := "redis://" + px.ln.Addr().String() + "/0?key=stateseal:fork"

	dir := t.TempDir()
	kek := kektest.LocalKEK(t, dir)
	o := &rotation.Options{KEK: kek, Logger: slog.New(slog.DiscardHandler)}
	if _, err := rotation.Init(ctx, loc, kek, keyring.AEAD, keyring.DefaultPolicy(), o); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the replica to hold version 1", func() bool {
		n := testkit.Must(rc.Exists(ctx, "stateseal:fork").Result())
		return n == 1
	})
	// The link breaks; the primary takes a write the replica never sees.
	// (While the primary still counts the replica connected, the store
	// refuses the write: it WAITs for it. With min_replicas=1 it would
	// refuse it after too.)
	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	pc := goredis.NewClient(&goredis.Options{Addr: primary.Addr()})
	defer pc.Close()
	testkit.WaitFor(t, "the primary to count no replica", func() bool {
		info := testkit.Must(pc.Info(ctx, "replication").Result())
		return strings.Contains(info, "connected_slaves:0")
	})
	if _, err := rotation.Rotate(ctx, loc, nil, o); err != nil {
		t.Fatal(err)
	}
	var reports []error
	var mu sync.Mutex
	l := &keyset.Loader{Path: loc, Options: keyset.LoadOptions{KEK: kek}, Logger: slog.New(slog.DiscardHandler),
		OnError: func(err error) { mu.Lock(); reports = append(reports, err); mu.Unlock() }}
	ring, err := l.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mine := ring.Current()
	if mine.Version() != 2 {
		t.Fatalf("loaded version %d", mine.Version())
	}
	// Failover: the service name now reaches the promoted replica, at
	// version 1, and an operator rotates there: another version 2.
	px.failover(replica.Addr())
	if _, err := rotation.Rotate(ctx, loc, nil, o); err != nil {
		t.Fatal(err)
	}
	err = l.Reload(ctx)
	if !errors.Is(err, keyset.ErrFork) || !strings.Contains(err.Error(), "version 2") {
		t.Fatalf("reload of the other version 2: %v, want ErrFork", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) == 0 || !errors.Is(reports[len(reports)-1], keyset.ErrFork) {
		t.Fatalf("OnError got %v", reports)
	}
	if ring.Current() != mine {
		t.Fatal("the loader replaced its keyset with the other branch")
	}
}
