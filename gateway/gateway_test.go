package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/gateway/gatewaytest"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/replay"
	"github.com/stateseal/stateseal/seal"
)

type fixture struct {
	t   *testing.T
	up  *upstream
	gw  *Gateway
	url string
	// upURL is the upstream's own address, for a request that skips
	// the gateway.
	upURL string
	ring  *keyring.Ring
	o     *mrtr.Options
	hc    *http.Client
}

func newFixture(t *testing.T, reply func(http.ResponseWriter, *http.Request, map[string]any), mod func(*Gateway, *mrtr.Options)) *fixture {
	t.Helper()
	up := &upstream{Reply: reply}
	us := httptest.NewServer(up)
	t.Cleanup(us.Close)
	u := testkit.Must(url.Parse(us.URL))
	g := &Gateway{Upstreams: []*url.URL{u}, Principal: Anonymous{}, BindSession: true,
		MaxRequestBytes: 1 << 20, MaxResponseBytes: 1 << 20, MaxEventBytes: 64 << 10,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	o := &mrtr.Options{Audience: "https://gw.test", AllowAnonymous: true, Metrics: &mrtr.Counters{}}
	if mod != nil {
		mod(g, o)
	}
	ring, err := keyring.Generate(keyring.AEAD)
	if err != nil {
		t.Fatal(err)
	}
	st, err := newStates(ring, o)
	if err != nil {
		t.Fatal(err)
	}
	g.SetStates(st)
	gs := httptest.NewServer(g)
	t.Cleanup(gs.Close)
	return &fixture{t: t, up: up, gw: g, url: gs.URL + "/mcp", upURL: us.URL + "/mcp", ring: ring, o: o}
}

// The shared test ends of JSON-RPC over HTTP, by the names these tests use.
type upstream = gatewaytest.Upstream

var (
	stateReply     = gatewaytest.StateReply
	stateResult    = gatewaytest.StateResult
	result         = gatewaytest.Result
	writeJSONValue = gatewaytest.WriteJSON
	sseData        = gatewaytest.SSEData
	rpcCall        = gatewaytest.Call
	resultOf       = gatewaytest.ResultOf
	refused        = gatewaytest.Refused
)

// post sends one JSON-RPC message and returns the status and the decoded
// reply (the last message of an SSE stream).
func (f *fixture) post(msg any, hdr map[string]string) (int, map[string]any) {
	f.t.Helper()
	return gatewaytest.Post(f.t, f.hc, f.url, msg, hdr)
}

var v2026 = map[string]string{headerVersion: version2026}

func TestRoundTripJSON(t *testing.T) {
	for _, method := range []string{mrtr.MethodCallTool, mrtr.MethodGetPrompt, mrtr.MethodReadResource} {
		t.Run(method, func(t *testing.T) {
			f := newFixture(t, stateReply, nil)
			name := "book"
			if method == mrtr.MethodReadResource {
				name = "file:///r"
			}
			args := map[string]any{"seats": "2"}
			if method == mrtr.MethodReadResource {
				args = nil
			}
			_, r1 := f.post(rpcCall(1, method, name, args, ""), v2026)
			tok, _ := resultOf(t, r1)["requestState"].(string)
			if tok == "" || strings.Contains(tok, "plain") {
				t.Fatalf("state not sealed: %v", r1)
			}
			_, r2 := f.post(rpcCall(2, method, name, args, tok), v2026)
			got, _ := f.up.Last()
			if s := got["params"].(map[string]any)["requestState"]; s != "plain:"+name {
				t.Fatalf("upstream got state %v", s)
			}
			if r2["id"] != float64(2) || !strings.Contains(fmt.Sprint(r2["result"]), "got plain:"+name) {
				t.Fatalf("retry: %v", r2)
			}
		})
	}
}

func TestAttacksRefused(t *testing.T) {
	f := newFixture(t, stateReply, func(g *Gateway, o *mrtr.Options) {
		o.AllowAnonymous = false
		o.SingleUse = mrtr.Targets("pay")
		o.Replay = replay.NewMemory(0)
		g.Principal = &HeaderPrincipal{Header: "X-User", Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	})
	alice := map[string]string{headerVersion: version2026, "X-User": "alice"}
	args := map[string]any{"amount": 10}
	_, r := f.post(rpcCall(1, mrtr.MethodCallTool, "book", args, ""), alice)
	tok := resultOf(t, r)["requestState"].(string)
	_, r = f.post(rpcCall(1, mrtr.MethodCallTool, "pay", args, ""), alice)
	payTok := resultOf(t, r)["requestState"].(string)

	expired := func() string {
		// The same keys, a clock an hour back: a token for this very
		// request that has expired.
		s, err := seal.New(f.ring, &seal.Options{Now: func() time.Time { return time.Now().Add(-time.Hour) }})
		if err != nil {
			t.Fatal(err)
		}
		st := testkit.Must(mrtr.New(s, f.o))
		tk, err := st.Seal(mrtr.Request{Method: mrtr.MethodCallTool, Target: "book", Principal: "alice", Session: "", Arguments: []byte(`{"amount":10}`)}, "plain:book")
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}()
	before := f.up.Calls.Load()
	for _, c := range []struct {
		name   string
		msg    map[string]any
		hdr    map[string]string
		reason string
	}{
		{"another tool", rpcCall(2, mrtr.MethodCallTool, "cancel", args, tok), alice, "invalid"},
		{"another method", rpcCall(2, mrtr.MethodGetPrompt, "book", args, tok), alice, "invalid"},
		{"another principal", rpcCall(2, mrtr.MethodCallTool, "book", args, tok), map[string]string{headerVersion: version2026, "X-User": "bob"}, "invalid"},
		{"no principal", rpcCall(2, mrtr.MethodCallTool, "book", args, tok), v2026, "invalid"},
		{"other arguments", rpcCall(2, mrtr.MethodCallTool, "book", map[string]any{"amount": 1000}, tok), alice, "invalid"},
		{"another session", rpcCall(2, mrtr.MethodCallTool, "book", args, tok), map[string]string{headerVersion: version2026, "X-User": "alice", headerSession: "s2"}, "invalid"},
		{"tampered", rpcCall(2, mrtr.MethodCallTool, "book", args, tok[:len(tok)-2]+flip(tok[len(tok)-2:])), alice, "invalid"},
		{"suffixed", rpcCall(2, mrtr.MethodCallTool, "book", args, tok+"-TAMPERED"), alice, "invalid"},
		{"truncated", rpcCall(2, mrtr.MethodCallTool, "book", args, tok[:len(tok)/2]), alice, "invalid"},
		{"expired", rpcCall(2, mrtr.MethodCallTool, "book", args, expired), alice, "expired"},
		{"garbage", rpcCall(2, mrtr.MethodCallTool, "book", args, "plain:book"), alice, "invalid"},
	} {
		status, m := f.post(c.msg, c.hdr)
		refused(t, status, m, http.StatusBadRequest, c.reason)
		if m["id"] != float64(2) {
			t.Errorf("%s: id %v", c.name, m["id"])
		}
	}
	// The valid state, with a second target or other arguments named in
	// another case, which an upstream reading JSON into a Go struct with
	// encoding/json would take: not read one way only, refused.
	for _, extra := range []map[string]any{{"Name": "cancel"}, {"ARGUMENTS": map[string]any{"amount": 1000}}, {"requestſtate": "x"}} {
		msg := rpcCall(2, mrtr.MethodCallTool, "book", args, tok)
		for k, v := range extra {
			msg["params"].(map[string]any)[k] = v
		}
		status, m := f.post(msg, alice)
		if e, _ := m["error"].(map[string]any); status != http.StatusBadRequest || e["code"] != float64(codeParseError) {
			t.Fatalf("%v: got HTTP %d %v", extra, status, m)
		}
	}
	if n := f.up.Calls.Load(); n != before {
		t.Fatalf("the upstream was contacted %d times by refused requests", n-before)
	}
	// Before 2026-07-28 the same refusal comes with HTTP 200, as the
	// go-sdk sends it.
	status, m := f.post(rpcCall(2, mrtr.MethodCallTool, "cancel", args, tok), map[string]string{"X-User": "alice"})
	refused(t, status, m, http.StatusOK, "invalid")

	// Single use: the first use opens, the second is refused as replayed.
	_, m = f.post(rpcCall(3, mrtr.MethodCallTool, "pay", args, payTok), alice)
	if !strings.Contains(fmt.Sprint(resultOf(t, m)), "got plain:pay") {
		t.Fatalf("first use: %v", m)
	}
	status, m = f.post(rpcCall(4, mrtr.MethodCallTool, "pay", args, payTok), alice)
	refused(t, status, m, http.StatusBadRequest, "replayed")
	// The valid state still opens for its owner (not single use).
	_, m = f.post(rpcCall(5, mrtr.MethodCallTool, "book", args, tok), alice)
	if !strings.Contains(fmt.Sprint(resultOf(t, m)), "got plain:book") {
		t.Fatalf("valid retry: %v", m)
	}
}

func flip(s string) string {
	b := []byte(s)
	if b[0] == 'A' {
		b[0] = 'B'
	} else {
		b[0] = 'A'
	}
	return string(b)
}

// TestStateElsewhereRefused: a requestState on a method that never gets
// one sealed, or in a notification, or not a string, is refused unopened.
func TestStateElsewhereRefused(t *testing.T) {
	f := newFixture(t, stateReply, nil)
	for _, msg := range []map[string]any{
		{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": map[string]any{"requestState": "x"}},
		{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{"requestState": "x"}},
		{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "t", "requestState": 42}},
		{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": 7, "requestState": "x"}},
	} {
		status, m := f.post(msg, v2026)
		refused(t, status, m, http.StatusBadRequest, "invalid")
	}
	if f.up.Calls.Load() != 0 {
		t.Fatal("the upstream was contacted")
	}
}

// TestStrictParsing: a message that two JSON parsers could read two ways
// never brings a state to the upstream, and never gets one sealed.
func TestStrictParsing(t *testing.T) {
	f := newFixture(t, stateReply, nil)
	post := func(body string) (int, string) {
		resp, err := http.Post(f.url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b := testkit.Must(io.ReadAll(resp.Body))
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	// Carrying a state (spelled with an escape too): refused before the
	// upstream, as unreadable (-32700) or as a state that does not open.
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"t","requestState":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","name":"u","requestState":"x"}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"t\xff\",\"requestState\":\"x\"}}",
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t\ud800"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","request\u0053tate":"x"}}`,
		// Names that encoding/json matches to struct fields ignoring
		// case (U+017F folds to s), where the gateway reads exact names.
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","RequestState":"x"}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"t\",\"reque\u017ftState\":\"x\"}}",
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","Name":"u","requestState":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","Arguments":{},"requestState":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","METHOD":"tools/list","params":{"name":"t","requestState":"x"}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","Name":"u","requestState":"x"}}]`,
		// Not JSON the gateway reads, without a state it can see: the
		// upstream would decide what it holds.
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","name":"u"}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"t\xff\"}}",
		`not json`,
	} {
		// (A refusal as a state is HTTP 200 here: no protocol version.)
		if status, b := post(body); !(status == http.StatusBadRequest && strings.Contains(b, "-32700")) && !strings.Contains(b, "invalid requestState") {
			t.Errorf("%s: HTTP %d %s", body, status, b)
		}
	}
	if f.up.Calls.Load() != 0 {
		t.Fatal("the upstream was contacted")
	}
	// First rounds in valid JSON the gateway cannot read one way only
	// reach the upstream (they bring nothing), but the state of their
	// result is not sealed, and its plaintext does not reach the client.
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"t"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","Name":"u"}}`,
	} {
		if _, b := post(body); !strings.Contains(b, "cannot seal requestState") || strings.Contains(b, "plain:") {
			t.Errorf("%s: %s", body, b)
		}
	}
}

// TestStateForOtherMethod: a requestState in a result of a request that
// cannot carry state never reaches the client in the clear.
func TestStateForOtherMethod(t *testing.T) {
	f := newFixture(t, func(w http.ResponseWriter, _ *http.Request, msg map[string]any) {
		writeJSONValue(w, result(msg, map[string]any{"resultType": "input_required", "requestState": "secret"}))
	}, nil)
	_, m := f.post(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/list"}, v2026)
	e, _ := m["error"].(map[string]any)
	if e["code"] != float64(codeInternalError) || e["message"] != "cannot seal requestState" || m["id"] != float64(9) {
		t.Fatalf("got %v", m)
	}
}

// TestNoPrincipalCannotSeal: without a principal, a first round's state
// is not sealed (-32603, as the middleware), and its plaintext is not sent.
func TestNoPrincipalCannotSeal(t *testing.T) {
	f := newFixture(t, stateReply, func(g *Gateway, o *mrtr.Options) {
		o.AllowAnonymous = false
		g.Principal = &HeaderPrincipal{Header: "X-User", Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	})
	status, m := f.post(rpcCall(1, mrtr.MethodCallTool, "book", nil, ""), map[string]string{"X-User": "alice"})
	e, _ := m["error"].(map[string]any)
	if status != 200 || e["message"] != "cannot seal requestState" || strings.Contains(fmt.Sprint(m), "plain") {
		t.Fatalf("got %d %v", status, m)
	}
	// The header came from an address the gateway does not trust: it is
	// not forwarded either.
	_, h := f.up.Last()
	if h.Get("X-User") != "" {
		t.Fatal("an untrusted principal header reached the upstream")
	}
}

func TestPassThrough(t *testing.T) {
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		switch r.Method {
		case http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case http.MethodGet:
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, ": comment\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")
		default:
			if msg["id"] == nil {
				w.WriteHeader(http.StatusAccepted)
				return
			}
			w.Header().Set("Mcp-Session-Id", "s1")
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25",  "x":[1,2]}}`)
		}
	}, nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`
	resp, err := http.Post(f.url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b := testkit.Must(io.ReadAll(resp.Body))
	resp.Body.Close()
	if string(b) != `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25",  "x":[1,2]}}` || resp.Header.Get("Mcp-Session-Id") != "s1" {
		t.Fatalf("initialize changed: %q %v", b, resp.Header)
	}
	resp = testkit.Must(http.Post(f.url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)))
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notification: %d", resp.StatusCode)
	}
	resp = testkit.Must(http.Get(f.url))
	b = testkit.Must(io.ReadAll(resp.Body))
	resp.Body.Close()
	if string(b) != ": comment\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n" {
		t.Fatalf("GET stream changed: %q", b)
	}
	req := testkit.Must(http.NewRequest(http.MethodDelete, f.url, nil))
	resp = testkit.Must(http.DefaultClient.Do(req))
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
}

