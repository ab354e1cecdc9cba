package main

// The test upstream and client of package gateway's tests, for the tests
// here that run the whole command.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/mrtr"
)

// upstream is a fake MCP server: it records what it receives and answers
// with its reply function.
type upstream struct {
	mu    sync.Mutex
	got   []map[string]any // request bodies
	hdrs  []http.Header
	calls atomic.Int64
	reply func(w http.ResponseWriter, r *http.Request, msg map[string]any)
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.calls.Add(1)
	var msg map[string]any
	if r.Method == http.MethodPost {
		b := testkit.Must(io.ReadAll(r.Body))
		testkit.Check(json.Unmarshal(b, &msg))
	}
	u.mu.Lock()
	u.got = append(u.got, msg)
	u.hdrs = append(u.hdrs, r.Header.Clone())
	u.mu.Unlock()
	u.reply(w, r, msg)
}

func (u *upstream) last() (map[string]any, http.Header) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.got[len(u.got)-1], u.hdrs[len(u.hdrs)-1]
}

// stateReply answers the first round of every call with input_required
// and state "plain:<name>", and a retry with the state it got, as JSON.
func stateReply(w http.ResponseWriter, _ *http.Request, msg map[string]any) {
	writeJSONValue(w, result(msg, stateResult(msg)))
}

func stateResult(msg map[string]any) map[string]any {
	p, _ := msg["params"].(map[string]any)
	if s, ok := p["requestState"].(string); ok && s != "" {
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": "got " + s}}}
	}
	name, _ := p["name"].(string)
	if name == "" {
		name, _ = p["uri"].(string)
	}
	return map[string]any{"resultType": "input_required",
		"inputRequests": map[string]any{"q": map[string]any{"method": "elicitation/create"}},
		"requestState":  "plain:" + name}
}

func result(msg map[string]any, res any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": msg["id"], "result": res}
}

func writeJSONValue(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// A fixture is a client of the gateway at url.
type fixture struct {
	t   *testing.T
	url string
	hc  *http.Client
}

// post sends one JSON-RPC message and returns the status and the decoded
// reply (the last message of an SSE stream).
func (f *fixture) post(msg any, hdr map[string]string) (int, map[string]any) {
	f.t.Helper()
	b := testkit.Must(json.Marshal(msg))
	req := testkit.Must(http.NewRequest(http.MethodPost, f.url, bytes.NewReader(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	hc := f.hc
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	body := testkit.Must(io.ReadAll(resp.Body))
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		evs := sseData(body)
		if len(evs) == 0 {
			return resp.StatusCode, nil
		}
		body = []byte(evs[len(evs)-1])
	}
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		f.t.Fatalf("reply %d %q: %v", resp.StatusCode, body, err)
	}
	return resp.StatusCode, out
}

func sseData(b []byte) []string {
	var out []string
	for _, ev := range strings.Split(string(b), "\n\n") {
		var data []string
		for _, line := range strings.Split(ev, "\n") {
			if v, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(v, " "))
			}
		}
		if len(data) > 0 {
			out = append(out, strings.Join(data, "\n"))
		}
	}
	return out
}

func rpcCall(id int, method, name string, args any, state string) map[string]any {
	p := map[string]any{"name": name}
	if method == mrtr.MethodReadResource {
		p = map[string]any{"uri": name}
	}
	if args != nil {
		p["arguments"] = args
	}
	if state != "" {
		p["requestState"] = state
		p["inputResponses"] = map[string]any{"q": map[string]any{"action": "accept"}}
	}
	return map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": p}
}

func resultOf(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	r, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result: %v", m)
	}
	return r
}

// refused checks a reply is the middleware's refusal with reason.
func refused(t *testing.T, status int, m map[string]any, wantStatus int, reason string) {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("not an error: %v", m)
	}
	data, _ := e["data"].(map[string]any)
	if status != wantStatus || e["code"] != float64(-32602) || e["message"] != "invalid requestState: "+reason || data["reason"] != reason {
		t.Fatalf("got HTTP %d %v; want HTTP %d -32602 invalid requestState: %s", status, e, wantStatus, reason)
	}
}

var v2026 = map[string]string{"Mcp-Protocol-Version": "2026-07-28"}
