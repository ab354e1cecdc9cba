package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
)

// openCall starts a tools/call on a client of its own and returns the
// response, whose body is the call's stream.
func openCall(t *testing.T, hc *http.Client, u, sid string, id int, tool string) *http.Response {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool)
	req := testkit.Must(http.NewRequest("POST", u, strings.NewReader(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-User", "alice")
	req.Header.Set(headerSession, sid)
	req.Header.Set(headerVersion, "2025-11-25")
	return testkit.Must(hc.Do(req))
}

// nextEvent reads the stream's next message.
func nextEvent(t *testing.T, br *bufio.Reader) map[string]any {
	t.Helper()
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended: %v", err)
		}
		if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			var m map[string]any
			testkit.Check(json.Unmarshal([]byte(d), &m))
			return m
		}
	}
}

// TestBridgeParks: a call that waits for its client's answer gives its
// handler back to net/http and keeps only the connection (parked); its
// stream said Connection: close, and once answered it reads to its end
// as valid HTTP/1.1 chunks: the final result, then a clean end.
func TestBridgeParks(t *testing.T) {
	up, u, g := bridgeFixture(t, &Bridge{}, nil)
	c := &legacyClient{t: t, url: u, who: "alice", caps: `{"elicitation":{}}`}
	c.init()
	hc := &http.Client{Transport: &http.Transport{}}
	resp := openCall(t, hc, u, c.sid, 1, "pay")
	defer resp.Body.Close()
	if !resp.Close || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("the stream: Close %v, %v: want Connection: close on an SSE stream", resp.Close, resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	q := nextEvent(t, br)
	waitFor(t, "the call to park", func() bool { return g.Bridge.parked.len() == 1 })
	if code, _ := c.answer(q["id"], `{"action":"accept","content":{"ok":true}}`); code != 202 {
		t.Fatalf("the answer: %d", code)
	}
	if m := nextEvent(t, br); !strings.Contains(fmt.Sprint(m["result"]), "done") {
		t.Fatalf("the final answer: %v", m)
	}
	if rest, err := io.ReadAll(br); err != nil || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("after the final answer: %q, %v; want a clean end", rest, err)
	}
	waitFor(t, "the parked call's end", func() bool { return g.Bridge.parked.len() == 0 && g.Bridge.Pending() == 0 })
	if up.executions.Load() != 1 {
		t.Fatalf("%d executions, want 1", up.executions.Load())
	}
}

// TestBridgeParkedLeaves: a parked call whose client closes its
// connection ends at once (no handler watches it any more: the call's
// own reader does), and its answer is refused after.
func TestBridgeParkedLeaves(t *testing.T) {
	up, u, g := bridgeFixture(t, &Bridge{}, nil)
	c := &legacyClient{t: t, url: u, who: "alice", caps: `{"elicitation":{}}`}
	c.init()
	tr := &http.Transport{}
	resp := openCall(t, &http.Client{Transport: tr}, u, c.sid, 1, "pay")
	q := nextEvent(t, bufio.NewReader(resp.Body))
	waitFor(t, "the call to park", func() bool { return g.Bridge.parked.len() == 1 })
	resp.Body.Close()
	tr.CloseIdleConnections()
	waitFor(t, "the call's end", func() bool { return g.Bridge.parked.len() == 0 && g.Bridge.Pending() == 0 })
	if code, _ := c.answer(q["id"], `{"action":"accept","content":{"ok":true}}`); code != 404 {
		t.Fatalf("an answer after the client left: %d, want 404", code)
	}
	if up.requests.Load() != 2 || up.executions.Load() != 0 { // discover, the first round
		t.Fatalf("%d upstream requests, %d executions; want 2 and none", up.requests.Load(), up.executions.Load())
	}
}

