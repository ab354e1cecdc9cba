package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"
)

// Parking. A bridged call may wait minutes for a person's answer, and
// net/http keeps a lot for each connection whose handler runs: the
// handler's goroutine and deep stack, a goroutine reading in the
// background, 10 KiB of buffers. So a call runs on a goroutine of its
// own, beside its handler; when it is about to wait for answers, it
// takes the connection (Hijack) and lets the handler return, with all
// of that. It keeps the connection, a goroutine that notices the client
// leave, and its own state. The stream it writes from then on is the
// same bytes: SSE events in HTTP/1.1 chunks. A stream that may be
// parked says Connection: close, since a hijacked connection is not
// given back to net/http for another request.
//
// Only an HTTP/1.1 connection parks; on another (HTTP/2), or a
// ResponseWriter that cannot be hijacked, the call waits on its handler
// as before.

// errClientLeft ends a parked call whose client closed its connection.
var errClientLeft = errors.New("gateway: the client closed its connection")

// errShutdown ends a parked call cut by Bridge.Shutdown.
var errShutdown = errors.New("gateway: shut down")

// A handoff is what a call's goroutine and its handler share.
type handoff struct {
	b      *Bridge
	rctx   context.Context         // the request's: it ends with the handler
	cancel context.CancelCauseFunc // the call's
	stop   func() bool             // ends the request context's hold on the call's
	parked chan struct{}           // closed once the call holds the connection
	ended  chan any                // the call ended on the handler: its panic, or nil
}

// runCall runs call on a goroutine of its own and returns when it ends
// or parks. A panic before parking is the handler's, as before.
func (g *Gateway) runCall(w http.ResponseWriter, r *http.Request, out *legacyStream, ctx context.Context, cancel context.CancelCauseFunc, call func(ctx context.Context)) {
	// Nothing here may hold r once the handler returns: its body holds
	// net/http's buffers.
	rctx := r.Context()
	h := &handoff{b: g.Bridge, rctx: rctx, cancel: cancel, parked: make(chan struct{}), ended: make(chan any, 1)}
	h.stop = context.AfterFunc(rctx, func() { cancel(context.Cause(rctx)) })
	if r.ProtoMajor == 1 && r.ProtoMinor >= 1 {
		out.hand = h
	}
	go func() {
		defer func() {
			p := recover()
			if out.conn == nil {
				h.ended <- p
				return
			}
			out.conn.Close()
			if p != nil && p != http.ErrAbortHandler {
				g.Bridge.logger().Error("gateway bridge: a parked call panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			}
			g.Bridge.parked.leave(out)
		}()
		call(ctx)
	}()
	select {
	case p := <-h.ended:
		h.stop()
		if p != nil {
			panic(p)
		}
	case <-h.parked:
	}
}

// park takes the connection from the handler, if it can: the call is
// about to wait for its client. It is a no-op if the call cannot park,
// or has parked already.
func (o *legacyStream) park() {
	h := o.hand
	if h == nil || o.conn != nil || !o.started {
		return
	}
	if !h.b.parked.reserve() {
		return // shutting down: the call waits on its handler
	}
	if !h.stop() {
		h.b.parked.unreserve()
		return // the client left: the call's context is ended
	}
	conn, _, err := http.NewResponseController(o.w).Hijack()
	if err != nil {
		h.b.parked.unreserve()
		o.hand = nil
		h.stop = context.AfterFunc(h.rctx, func() { h.cancel(context.Cause(h.rctx)) })
		return
	}
	// Bytes the client sent after its request, pipelined, go with the
	// handler: the stream said Connection: close.
	o.conn, o.w = conn, nil
	h.b.parked.enter(o, h.cancel)
	go watch(conn, h.cancel)
	close(h.parked)
}

// watch ends the call when its client leaves: a parked connection has
// no other reader. A client sends nothing while it reads its stream; one
// that keeps sending is cut.
func watch(conn net.Conn, cancel context.CancelCauseFunc) {
	var buf [64]byte
	for n := 0; n < 4096; {
		k, err := conn.Read(buf[:])
		if err != nil {
			break
		}
		n += k
	}
	cancel(errClientLeft)
	conn.Close()
}

// chunk writes p as one HTTP/1.1 chunk on the parked connection, and
// the last chunk after it if last, by deadline (zero: none).
func (o *legacyStream) chunk(p []byte, last bool, deadline time.Time) error {
	b := make([]byte, 0, len(p)+24)
	b = fmt.Appendf(b, "%x\r\n", len(p))
	b = append(b, p...)
	b = append(b, "\r\n"...)
	if last {
		b = append(b, "0\r\n\r\n"...)
	}
	o.conn.SetWriteDeadline(deadline)
	_, err := o.conn.Write(b)
	if err != nil {
		// Part of the chunk may have gone: nothing after it would
		// read as the stream, and a client that did not take this one
		// in time does not hold the call a minute more for its error.
		o.conn.Close()
	}
	return err
}

// parkedCalls are the calls that hold their connections themselves:
// net/http's Shutdown does not see them, Bridge.Shutdown does.
type parkedCalls struct {
	mu       sync.Mutex
	calls    map[*legacyStream]context.CancelCauseFunc
	reserved int
	draining bool          // Shutdown began: nothing parks any more
	closed   bool          // cut
	none     chan struct{} // closed when no call is parked or reserved
}

func (p *parkedCalls) reserve() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.draining {
		return false
	}
	if p.reserved+len(p.calls) == 0 {
		p.none = make(chan struct{})
	}
	p.reserved++
	return true
}

func (p *parkedCalls) unreserve() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reserved--
	p.check()
}

