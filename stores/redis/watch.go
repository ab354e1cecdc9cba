package redis

import (
	"context"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/internal/share"
)

// Watch signals every write announced on the channel, and every time the
// subscription is made again after a drop (a Redis restart, a Sentinel
// failover, a Cluster node's death: go-redis reconnects by itself), since
// writes made meanwhile were not announced: the loader then reads the
// revision at once instead of at its next poll. It returns once Redis has
// confirmed the subscription (or failed to, within five seconds), so that
// a write made after it returns is signalled.
//
// All the stores of one client share one subscription per channel (one
// connection, one health check), however many loaders watch: a thousand
// loaders in a process cost Redis one subscriber.
//
// Behind Sentinel the subscription follows the primary: go-redis moves
// its pool to a new primary at once, but not its subscriptions, which
// stay on the old primary (alive, and no longer sent the writes) until
// the sentinels reconfigure it, up to 10 s later. So every
// followEvery (1 s) the hub asks the primary through the pool which
// server it is (INFO server's run_id); when that is not the server it
// subscribed on, it subscribes again (the new connection goes to the new
// primary), drops the old subscription, and signals every watcher.
func (s *Store) Watch(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	e := join(s.client, s.Channel())
	h := e.Value()
	if !h.start(e.Forget) {
		leave(e, nil)
		close(out) // polling carries on
		return out
	}
	h.mu.Lock()
	h.subs[out] = struct{}{}
	h.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-h.done:
		}
		leave(e, out)
		close(out)
	}()
	return out
}

// followEvery is how often a hub behind Sentinel checks that its
// subscription is on the primary; a variable for tests.
var followEvery = time.Second

type hubKey struct {
	client  goredis.UniversalClient
	channel string
}

// A hub is one subscription fanned out to every watcher of a channel.
type hub struct {
	key   hubKey
	once  sync.Once
	ok    bool
	done  chan struct{} // closed when the subscription ends
	mu    sync.Mutex
	ps    *goredis.PubSub // guarded by mu once run has started
	on    string          // the run_id of the server ps subscribed on ("": unknown); guarded by mu
	ended bool            // stop was called; guarded by mu
	subs  map[chan struct{}]struct{}
	close sync.Once
}

var hubs share.Map[hubKey, *hub]

// join returns the hub for the channel, counting one more user.
func join(c goredis.UniversalClient, channel string) *share.Share[hubKey, *hub] {
	k := hubKey{c, channel}
	e, _ := hubs.Acquire(k, func() (*hub, error) {
		return &hub{key: k, done: make(chan struct{}), subs: map[chan struct{}]struct{}{}}, nil
	}, nil) // a hub not yet started holds nothing to close
	return e
}

// leave drops a user (and its channel, if any); the last one closes the
// subscription.
func leave(e *share.Share[hubKey, *hub], out chan struct{}) {
	h := e.Value()
	if out != nil {
		h.mu.Lock()
		delete(h.subs, out)
		h.mu.Unlock()
	}
	if e.Release() {
		h.stop()
	}
}

func (h *hub) stop() {
	h.close.Do(func() {
		h.mu.Lock()
		h.ended = true
		ps := h.ps
		h.mu.Unlock()
		if ps != nil {
			ps.Close()
		}
	})
}

// start subscribes, once per hub, and reports whether Redis confirmed it.
// A hub that failed is forgotten (forget), so that the next Watch tries
// again.
func (h *hub) start(forget func()) bool {
	h.once.Do(func() {
		ps := h.key.client.Subscribe(context.Background(), h.key.channel)
		h.mu.Lock()
		h.ps = ps
		h.mu.Unlock()
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := ps.Receive(c)
		cancel()
		if err != nil {
			forget()
			h.stop()
			close(h.done)
			return
		}
		h.ok = true
		if sentinel(h.key.client) {
			id := serverID(h.key.client)
			h.mu.Lock()
			h.on = id
			h.mu.Unlock()
		}
		go h.run()
	})
	return h.ok
}

// run fans out every message, and every new subscription confirmation (a
// reconnection), until the subscription is closed (and not replaced by
// one on a new primary).
func (h *hub) run() {
	defer close(h.done)
	quit := make(chan struct{})
	defer close(quit)
	if sentinel(h.key.client) {
		go h.follow(quit)
	}
	for {
		h.mu.Lock()
		ps := h.ps
		h.mu.Unlock()
		for range ps.ChannelWithSubscriptions() {
			h.signal()
		}
		h.mu.Lock()
		moved := h.ps != ps && !h.ended
		h.mu.Unlock()
		if !moved {
			return
		}
	}
}

// signal tells every watcher to read the revision.
func (h *hub) signal() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for out := range h.subs {
		select {
		case out <- struct{}{}:
		default: // a signal is pending already
		}
	}
}

// follow moves the subscription to the primary the client's pool
// reaches, when that is another server than the one it subscribed on.
func (h *hub) follow(quit <-chan struct{}) {
	t := time.NewTicker(followEvery)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case <-t.C:
		}
		id := serverID(h.key.client)
		h.mu.Lock()
		on := h.on
		if on == "" {
			h.on = id
		}
		h.mu.Unlock()
		if id == "" || on == "" || id == on {
			continue
		}
		ps := h.key.client.Subscribe(context.Background(), h.key.channel)
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := ps.Receive(c)
		cancel()
		if err != nil {
			ps.Close() // the next tick tries again
			continue
		}
		h.mu.Lock()
		if h.ended {
			h.mu.Unlock()
			ps.Close()
			return
		}
		old := h.ps
		h.ps, h.on = ps, serverID(h.key.client)
		h.mu.Unlock()
		old.Close()
		// Writes made on the new primary before this subscription were
		// not announced to it.
		h.signal()
	}
}

// sentinel reports a Sentinel failover client (go-redis names its
// address "FailoverClient").
func sentinel(c goredis.UniversalClient) bool {
	cl, ok := c.(*goredis.Client)
	return ok && cl.Options().Addr == "FailoverClient"
}

// serverID is the run_id of the server the client's pool reaches ("" if
// it does not answer within a second).
func serverID(c goredis.UniversalClient) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "run_id:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
