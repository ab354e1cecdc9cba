package gateway

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/replay"
)

// TestUpstreamOutOfTurn: an upstream that refuses connections is taken
// out of turn and every request goes to the other, a single-use flow
// included, paid once; with HealthPath, the upstream is back in turn as
// soon as its health path answers, and then gets requests again.
func TestUpstreamOutOfTurn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	ln.Close() // refuses connections from now on
	var healthAsks atomic.Int64
	f := newFixture(t, stateReply, func(g *Gateway, o *mrtr.Options) {
		dead := testkit.Must(url.Parse("http://" + deadAddr))
		g.Upstreams = append([]*url.URL{dead}, g.Upstreams...)
		g.HealthPath = "/healthz"
		o.SingleUse = mrtr.Targets("pay")
		o.Replay = replay.NewMemory(0)
	})
	for i := range 4 {
		_, m := f.post(rpcCall(i, "tools/call", "look", nil, ""), v2026)
		if resultOf(t, m) == nil {
			t.Fatalf("request %d with one upstream dead: %v", i, m)
		}
	}
	_, m := f.post(rpcCall(10, "tools/call", "pay", nil, ""), v2026)
	tok := resultOf(t, m)["requestState"].(string)
	_, m = f.post(rpcCall(11, "tools/call", "pay", nil, tok), v2026)
	if resultOf(t, m) == nil {
		t.Fatalf("the confirmation: %v", m)
	}
	if f.gw.ups[0].backoff.Load() == 0 {
		t.Fatal("the dead upstream was not taken out of turn")
	}
	calls := f.up.Calls.Load()

	// Back: the health path answers, and it is in turn again.
	ln, err = net.Listen("tcp", deadAddr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	back := &upstream{Reply: stateReply}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			healthAsks.Add(1)
			return
		}
		back.ServeHTTP(w, r)
	}))
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	waitFor(t, "the upstream back in turn", func() bool { return f.gw.ups[0].backoff.Load() == 0 })
	for i := range 4 {
		f.post(rpcCall(20+i, "tools/call", "look", nil, ""), v2026)
	}
	if healthAsks.Load() == 0 || back.Calls.Load() != 2 || f.up.Calls.Load() != calls+2 {
		t.Fatalf("after it answered: health asked %d times, requests %d and %d, want 2 and 2", healthAsks.Load(), back.Calls.Load(), f.up.Calls.Load()-calls)
	}
}

// TestSingleUseNotOnDeadKeptAlive: the upstream dies (kill -9) while the
// gateway holds a kept-alive connection to it. The confirmation of a
// single-use flow must not go on that connection: it would be written
// before the reset came, proving nothing, and the state would burn (CI
// caught this as a flaky TestCaseDeadUpstream). On a fresh connection the
// dial is refused, the client gets "try again", and once the upstream is
// back the same state pays, once.
func TestSingleUseNotOnDeadKeptAlive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	var dead atomic.Bool
	up := &upstream{Reply: stateReply}
	srv := httptest.NewUnstartedServer(up)
	srv.Listener = &dyingListener{Listener: ln, dead: &dead}
	srv.Start()
	f, tok := firstPay(t, func(g *Gateway) { g.Upstreams = []*url.URL{testkit.Must(url.Parse(srv.URL))} })
	// Dead: the listener refuses, and the kept-alive connection resets
	// when anything arrives on it.
	dead.Store(true)
	ln.Close()
	_, m := f.post(rpcCall(2, "tools/call", "pay", nil, tok), v2026)
	e, _ := m["error"].(map[string]any)
	if msg, _ := e["message"].(string); !strings.Contains(msg, "try again") {
		t.Fatalf("with the upstream dead: %v, want upstream unavailable; try again", m)
	}
	srv.Close()
	calls := up.Calls.Load()

	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	back := httptest.NewUnstartedServer(up)
	back.Listener = ln
	back.Start()
	defer back.Close()
	_, m = f.post(rpcCall(3, "tools/call", "pay", nil, tok), v2026)
	if resultOf(t, m) == nil {
		t.Fatalf("the retry once the upstream is back: %v, want paid (the state was not burned)", m)
	}
	if n := up.Calls.Load() - calls; n != 1 {
		t.Fatalf("the retry reached the upstream %d times, want 1", n)
	}
	status, m := f.post(rpcCall(4, "tools/call", "pay", nil, tok), v2026)
	refused(t, status, m, http.StatusBadRequest, "replayed")
}

// dyingListener hands out connections that, once dead is set, reset on
// the first bytes that arrive: a process killed with the connection open.
type dyingListener struct {
	net.Listener
	dead *atomic.Bool
}

func (l *dyingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &dyingConn{Conn: c, dead: l.dead}, nil
}

type dyingConn struct {
	net.Conn
	dead *atomic.Bool
}

func (c *dyingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.dead.Load() {
		if tc, ok := c.Conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // close with a reset, as the kernel does for a killed process
		}
		c.Conn.Close()
		return 0, net.ErrClosed
	}
	return n, err
}

// TestSingleUseNoTransportResend: a request that used a single-use state
// goes out without a GetBody, so that no transport can send it again by
// itself (HTTP/2 resends, on a new connection, after a stream reset that
// may come once the upstream acted: found by an attacker review); other
// requests keep theirs. The only resend is the failover's, after a
// refused dial.
func TestSingleUseNoTransportResend(t *testing.T) {
	rt := recordingRT{next: http.DefaultTransport}
	f, tok := firstPay(t, func(g *Gateway) { g.Transport = &rt })
	if !rt.getBody.Load() {
		t.Fatal("a first round went out without a GetBody")
	}
	_, m := f.post(rpcCall(2, "tools/call", "pay", nil, tok), v2026)
	if resultOf(t, m) == nil {
		t.Fatalf("the confirmation: %v", m)
	}
	if rt.getBody.Load() {
		t.Fatal("the single-use confirmation went out with a GetBody: a transport may send it again")
	}
}

type recordingRT struct {
	next    http.RoundTripper
	getBody atomic.Bool // of the last request
}

func (r *recordingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	r.getBody.Store(req.GetBody != nil)
	return r.next.RoundTrip(req)
}

// firstPay starts a fixture whose tool "pay" is single use, with mod
// setting the rest of the gateway, and returns it with the state of a
// first round of "pay".
func firstPay(t *testing.T, mod func(*Gateway)) (*fixture, string) {
	t.Helper()
	f := newFixture(t, stateReply, func(g *Gateway, o *mrtr.Options) {
		mod(g)
		o.SingleUse = mrtr.Targets("pay")
		o.Replay = replay.NewMemory(0)
	})
	_, m := f.post(rpcCall(1, "tools/call", "pay", nil, ""), v2026)
	tok, _ := resultOf(t, m)["requestState"].(string)
	if tok == "" {
		t.Fatalf("no state: %v", m)
	}
	return f, tok
}
