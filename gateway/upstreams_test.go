package gateway

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
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
