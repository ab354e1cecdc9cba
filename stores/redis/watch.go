package redis

import (
	"context"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
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
func (s *Store) Watch(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	h := join(s.client, s.Channel())
	if !h.start() {
		leave(h, nil)
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
		leave(h, out)
		close(out)
	}()
	return out
}

type hubKey struct {
	client  goredis.UniversalClient
	channel string
}

// A hub is one subscription fanned out to every watcher of a channel.
type hub struct {
	key   hubKey
	refs  int // guarded by hubs.mu
	once  sync.Once
	ok    bool
	ps    *goredis.PubSub
	done  chan struct{} // closed when the subscription ends
	mu    sync.Mutex
	subs  map[chan struct{}]struct{}
	close sync.Once
}

var hubs = struct {
	sync.Mutex
	m map[hubKey]*hub
}{m: map[hubKey]*hub{}}

// join returns the hub for the channel, counting one more user.
func join(c goredis.UniversalClient, channel string) *hub {
	k := hubKey{c, channel}
	hubs.Lock()
	defer hubs.Unlock()
	h := hubs.m[k]
	if h == nil {
		h = &hub{key: k, done: make(chan struct{}), subs: map[chan struct{}]struct{}{}}
		hubs.m[k] = h
	}
	h.refs++
	return h
}

// leave drops a user (and its channel, if any); the last one closes the
// subscription.
func leave(h *hub, out chan struct{}) {
	if out != nil {
		h.mu.Lock()
		delete(h.subs, out)
		h.mu.Unlock()
	}
	hubs.Lock()
	h.refs--
	last := h.refs == 0
	if last && hubs.m[h.key] == h {
		delete(hubs.m, h.key)
	}
	hubs.Unlock()
	if last {
		h.stop()
	}
}

func (h *hub) stop() {
	h.close.Do(func() {
		if h.ps != nil {
			h.ps.Close()
		}
	})
}

// start subscribes, once per hub, and reports whether Redis confirmed it.
// A hub that failed is forgotten, so that the next Watch tries again.
func (h *hub) start() bool {
	h.once.Do(func() {
		h.ps = h.key.client.Subscribe(context.Background(), h.key.channel)
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := h.ps.Receive(c)
		cancel()
		if err != nil {
			hubs.Lock()
			if hubs.m[h.key] == h {
				delete(hubs.m, h.key)
			}
			hubs.Unlock()
			h.stop()
			close(h.done)
			return
		}
		h.ok = true
		go h.run()
	})
	return h.ok
}

// run fans out every message, and every new subscription confirmation (a
// reconnection), until the subscription is closed.
func (h *hub) run() {
	defer close(h.done)
	for range h.ps.ChannelWithSubscriptions() {
		h.mu.Lock()
		for out := range h.subs {
			select {
			case out <- struct{}{}:
			default: // a signal is pending already
			}
		}
		h.mu.Unlock()
	}
}