// TestSSEStreaming: progress notifications before the input_required
// result reach the client in order, each as it is sent (the upstream
// waits for the client to see one before sending the next), and the
// result's state is sealed inside the stream.
func TestSSEStreaming(t *testing.T) {
	next := make(chan struct{})
	f := newFixture(t, func(w http.ResponseWriter, _ *http.Request, msg map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i := range 3 {
			fmt.Fprintf(w, "id: %d\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":%d}}\n\n", i, i)
			fl.Flush()
			<-next
		}
		b := testkit.Must(json.Marshal(result(msg, stateResult(msg))))
		fmt.Fprintf(w, "id: 3\nevent: message\ndata: %s\n\n", b)
	}, nil)
	b := testkit.Must(json.Marshal(rpcCall(1, mrtr.MethodCallTool, "book", nil, "")))
	req := testkit.Must(http.NewRequest(http.MethodPost, f.url, bytes.NewReader(b)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	readEvent := func() string {
		var ev strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("stream: %v (%q)", err, ev.String())
			}
			if line == "\n" {
				return ev.String()
			}
			ev.WriteString(line)
		}
	}
	for i := range 3 {
		ev := readEvent()
		if !strings.Contains(ev, fmt.Sprintf(`"progress":%d`, i)) || !strings.HasPrefix(ev, fmt.Sprintf("id: %d\n", i)) {
			t.Fatalf("event %d: %q", i, ev)
		}
		next <- struct{}{}
	}
	ev := readEvent()
	data := sseData([]byte(ev + "\n"))
	var m map[string]any
	testkit.Check(json.Unmarshal([]byte(data[0]), &m))
	tok, _ := resultOf(t, m)["requestState"].(string)
	if !strings.HasPrefix(ev, "id: 3\nevent: message\n") || tok == "" || strings.Contains(tok, "plain") {
		t.Fatalf("final event: %q", ev)
	}
	if _, err := f.gw.states.Load().Open(context.Background(), mrtr.Request{Method: mrtr.MethodCallTool, Target: "book"}, tok); err != nil {
		t.Fatalf("sealed state does not open: %v", err)
	}
}