// TestBridgeShutdown: Shutdown waits for a parked call answered in
// time, which completes; a call that starts after it does not park; at
// its deadline it cuts those left (their streams end without an answer,
// nothing more goes upstream) and says so.
func TestBridgeShutdown(t *testing.T) {
	up, u, g := bridgeFixture(t, &Bridge{}, nil)
	c := &legacyClient{t: t, url: u, who: "alice", caps: `{"elicitation":{}}`}
	c.init()
	hc := &http.Client{Transport: &http.Transport{}}

	resp := openCall(t, hc, u, c.sid, 1, "pay")
	br := bufio.NewReader(resp.Body)
	q := nextEvent(t, br)
	waitFor(t, "the call to park", func() bool { return g.Bridge.parked.len() == 1 })
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done <- g.Bridge.Shutdown(ctx)
	}()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned before its parked call ended: %v", err)
	default:
	}
	if code, _ := c.answer(q["id"], `{"action":"accept","content":{"ok":true}}`); code != 202 {
		t.Fatalf("the answer: %d", code)
	}
	if m := nextEvent(t, br); !strings.Contains(fmt.Sprint(m["result"]), "done") {
		t.Fatalf("the final answer: %v", m)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown after the call completed: %v", err)
	}
	resp.Body.Close()
	if up.executions.Load() != 1 {
		t.Fatalf("%d executions, want 1", up.executions.Load())
	}

	// Once Shutdown began, a call waits on its handler, which
	// http.Server.Shutdown sees, instead of parking.
	resp = openCall(t, hc, u, c.sid, 2, "pay")
	nextEvent(t, bufio.NewReader(resp.Body))
	if g.Bridge.parked.len() != 0 {
		t.Fatal("a call parked after Shutdown began")
	}
	resp.Body.Close()
	waitFor(t, "the call's end", func() bool { return g.Bridge.Pending() == 0 })

	// A fresh bridge: cut at the deadline.
	up, u, g = bridgeFixture(t, &Bridge{}, nil)
	c = &legacyClient{t: t, url: u, who: "alice", caps: `{"elicitation":{}}`}
	c.init()
	resp = openCall(t, hc, u, c.sid, 2, "pay")
	defer resp.Body.Close()
	br = bufio.NewReader(resp.Body)
	nextEvent(t, br)
	waitFor(t, "the call to park", func() bool { return g.Bridge.parked.len() == 1 })
	before := up.requests.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := g.Bridge.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown past its deadline: %v", err)
	}
	if g.Bridge.parked.len() != 0 || g.Bridge.Pending() != 0 {
		t.Fatalf("after the cut: %d parked, %d pending", g.Bridge.parked.len(), g.Bridge.Pending())
	}
	if rest, err := io.ReadAll(br); err == nil || strings.Contains(string(rest), "result") {
		t.Fatalf("a cut stream: %q, %v; want it cut, with no answer", rest, err)
	}
	if up.requests.Load() != before || up.executions.Load() != 0 {
		t.Fatalf("after the cut: %d more upstream requests, %d executions; want none and none", up.requests.Load()-before, up.executions.Load())
	}
}

// TestBridgeHTTP2: on HTTP/2 a call cannot take its connection: it
// waits on its handler, as before, and completes; a client that leaves
// still ends it.
func TestBridgeHTTP2(t *testing.T) {
	up, _, g := bridgeFixture(t, &Bridge{}, nil)
	gs := httptest.NewUnstartedServer(g)
	gs.EnableHTTP2 = true
	gs.StartTLS()
	t.Cleanup(gs.Close)
	u := gs.URL + "/mcp"
	hc := gs.Client()
	c := &legacyClient{t: t, url: u, who: "alice", caps: `{"elicitation":{}}`, hc: hc}
	c.init()
	resp := openCall(t, hc, u, c.sid, 1, "pay")
	if resp.ProtoMajor != 2 {
		t.Fatalf("%s, want HTTP/2", resp.Proto)
	}
	br := bufio.NewReader(resp.Body)
	q := nextEvent(t, br)
	if code, _ := c.answer(q["id"], `{"action":"accept","content":{"ok":true}}`); code != 202 {
		t.Fatalf("the answer: %d", code)
	}
	if m := nextEvent(t, br); !strings.Contains(fmt.Sprint(m["result"]), "done") {
		t.Fatalf("the final answer: %v", m)
	}
	resp.Body.Close()
	resp = openCall(t, hc, u, c.sid, 2, "pay")
	nextEvent(t, bufio.NewReader(resp.Body))
	if g.Bridge.parked.len() != 0 {
		t.Fatal("a call parked on HTTP/2")
	}
	resp.Body.Close()
	waitFor(t, "the call's end", func() bool { return g.Bridge.Pending() == 0 })
	if up.executions.Load() != 1 {
		t.Fatalf("%d executions, want 1", up.executions.Load())
	}
}
