//go:build unix

package gateway

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
)

// The receive buffer is set before connecting (the window is offered in
// the handshake): with syscall, so on unix only.

// TestBridgeParkedStalledReader: a parked call whose client stops
// reading its stream (it keeps the connection, and ACKs with a zero
// window) while the answered upstream streams notifications is cut
// within AnswerTimeout of the write that stalls: it does not hold its
// goroutines, its connection and its place under MaxPending forever.
// Nothing goes upstream after the answered round.
func TestBridgeParkedStalledReader(t *testing.T) {
	up := &noisyUpstream{notes: 4000}
	small := func(c net.Conn) { testkit.Check(c.(*net.TCPConn).SetWriteBuffer(4096)) }
	u, g, _ := attackGateway(t, &Bridge{AnswerTimeout: time.Second}, up, small)
	c := &legacyClient{t: t, url: u, who: "alice", caps: `{"elicitation":{}}`}
	c.init()
	d := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		testkit.Check(rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) }))
		return serr
	}}
	_, br := rawCall(t, d, u, c.sid, "alice", 1, "noisy", "")
	q := nextEvent(t, br)
	waitFor(t, "the call to park", func() bool { return g.Bridge.parked.len() == 1 })
	if code, b := c.answer(q["id"], `{"action":"accept","content":{}}`); code != 202 {
		t.Fatalf("the answer: %d %s", code, b)
	}
	// The client reads nothing more, and keeps its connection.
	waitFor(t, "the answered round to run", func() bool { return up.executions.Load() == 1 })
	waitFor(t, "the call of a client that stopped reading to end", func() bool {
		return g.Bridge.parked.len() == 0 && g.Bridge.Pending() == 0
	})
	if n := up.requests.Load(); n != 3 { // discover, the first round, the answered one
		t.Fatalf("%d upstream requests, want 3", n)
	}
}
