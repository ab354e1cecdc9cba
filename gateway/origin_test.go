package gateway

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/mrtr"
)

// emptyReply answers every request with an empty result.
func emptyReply(w http.ResponseWriter, _ *http.Request, msg map[string]any) {
	writeJSONValue(w, result(msg, map[string]any{}))
}

// rebound is a client of the gateway at gwURL for which every name
// resolves to the gateway's address, as a browser's does once an
// attacker rebinds the name of a page it serves: the request names the
// attacker's host in Host, and the page's origin in Origin.
func rebound(gwURL string) *http.Client {
	addr := strings.TrimPrefix(gwURL, "http://")
	addr = addr[:strings.IndexByte(addr, '/')]
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}}
}

// ask sends req to the gateway and returns the status and the body.
func ask(t *testing.T, hc *http.Client, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, testkit.Must(io.ReadAll(resp.Body))
}

// mcpPost is a tools/list to url at version, with the headers hdr.
func mcpPost(url, version string, hdr map[string]string) *http.Request {
	req := testkit.Must(http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(headerVersion, version)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return req
}

// checkForbidden checks a refusal for Host or Origin: 403, a JSON-RPC
// error without an id naming the header, and nothing upstream.
func checkForbidden(t *testing.T, f *fixture, calls int64, status int, body []byte, what string) {
	t.Helper()
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}
	if status != http.StatusForbidden || json.Unmarshal(body, &m) != nil || m.JSONRPC != "2.0" || string(m.ID) != "null" ||
		m.Error.Code != codeInvalidRequest || !strings.Contains(m.Error.Message, what) {
		t.Fatalf("got %d %s, want 403 and a JSON-RPC error naming %s", status, body, what)
	}
	if n := f.up.Calls.Load(); n != calls {
		t.Fatalf("the upstream got %d requests, want %d", n, calls)
	}
}

// TestDNSRebinding does the attack: a page whose name was rebound to the
// gateway's loopback address calls it from the user's browser, with its
// own name in Host (and, for a POST or any request to another origin,
// its origin in Origin), at every protocol version, on the MCP path and
// on any other (the upstream's health endpoint, say). Each is refused
// with 403 before anything goes upstream. Loopback names pass, in any
// case, with or without a port, as IPv4 or IPv6; so does a client that
// sends no Origin, which is not a browser.
func TestDNSRebinding(t *testing.T) {
	f := newFixture(t, emptyReply, nil)
	u := testkit.Must(url.Parse(f.url))
	port := u.Port()
	evil := rebound(f.url)
	for _, v := range []string{"2025-03-26", "2025-06-18", "2025-11-25", version2026} {
		calls, refusedBefore := f.up.Calls.Load(), f.gw.Stats.Refused.Load()
		st, body := ask(t, evil, mcpPost("http://evil.example:"+port+"/mcp", v, map[string]string{"Origin": "http://evil.example:" + port}))
		checkForbidden(t, f, calls, st, body, `Host "evil.example:`+port+`"`)
		if f.gw.Stats.Refused.Load() != refusedBefore+1 {
			t.Fatal("a refusal for Host was not counted")
		}
		// Without Origin (a same-origin GET sends none), on another path.
		for _, path := range []string{"/mcp", "/healthz", "/"} {
			req := testkit.Must(http.NewRequest(http.MethodGet, "http://evil.example:"+port+path, nil))
			req.Header.Set(headerVersion, v)
			st, body = ask(t, evil, req)
			checkForbidden(t, f, calls, st, body, `Host "evil.example:`+port+`"`)
		}
	}
	calls := f.up.Calls.Load()
	for _, host := range []string{"evil.example", "EVIL.example:1", "localhost.evil.example", "127.0.0.1.nip.io:" + port, "0.0.0.0:" + port,
		"10.0.0.1", "[::]:" + port, "[fe80::1]", "[::1", "::1", "localhost:x", "localhost:1:2"} {
		req := mcpPost(f.url, version2026, nil)
		req.Host = host
		st, body := ask(t, http.DefaultClient, req)
		checkForbidden(t, f, calls, st, body, "Host")
	}

	// Loopback names, and no Origin or a loopback page's.
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LocalHost:" + port, "localhost", "localhost.", "127.0.0.1",
		"127.8.9.10:1", "[::1]:" + port, "[::1]", "[::ffff:127.0.0.1]:" + port} {
		for _, o := range []string{"", "http://localhost:6274", "https://127.0.0.1", "http://[::1]:" + port, "HTTP://LOCALHOST:" + port} {
			calls := f.up.Calls.Load()
			req := mcpPost(f.url, version2026, map[string]string{"Origin": o})
			if o == "" {
				req.Header.Del("Origin")
			}
			req.Host = host
			if st, body := ask(t, http.DefaultClient, req); st != http.StatusOK || f.up.Calls.Load() != calls+1 {
				t.Fatalf("Host %q, Origin %q: got %d %s", host, o, st, body)
			}
		}
	}

	// A loopback Host with a foreign, opaque or doubled Origin: a page
	// elsewhere calling the gateway at 127.0.0.1 (the browser refuses it
	// the answer, not the request).
	calls = f.up.Calls.Load()
	for _, o := range [][]string{{"http://evil.example"}, {"https://localhost.evil.example"}, {"null"}, {"file://"}, {"http://localhost:6274/path"},
		{"ftp://localhost"}, {"http://user@localhost"}, {"localhost"}, {"http://localhost:6274", "http://evil.example"}} {
		req := mcpPost(f.url, version2026, nil)
		req.Header["Origin"] = o
		st, body := ask(t, http.DefaultClient, req)
		checkForbidden(t, f, calls, st, body, "Origin")
	}

	// The same over a real IPv6 loopback connection, if this machine has one.
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Logf("no IPv6 loopback: %v", err)
		return
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: f.gw}}
	srv.Start()
	defer srv.Close()
	calls = f.up.Calls.Load()
	if st, body := ask(t, http.DefaultClient, mcpPost(srv.URL+"/mcp", version2026, map[string]string{"Origin": srv.URL})); st != http.StatusOK {
		t.Fatalf("%s: got %d %s", srv.URL, st, body)
	}
	st, body := ask(t, rebound(srv.URL+"/mcp"), mcpPost("http://evil.example/mcp", version2026, nil))
	checkForbidden(t, f, calls+1, st, body, `Host "evil.example"`)
}

