package gateway

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/mrtr"
)

// The forged state every request attack carries: an upstream reading it
// would act on it.
const forged = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book","requestState":"forged:admin"}}`

func utf16le(s string, bom bool) []byte {
	var b []byte
	if bom {
		b = append(b, 0xff, 0xfe)
	}
	for _, u := range utf16.Encode([]rune(s)) {
		b = binary.LittleEndian.AppendUint16(b, u)
	}
	return b
}

func utf16be(s string) []byte {
	var b []byte
	for _, u := range utf16.Encode([]rune(s)) {
		b = binary.BigEndian.AppendUint16(b, u)
	}
	return b
}

func utf32le(s string) []byte {
	var b []byte
	for _, r := range s {
		b = binary.LittleEndian.AppendUint32(b, uint32(r))
	}
	return b
}

func compress(t testing.TB, coding string, level int, s string) []byte {
	var buf bytes.Buffer
	var w io.WriteCloser
	var err error
	if coding == "gzip" {
		w, err = gzip.NewWriterLevel(&buf, level)
	} else {
		w, err = zlib.NewWriterLevel(&buf, level) // HTTP's deflate is zlib
	}
	if err != nil {
		panic(err) // a level out of range: the test's own mistake
	}
	io.WriteString(w, s)
	w.Close()
	return buf.Bytes()
}

// TestRequestFraming: every request the gateway would not read as every
// upstream reads it is refused before the upstream, with a JSON-RPC
// error saying why; a path listed as pass-through still passes.
func TestRequestFraming(t *testing.T) {
	f := newFixture(t, stateReply, nil)
	f.gw.PassThrough = []string{"/.well-known/oauth-authorization-server"}
	base := strings.TrimSuffix(f.url, "/mcp")
	for _, tc := range []struct {
		name, method, path string
		hdr                map[string][]string
		body               []byte
		status             int
	}{
		{"gzip", "POST", "/mcp", map[string][]string{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}, compress(t, "gzip", gzip.NoCompression, forged), 415},
		{"deflate", "POST", "/mcp", map[string][]string{"Content-Type": {"application/json"}, "Content-Encoding": {"deflate"}}, compress(t, "deflate", flate.BestCompression, forged), 415},
		{"identity then gzip", "POST", "/mcp", map[string][]string{"Content-Type": {"application/json"}, "Content-Encoding": {"identity, gzip"}}, compress(t, "gzip", 6, forged), 415},
		{"charset utf-16le", "POST", "/mcp", map[string][]string{"Content-Type": {"application/json; charset=utf-16le"}}, utf16le(forged, false), 415},
		{"charset latin1", "POST", "/mcp", map[string][]string{"Content-Type": {"application/json; charset=iso-8859-1"}}, []byte(forged), 415},
		{"utf-16le with BOM", "POST", "/mcp", map[string][]string{"Content-Type": {"application/json"}}, utf16le(forged, true), 400},
		{"utf-16be without BOM", "POST", "/mcp", map[string][]string{"Content-Type": {"application/json"}}, utf16be(forged), 400},
		{"utf-32le without BOM", "POST", "/mcp", map[string][]string{"Content-Type": {"application/json"}}, utf32le(forged), 400},
		{"utf-8 BOM", "POST", "/mcp", map[string][]string{"Content-Type": {"application/json"}}, append([]byte("\xef\xbb\xbf"), forged...), 400},
		{"text/plain", "POST", "/mcp", map[string][]string{"Content-Type": {"text/plain"}}, []byte(forged), 415},
		{"form", "POST", "/mcp", map[string][]string{"Content-Type": {"application/x-www-form-urlencoded"}}, []byte(forged), 415},
		{"json-seq", "POST", "/mcp", map[string][]string{"Content-Type": {"application/json-seq"}}, []byte("\x1e" + forged + "\n"), 415},
		{"octet-stream", "POST", "/mcp", map[string][]string{"Content-Type": {"application/octet-stream"}}, []byte(forged), 415},
		{"vnd+json", "POST", "/mcp", map[string][]string{"Content-Type": {"application/vnd.api+json"}}, []byte(forged), 415},
		{"no Content-Type", "POST", "/mcp", map[string][]string{}, []byte(forged), 415},
		{"two Content-Types", "POST", "/mcp", map[string][]string{"Content-Type": {"application/json", "text/plain"}}, []byte(forged), 415},
		{"PUT", "PUT", "/mcp", map[string][]string{"Content-Type": {"application/json"}}, []byte(forged), 405},
		{"PATCH", "PATCH", "/mcp", map[string][]string{"Content-Type": {"application/json"}}, []byte(forged), 405},
		{"lowercase post", "post", "/mcp", map[string][]string{"Content-Type": {"application/json"}}, []byte(forged), 405},
		{"GET with a body", "GET", "/mcp", map[string][]string{"Content-Type": {"application/json"}}, []byte(forged), 400},
		{"websocket upgrade", "GET", "/mcp", map[string][]string{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}, nil, 400},
		{"h2c upgrade", "POST", "/mcp", map[string][]string{"Content-Type": {"application/json"}, "Connection": {"Upgrade, HTTP2-Settings"}, "Upgrade": {"h2c"}, "Http2-Settings": {"AAMAAABkAARAAAAAAAIAAAAA"}}, []byte(forged), 400},
		{"upgrade on a pass-through path", "GET", "/.well-known/oauth-authorization-server", map[string][]string{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}}, nil, 400},
		{"an escaped pass-through path", "PUT", "/.well-known%2Foauth-authorization-server", map[string][]string{"Content-Type": {"text/plain"}}, []byte(forged), 405},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.up.Calls.Load()
			req, err := http.NewRequest(tc.method, base+tc.path, bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header = tc.hdr
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b := testkit.Must(io.ReadAll(resp.Body))
			resp.Body.Close()
			if resp.StatusCode != tc.status || !bytes.Contains(b, []byte(`"error":{"code":-32`)) {
				t.Fatalf("HTTP %d %s; want %d and a JSON-RPC error", resp.StatusCode, b, tc.status)
			}
			if f.up.Calls.Load() != before {
				t.Fatal("the upstream got the request")
			}
		})
	}
	// The listed path passes, unread, with its method and body; its JSON
	// answer (a plaintext state, from stateReply) is still read, and the
	// plaintext does not reach the client.
	before := f.up.Calls.Load()
	req := testkit.Must(http.NewRequest("PUT", base+"/.well-known/oauth-authorization-server", strings.NewReader("x=1")))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b := testkit.Must(io.ReadAll(resp.Body))
	resp.Body.Close()
	if f.up.Calls.Load() != before+1 {
		t.Fatalf("the pass-through path did not reach the upstream: HTTP %d", resp.StatusCode)
	}
	if bytes.Contains(b, []byte("plain:")) || !bytes.Contains(b, []byte("cannot seal requestState")) {
		t.Fatalf("the pass-through answer: %s", b)
	}
}

