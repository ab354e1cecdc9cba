package gateway

import (
	"net/http"
	"sync"
	"time"
)

// headerDelay is how long a stream's headers wait for its first event
// before they are flushed alone. An upstream normally sends the event
// with its headers, and the two then leave in one write to the client;
// the wait is only seen when the upstream holds its first event.
const headerDelay = 5 * time.Millisecond

// A flushWriter is the client's ResponseWriter as the proxy writes to it.
// For a stream, it flushes the body after each write: each is whole
// events (an sseBody's Read returns one event at a time). The headers go
// with the first event, in the same write; if that event has not come
// within headerDelay, a timer flushes the headers alone, so that a client
// sees the stream open while the upstream holds its first event
// (TestSSEHeadersAtOnce).
//
// The timer's flush is the only use of the client's ResponseWriter off
// the handler's goroutine. The handler disarms the timer, under the
// timer's lock, before any other use of the ResponseWriter after
// WriteHeader (Header, Write, Flush, Unwrap) and before ServeHTTP returns
// (stop): the two never overlap, and nothing touches the ResponseWriter
// once the handler has returned (http.ResponseWriter's rule; ReverseProxy's
// maxLatencyWriter holds the same lock for the same reason). When the
// event comes in time the timer is stopped, not fired: no goroutine wakes,
// and the timer goes back to a pool, so a stream allocates nothing more.
type flushWriter struct {
	http.ResponseWriter
	stream bool
	delay  time.Duration // if not zero, replaces headerDelay (tests)
	hold   *headerTimer  // armed from WriteHeader to the first event
}

// A headerTimer flushes a stream's headers alone when its first event is
// late. It is reused: a timer made per stream would be an allocation.
type headerTimer struct {
	t  *time.Timer
	mu sync.Mutex   // between the timer's flush and disarm
	f  *flushWriter // what the timer flushes; nil once disarmed or fired
}

var headerTimers = sync.Pool{New: func() any {
	h := new(headerTimer)
	h.t = time.AfterFunc(time.Hour, h.fire)
	h.t.Stop()
	return h
}}

func (h *headerTimer) fire() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f != nil { // nil: the handler disarmed it as it fired
		h.f.flush()
		h.f = nil
	}
}

func (f *flushWriter) arm() {
	h := headerTimers.Get().(*headerTimer)
	h.mu.Lock()
	h.f = f
	h.mu.Unlock()
	d := headerDelay
	if f.delay != 0 {
		d = f.delay
	}
	h.t.Reset(d)
	f.hold = h
}

// stop disarms the header timer: once it returns, the timer's goroutine
// does not touch the ResponseWriter (it flushed before, or never will).
func (f *flushWriter) stop() {
	h := f.hold
	if h == nil {
		return
	}
	f.hold = nil
	h.mu.Lock()
	h.f = nil
	stopped := h.t.Stop()
	h.mu.Unlock()
	// A timer that fired is not reused: its goroutine may not have taken
	// the lock yet, and would then flush the next stream's headers early.
	if stopped {
		headerTimers.Put(h)
	}
}

func (f *flushWriter) WriteHeader(code int) {
	f.ResponseWriter.WriteHeader(code)
	if f.stream && f.hold == nil {
		f.arm()
	}
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.stop()
	n, err := f.ResponseWriter.Write(p)
	if f.stream && err == nil {
		f.flush()
	}
	return n, err
}

// Header disarms the timer first: after WriteHeader, net/http's Header
// reads what a flush of the headers writes.
func (f *flushWriter) Header() http.Header {
	f.stop()
	return f.ResponseWriter.Header()
}

func (f *flushWriter) Flush() {
	f.stop()
	f.flush()
}

func (f *flushWriter) flush() {
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
		return
	}
	http.NewResponseController(f.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the client's ResponseWriter.
func (f *flushWriter) Unwrap() http.ResponseWriter {
	f.stop()
	return f.ResponseWriter
}
