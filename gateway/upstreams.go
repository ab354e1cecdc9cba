package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"syscall"
	"time"
)

// Upstreams are used in turn, and one that refuses a connection is taken
// out of turn: passively, on the failed dial of a real request. It comes
// back into turn when its time out ends (1 s, doubling at each failure in
// a row, at most 30 s), or, with HealthPath, as soon as a probe of it gets
// an HTTP answer. A request whose connection was refused, which therefore
// provably never left the gateway, goes to the next upstream; when none
// accepts a connection, the single-use state it opened is taken back
// (mrtr.Call.Release), so the client's retry runs once, and the client
// gets -32603 "upstream unavailable; try again". Such a request goes on
// a fresh connection (Gateway.Transport), so that an upstream killed with
// connections kept alive still refuses it at the dial.
type upstreamState struct {
	downUntil atomic.Int64 // UnixNano; at or before now: in turn
	backoff   atomic.Int64 // the last time out, ns; 0 while it answers
	probing   atomic.Bool
}

const (
	minEject = time.Second
	maxEject = 30 * time.Second
)

// errNoUpstream reports a request that no upstream accepted a connection
// for: it was never sent.
var errNoUpstream = errors.New("upstream unavailable; try again")

// pick returns the index of the next upstream in turn, skipping those
// out of turn, unless all are: a refused connection costs nothing, and
// one of them may be back.
func (g *Gateway) pick() int {
	n := uint64(len(g.Upstreams))
	start := g.next.Add(1) - 1
	now := time.Now().UnixNano()
	for i := range n {
		k := int((start + i) % n)
		if g.ups[k].downUntil.Load() <= now {
			return k
		}
	}
	return int(start % n)
}

// dialFailed reports whether err is a failure to connect: nothing of the
// request was written.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// localDialError reports whether a failed dial failed on this machine,
// before any packet left: out of file descriptors (EMFILE, ENFILE), of
// ephemeral ports (EADDRNOTAVAIL), of buffers or memory.
func localDialError(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.EADDRNOTAVAIL, syscall.ENOBUFS, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (g *Gateway) eject(k int, err error) {
	u := &g.ups[k]
	b := min(max(2*time.Duration(u.backoff.Load()), minEject), maxEject)
	u.backoff.Store(int64(b))
	u.downUntil.Store(time.Now().Add(b).UnixNano())
	g.logger().Warn("gateway: upstream refused a connection; out of turn", "upstream", g.Upstreams[k].Redacted(), "for_seconds", b.Seconds(), "err", err)
	if g.HealthPath != "" && u.probing.CompareAndSwap(false, true) {
		go g.probe(k)
	}
}

func (g *Gateway) answered(k int) {
	u := &g.ups[k]
	if u.backoff.Swap(0) != 0 {
		u.downUntil.Store(0)
		g.logger().Info("gateway: upstream answers; back in turn", "upstream", g.Upstreams[k].Redacted())
	}
}

// probe asks upstream k for HealthPath every second until it answers
// (any HTTP status below 500), then puts it back in turn.
func (g *Gateway) probe(k int) {
	defer g.ups[k].probing.Store(false)
	target := g.Upstreams[k].JoinPath(g.HealthPath)
	for g.ups[k].backoff.Load() != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
		resp, err := g.transport.RoundTrip(req)
		if err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
		}
		cancel()
		if err == nil && resp.StatusCode < 500 {
			g.answered(k)
			return
		}
		time.Sleep(time.Second)
	}
}

// roundTrip sends req to the upstream outRequest chose, and, while
// upstreams refuse the connection, to the next.
func (g *Gateway) roundTrip(ex *exchange, req *http.Request) (*http.Response, error) {
	k := ex.upstream
	body := ex.sent
	replayable := req.Body == nil || body != nil
	single := ex.single != nil && ex.single.mc != nil && ex.single.mc.Used()
	if body != nil {
		// The transport may then send it again on a fresh connection
		// when a reused one fails before anything is written. Not with
		// Idempotency-Key or X-Idempotency-Key (headers the client
		// chooses): with a GetBody, net/http counts such a POST
		// replayable, and sends it again after a connection cut once
		// it was written, when the upstream may have acted on it: a
		// single-use state would run twice. Nor for a single-use
		// state at all: HTTP/2 sends a request again, on a new
		// connection, after a stream reset (RST_STREAM) that may
		// come once the upstream acted on it; without a GetBody it
		// cannot, and the only resend is the failover's below, after
		// a refused dial.
		if !idempotencyKey(req.Header) && !single {
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
	}
	transport := g.transport
	if single {
		// A kept-alive connection the upstream closed an instant ago
		// fails after the write: no proof the request was not acted on,
		// and the state would burn. A refused dial is that proof.
		transport = g.fresh
		// So is a request cut (its client gone, a shutdown) before the
		// transport wrote a byte of it: settle gives its state back.
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			WroteHeaderField: func(string, []string) { ex.written.Store(true) },
		}))
	}
	tried := make([]bool, len(g.Upstreams))
	for {
		resp, err := transport.RoundTrip(req)
		tried[k] = true
		if err == nil || !dialFailed(err) || !replayable {
			if err == nil {
				g.answered(k)
			}
			return resp, err
		}
		if localDialError(err) {
			// This machine is out of descriptors or ports: the upstream
			// is not at fault, and out of turn it would only send the
			// load to others. The next one may still connect (ports are
			// per destination).
			// Logged at most once a second: every request meets it.
			if g.localLog.allow() {
				g.logger().Error("gateway: cannot open a connection to an upstream: a limit of this machine (file descriptors, ports, memory); the upstream stays in turn", "upstream", g.Upstreams[k].Redacted(), "err", err)
			}
		} else {
			g.eject(k, err)
		}
		if k = g.untried(tried); k < 0 {
			if ex.single != nil && ex.single.mc != nil {
				ex.single.mc.Release(context.WithoutCancel(req.Context()))
			}
			return nil, errors.Join(errNoUpstream, err)
		}
		ex.upstream = k
		next := req.Clone(req.Context())
		g.direct(next, ex.r, k)
		if body != nil {
			next.Body = io.NopCloser(bytes.NewReader(body))
		}
		req = next
	}
}

// idempotencyKey reports whether h has a header that makes net/http
// count a request with a GetBody replayable (Request.isReplayable), in
// the spelling it looks up.
func idempotencyKey(h http.Header) bool {
	_, a := h["Idempotency-Key"]
	_, b := h["X-Idempotency-Key"]
	return a || b
}

// untried returns the next upstream not tried yet, those in turn first.
func (g *Gateway) untried(tried []bool) int {
	now := time.Now().UnixNano()
	alt := -1
	for k, t := range tried {
		if t {
			continue
		}
		if g.ups[k].downUntil.Load() <= now {
			return k
		}
		if alt < 0 {
			alt = k
		}
	}
	return alt
}