// TestAllowedHostsAndOrigins: lists replace the defaults, loopback
// names included; "*" allows any.
func TestAllowedHostsAndOrigins(t *testing.T) {
	logs := &testkit.Buffer{}
	f := newFixture(t, emptyReply, func(g *Gateway, _ *mrtr.Options) {
		g.Logger = slog.New(slog.NewTextHandler(logs, nil))
		g.AllowedHosts = []string{"mcp.example.com", "[::1]", "not a name", "host:443"}
		g.AllowedOrigins = []string{"https://app.example.com", "http://localhost:6274", "null"}
	})
	try := func(host, origin string) int {
		req := mcpPost(f.url, version2026, map[string]string{"Origin": origin})
		if origin == "" {
			req.Header.Del("Origin")
		}
		req.Host = host
		st, _ := ask(t, http.DefaultClient, req)
		return st
	}
	for _, c := range []struct {
		host, origin string
		want         int
	}{
		{"mcp.example.com", "", 200},
		{"MCP.Example.COM.:8443", "https://app.example.com", 200},
		{"mcp.example.com", "https://APP.example.com:443", 200},
		{"[::1]:8080", "http://localhost:6274", 200},
		{"mcp.example.com", "http://app.example.com", 403},       // another scheme
		{"mcp.example.com", "https://app.example.com:8443", 403}, // another port
		{"mcp.example.com", "http://localhost:6275", 403},
		{"mcp.example.com", "null", 403}, // never allowed
		{"localhost", "", 403},           // the list replaces the default
		{"127.0.0.1", "", 403},
		{"evil.example", "https://app.example.com", 403},
		{"host", "", 403}, // its entry had a port, and matches nothing
		{"host:443", "", 403},
		{"mcp.example.com.evil.example", "", 403},
	} {
		if got := try(c.host, c.origin); got != c.want {
			t.Errorf("Host %q, Origin %q: got %d, want %d", c.host, c.origin, got, c.want)
		}
	}

	// Ten refusals in a moment: one line (at most one a second), naming
	// the refused header.
	if n := strings.Count(logs.String(), "refused a request for its Host or Origin"); n < 1 || n > 2 || !strings.Contains(logs.String(), "is not allowed here") {
		t.Fatalf("%d log lines:\n%s", n, logs)
	}

	wild := newFixture(t, emptyReply, func(g *Gateway, _ *mrtr.Options) { g.AllowedHosts, g.AllowedOrigins = []string{"*"}, []string{"*"} })
	req := mcpPost(wild.url, version2026, map[string]string{"Origin": "null"})
	req.Host = "anything.example"
	if st, body := ask(t, http.DefaultClient, req); st != http.StatusOK {
		t.Fatalf("with *: got %d %s", st, body)
	}
}

