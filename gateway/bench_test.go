package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mrtr"
)

// cannedUpstream answers every request in memory as the go-sdk server
// does: an SSE stream with one input_required result (first round) or a
// complete result (retry).
type cannedUpstream struct{}

func (cannedUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	b := testkit.Must(io.ReadAll(r.Body))
	r.Body.Close()
	var msg map[string]any
	testkit.Check(json.Unmarshal(b, &msg))
	res := testkit.Must(json.Marshal(result(msg, stateResult(msg))))
	body := "event: message\ndata: " + string(res) + "\n\n"
	return &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: r,
		Header:        http.Header{"Content-Type": {"text/event-stream"}, "Cache-Control": {"no-cache, no-transform"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: -1}, nil
}

func benchFlow(b *testing.B, h http.Handler) {
	first := testkit.Must(json.Marshal(rpcCall(1, mrtr.MethodCallTool, "book", map[string]any{"seats": 2}, "")))
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "http://localhost/mcp", bytes.NewReader(first))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		data := sseData(rec.Body.Bytes())
		var m map[string]any
		testkit.Check(json.Unmarshal([]byte(data[0]), &m))
		state := m["result"].(map[string]any)["requestState"].(string)
		second := testkit.Must(json.Marshal(rpcCall(2, mrtr.MethodCallTool, "book", map[string]any{"seats": 2}, state)))
		rec = httptest.NewRecorder()
		req = httptest.NewRequest(http.MethodPost, "http://localhost/mcp", bytes.NewReader(second))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), "got plain:book") {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}

var benchUpstream, _ = url.Parse("http://upstream.invalid")

// BenchmarkPlainProxyFlow and BenchmarkGatewayFlow run a two-round flow
// through a plain httputil.ReverseProxy and through the gateway, against
// an upstream in memory: the difference is the gateway's CPU per flow.
func BenchmarkPlainProxyFlow(b *testing.B) {
	p := httputil.NewSingleHostReverseProxy(benchUpstream)
	p.Transport = cannedUpstream{}
	benchFlow(b, p)
}

func BenchmarkGatewayFlow(b *testing.B) {
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	st := testkit.Must(newStates(ring, &mrtr.Options{Audience: "https://bench.test", AllowAnonymous: true, Metrics: &mrtr.Counters{}}))
	g := &Gateway{Upstreams: []*url.URL{benchUpstream}, Principal: Anonymous{}, BindSession: true, MaxRequestBytes: 8 << 20,
		MaxResponseBytes: 16 << 20, MaxEventBytes: 4 << 20, IdleTimeout: 0, Transport: cannedUpstream{},
		Logger: slog.New(slog.DiscardHandler)}
	g.SetStates(st)
	benchFlow(b, g)
}

// BenchmarkGatewayWork is the gateway's own work for a two-round flow,
// without HTTP: reading both requests, rewriting both SSE responses (one
// seal, one open), as the go-sdk example server's messages look.
func BenchmarkGatewayWork(b *testing.B) {
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	st := testkit.Must(newStates(ring, &mrtr.Options{Audience: "https://bench.test", AllowAnonymous: true, Metrics: &mrtr.Counters{}}))
	u := testkit.Must(url.Parse("http://upstream.invalid"))
	g := &Gateway{Upstreams: []*url.URL{u}, Principal: Anonymous{}, BindSession: true, MaxEventBytes: 4 << 20, Logger: slog.New(slog.DiscardHandler)}
	g.SetStates(st)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"fleet","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	first := []byte(`{"id":1,"jsonrpc":"2.0","method":"tools/call","params":{` + meta + `,"name":"test_input_required_result_request_state"}}`)
	resp1 := []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"_meta\":{\"io.modelcontextprotocol/serverInfo\":{\"name\":\"stateseal-example\",\"version\":\"1.0.0\"}},\"content\":null,\"requestState\":\"{\\\"step\\\":\\\"confirm\\\",\\\"fixture\\\":\\\"v1\\\"}\",\"resultType\":\"input_required\",\"inputRequests\":{\"confirm\":{\"method\":\"elicitation/create\",\"params\":{\"mode\":\"form\",\"message\":\"Please confirm\",\"requestedSchema\":{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"}},\"required\":[\"ok\"]}}}}}}\n\n")
	resp2 := []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"_meta\":{\"io.modelcontextprotocol/serverInfo\":{\"name\":\"stateseal-example\",\"version\":\"1.0.0\"}},\"content\":[{\"type\":\"text\",\"text\":\"state-ok\"}]}}\n\n")
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	round := func(req, resp []byte) []byte {
		ex := &exchange{g: g, st: g.states.Load(), r: r, version: version2026}
		if _, ref := inspect(ex, req); ref != nil {
			b.Fatal(ref.rpcError)
		}
		body := newSSEReader(io.NopCloser(bytes.NewReader(resp)), ex.g, ex)
		var out bytes.Buffer
		testkit.Check(body.writeTo(&out))
		body.Close()
		return out.Bytes()
	}
	b.ReportAllocs()
	for b.Loop() {
		out := round(first, resp1)
		_, tok, _ := bytes.Cut(out, []byte(`"requestState":"`))
		tok, _, _ = bytes.Cut(tok, []byte(`"`))
		second := []byte(`{"id":2,"jsonrpc":"2.0","method":"tools/call","params":{` + meta + `,"inputResponses":{"confirm":{"action":"accept","content":{}}},"name":"test_input_required_result_request_state","requestState":"` + string(tok) + `"}}`)
		if out := round(second, resp2); !bytes.Contains(out, []byte("state-ok")) {
			b.Fatalf("%s", out)
		}
	}
}
