// Package gatewaytest holds the two ends of JSON-RPC over HTTP that this
// module's tests of the gateway share: Upstream, a fake MCP server that
// records what reaches it, and Post, a client that sends one message and
// decodes the reply, from a JSON body or the last event of an SSE stream.
// Call builds a request, Refused checks the middleware's refusal.
// RunFixtures drives the example server's input-required fixtures with the
// go-sdk client, directly or through a gateway.
package gatewaytest

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

// An Upstream is a fake MCP server: it records what it receives and
// answers with Reply.
type Upstream struct {
	Mu    sync.Mutex
	Got   []map[string]any // request bodies, decoded
	Hdrs  []http.Header
	Trail []http.Header // trailers, read with a POST's body
	Calls atomic.Int64
	Reply func(w http.ResponseWriter, r *http.Request, msg map[string]any)
}

func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.Calls.Add(1)
	var msg map[string]any
	if r.Method == http.MethodPost {
		b := testkit.Must(io.ReadAll(r.Body))
		testkit.Check(json.Unmarshal(b, &msg))
	}
	u.Mu.Lock()
	u.Got = append(u.Got, msg)
	u.Hdrs = append(u.Hdrs, r.Header.Clone())
	u.Trail = append(u.Trail, r.Trailer.Clone())
	u.Mu.Unlock()
	u.Reply(w, r, msg)
}

// Last is the last request the upstream received and its headers.
func (u *Upstream) Last() (map[string]any, http.Header) {
	u.Mu.Lock()
	defer u.Mu.Unlock()
	return u.Got[len(u.Got)-1], u.Hdrs[len(u.Hdrs)-1]
}

// StateReply answers the first round of every call with input_required
// and state "plain:<name>", and a retry with the state it got, as JSON.
func StateReply(w http.ResponseWriter, _ *http.Request, msg map[string]any) {
	WriteJSON(w, Result(msg, StateResult(msg)))
}

// StateResult is StateReply's result for msg.
func StateResult(msg map[string]any) map[string]any {
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

// Result is the response to msg with result res.
func Result(msg map[string]any, res any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": msg["id"], "result": res}
}

// WriteJSON writes v as a JSON body.
func WriteJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// Post sends one JSON-RPC message to url with the headers hdr (hc nil
// means http.DefaultClient) and returns the status and the decoded reply:
// the body, or the last message of an SSE stream (nil if it has none).
func Post(t testing.TB, hc *http.Client, url string, msg any, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	b := testkit.Must(json.Marshal(msg))
	req := testkit.Must(http.NewRequest(http.MethodPost, url, bytes.NewReader(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := testkit.Must(io.ReadAll(resp.Body))
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		evs := SSEData(body)
		if len(evs) == 0 {
			return resp.StatusCode, nil
		}
		body = []byte(evs[len(evs)-1])
	}
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("reply %d %q: %v", resp.StatusCode, body, err)
	}
	return resp.StatusCode, out
}

// SSEData is the data of each event of an SSE stream.
func SSEData(b []byte) []string {
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

// Call is a request of method for the tool or prompt name (the resource
// URI for resources/read), with args if not nil, and a retry's state and
// input responses if state is not empty.
func Call(id int, method, name string, args any, state string) map[string]any {
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

// ResultOf is the result of the reply m, failing the test if it has none.
func ResultOf(t testing.TB, m map[string]any) map[string]any {
	t.Helper()
	r, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result: %v", m)
	}
	return r
}

// Refused checks that a reply is the middleware's refusal with reason,
// with HTTP status wantStatus.
func Refused(t testing.TB, status int, m map[string]any, wantStatus int, reason string) {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("not an error: %v", m)
	}
	data, _ := e["data"].(map[string]any)
	if status != wantStatus || e["code"] != float64(-32602) || e["message"] != "invalid requestState: "+reason || data["reason"] != reason {
		t.Fatalf("got HTTP %d %v; want HTTP %d -32602 invalid requestState: %[4]s, reason %[4]s", status, e, wantStatus, reason)
	}
}
