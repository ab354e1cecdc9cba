package share

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// A client stands for what a Map shares: it knows whether it was closed.
type client struct {
	n      int
	closed atomic.Bool
}

// opener opens numbered clients and counts them.
type opener struct{ n atomic.Int64 }

func (o *opener) open() (*client, error) { return &client{n: int(o.n.Add(1))}, nil }

func acquire(t *testing.T, m *Map[string, *client], o *opener) *Share[string, *client] {
	t.Helper()
	s, err := m.Acquire("k", o.open, func(c *client) { c.closed.Store(true) })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestShared: holders of one key share one value, opened once; only the
// last release reports itself last, and the next Acquire opens anew.
func TestShared(t *testing.T) {
	var m Map[string, *client]
	o := new(opener)
	a, b := acquire(t, &m, o), acquire(t, &m, o)
	if a != b || o.n.Load() != 1 {
		t.Fatalf("two holders: shares %p and %p, %d opens; want one share, one open", a, b, o.n.Load())
	}
	if a.Release() {
		t.Error("the first of two releases reported itself last")
	}
	if !b.Release() {
		t.Error("the last release did not report itself last")
	}
	c := acquire(t, &m, o)
	if c == a || c.Value().n != 2 {
		t.Errorf("Acquire after the last release: client %d (share reused: %v), want a new client 2", c.Value().n, c == a)
	}
}

// TestReleaseLeavesReplacedShare: a share forgotten while held is
// replaced under its key by a new one; the old holder's last release
// must leave the new share in the map, and the next Acquire shares it.
func TestReleaseLeavesReplacedShare(t *testing.T) {
	var m Map[string, *client]
	o := new(opener)
	old := acquire(t, &m, o)
	old.Forget()
	repl := acquire(t, &m, o)
	if repl == old {
		t.Fatal("Acquire after Forget returned the forgotten share")
	}
	if !old.Release() {
		t.Error("the old share's only holder's release did not report itself last")
	}
	if s := acquire(t, &m, o); s != repl {
		t.Errorf("after the old holder's release, Acquire returned client %d, want the replacement (client %d): the release deleted the share that replaced its own", s.Value().n, repl.Value().n)
	}
	if o.n.Load() != 2 {
		t.Errorf("%d clients opened, want 2", o.n.Load())
	}
}

// TestReleaseTooMany: a release after the last panics and leaves the
// share made since under the same key in the map.
func TestReleaseTooMany(t *testing.T) {
	var m Map[string, *client]
	o := new(opener)
	old := acquire(t, &m, o)
	if !old.Release() {
		t.Fatal("the only holder's release did not report itself last")
	}
	repl := acquire(t, &m, o)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a release too many did not panic")
			}
		}()
		old.Release()
	}()
	if s := acquire(t, &m, o); s != repl {
		t.Error("a release too many deleted the share made since")
	}
}

// TestKeep: a Map that keeps its values shares the same one again after
// its last holder released it.
func TestKeep(t *testing.T) {
	m := Map[string, *client]{Keep: true}
	o := new(opener)
	a := acquire(t, &m, o)
	if !a.Release() {
		t.Error("the only holder's release did not report itself last")
	}
	if b := acquire(t, &m, o); b != a || o.n.Load() != 1 {
		t.Errorf("Acquire after the last release: %d opens (same share: %v), want the kept share", o.n.Load(), b == a)
	}
}

// TestOpenFails: a failed open is returned and leaves nothing in the map.
func TestOpenFails(t *testing.T) {
	var m Map[string, *client]
	boom := errors.New("boom")
	if _, err := m.Acquire("k", func() (*client, error) { return nil, boom }, nil); !errors.Is(err, boom) {
		t.Fatalf("Acquire with a failing open: %v, want %v", err, boom)
	}
	o := new(opener)
	if s := acquire(t, &m, o); s.Value().n != 1 {
		t.Errorf("Acquire after a failed open shared client %d, want a new one", s.Value().n)
	}
}

// TestOpenRace: two Acquires that both find no share both open (outside
// the lock, at once); one client is shared by both, and the other is
// discarded, once.
func TestOpenRace(t *testing.T) {
	var m Map[string, *client]
	var entered sync.WaitGroup
	entered.Add(2)
	var opened []*client
	var mu sync.Mutex
	open := func() (*client, error) {
		entered.Done()
		entered.Wait() // both are inside open before either stores
		mu.Lock()
		defer mu.Unlock()
		c := &client{n: len(opened) + 1}
		opened = append(opened, c)
		return c, nil
	}
	var discards atomic.Int64
	discard := func(c *client) { discards.Add(1); c.closed.Store(true) }
	shares := make([]*Share[string, *client], 2)
	errs := make([]error, 2)
	var done sync.WaitGroup
	for i := range shares {
		done.Go(func() { shares[i], errs[i] = m.Acquire("k", open, discard) })
	}
	done.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if shares[0] != shares[1] {
		t.Fatal("two Acquires racing got two shares")
	}
	if len(opened) != 2 || discards.Load() != 1 {
		t.Fatalf("%d opens, %d discards; want 2 and 1", len(opened), discards.Load())
	}
	if kept := shares[0].Value(); kept.closed.Load() {
		t.Error("the shared client was discarded")
	}
	if shares[0].Release() || !shares[1].Release() {
		t.Error("two holders' releases: want the second last")
	}
}

// TestManyHolders: holders acquiring and releasing at once close every
// client they opened exactly once, and none while it is held.
func TestManyHolders(t *testing.T) {
	var m Map[string, *client]
	var opened, closed atomic.Int64
	open := func() (*client, error) { opened.Add(1); return new(client), nil }
	release := func(c *client) {
		if !c.closed.CompareAndSwap(false, true) {
			t.Error("a client closed twice")
		}
		closed.Add(1)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				s, err := m.Acquire("k", open, release)
				if err != nil {
					t.Error(err)
					return
				}
				if s.Value().closed.Load() {
					t.Error("a held client was closed")
				}
				if s.Release() {
					release(s.Value())
				}
			}
		})
	}
	wg.Wait()
	if opened.Load() != closed.Load() {
		t.Errorf("%d clients opened, %d closed", opened.Load(), closed.Load())
	}
	if len(m.m) != 0 {
		t.Errorf("%d shares left in the map after every release", len(m.m))
	}
}