// TestMalformedUpstream: whatever the upstream sends, the client gets a
// JSON-RPC error for its call, never a panic, a hang or a plaintext.
func TestMalformedUpstream(t *testing.T) {
	huge := strings.Repeat("x", 70<<10)
	for _, c := range []struct {
		name  string
		reply func(w http.ResponseWriter, r *http.Request)
		msg   string
	}{
		{"not JSON", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"requestState":"plain"`)
		}, "malformed upstream response"},
		{"duplicate names", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"requestState":"plain","requestState":"x"}}`)
		}, "malformed upstream response"},
		{"state named in another case", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","RequestState":"plain"}}`)
		}, "malformed upstream response"},
		{"SSE line ended by a lone CR", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message\rdata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"requestState\":\"plain\"}}\r\r\n\n")
		}, "malformed upstream response"},
		{"state not a string", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":{"plain":1}}}`)
		}, "malformed upstream response"},
		{"JSON too large", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, strings.Repeat(" ", 2<<20))
		}, "malformed upstream response"},
		{"SSE event not JSON", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"id\":1,\"result\":{\"requestState\":\"plain\"\n\n")
		}, "malformed upstream response"},
		{"SSE event too large", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: "+huge+"\n\n")
		}, "upstream SSE event too large"},
		{"SSE cut", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}, "upstream response failed"},
		{"SSE silent", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, "upstream timed out"},
		{"JSON silent", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, "upstream timed out"},
		{"no answer", func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}, "upstream timed out"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, func(w http.ResponseWriter, r *http.Request, _ map[string]any) { c.reply(w, r) }, func(g *Gateway, _ *mrtr.Options) {
				g.IdleTimeout = 200 * time.Millisecond
				tr := http.DefaultTransport.(*http.Transport).Clone()
				tr.ResponseHeaderTimeout = 200 * time.Millisecond
				g.Transport = tr
			})
			_, m := f.post(rpcCall(1, mrtr.MethodCallTool, "book", nil, ""), v2026)
			e, _ := m["error"].(map[string]any)
			if e["code"] != float64(codeInternalError) || e["message"] != c.msg || m["id"] != float64(1) {
				t.Fatalf("got %v", m)
			}
		})
	}
}

func TestNotReady(t *testing.T) {
	g := &Gateway{Upstreams: []*url.URL{{Scheme: "http", Host: "127.0.0.1:1"}}}
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "http://localhost/mcp", strings.NewReader("{}")))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("got %d", rec.Code)
	}
}

func TestRequestTooLarge(t *testing.T) {
	f := newFixture(t, stateReply, nil)
	resp, err := http.Post(f.url, "application/json", strings.NewReader(`{"a":"`+strings.Repeat("x", 2<<20)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || f.up.Calls.Load() != 0 {
		t.Fatalf("got %d", resp.StatusCode)
	}
}
