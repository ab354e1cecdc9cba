package gateway

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mrtr"
)

// sseUpstream answers over loopback as the go-sdk server does (an SSE
// stream of one message), from canned bytes: its own cost is small, so
// that what a proxy adds shows.
func sseUpstream(w http.ResponseWriter, r *http.Request) {
	b := testkit.Must(io.ReadAll(r.Body))
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	defer w.(http.Flusher).Flush() // chunked, as the go-sdk's streams are
	if bytes.Contains(b, []byte(`"requestState"`)) {
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"state-ok\"}]}}\n\n")
		return
	}
	io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"resultType\":\"input_required\",\"inputRequests\":{\"confirm\":{\"method\":\"elicitation/create\",\"params\":{\"message\":\"ok?\",\"requestedSchema\":{\"type\":\"object\",\"properties\":{}}}}},\"requestState\":\"plain:state-of-the-first-round\"}}\n\n")
}

// benchLoopback runs two-round flows, one request at a time, against
// base over loopback: ns/op is the latency of a flow.
func benchLoopback(b *testing.B, base string) {
	hc := &http.Client{Transport: loopbackTransport()}
	first := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book","arguments":{"seats":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	post := func(body []byte) []byte {
		req := testkit.Must(http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(headerVersion, version2026)
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("%d %v %s", resp.StatusCode, err, out)
		}
		return out
	}
	b.ReportAllocs()
	for b.Loop() {
		out := post(first)
		_, tok, _ := bytes.Cut(out, []byte(`"requestState":"`))
		tok, _, _ = bytes.Cut(tok, []byte(`"`))
		second := append(append(append([]byte(nil), first[:len(first)-2]...), `,"requestState":"`...), tok...)
		second = append(second, `"}}`...)
		second = bytes.Replace(second, []byte(`"id":1`), []byte(`"id":2`), 1)
		out = post(second)
		if !bytes.Contains(out, []byte("state-ok")) {
			b.Fatalf("%s", out)
		}
	}
}

func loopbackTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	return tr
}

// BenchmarkLoopbackDirect, BenchmarkLoopbackPlainProxy and
// BenchmarkLoopbackGateway run the same flows straight to an upstream on
// loopback, through a plain httputil.ReverseProxy (reading the body
// first, as TestLoad's does) and through the gateway: with an upstream
// that costs little, the differences are the proxies' latency.
//
//	go test -run '^$' -bench Loopback -count 5 ./gateway
func BenchmarkLoopbackDirect(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(sseUpstream))
	defer up.Close()
	benchLoopback(b, up.URL)
}

func BenchmarkLoopbackPlainProxy(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(sseUpstream))
	defer up.Close()
	u := testkit.Must(url.Parse(up.URL))
	p := httputil.NewSingleHostReverseProxy(u)
	p.Transport = loopbackTransport()
	ps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := testkit.Must(io.ReadAll(r.Body))
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.ServeHTTP(w, r)
	}))
	defer ps.Close()
	benchLoopback(b, ps.URL)
}

func BenchmarkLoopbackGateway(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(sseUpstream))
	defer up.Close()
	u := testkit.Must(url.Parse(up.URL))
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	st := testkit.Must(newStates(ring, &mrtr.Options{Audience: "https://bench.test", AllowAnonymous: true, Metrics: &mrtr.Counters{}}))
	g := &Gateway{Upstreams: []*url.URL{u}, Principal: Anonymous{}, BindSession: true, MaxRequestBytes: 8 << 20,
		MaxResponseBytes: 16 << 20, MaxEventBytes: 4 << 20, IdleTimeout: time.Minute, Transport: loopbackTransport(),
		Logger: slog.New(slog.DiscardHandler)}
	g.SetStates(st)
	gs := httptest.NewServer(g)
	defer gs.Close()
	benchLoopback(b, gs.URL)
}
