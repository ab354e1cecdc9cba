package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/replay"
)

// TestRequestBudget: slow clients each sending most of a large body and
// then stalling hold, together, no more than MaxRequestBytesInFlight: one
// more is answered 503 at once and the upstream gets nothing; once the
// stalled ones go, the budget is whole again and requests pass.
func TestRequestBudget(t *testing.T) {
	const size = 200 << 10 // each stalled body, all but its last byte sent
	f := newFixture(t, stateReply, func(g *Gateway, _ *mrtr.Options) {
		g.MaxRequestBytes = 256 << 10
		g.MaxRequestBytesInFlight = 4*(size+1) + 1000 // four stalled bodies fit, not five
	})
	host := strings.TrimPrefix(strings.TrimSuffix(f.url, "/mcp"), "http://")
	start := func(send int) net.Conn {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(20 * time.Second))
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"` + strings.Repeat("x", size-len(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"`)-3) + `"}}`
		io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(size)+"\r\n\r\n"+body[:send])
		return c
	}
	var stalled []net.Conn
	for i := 0; i < 4; i++ {
		stalled = append(stalled, start(size-1))
		waitFor(t, "a stalled body held", func() bool { return f.gw.inFlight.Load() == int64(i+1)*(size+1) })
	}
	c := start(size)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := testkit.Must(io.ReadAll(resp.Body))
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !bytes.Contains(b, []byte(`"code":-32600`)) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a fifth body: HTTP %d %s", resp.StatusCode, b)
	}
	if f.up.Calls.Load() != 0 {
		t.Fatal("the upstream got a request")
	}
	for _, s := range stalled {
		s.Close()
	}
	waitFor(t, "the budget given back", func() bool { return f.gw.inFlight.Load() == 0 })
	if status, _ := f.post(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{"name": "book"}}, nil); status != 200 {
		t.Fatalf("after: HTTP %d", status)
	}
	if f.gw.inFlight.Load() != 0 {
		t.Fatalf("%d bytes still held", f.gw.inFlight.Load())
	}
}

// TestResponseBudgetSSE: an SSE event that would take the response
// budget past its bound ends the stream with an error event for the
// call, and what the stream held is given back.
func TestResponseBudgetSSE(t *testing.T) {
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: "+toJSON(result(msg, map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Repeat("y", 300<<10)}}}))+"\n\n")
	}, func(g *Gateway, _ *mrtr.Options) {
		g.MaxEventBytes = 1 << 20
		g.MaxResponseBytesInFlight = 1 << 20
	})
	const others = 900 << 10 // held by other exchanges
	f.gw.respInFlight.Add(others)
	_, got := f.post(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": map[string]any{"name": "report"}}, nil)
	if e, _ := got["error"].(map[string]any); e == nil || e["code"] != float64(-32603) || !strings.Contains(e["message"].(string), "holding as many responses") {
		t.Fatalf("got %.300v", got)
	}
	waitFor(t, "the stream's buffers given back", func() bool { return f.gw.respInFlight.Load() == others })
	f.gw.respInFlight.Add(-others)
	if _, got := f.post(map[string]any{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": map[string]any{"name": "report"}}, nil); got["result"] == nil {
		t.Fatalf("with the budget free: %.300v", got)
	}
	waitFor(t, "the budget given back", func() bool { return f.gw.respInFlight.Load() == 0 })
}

// TestOpenedCopyCounted: the request sent upstream with its state opened
// is a copy of the body read, held with it until the exchange ends, and
// taken from MaxRequestBytesInFlight beside it.
func TestOpenedCopyCounted(t *testing.T) {
	var held, sent atomic.Int64
	var f *fixture
	f = newFixture(t, func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		if params, _ := msg["params"].(map[string]any); params["requestState"] != nil {
			held.Store(f.gw.inFlight.Load())
			sent.Store(r.ContentLength)
		}
		stateReply(w, r, msg)
	}, nil)
	_, r1 := f.post(rpcCall(1, mrtr.MethodCallTool, "book", nil, ""), v2026)
	tok, _ := resultOf(t, r1)["requestState"].(string)
	retry := rpcCall(2, mrtr.MethodCallTool, "book", nil, tok)
	if status, _ := f.post(retry, v2026); status != 200 || sent.Load() <= 0 {
		t.Fatalf("retry: HTTP %d, the upstream got %d bytes", status, sent.Load())
	}
	body := int64(len(testkit.Must(json.Marshal(retry))))
	if held.Load() < body+sent.Load() {
		t.Fatalf("%d bytes counted while the upstream had the request, want the body read (%d) and the copy sent (%d)", held.Load(), body, sent.Load())
	}
	waitFor(t, "the budget given back", func() bool { return f.gw.inFlight.Load() == 0 })
}

// TestOpenedCopyOverBudget: a state whose plaintext is control bytes
// opens into a copy about 4.5 times the request that carried it (each
// byte quoted as \u0001). Past MaxRequestBytesInFlight it is refused
// like a body over it, 503 with Retry-After, before anything goes
// upstream; its single-use state is given back, and nothing stays held.
func TestOpenedCopyOverBudget(t *testing.T) {
	var retries atomic.Int64
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		if params, _ := msg["params"].(map[string]any); params["requestState"] != nil {
			retries.Add(1)
			stateReply(w, r, msg)
			return
		}
		res := map[string]any{"resultType": "input_required",
			"inputRequests": map[string]any{"q": map[string]any{"method": "elicitation/create"}},
			"requestState":  strings.Repeat("\x01", 40000)}
		w.Header().Set("Content-Type", "application/json")
		testkit.Must(w.Write(testkit.Must(json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg["id"], "result": res}))))
	}, func(g *Gateway, o *mrtr.Options) {
		o.SingleUse = mrtr.Targets("pay")
		o.Replay = replay.NewMemory(0)
		g.MaxRequestBytesInFlight = 100000 // the retry (about 54 KB) fits, its opened copy (about 240 KB) does not
	})
	_, r1 := f.post(rpcCall(1, mrtr.MethodCallTool, "pay", nil, ""), v2026)
	tok, _ := resultOf(t, r1)["requestState"].(string)
	retry := rpcCall(2, mrtr.MethodCallTool, "pay", nil, tok)
	if body := len(testkit.Must(json.Marshal(retry))); tok == "" || body > 100000 {
		t.Fatalf("first round: a retry of %d bytes, %v", body, r1)
	}
	status, m := f.post(retry, v2026)
	e, _ := m["error"].(map[string]any)
	if msg, _ := e["message"].(string); status != http.StatusServiceUnavailable || !strings.Contains(msg, "its bound") {
		t.Fatalf("retry: HTTP %d %v", status, m)
	}
	if retries.Load() != 0 {
		t.Fatal("the upstream got the retry")
	}
	waitFor(t, "the budget given back", func() bool { return f.gw.inFlight.Load() == 0 })
	// Given back: it opens (once) again.
	if _, err := f.gw.states.Load().Open(context.Background(), mrtr.Request{Method: mrtr.MethodCallTool, Target: "pay"}, tok); err != nil {
		t.Fatalf("the refused retry's state: %v", err)
	}
}