func (p *parkedCalls) enter(o *legacyStream, cancel context.CancelCauseFunc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calls == nil {
		p.calls = map[*legacyStream]context.CancelCauseFunc{}
	}
	p.reserved--
	p.calls[o] = cancel
	if p.closed {
		// Reserved before a cut that did not see it: cut now.
		cancel(errShutdown)
		o.conn.Close()
	}
}

func (p *parkedCalls) leave(o *legacyStream) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.calls, o)
	p.check()
}

// check closes none if nothing is parked. Under p.mu.
func (p *parkedCalls) check() {
	if p.reserved+len(p.calls) == 0 && p.none != nil {
		close(p.none)
		p.none = nil
	}
}

// Shutdown waits, until ctx ends, for the calls that wait for their
// clients' answers off their handlers to end (from its start, no call
// parks any more: one that waits stays on its handler); then it cuts those left,
// as a closed connection would (nothing more goes upstream; a round in
// flight is cut as the gateway cuts any request), and waits for them to
// stop. Call it after http.Server.Shutdown, with the same deadline:
// such a call has handed its connection back from net/http, whose
// Shutdown neither waits for it nor closes it. It returns ctx's error
// if it had to cut.
func (b *Bridge) Shutdown(ctx context.Context) error {
	p := &b.parked
	p.mu.Lock()
	p.draining = true // a call that would park now waits on its handler, which http.Server.Shutdown sees
	none := p.none
	p.mu.Unlock()
	if none == nil {
		return nil
	}
	select {
	case <-none:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	p.closed = true
	var cut []*legacyStream
	for o, cancel := range p.calls {
		cancel(errShutdown)
		cut = append(cut, o)
	}
	none = p.none
	p.mu.Unlock()
	for _, o := range cut {
		// Apart: a TLS connection's Close may wait to send its alert.
		go o.conn.Close()
	}
	if none != nil {
		// Each cut call ends its round at once: its context is done.
		t := time.NewTimer(time.Minute)
		defer t.Stop()
		select {
		case <-none:
		case <-t.C:
		}
	}
	return ctx.Err()
}

// len is the number of parked calls.
func (p *parkedCalls) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls)
}