// The plaintext a lenient upstream puts where the gateway must not let
// it through to the client.
const plain = "secret-plain-state"

// attacker answers as an upstream that compresses, upgrades, mislabels
// and hides states, by the request's path.
func attacker(w http.ResponseWriter, r *http.Request, msg map[string]any) {
	res := result(msg, map[string]any{"resultType": "input_required", "requestState": plain})
	js := testkit.Must(jsonMarshal(res))
	sse := "event: message\ndata: " + string(js) + "\n\n"
	h := w.Header()
	switch strings.TrimPrefix(r.URL.Path, "/") {
	case "101", "101-bare":
		conn, brw := testkit.Must2(http.NewResponseController(w).Hijack())
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
		if r.URL.Path == "/101" {
			brw.WriteString("Upgrade: websocket\r\nConnection: Upgrade\r\n")
		}
		brw.WriteString("\r\n" + string(js))
		brw.Flush()
		return
	case "gzip-json":
		h.Set("Content-Type", "application/json")
		h.Set("Content-Encoding", "gzip")
		w.Write(compress(nil, "gzip", gzip.NoCompression, string(js)))
		return
	case "gzip-sse-stored":
		h.Set("Content-Type", "text/event-stream")
		h.Set("Content-Encoding", "gzip")
		w.Write(compress(nil, "gzip", gzip.NoCompression, sse))
		return
	case "deflate-sse":
		h.Set("Content-Type", "text/event-stream")
		h.Set("Content-Encoding", "deflate")
		w.Write(compress(nil, "deflate", flate.BestCompression, sse))
		return
	case "json-seq":
		h.Set("Content-Type", "application/json-seq")
		w.Write(append([]byte("\x1e"), js...))
		return
	case "vnd-json":
		h.Set("Content-Type", "application/vnd.mcp+json")
	case "text-json":
		h.Set("Content-Type", "text/json")
	case "two-types":
		h["Content-Type"] = []string{"text/plain", "application/json"}
	case "utf-16":
		h.Set("Content-Type", "application/json; charset=utf-16le")
		w.Write(utf16le(string(js), false))
		return
	case "text-plain":
		h.Set("Content-Type", "text/plain")
	case "untyped-utf16":
		h["Content-Type"] = nil
		w.Write(utf16le(string(js), true))
		return
	case "error-data":
		h.Set("Content-Type", "application/json")
		js = testkit.Must(jsonMarshal(map[string]any{"jsonrpc": "2.0", "id": msg["id"], "error": map[string]any{"code": -32000, "message": "x", "data": map[string]any{"requestState": plain}}}))
	case "nested":
		h.Set("Content-Type", "application/json")
		js = testkit.Must(jsonMarshal(result(msg, map[string]any{"content": []any{map[string]any{"type": "text", "text": "x", "RequestState": plain}}})))
	case "snake-json":
		// pydantic (the Python SDK's client) reads request_state as
		// requestState.
		h.Set("Content-Type", "application/json")
		js = testkit.Must(jsonMarshal(result(msg, map[string]any{"resultType": "input_required", "request_state": plain})))
	case "snake-sse":
		h.Set("Content-Type", "text/event-stream")
		n := testkit.Must(jsonMarshal(result(msg, map[string]any{"resultType": "input_required", "Request-State": plain})))
		io.WriteString(w, "event: message\ndata: "+string(n)+"\n\n")
		return
	case "sse-double-bom", "sse-unknown-field":
		// A BOM encoded twice (C3 AF C2 BB C2 BF): the gateway would read
		// the field "ï»¿data", eventsource-parser (the TypeScript SDK's)
		// drops the three characters and reads the data.
		h.Set("Content-Type", "text/event-stream")
		prefix := "\u00ef\u00bb\u00bf"
		if r.URL.Path == "/sse-unknown-field" {
			prefix = "x"
		}
		io.WriteString(w, prefix+"data: "+string(js)+"\n\n")
		return
	case "sse-notification", "sse-server-request":
		h.Set("Content-Type", "text/event-stream")
		m := map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"requestState": plain}}
		if r.URL.Path == "/sse-server-request" {
			m = map[string]any{"jsonrpc": "2.0", "id": "s1", "method": "elicitation/create", "params": map[string]any{"_meta": map[string]any{"requestState": plain}}}
		}
		n := testkit.Must(jsonMarshal(m))
		io.WriteString(w, "event: message\ndata: "+string(n)+"\n\n"+sse)
		return
	default:
		h.Set("Content-Type", "application/json")
	}
	w.Write(js)
}

