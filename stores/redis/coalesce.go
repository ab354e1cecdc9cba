package redis

import (
	"context"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Loaders in one process that read one keyset through one client (a
// fleet's instances in a test, or many tenants' loaders on one key) all
// ask at once when a write is announced. Their reads are coalesced: a
// call joins the next Redis call, one that starts after it did, never one
// already in flight (which may have been sent before the write it was
// told of), so each still sees every write made before it was called.
// A thousand loaders then cost Redis two calls per notification, not a
// thousand.

// flightTimeout bounds a shared call, whichever caller's context ends.
const flightTimeout = 10 * time.Second

type flightKey struct {
	client goredis.UniversalClient
	key    string
	op     string
}

type flight struct {
	done chan struct{}
	val  any
	err  error
}

type group struct {
	key       flightKey
	fn        func(context.Context) (any, error)
	mu        sync.Mutex
	cur, next *flight
}

var groups = struct {
	sync.Mutex
	m map[flightKey]*group
}{m: map[flightKey]*group{}}

// coalesced runs fn, or shares the result of a run of the same op on the
// same client and key that starts after this call.
func coalesced(ctx context.Context, k flightKey, fn func(context.Context) (any, error)) (any, error) {
	groups.Lock()
	g := groups.m[k]
	if g == nil {
		g = &group{key: k, fn: fn}
		groups.m[k] = g
	}
	groups.Unlock()
	g.mu.Lock()
	var f *flight
	if g.cur == nil {
		f = &flight{done: make(chan struct{})}
		g.cur = f
		g.mu.Unlock()
		go g.run(f)
	} else {
		if g.next == nil {
			g.next = &flight{done: make(chan struct{})}
		}
		f = g.next
		g.mu.Unlock()
	}
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run makes the call for f, then starts the one callers joined meanwhile.
// An idle group is dropped from the table.
func (g *group) run(f *flight) {
	for f != nil {
		ctx, cancel := context.WithTimeout(context.Background(), flightTimeout)
		f.val, f.err = g.fn(ctx)
		cancel()
		close(f.done)
		g.mu.Lock()
		f, g.cur, g.next = g.next, g.next, nil
		g.mu.Unlock()
	}
	// Idle: forget the group (and with it the client). A caller that
	// still holds it starts a run of its own; one that comes later makes
	// another group: either way its call starts after it was made.
	groups.Lock()
	g.mu.Lock()
	if g.cur == nil && groups.m[g.key] == g {
		delete(groups.m, g.key)
	}
	g.mu.Unlock()
	groups.Unlock()
}
