package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/replay"
)

// TestSettleSingleUse: what the retry of a single-use state hears after
// its call went wrong, by what the gateway saw of the upstream's answer.
// An SSE stream cut before the answer, or an answer to another id, is
// no answer: "undetermined" (the gateway's own error event does not
// count as the upstream's answer). A request the transport never began
// to write (its client gone first) is given back, and its retry runs.
func TestSettleSingleUse(t *testing.T) {
	var mode atomic.Value
	var execs atomic.Int64
	hold := make(chan struct{})
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		p, _ := msg["params"].(map[string]any)
		if s, _ := p["requestState"].(string); s == "" {
			stateReply(w, r, msg)
			return
		}
		execs.Add(1)
		switch mode.Load().(string) {
		case "sse-cut":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, ": working\n\n")
			w.(http.Flusher).Flush()
			c, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			c.Close()
		case "other-id":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":99,"result":{"content":[]}}`)
		case "batch-json", "batch-sse":
			// The call's answer inside a batch: a client reads it, so
			// the gateway refuses it unread.
			b := `[{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"paid"}]}}]`
			if mode.Load().(string) == "batch-sse" {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "event: message\ndata: "+b+"\n\n")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, b)
		default:
			stateReply(w, r, msg)
		}
	}, func(g *Gateway, o *mrtr.Options) {
		o.SingleUse = mrtr.Targets("pay")
		o.Replay = replay.NewMemory(0)
		// The client's request is cut before the transport writes it
		// when the test says so.
		base := defaultTransport()
		g.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if mode.Load().(string) == "cut-before-write" {
				<-hold
				<-r.Context().Done()
			}
			return base.RoundTrip(r)
		})
	})
	first := func() string {
		_, m := f.post(rpcCall(1, mrtr.MethodCallTool, "pay", map[string]any{"n": 1}, ""), v2026)
		tok, _ := resultOf(t, m)["requestState"].(string)
		if tok == "" {
			t.Fatalf("no state: %v", m)
		}
		return tok
	}
	retry := func(tok string) (int, map[string]any) {
		return f.post(rpcCall(2, mrtr.MethodCallTool, "pay", map[string]any{"n": 1}, tok), v2026)
	}
	for _, m := range []string{"sse-cut", "other-id", "batch-json", "batch-sse"} {
		mode.Store(m)
		tok := first()
		if _, got := retry(tok); strings.Contains(toJSON(got), "paid") {
			t.Fatalf("%s: the client got an answer the gateway did not read: %v", m, got)
		}
		mode.Store("")
		status, got := retry(tok)
		refused(t, status, got, http.StatusBadRequest, "undetermined")
	}

	tok := first()
	mode.Store("cut-before-write")
	before := execs.Load()
	ctx, cancel := context.WithCancel(context.Background())
	req := testkit.Must(http.NewRequestWithContext(ctx, "POST", f.url, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pay","arguments":{"n":1},"requestState":"`+tok+`"}}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	done := make(chan struct{})
	go func() { defer close(done); http.DefaultClient.Do(req) }()
	hold <- struct{}{} // the gateway holds the request, unwritten
	cancel()
	<-done
	waitFor(t, "the state given back", func() bool {
		mode.Store("")
		_, got := retry(tok)
		if _, ok := got["error"]; ok {
			return false
		}
		return true
	})
	if n := execs.Load() - before; n != 1 {
		t.Fatalf("the state given back ran %d times", n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestUnwritableStateGivenBack: a single-use state that opens but cannot
// be written into the request as JSON (its plaintext is not UTF-8, as a
// Go server sharing the keyset may seal) is refused before anything is
// sent, and its use is given back: the same state still opens once.
func TestUnwritableStateGivenBack(t *testing.T) {
	var execs atomic.Int64
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		if p, _ := msg["params"].(map[string]any); p["requestState"] != nil {
			execs.Add(1)
		}
		stateReply(w, r, msg)
	}, func(g *Gateway, o *mrtr.Options) {
		o.SingleUse = mrtr.Targets("pay")
		o.Replay = replay.NewMemory(0)
	})
	req := mrtr.Request{Method: mrtr.MethodCallTool, Target: "pay", Arguments: []byte(`{"n":1}`)}
	st := f.gw.states.Load()
	tok := testkit.Must(st.Call(req).Seal("state \xff not UTF-8"))
	status, got := f.post(rpcCall(2, mrtr.MethodCallTool, "pay", map[string]any{"n": 1}, tok), v2026)
	if _, ok := got["error"]; !ok || execs.Load() != 0 {
		t.Fatalf("an unwritable state: %d %v, %d executions", status, got, execs.Load())
	}
	if _, err := st.Call(req).Open(context.Background(), tok); err != nil {
		t.Fatalf("the state's use was not given back: %v", err)
	}
	if _, err := st.Call(req).Open(context.Background(), tok); err == nil {
		t.Fatal("the state opened twice")
	}
}