// TestResponseFraming: a lenient upstream tries every way to get a
// plaintext state past the gateway to the client; each reaches the
// client as an error, never the plaintext (the client's raw bytes are
// searched, so a stored deflate block cannot hide it). The gateway asks
// every upstream for the identity encoding.
func TestResponseFraming(t *testing.T) {
	f := newFixture(t, attacker, nil)
	base := strings.TrimSuffix(f.url, "/mcp")
	hc := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	do := func(method, path string) (int, []byte) {
		var body io.Reader
		if method == "POST" {
			body = strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"book"}}`)
		}
		req := testkit.Must(http.NewRequest(method, base+path, body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Accept-Encoding", "gzip, deflate")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := testkit.Must(io.ReadAll(resp.Body))
		return resp.StatusCode, b
	}
	for _, mode := range []string{"101", "101-bare", "gzip-json", "gzip-sse-stored", "deflate-sse", "json-seq", "vnd-json", "text-json",
		"two-types", "utf-16", "text-plain", "untyped-utf16", "error-data", "nested", "sse-notification", "sse-server-request",
		"snake-json", "snake-sse", "sse-double-bom", "sse-unknown-field"} {
		t.Run(mode, func(t *testing.T) {
			status, b := do("POST", "/"+mode)
			if bytes.Contains(b, []byte(plain)) || bytes.Contains(b, []byte("secret")) {
				t.Fatalf("the plaintext reached the client: HTTP %d %q", status, b)
			}
			if !bytes.Contains(b, []byte(`"error":{"code":-32603`)) {
				t.Fatalf("HTTP %d %q: want a -32603 error", status, b)
			}
			if _, hdr := f.up.Last(); hdr.Get("Accept-Encoding") != "identity" {
				t.Fatalf("the upstream was asked for %q", hdr.Get("Accept-Encoding"))
			}
		})
	}
	// A JSON answer to a GET (no call to seal for) is read too.
	if status, b := do("GET", "/mcp"); bytes.Contains(b, []byte(plain)) {
		t.Fatalf("GET: the plaintext reached the client: HTTP %d %q", status, b)
	}
	// The control: the same upstream's honest answer is sealed.
	if _, b := do("POST", "/mcp"); bytes.Contains(b, []byte(plain)) || !bytes.Contains(b, []byte(`"requestState":"`)) {
		t.Fatalf("honest answer: %q", b)
	}
}

