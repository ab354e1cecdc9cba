package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
)

// TestBridgeShutdown: SIGTERM to the gateway holding a bridged call
// that waits for its client's answer (the call holds its connection
// itself, off net/http's books). Within -shutdown-timeout, the answer,
// sent to the other gateway, is relayed to the stopping one, the call
// pays, once, and the client gets its result; then it exits. A call not
// answered by the deadline is cut: its stream ends without an answer,
// nothing pays, and the log says so.
func TestBridgeShutdown(t *testing.T) {
	r := testservers.StartRedisVolatile(t)
	ledger := newLedger(t)
	up := startPay(t, ledger)
	args := []string{"-upstream", up.URL(), "-keyset", keysetDir(t), "-bridge-redis", r.URL(), "-shutdown-timeout", "30s"}
	a, b := startGatewayProc(t, args...), startGatewayProc(t, args...)
	sid := legacySession(t, a.proxy)
	resp := testkit.Must(legacyPost(b.proxy, sid, `{"jsonrpc":"2.0","id":9,"method":"ping"}`)) // b's bridge subscribes
	resp.Body.Close()

	call, event := legacyCall(t, a.proxy, sid, 1)
	defer call.Body.Close()
	q, err := event()
	if err != nil {
		t.Fatal(err)
	}
	a.cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, "a's shutdown to begin", func() bool { return strings.Contains(a.Logs(), "shutting down") })
	resp = testkit.Must(legacyPost(b.proxy, sid, `{"jsonrpc":"2.0","id":`+string(testkit.Must(json.Marshal(q["id"])))+`,"result":{"action":"accept","content":{}}}`))
	resp.Body.Close()
	if resp.StatusCode != 202 {
		t.Fatalf("the answer, relayed to the stopping gateway: %d, want 202\n%s", resp.StatusCode, a.Logs())
	}
	if final, err := event(); err != nil || !strings.Contains(fmt.Sprint(final["result"]), "paid") {
		t.Fatalf("the call answered during shutdown: %v %v", final, err)
	}
	select {
	case <-a.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("a did not exit once its call ended:\n%s", a.Logs())
	}
	if n := noDoubles(t, ledger); len(n) != 1 {
		t.Fatalf("%d payments, want 1", len(n))
	}

	// Not answered in time: cut at the deadline.
	c := startGatewayProc(t, "-upstream", up.URL(), "-keyset", keysetDir(t), "-shutdown-timeout", "500ms")
	sid = legacySession(t, c.proxy)
	call2, event2 := legacyCall(t, c.proxy, sid, 1)
	defer call2.Body.Close()
	if _, err := event2(); err != nil {
		t.Fatal(err)
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("c did not exit after its deadline:\n%s", c.Logs())
	}
	if m, err := event2(); err == nil {
		t.Fatalf("a call cut at shutdown answered: %v", m)
	}
	if !strings.Contains(c.Logs(), "bridged calls cut") {
		t.Fatalf("the log does not say the call was cut:\n%s", c.Logs())
	}
	if n := noDoubles(t, ledger); len(n) != 1 {
		t.Fatalf("%d payments after the cut, want 1", len(n))
	}
}

// legacySession initializes a 2025-11-25 session at url.
func legacySession(t *testing.T, url string) string {
	t.Helper()
	resp := testkit.Must(legacyPost(url, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`))
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d", resp.StatusCode)
	}
	return sid
}

// legacyCall starts a pay call and returns its response and a reader of
// its stream's messages.
func legacyCall(t *testing.T, url, sid string, id int) (*http.Response, func() (map[string]any, error)) {
	t.Helper()
	call := testkit.Must(legacyPost(url, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"pay","arguments":{}}}`, id)))
	return call, sseEvents(call.Body)
}

// sseEvents reads an SSE stream's messages, one a call: io.EOF at its
// end, or the error that cut it.
func sseEvents(body io.Reader) func() (map[string]any, error) {
	sc := bufio.NewScanner(body)
	return func() (map[string]any, error) {
		for sc.Scan() {
			if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
				var m map[string]any
				return m, json.Unmarshal(d, &m)
			}
		}
		if sc.Err() != nil {
			return nil, sc.Err()
		}
		return nil, io.EOF
	}
}
