package gateway

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// The idle timeout is kept by one goroutine per gateway, which closes the
// body of a response from which nothing arrived for IdleTimeout: the
// read waiting on it fails, and the client gets its error. (A context and
// a timer per request cost more CPU than all the sealing.) The time to
// the response's headers is the transport's ResponseHeaderTimeout.
type watchdog struct {
	mu      sync.Mutex
	watched map[*watched]struct{}
	running bool
}

type watched struct {
	body     io.Closer
	last     atomic.Int64 // UnixNano of the last progress
	timedOut atomic.Bool
}

var errIdle = errors.New("upstream idle past the timeout")

func (d *watchdog) watch(w *watched, idle time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.watched == nil {
		d.watched = map[*watched]struct{}{}
	}
	d.watched[w] = struct{}{}
	if !d.running {
		d.running = true
		go d.run(idle)
	}
}

func (d *watchdog) unwatch(w *watched) {
	d.mu.Lock()
	delete(d.watched, w)
	d.mu.Unlock()
}

// run checks the watched responses until none is left.
func (d *watchdog) run(idle time.Duration) {
	tick := min(idle/4, time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	for range t.C {
		now := time.Now().UnixNano()
		d.mu.Lock()
		if len(d.watched) == 0 {
			d.running = false
			d.mu.Unlock()
			return
		}
		for w := range d.watched {
			if now-w.last.Load() >= int64(idle) {
				w.timedOut.Store(true)
				w.body.Close()
				delete(d.watched, w)
			}
		}
		d.mu.Unlock()
	}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// progress says something arrived from upstream, for the idle timeout.
func (ex *exchange) progress() {
	if ex.w != nil {
		ex.w.last.Store(time.Now().UnixNano())
	}
}

// timedOut reports whether the idle timeout ended the response.
func (ex *exchange) timedOut() bool { return ex.w != nil && ex.w.timedOut.Load() }

// progressReader restarts the exchange's idle timer as data arrives.
type progressReader struct {
	r  io.Reader
	ex *exchange
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.ex.progress()
	}
	return n, err
}
