package gateway

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
)

// A strictWriter is a client's ResponseWriter that counts, in plain
// fields, every use: under -race, two uses that overlap are reported.
// Every use after the handler is done (stopped) is counted in late.
type strictWriter struct {
	h       http.Header
	uses    int    // not atomic, on purpose
	log     []byte // s: status, w: write, f: flush
	flushes atomic.Int32
	stopped atomic.Bool
	late    *atomic.Int32
}

func (s *strictWriter) use(op byte) {
	if s.stopped.Load() {
		s.late.Add(1)
	}
	s.uses++
	s.log = append(s.log, op)
}

func (s *strictWriter) Header() http.Header         { s.use('h'); return s.h }
func (s *strictWriter) WriteHeader(int)             { s.use('s') }
func (s *strictWriter) Write(p []byte) (int, error) { s.use('w'); return len(p), nil }
func (s *strictWriter) Flush()                      { s.use('f'); s.flushes.Add(1) }

// TestHeaderFlushWithFirstEvent: an event that comes at once leaves with
// the headers in one flush, the timer stopped before it fires, and a
// stream's writer allocates nothing for it (the timer is pooled).
func TestHeaderFlushWithFirstEvent(t *testing.T) {
	late := new(atomic.Int32)
	sw := &strictWriter{h: http.Header{}, late: late}
	f := &flushWriter{ResponseWriter: sw, stream: true, delay: time.Minute}
	ev := []byte("data: x\n\n")
	allocs := testing.AllocsPerRun(100, func() {
		sw.log = sw.log[:0]
		f.WriteHeader(http.StatusOK)
		testkit.Must(f.Write(ev))
		f.stop()
		if string(sw.log) != "swf" {
			t.Fatalf("uses %q, want status, write, one flush", sw.log)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations a stream", allocs)
	}
}

// TestHeaderFlushAlone: when the first event is late, the timer flushes
// the headers alone, and the event then gets its own flush.
func TestHeaderFlushAlone(t *testing.T) {
	late := new(atomic.Int32)
	sw := &strictWriter{h: http.Header{}, late: late}
	f := &flushWriter{ResponseWriter: sw, stream: true, delay: time.Millisecond}
	f.WriteHeader(http.StatusOK)
	testkit.WaitFor(t, "the headers flushed alone", func() bool { return sw.flushes.Load() == 1 })
	testkit.Must(f.Write([]byte("data: x\n\n")))
	f.stop()
	if string(sw.log) != "sfwf" {
		t.Fatalf("uses %q, want status, flush, write, flush", sw.log)
	}
}

// TestHeaderFlushRaces: the handler's next use of the writer (an event,
// Header as ReverseProxy's trailers make, or none: the stream ends) is
// placed before, near and after the moment the timer fires. Under -race
// the timer's flush never overlaps the handler's uses, the headers are
// flushed alone at most once, and nothing reaches the writer once stop
// has returned.
func TestHeaderFlushRaces(t *testing.T) {
	const delay = 200 * time.Microsecond
	late := new(atomic.Int32)
	for i := range 300 {
		sw := &strictWriter{h: http.Header{}, late: late}
		f := &flushWriter{ResponseWriter: sw, stream: true, delay: delay}
		f.WriteHeader(http.StatusOK)
		// Not a wait for a condition: it places the next use around the
		// timer's moment, a different place each time.
		time.Sleep(time.Duration(i%20) * delay / 10)
		switch i % 3 {
		case 0:
			testkit.Must(f.Write([]byte("data: x\n\n")))
		case 1:
			f.Header().Set("X-After", "1")
		}
		f.stop()
		sw.stopped.Store(true)
		if n := sw.flushes.Load(); i%3 != 0 && n > 1 || i%3 == 0 && n > 2 {
			t.Fatalf("run %d: %d flushes (%q)", i, n, sw.log)
		}
	}
	if n := late.Load(); n != 0 {
		t.Fatalf("%d uses of a writer after stop", n)
	}
}
