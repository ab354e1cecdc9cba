package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/netip"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
		// Other spellings a CGI or WSGI server reads as the same.
		"X_Forwarded_For: 6.6.6.6",
		"Content_Encoding: gzip",
		"Mcp_Protocol_Version: 2025-03-26",
		"Transfer_Encoding: chunked",
		"X.Forwarded.For: 6.6.6.6", // PHP reads '.' as '_'
		"Mcp.Protocol.Version: 2025-03-26",
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
	for k, v := range h {
		if strings.ContainsAny(k, "_.") {
			t.Errorf("upstream got %s: %q, another spelling of a header the gateway sets or reads", k, v)
		}
	}
	if h.Get("X-Kept") != "1" {
		t.Errorf("upstream lost an end-to-end header: %v", h)
	}
	if h.Get("Content-Length") != strconv.Itoa(len(body)) || h.Get("Transfer-Encoding") != "" {
		t.Errorf("upstream got Content-Length %q, Transfer-Encoding %q: want the body's length, %d", h.Get("Content-Length"), h.Get("Transfer-Encoding"), len(body))
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

// TestConnectionNamingReadHeaders: a Connection header naming a header
// the gateway reads (the session a state is bound to, the credentials,
// the principal header, the framing) is refused: a proxy removes what
// Connection names, so the state would run upstream without it.
func TestConnectionNamingReadHeaders(t *testing.T) {
	f := newFixture(t, stateReply, func(g *Gateway, _ *mrtr.Options) {
		g.Principal = &HeaderPrincipal{Header: "X-Forwarded-User", Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	})
	base := strings.TrimSuffix(f.url, "/mcp")
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book","arguments":{"a":1}}}`
	hdrs := []string{"Mcp-Session-Id: S1", "X-Forwarded-User: alice", "Authorization: Bearer x"}
	if resp, b := rawPost(t, base, "/mcp", hdrs, call); resp.StatusCode != http.StatusOK {
		t.Fatalf("without Connection: %d %s", resp.StatusCode, b)
	}
	before := f.up.Calls.Load()
	for _, named := range []string{"Mcp-Session-Id", "mcp-session-id", "Mcp-Protocol-Version", "Authorization", "X-Forwarded-User", "Content-Type", "Content-Length"} {
		resp, b := rawPost(t, base, "/mcp", append(hdrs, "Connection: keep-alive, "+named), call)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, "Connection names") {
			t.Errorf("Connection: %s: %d %s, want 400", named, resp.StatusCode, b)
		}
	}
	if n := f.up.Calls.Load() - before; n != 0 {
		t.Fatalf("the upstream got %d of the refused requests", n)
	}
}

// TestUncleanPathRefused: a path with a dot segment or an empty one
// (decoded: %2e and %2F count) is refused, so that an upstream that
// resolves it cannot serve a path outside its base, or another than the
// one a -passthrough entry matched.
func TestUncleanPathRefused(t *testing.T) {
	f := newFixture(t, stateReply, nil)
	base := strings.TrimSuffix(f.url, "/mcp")
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, target := range []string{"/../tenantB/mcp", "/mcp/./x", "//evil.example/mcp", "/a/%2e%2e/mcp", "/a%2F..%2Fmcp", "/mcp/..", "/a//mcp",
		// Bytes some server reads as more: Tomcat cuts ";params" from a
		// segment then resolves "..", some read '\' as '/', some decode
		// twice.
		"/..;/..;/tenantB/mcp", "/mcp/.;/x", "/a%5C..%5Cmcp", `/a\..\mcp`, "/%252e%252e/mcp", "/mcp%00", "/mcp%0a"} {
		resp, b := rawPost(t, base, target, nil, call)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, "clean absolute path") {
			t.Errorf("%s: %d %s, want 400", target, resp.StatusCode, b)
		}
	}
	if n := f.up.Calls.Load(); n != 0 {
		t.Fatalf("the upstream got %d of the refused requests", n)
	}
	for _, target := range []string{"/mcp", "/mcp/", "/a/.well-known/x"} {
		if resp, b := rawPost(t, base, target, nil, call); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s, want 200", target, resp.StatusCode, b)
		}
	}
}

// TestWatchdogReleased: an exchange leaves the idle watchdog when it
// ends, whether its answer was read, refused or streamed: a finished
// request held until IdleTimeout would be memory any client could add
// to at its request rate.
func TestWatchdogReleased(t *testing.T) {
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		switch msg["method"] {
		case "tools/list":
			writeJSONValue(w, result(msg, map[string]any{}))
		case "ping":
			w.Header().Set("Content-Type", "application/json-seq") // refused
			io.WriteString(w, "{}")
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message\ndata: "+string(testkit.Must(json.Marshal(result(msg, map[string]any{}))))+"\n\n")
		}
	}, func(g *Gateway, _ *mrtr.Options) { g.IdleTimeout = time.Hour })
	base := strings.TrimSuffix(f.url, "/mcp")
	for i, m := range []string{"tools/list", "ping", "resources/list"} {
		rawPost(t, base, "/mcp", nil, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"method":"`+m+`"}`)
		f.gw.dog.mu.Lock()
		n := len(f.gw.dog.watched)
		f.gw.dog.mu.Unlock()
		if n != 0 {
			t.Fatalf("after %s, the watchdog still holds %d exchanges", m, n)
		}
	}
}

// TestRoutingHeadersMatchBody: MCP 2026-07-28 clients name the method
// and the target in Mcp-Method and Mcp-Name too, for routing. A state
// bound to one tool is refused beside headers naming another (an
// upstream routing by the header would run that tool with it), and a
// first round whose headers name another tool gets no state sealed
// under the body's binding.
func TestRoutingHeadersMatchBody(t *testing.T) {
	var routed atomic.Value
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		routed.Store(r.Header.Get("Mcp-Name")) // an upstream that routes by the header
		stateReply(w, r, msg)
	}, nil)
	send := func(id int, name string, state string) (int, map[string]any) {
		params := map[string]any{"name": "book", "arguments": map[string]any{"a": 1}}
		if state != "" {
			params["requestState"] = state
		}
		return f.post(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params},
			map[string]string{headerMethod: "tools/call", headerName: name})
	}
	_, first := send(1, "book", "")
	tok, _ := resultOf(t, first)["requestState"].(string)
	if tok == "" || strings.HasPrefix(tok, "plain:") {
		t.Fatalf("first round: %v", first)
	}
	calls := f.up.Calls.Load()
	if status, m := send(2, "pay", tok); status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(m), "Mcp-Name header does not match") {
		t.Fatalf("a book state beside Mcp-Name: pay: %d %v", status, m)
	}
	if f.up.Calls.Load() != calls {
		t.Fatal("the upstream got the refused retry")
	}
	if _, m := send(3, "pay", ""); !strings.Contains(fmt.Sprint(m), "cannot seal requestState") {
		t.Fatalf("a first round routed to pay, sealed as book's: %v", m)
	}
	if status, m := send(4, "book", tok); status != http.StatusOK || routed.Load() != "book" || !strings.Contains(fmt.Sprint(m), "got plain:book") {
		t.Fatalf("the honest retry: %d %v", status, m)
	}
}