// otherAddr is a listener whose connections report a local address that
// is not loopback, as a gateway on 0.0.0.0 sees a client of another
// machine (the test's traffic stays on loopback).
type otherAddr struct{ net.Listener }

func (l otherAddr) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	return otherConn{c}, err
}

type otherConn struct{ net.Conn }

func (otherConn) LocalAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8080} }

// TestOtherAddressDefault: without lists, a request that reached the
// gateway on another address than loopback may name any host, but a
// browser's (one with an Origin) is refused: no page may call it until
// its origin is listed.
func TestOtherAddressDefault(t *testing.T) {
	f := newFixture(t, emptyReply, nil)
	srv := &httptest.Server{Listener: otherAddr{testkit.Must(net.Listen("tcp", "127.0.0.1:0"))}, Config: &http.Server{Handler: f.gw}}
	srv.Start()
	defer srv.Close()
	for _, host := range []string{"mcp.example.com", "10.1.2.3:8080", "localhost", "evil.example"} {
		calls := f.up.Calls.Load()
		req := mcpPost(srv.URL+"/mcp", "2025-11-25", nil)
		req.Host = host
		if st, body := ask(t, http.DefaultClient, req); st != http.StatusOK || f.up.Calls.Load() != calls+1 {
			t.Fatalf("Host %q without Origin: got %d %s", host, st, body)
		}
	}
	calls := f.up.Calls.Load()
	for _, o := range []string{"https://mcp.example.com", "http://localhost:6274", "null"} {
		req := mcpPost(srv.URL+"/mcp", "2025-11-25", map[string]string{"Origin": o})
		req.Host = "mcp.example.com"
		st, body := ask(t, http.DefaultClient, req)
		checkForbidden(t, f, calls, st, body, "Origin")
	}
}

func TestHostAndOriginParsing(t *testing.T) {
	for h, want := range map[string]string{
		"localhost": "localhost", "LOCALHOST:80": "localhost", "localhost.:1": "localhost", "[::1]": "::1", "[::1]:8080": "::1",
		"127.0.0.1:": "127.0.0.1", "Mcp.Example.com": "mcp.example.com",
		"": "", ":80": "", "[::1]x": "", "[127.0.0.1]": "", "::1": "", "a:b": "", "a b": "", "a/b": "", "a%2e": "", "ſ": "", ".": "",
	} {
		got, ok := hostName(h)
		if ok != (want != "") || got != want {
			t.Errorf("hostName(%q) = %q, %v; want %q", h, got, ok, want)
		}
	}
	for s, want := range map[string]string{
		"http://localhost:6274": "http://localhost:6274", "HTTPS://App.Example.com:443": "https://app.example.com",
		"http://[::1]:80": "http://[::1]", "chrome-extension://abcdef": "chrome-extension://abcdef",
		"null": "", "": "", "http://": "", "http://a/": "", "http://a?": "", "http://a#x": "", "http://u@a": "", "http://a:": "",
		"http://a:b": "", "localhost:80": "", "mailto:x@y": "",
	} {
		o, ok := parseOrigin(s)
		if ok != (want != "") || ok && o.String() != want {
			t.Errorf("parseOrigin(%q) = %v, %v; want %q", s, o, ok, want)
		}
	}
	for _, s := range []string{"*", "mcp.example.com", "127.0.0.1", "::1", "[::1]", "Localhost."} {
		if err := CheckAllowedHost(s); err != nil {
			t.Errorf("CheckAllowedHost(%q): %v", s, err)
		}
	}
	for _, s := range []string{"", "mcp.example.com:443", "[::1]:80", "https://mcp.example.com", "a b", "*.example.com", "1:2"} {
		if CheckAllowedHost(s) == nil {
			t.Errorf("CheckAllowedHost(%q) accepted it", s)
		}
	}
	for _, s := range []string{"*", "https://app.example.com", "http://localhost:6274", "moz-extension://x"} {
		if err := CheckAllowedOrigin(s); err != nil {
			t.Errorf("CheckAllowedOrigin(%q): %v", s, err)
		}
	}
	for _, s := range []string{"", "null", "app.example.com", "https://app.example.com/", "https://*.example.com"} {
		if CheckAllowedOrigin(s) == nil {
			t.Errorf("CheckAllowedOrigin(%q) accepted it", s)
		}
	}
}