// TestPrincipalHeaderSpellings: the principal header reaches the upstream
// in no spelling a server may read as the same, from an untrusted
// address; from a trusted one, a second spelling beside it is removed and
// makes the request carry no principal.
func TestPrincipalHeaderSpellings(t *testing.T) {
	// PHP reads '.' as '_' too ($_SERVER's HTTP_X_FORWARDED_USER).
	spellings := []string{"X_Forwarded_User", "x_forwarded_user", "X-FORWARDED_USER", "x-forwarded-user", "X.Forwarded.User", "X-Forwarded.User", "X-Forwarded-User"}
	for _, trusted := range []string{"10.0.0.0/8", "127.0.0.0/8"} {
		f := newFixture(t, stateReply, func(g *Gateway, o *mrtr.Options) {
			o.AllowAnonymous = false
			g.Principal = &HeaderPrincipal{Header: "X-Forwarded-User", Trusted: []netip.Prefix{netip.MustParsePrefix(trusted)}}
		})
		for _, sp := range spellings {
			req := testkit.Must(http.NewRequest("POST", f.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book"}}`)))
			req.Header.Set("Content-Type", "application/json")
			req.Header[sp] = []string{"admin"}
			if trusted == "127.0.0.0/8" && sp != "X-Forwarded-User" {
				req.Header["X-Forwarded-User"] = []string{"alice"}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b := testkit.Must(io.ReadAll(resp.Body))
			resp.Body.Close()
			_, hdr := f.up.Last()
			for k, v := range hdr {
				if headerFold(k) != "x-forwarded-user" {
					continue
				}
				if trusted == "10.0.0.0/8" || k != "X-Forwarded-User" || v[0] != "alice" && sp != "X-Forwarded-User" {
					t.Fatalf("trusted %s, sent %s: the upstream got %s: %v", trusted, sp, k, v)
				}
			}
			if trusted == "127.0.0.0/8" && sp != "X-Forwarded-User" && !bytes.Contains(b, []byte("cannot seal requestState")) {
				t.Fatalf("%s beside X-Forwarded-User from a trusted proxy: a state sealed: %s", sp, b)
			}
		}
	}
}

// TestSlowBody: a client sending its body a byte at a time is cut at
// BodyTimeout with 408, and the upstream gets nothing.
func TestSlowBody(t *testing.T) {
	f := newFixture(t, stateReply, func(g *Gateway, _ *mrtr.Options) { g.BodyTimeout = 300 * time.Millisecond })
	host := strings.TrimPrefix(strings.TrimSuffix(f.url, "/mcp"), "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := []byte(forged)
	io.WriteString(conn, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for _, c := range body {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := conn.Write([]byte{c}); err != nil {
				return
			}
		}
	}()
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || time.Since(start) > 5*time.Second {
		t.Fatalf("HTTP %d after %v", resp.StatusCode, time.Since(start))
	}
	if f.up.Calls.Load() != 0 {
		t.Fatal("the upstream got the request")
	}
}

// TestRequestTrailers: a request whose trailers would reach the upstream
// after the body the gateway read (a principal header, a
// Content-Encoding) is refused, declared in a Trailer header or not; on
// a pass-through path, whose body is not read, none is forwarded.
func TestRequestTrailers(t *testing.T) {
	f := newFixture(t, stateReply, nil)
	f.gw.PassThrough = []string{"/oauth"}
	host := strings.TrimPrefix(strings.TrimSuffix(f.url, "/mcp"), "http://")
	send := func(path, declare string) (int, []byte) {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book"}}`
		io.WriteString(conn, "POST "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"+declare+"\r\n"+
			strconv.FormatInt(int64(len(body)), 16)+"\r\n"+body+"\r\n0\r\nX-Forwarded-User: admin\r\nContent-Encoding: gzip\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		b := testkit.Must(io.ReadAll(resp.Body))
		resp.Body.Close()
		return resp.StatusCode, b
	}
	for _, declare := range []string{"Trailer: X-Forwarded-User, Content-Encoding\r\n", ""} {
		before := f.up.Calls.Load()
		if status, b := send("/mcp", declare); status != http.StatusBadRequest || !bytes.Contains(b, []byte(`"code":-32600`)) || !bytes.Contains(b, []byte("trailers")) {
			t.Fatalf("%q: HTTP %d %s", declare, status, b)
		}
		if f.up.Calls.Load() != before {
			t.Fatalf("%q: the upstream got the request", declare)
		}
	}
	if status, b := send("/oauth", "Trailer: X-Forwarded-User\r\n"); status != http.StatusBadRequest {
		t.Fatalf("pass-through, declared: HTTP %d %s", status, b)
	}
	before := f.up.Calls.Load()
	send("/oauth", "")
	if f.up.Calls.Load() != before+1 {
		t.Fatal("pass-through: the upstream did not get the request")
	}
	f.up.Mu.Lock()
	tr := f.up.Trail[len(f.up.Trail)-1]
	f.up.Mu.Unlock()
	if len(tr) != 0 {
		t.Fatalf("pass-through: the upstream got trailers %v", tr)
	}
}

// TestSessionHeaderSpellings: a state is bound to the one Mcp-Session-Id
// the upstream gets: two are refused, and another spelling
// (Mcp_Session_Id, which CGI and WSGI read as the same) never reaches
// the upstream.
func TestSessionHeaderSpellings(t *testing.T) {
	f := newFixture(t, stateReply, nil)
	send := func(hdr http.Header) (int, []byte) {
		req := testkit.Must(http.NewRequest("POST", f.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book"}}`)))
		req.Header = hdr
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := testkit.Must(io.ReadAll(resp.Body))
		return resp.StatusCode, b
	}
	before := f.up.Calls.Load()
	if status, b := send(http.Header{"Mcp-Session-Id": {"S1", "S3"}}); status != http.StatusBadRequest || !bytes.Contains(b, []byte(`"code":-32600`)) {
		t.Fatalf("two Mcp-Session-Id: HTTP %d %s", status, b)
	}
	if f.up.Calls.Load() != before {
		t.Fatal("two Mcp-Session-Id: the upstream got the request")
	}
	for _, sp := range []string{"Mcp_Session_Id", "mcp_session_id", "MCP-SESSION_ID", "Mcp.Session.Id"} {
		if status, b := send(http.Header{"Mcp-Session-Id": {"S1"}, sp: {"S2"}}); status != 200 {
			t.Fatalf("%s: HTTP %d %s", sp, status, b)
		}
		_, hdr := f.up.Last()
		for k, v := range hdr {
			if headerFold(k) == "mcp-session-id" && (k != "Mcp-Session-Id" || len(v) != 1 || v[0] != "S1") {
				t.Fatalf("%s: the upstream got %s: %v", sp, k, v)
			}
		}
	}
}

// TestResponseTrailersDropped: an upstream's trailers, declared or not,
// in a JSON answer or an SSE stream, never reach the client: the gateway
// does not read them, so a plaintext state there would pass.
func TestResponseTrailersDropped(t *testing.T) {
	for _, sse := range []bool{false, true} {
		reply := func(w http.ResponseWriter, _ *http.Request, msg map[string]any) {
			w.Header().Set("Trailer", "X-Leak")
			body := testkit.Must(json.Marshal(result(msg, map[string]any{"content": []any{}})))
			if sse {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprintf(w, "data: %s\n\n", body)
			} else {
				w.Header().Set("Content-Type", "application/json")
				w.Write(body)
			}
			w.Header().Set("X-Leak", "requestState=PLAINTEXT")
			w.Header().Set(http.TrailerPrefix+"X-Undeclared", "requestState=PLAINTEXT")
		}
		f := newFixture(t, reply, nil)
		b := testkit.Must(json.Marshal(rpcCall(1, "tools/call", "book", nil, "")))
		req := testkit.Must(http.NewRequest(http.MethodPost, f.url, bytes.NewReader(b)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp := testkit.Must(http.DefaultClient.Do(req))
		body := testkit.Must(io.ReadAll(resp.Body))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Fatalf("sse=%v: HTTP %d %s", sse, resp.StatusCode, body)
		}
		if len(resp.Trailer) != 0 || resp.Header.Get("Trailer") != "" {
			t.Fatalf("sse=%v: the client got the upstream's trailers: %v (announced %q)", sse, resp.Trailer, resp.Header.Get("Trailer"))
		}
	}
}
