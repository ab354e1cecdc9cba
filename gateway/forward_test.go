package gateway

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/mrtr"
)

// rawPost sends a POST written byte for byte, so that its headers are
// exactly the test's (no User-Agent, a Connection header naming others),
// and reads the response.
func rawPost(t *testing.T, base, target string, headers []string, body string) (*http.Response, string) {
	t.Helper()
	u := testkit.Must(url.Parse(base))
	c := testkit.Must(net.Dial("tcp", u.Host))
	defer c.Close()
	req := "POST " + target + " HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: application/json\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n"
	for _, h := range headers {
		req += h + "\r\n"
	}
	testkit.Must(io.WriteString(c, req+"\r\n"+body))
	resp := testkit.Must(http.ReadResponse(bufio.NewReader(c), nil))
	b := testkit.Must(io.ReadAll(resp.Body))
	return resp, string(b)
}

// TestForwardedHeaders: what the gateway forwards of a request's headers
// and of a response's, as ReverseProxy would. A header of one connection
// (hop-by-hop, or named by Connection) goes neither way; the client's
// Forwarded and X-Forwarded-* are replaced by the gateway's own, so a
// client cannot name another address to the upstream; no User-Agent is
// made up; a query with a parameter Go does not parse (a semicolon, a
// bad escape) reaches the upstream as the gateway parsed it.
func TestForwardedHeaders(t *testing.T) {
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		w.Header().Set("Connection", "X-Up-Secret")
		w.Header().Set("X-Up-Secret", "for the gateway only")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("Proxy-Authenticate", "Basic")
		w.Header().Set("X-Kept", "1")
		w.Header().Set("X-Query", r.URL.RawQuery)
		writeJSONValue(w, result(msg, map[string]any{}))
	}, nil)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	resp, b := rawPost(t, strings.TrimSuffix(f.url, "/mcp"), "/mcp?a=1;b=2&c=%zz&d=4", []string{
		"Connection: keep-alive, X-Secret",
		"X-Secret: for the gateway only",
		"Keep-Alive: timeout=5",
		"Proxy-Authorization: Basic eDp5",
		"Proxy-Connection: keep-alive",
		"Te: trailers",
		"Forwarded: for=6.6.6.6",
		"X-Forwarded-For: 6.6.6.6",
		"X-Forwarded-Host: evil.example",
		"X-Forwarded-Proto: https",
		"X-Kept: 1",
	}, body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(b, `"result"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	_, h := f.up.Last()
	for _, k := range []string{"X-Secret", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "Te", "Forwarded", "User-Agent"} {
		if v, ok := h[k]; ok {
			t.Errorf("upstream got %s: %q", k, v)
		}
	}
	if h.Get("X-Kept") != "1" {
		t.Errorf("upstream lost an end-to-end header: %v", h)
	}
	gu := testkit.Must(url.Parse(f.url))
	if got := h.Values("X-Forwarded-For"); len(got) != 1 || got[0] != "127.0.0.1" {
		t.Errorf("X-Forwarded-For %q, want the client's address alone", got)
	}
	if h.Get("X-Forwarded-Host") != gu.Host || h.Get("X-Forwarded-Proto") != "http" {
		t.Errorf("X-Forwarded-Host %q, -Proto %q: want %q, http", h.Get("X-Forwarded-Host"), h.Get("X-Forwarded-Proto"), gu.Host)
	}
	if q := resp.Header.Get("X-Query"); q != "d=4" {
		t.Errorf("upstream got query %q, want the parameters Go parses, d=4", q)
	}
	for _, k := range []string{"X-Up-Secret", "Keep-Alive", "Proxy-Authenticate"} {
		if v, ok := resp.Header[k]; ok {
			t.Errorf("client got %s: %q", k, v)
		}
	}
	if resp.Header.Get("X-Kept") != "1" {
		t.Errorf("client lost an end-to-end header: %v", resp.Header)
	}
}

// TestInformationalDropped: a 1xx response (103 Early Hints) is headers
// the gateway does not read, so the client never gets one: a state in
// them would pass unsealed.
func TestInformationalDropped(t *testing.T) {
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		w.Header().Set("Link", "</x>; rel=preload")
		w.Header().Set("X-Request-State", "plain:secret")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("X-Request-State")
		w.Header().Del("Link")
		writeJSONValue(w, result(msg, map[string]any{}))
	}, nil)
	var got []int
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		got = append(got, code)
		return nil
	}}
	ctx := httptrace.WithClientTrace(context.Background(), trace)
	req := testkit.Must(http.NewRequestWithContext(ctx, http.MethodPost, f.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)))
	req.Header.Set("Content-Type", "application/json")
	resp := testkit.Must(http.DefaultClient.Do(req))
	b := testkit.Must(io.ReadAll(resp.Body))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"result"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if len(got) != 0 || resp.Header.Get("X-Request-State") != "" {
		t.Fatalf("client got 1xx %v, headers %v", got, resp.Header)
	}
	// The upstream did send it: the test's upstream is not the reason.
	direct := testkit.Must(http.NewRequestWithContext(ctx, http.MethodPost, f.upURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)))
	resp = testkit.Must(http.DefaultClient.Do(direct))
	resp.Body.Close()
	if len(got) != 1 || got[0] != http.StatusEarlyHints {
		t.Fatalf("upstream sent 1xx %v, want [103]", got)
	}
}

// TestFailoverQueryCleaned: a request sent again to the next upstream,
// after the first refused the connection, has the query the first
// would have had, not the client's.
func TestFailoverQueryCleaned(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := testkit.Must(url.Parse(dead.URL))
	dead.Close() // refuses connections from now on
	var mu sync.Mutex
	var queries []string
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		writeJSONValue(w, result(msg, map[string]any{}))
	}, func(g *Gateway, _ *mrtr.Options) {
		g.Upstreams = append([]*url.URL{deadURL}, g.Upstreams...) // the first in turn
	})
	resp, b := rawPost(t, strings.TrimSuffix(f.url, "/mcp"), "/mcp?a=1;b=2&d=4", nil, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	mu.Lock()
	defer mu.Unlock()
	if resp.StatusCode != http.StatusOK || len(queries) != 1 || queries[0] != "d=4" {
		t.Fatalf("%d %s: upstream got queries %q, want [d=4]", resp.StatusCode, b, queries)
	}
}
