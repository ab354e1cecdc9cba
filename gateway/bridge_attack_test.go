package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/replay"
	"github.com/stateseal/stateseal/seal"
)

// Attacks on the bridge's parked calls (bridge_park.go): raw HTTP/1.1
// clients that pipeline, smuggle, stall, flood or leave, against a real
// gateway and upstream on loopback.

// attackGateway is bridgeFixture's gateway in front of up, served by a
// server whose accepted connections pass through wrap (nil: as they are).
func attackGateway(t *testing.T, b *Bridge, up http.Handler, wrap func(net.Conn)) (string, *Gateway, *httptest.Server) {
	t.Helper()
	us := httptest.NewServer(up)
	t.Cleanup(us.Close)
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	s := testkit.Must(seal.New(ring, nil))
	st := testkit.Must(mrtr.New(s, &mrtr.Options{Audience: "https://gw.test", SingleUse: mrtr.Targets("pay"), Replay: replay.NewMemory(0),
		Logger: slog.New(slog.DiscardHandler), Metrics: &mrtr.Counters{}}))
	b.Audience = "https://gw.test"
	g := &Gateway{Upstreams: []*url.URL{testkit.Must(url.Parse(us.URL))}, Bridge: b, MaxRequestBytes: 1 << 20, MaxResponseBytes: 1 << 20, MaxEventBytes: 1 << 20,
		Logger: slog.New(slog.DiscardHandler), Principal: &HeaderPrincipal{Header: "X-User", Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}
	g.SetStates(st)
	gs := httptest.NewUnstartedServer(g)
	if wrap != nil {
		gs.Listener = &wrapListener{Listener: gs.Listener, wrap: wrap}
	}
	gs.Start()
	t.Cleanup(gs.Close)
	return gs.URL + "/mcp", g, gs
}

// attackGatewayTLS is attackGateway over TLS, HTTP/1.1 only.
func attackGatewayTLS(t *testing.T, b *Bridge, up http.Handler, wrap func(net.Conn)) (string, *Gateway, *httptest.Server) {
	t.Helper()
	_, g, plain := attackGateway(t, b, up, nil)
	plain.Close()
	gs := httptest.NewUnstartedServer(g)
	if wrap != nil {
		gs.Listener = &wrapListener{Listener: gs.Listener, wrap: wrap}
	}
	gs.StartTLS()
	t.Cleanup(gs.Close)
	return gs.URL + "/mcp", g, gs
}

type wrapListener struct {
	net.Listener
	wrap func(net.Conn)
}

func (l *wrapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.wrap(c)
	}
	return c, err
}

// noisyUpstream is bridgeUpstream, but for the tool "noisy": once
// answered, it runs (counted) and streams notes notifications of 1 KiB
// before its result, as a long tool reports progress.
type noisyUpstream struct {
	bridgeUpstream
	notes int
}

func (u *noisyUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body := testkit.Must(io.ReadAll(r.Body))
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name    string         `json:"name"`
			Answers map[string]any `json:"inputResponses"`
		} `json:"params"`
	}
	testkit.Check(json.Unmarshal(body, &msg))
	if msg.Method != "tools/call" || msg.Params.Name != "noisy" || msg.Params.Answers == nil {
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		u.bridgeUpstream.ServeHTTP(w, r)
		return
	}
	u.requests.Add(1)
	u.executions.Add(1)
	w.Header().Set("Content-Type", "text/event-stream")
	pad := strings.Repeat("x", 1024)
	for i := range u.notes {
		_, err := fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"%d %s\"}}\n\n", i, pad)
		if err != nil {
			return
		}
		http.NewResponseController(w).Flush()
	}
	fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[]}}\n\n", msg.ID)
}

// rawCall writes a tools/call of tool by hand on a new connection to u,
// with the extra headers hdr (each line ending in \r\n), and returns the
// connection and a reader of what comes back.
func rawCall(t *testing.T, d *net.Dialer, u, sid, who string, id int, tool, hdr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	pu := testkit.Must(url.Parse(u))
	if d == nil {
		d = &net.Dialer{}
	}
	conn := testkit.Must(d.Dial("tcp", pu.Host))
	t.Cleanup(func() { conn.Close() })
	testkit.Must(io.WriteString(conn, callRequest(pu, sid, who, id, tool, hdr)))
	return conn, bufio.NewReader(conn)
}

// callRequest is a tools/call as an HTTP/1.1 request's bytes.
func callRequest(pu *url.URL, sid, who string, id int, tool, hdr string) string {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool)
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nX-User: %s\r\n%s: %s\r\n%s: 2025-11-25\r\nContent-Length: %d\r\n%s\r\n%s",
		pu.Path, pu.Host, who, headerSession, sid, headerVersion, len(body), hdr, body)
}

// panickyPrincipal is HeaderPrincipal whose Forward panics once armed:
// a bug in a part the walk calls (a principal source, a transport, a
// replay store), met in a bridged call's round.
type panickyPrincipal struct {
	HeaderPrincipal
	armed atomic.Bool
}

func (p *panickyPrincipal) Forward(in, out *http.Request) {
	if p.armed.Load() {
		panic("panickyPrincipal: a bug")
	}
	p.HeaderPrincipal.Forward(in, out)
}

// TestBridgeRoundPanic: a panic in the walk of a bridged call's round,
// before the call parks or after, costs that call, as the same panic
// costs one request of a 2026-07-28 client (net/http recovers it): the
// process lives on and serves. The rounds run on goroutines of their
// own, which nothing recovered: the panic killed the process. The
// scenario runs in a child process, whose death the parent sees.
func TestBridgeRoundPanic(t *testing.T) {
	if os.Getenv("STATESEAL_ROUND_PANIC_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBridgeRoundPanic$", "-test.v", "-test.timeout=60s")
		cmd.Env = append(os.Environ(), "STATESEAL_ROUND_PANIC_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "the gateway lived on") {
			t.Fatalf("the child: %v\n%s", err, out)
		}
		return
	}
	up := &bridgeUpstream{}
	p := &panickyPrincipal{HeaderPrincipal: HeaderPrincipal{Header: "X-User", Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}
	u, g, _ := attackGateway(t, &Bridge{}, up, nil)
	g.Principal = p
	c := &legacyClient{t: t, url: u, who: "alice", caps: `{"elicitation":{}}`}
	c.init()

	// Before parking: the first round panics.
	p.armed.Store(true)
	conn, br := rawCall(t, nil, u, c.sid, "alice", 1, "pay", "")
	rest, err := io.ReadAll(br)
	conn.Close()
	if len(rest) > 0 {
		t.Fatalf("a call whose round panicked answered: %q (%v)", rest, err)
	}
	p.armed.Store(false)

	// After parking: the answered round panics.
	resp := openCall(t, &http.Client{Transport: &http.Transport{}}, u, c.sid, 2, "pay")
	defer resp.Body.Close()
	br = bufio.NewReader(resp.Body)
	q := nextEvent(t, br)
	waitFor(t, "the call to park", func() bool { return g.Bridge.parked.len() == 1 })
	p.armed.Store(true)
	if code, b := c.answer(q["id"], `{"action":"accept","content":{}}`); code != 202 {
		t.Fatalf("the answer: %d %s", code, b)
	}
	rest, err = io.ReadAll(br)
	if strings.Contains(string(rest), "result") {
		t.Fatalf("a call whose round panicked answered: %s (%v)", rest, err)
	}
	waitFor(t, "the call's end", func() bool { return g.Bridge.parked.len() == 0 && g.Bridge.Pending() == 0 })
	p.armed.Store(false)

	// The gateway still serves, and nothing ran.
	c2 := &legacyClient{t: t, url: u, who: "alice", caps: `{"elicitation":{}}`}
	c2.init()
	if up.executions.Load() != 0 {
		t.Fatalf("%d executions, want none", up.executions.Load())
	}
	fmt.Println("the gateway lived on")
}

// answerRequest is a client's answer to input request id as an HTTP/1.1
// request's bytes.
func answerRequest(pu *url.URL, sid, who, id string) string {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":{"action":"accept","content":{"ok":true}}}`, id)
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nX-User: %s\r\n%s: %s\r\n%s: 2025-11-25\r\nContent-Length: %d\r\n\r\n%s",
		pu.Path, pu.Host, who, headerSession, sid, headerVersion, len(body), body)
}

// TestBridgeParkedFraming: what a client may do with the HTTP/1.1
// framing of a call that parks. Bytes after its request (a second call,
// pipelined before it parks; an answer to its input request, on the same
// connection after it parks; a request smuggled in a chunked body that
// also says Content-Length) are never served: nothing more goes upstream,
// the answer is not taken (the same answer on its own connection is),
// and nothing follows the stream's end. HTTP/1.0 does not park and still
// completes; Expect: 100-continue, a chunked body and Connection:
// keep-alive park as any call; HEAD is refused.
func TestBridgeParkedFraming(t *testing.T) {
	up := &bridgeUpstream{}
	u, g, _ := attackGateway(t, &Bridge{}, up, nil)
	pu := testkit.Must(url.Parse(u))
	c := &legacyClient{t: t, url: u, who: "alice", caps: `{"elicitation":{}}`}
	c.init()
	chunked := func(id int, after string) string {
		req := callRequest(pu, c.sid, "alice", id, "pay", "Transfer-Encoding: chunked\r\n")
		head, body, _ := strings.Cut(req, "\r\n\r\n")
		head = strings.Replace(head, fmt.Sprintf("Content-Length: %d\r\n", len(body)), "", 1)
		if after != "" {
			// Both: the smuggler's classic, the chunked body ending
			// where Content-Length says the second request starts.
			head += fmt.Sprintf("\r\nContent-Length: %d", len(fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)))
		}
		return head + "\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body) + after
	}
	for i, tc := range []struct {
		name     string
		req      func(id int) string
		expect   bool // Expect: 100-continue: the body after the 100
		parks    bool
		after    func(id int, input string) string // written once the input request is read
		refused  bool
		wantProt string
	}{
		{name: "pipelined call", parks: true, req: func(id int) string {
			return callRequest(pu, c.sid, "alice", id, "pay", "") + callRequest(pu, c.sid, "alice", id+100, "pay", "")
		}},
		{name: "answer on the parked connection", parks: true, req: func(id int) string { return callRequest(pu, c.sid, "alice", id, "pay", "") },
			after: func(id int, input string) string { return answerRequest(pu, c.sid, "alice", input) }},
		{name: "call on the parked connection", parks: true, req: func(id int) string { return callRequest(pu, c.sid, "alice", id, "pay", "") },
			after: func(id int, input string) string { return callRequest(pu, c.sid, "alice", id+100, "pay", "") }},
		{name: "smuggled", parks: true, req: func(id int) string { return chunked(id, callRequest(pu, c.sid, "alice", id+100, "pay", "")) }},
		{name: "chunked body", parks: true, req: func(id int) string { return chunked(id, "") }},
		{name: "keep-alive", parks: true, req: func(id int) string { return callRequest(pu, c.sid, "alice", id, "pay", "Connection: keep-alive\r\n") }},
		{name: "expect 100-continue", parks: true, expect: true, req: func(id int) string {
			return callRequest(pu, c.sid, "alice", id, "pay", "Expect: 100-continue\r\n")
		}},
		{name: "HTTP/1.0", parks: false, wantProt: "HTTP/1.0", req: func(id int) string {
			return strings.Replace(callRequest(pu, c.sid, "alice", id, "pay", ""), "HTTP/1.1", "HTTP/1.0", 1)
		}},
		{name: "HEAD", refused: true, req: func(id int) string {
			return strings.Replace(callRequest(pu, c.sid, "alice", id, "pay", ""), "POST", "HEAD", 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := i + 1
			before, ran := up.requests.Load(), up.executions.Load()
			conn := testkit.Must(net.Dial("tcp", pu.Host))
			defer conn.Close()
			br := bufio.NewReader(conn)
			req := tc.req(id)
			if tc.expect {
				head, body, _ := strings.Cut(req, "\r\n\r\n")
				testkit.Must(io.WriteString(conn, head+"\r\n\r\n"))
				cont := testkit.Must(http.ReadResponse(br, nil))
				if cont.StatusCode != http.StatusContinue {
					t.Fatalf("Expect: 100-continue: %d", cont.StatusCode)
				}
				req = body
			}
			testkit.Must(io.WriteString(conn, req))
			resp := testkit.Must(http.ReadResponse(br, nil))
			if tc.refused {
				if resp.StatusCode/100 != 4 || up.requests.Load() != before {
					t.Fatalf("%d, %d upstream requests; want a 4xx and none", resp.StatusCode, up.requests.Load()-before)
				}
				return
			}
			if tc.wantProt != "" && resp.Proto != tc.wantProt || resp.StatusCode != 200 || !resp.Close {
				t.Fatalf("%s %d, Close %v; want 200 and Connection: close", resp.Proto, resp.StatusCode, resp.Close)
			}
			sr := bufio.NewReader(resp.Body)
			q := nextEvent(t, sr)
			input := q["id"].(string)
			if tc.parks {
				waitFor(t, "the call to park", func() bool { return g.Bridge.parked.len() == 1 })
			} else if n := g.Bridge.parked.len(); n != 0 {
				t.Fatalf("%d parked, want none", n)
			}
			if tc.after != nil {
				testkit.Must(io.WriteString(conn, tc.after(id, input)))
			}
			// The answer on its own connection: taken, so none before it
			// was.
			if code, b := c.answer(input, `{"action":"accept","content":{"ok":true}}`); code != 202 {
				t.Fatalf("the answer on its own connection: %d %s", code, b)
			}
			if m := nextEvent(t, sr); !strings.Contains(fmt.Sprint(m["result"]), "done") {
				t.Fatalf("the final answer: %v", m)
			}
			rest, err := io.ReadAll(br)
			if len(strings.TrimSpace(string(rest))) != 0 && tc.parks || strings.Contains(string(rest), "HTTP/1") {
				t.Fatalf("after the stream: %q (%v); want its end, and no other response", rest, err)
			}
			if n := up.requests.Load() - before; n != 2 || up.executions.Load()-ran != 1 {
				t.Fatalf("%d upstream requests and %d executions; want 2 (the call's rounds) and 1", n, up.executions.Load()-ran)
			}
		})
	}
}

// TestBridgeParkedClientBytes: what a parked call's client sends on its
// connection. A flood (8 KiB) cuts the call: a client reading its
// stream sends nothing. A half-close (FIN, still reading) is a client
// gone, as net/http takes it for a handler that has read its request
// (its context ends), before the call parks or after: the call ends
// without an answer, its input request's answer is refused, and nothing
// more goes upstream.
func TestBridgeParkedClientBytes(t *testing.T) {
	up := &bridgeUpstream{}
	u, g, _ := attackGateway(t, &Bridge{}, up, nil)
	c := &legacyClient{t: t, url: u, who: "alice", caps: `{"elicitation":{}}`}
	c.init()
	for i, tc := range []struct {
		name   string
		parked bool // sent once the call parked, else right after the request
		send   func(net.Conn)
	}{
		{"flood", true, func(conn net.Conn) { conn.Write(make([]byte, 8<<10)) }},
		{"half-close after parking", true, func(conn net.Conn) { conn.(*net.TCPConn).CloseWrite() }},
		{"half-close before parking", false, func(conn net.Conn) { conn.(*net.TCPConn).CloseWrite() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := up.requests.Load()
			conn, br := rawCall(t, nil, u, c.sid, "alice", i+1, "pay", "")
			if !tc.parked {
				tc.send(conn)
			}
			resp := testkit.Must(http.ReadResponse(br, nil))
			sr := bufio.NewReader(resp.Body)
			var q map[string]any
			if tc.parked {
				q = nextEvent(t, sr)
				waitFor(t, "the call to park", func() bool { return g.Bridge.parked.len() == 1 })
				tc.send(conn)
			} else {
				// The input request may or may not have been written
				// before the call saw its client leave.
				line, err := sr.ReadString('\n')
				for err == nil && !strings.HasPrefix(line, "data: ") {
					line, err = sr.ReadString('\n')
				}
				if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
					testkit.Check(json.Unmarshal([]byte(d), &q))
				}
			}
			rest, err := io.ReadAll(sr)
			if strings.Contains(string(rest), "result") {
				t.Fatalf("the stream went on: %q (%v)", rest, err)
			}
			waitFor(t, "the call's end", func() bool { return g.Bridge.parked.len() == 0 && g.Bridge.Pending() == 0 })
			if q != nil {
				if code, _ := c.answer(q["id"], `{"action":"accept","content":{"ok":true}}`); code != 404 {
					t.Fatalf("an answer after the client left: %d, want 404", code)
				}
			}
			if n := up.requests.Load() - before; n > 1 || up.executions.Load() != 0 {
				t.Fatalf("%d upstream requests, %d executions; want the first round at most, and none", n, up.executions.Load())
			}
		})
	}
}

// TestBridgeParkedFlood: calls that park, as one principal and as
// another, hold their bounds (past MaxPendingPerPrincipal, then
// MaxPending, 503 before any input request); each parked call costs two
// goroutines (its own and its reader), not net/http's; and once their
// clients leave (a FIN) or stall (the connection kept, nothing read or
// answered: they end at AnswerTimeout) every goroutine and place comes
// back.
func TestBridgeParkedFlood(t *testing.T) {
	const per, total, timeout = 60, 90, 5 * time.Second
	up := &bridgeUpstream{quiet: true}
	u, g, _ := attackGateway(t, &Bridge{MaxPending: total, MaxPendingPerPrincipal: per, AnswerTimeout: timeout}, up, nil)
	alice := &legacyClient{t: t, url: u, who: "alice", caps: `{"elicitation":{}}`}
	alice.init()
	mallory := &legacyClient{t: t, url: u, who: "mallory", caps: `{"elicitation":{}}`}
	mallory.init()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	waitFor(t, "the gateway to be idle", func() bool { return g.inFlight.Load() == 0 })
	base := runtime.NumGoroutine()

	open := func(c *legacyClient, n int) (parked, refused []net.Conn) {
		for i := range n {
			conn, br := rawCall(t, nil, u, c.sid, c.who, i, "pay", "")
			resp := testkit.Must(http.ReadResponse(br, nil))
			switch resp.StatusCode {
			case http.StatusOK:
				nextEvent(t, bufio.NewReader(resp.Body))
				parked = append(parked, conn)
			case http.StatusServiceUnavailable:
				if resp.Header.Get("Retry-After") == "" {
					t.Fatal("a 503 without Retry-After")
				}
				refused = append(refused, conn)
			default:
				t.Fatalf("call %d: %d", i, resp.StatusCode)
			}
		}
		return parked, refused
	}
	start := time.Now()
	aliceIn, aliceOut := open(alice, per+10)
	malloryIn, malloryOut := open(mallory, per)
	if len(aliceIn) != per || len(aliceOut) != 10 || len(malloryIn) != total-per || len(malloryOut) != 2*per-total {
		t.Fatalf("alice %d in, %d refused; mallory %d in, %d refused; want %d/10 and %d/%d",
			len(aliceIn), len(aliceOut), len(malloryIn), len(malloryOut), per, total-per, 2*per-total)
	}
	if time.Since(start) > timeout/2 {
		t.Fatalf("opening the calls took %v, too close to the answer timeout", time.Since(start))
	}
	waitFor(t, "every admitted call to park", func() bool { return g.Bridge.parked.len() == total })
	// Each parked call: its own goroutine and its reader; no handler
	// (net/http's goroutine and its reader) runs for any.
	stacks := goroutines()
	var handlers, readers int
	for _, s := range stacks {
		if strings.Contains(s, "gateway.(*Gateway).ServeHTTP") {
			handlers++
		}
		if strings.Contains(s, "gateway.watch") {
			readers++
		}
	}
	if handlers != 0 || readers != total {
		t.Fatalf("%d parked calls: %d handlers, %d readers; want none and one each", total, handlers, readers)
	}
	for _, conn := range append(append(aliceIn, aliceOut...), malloryOut...) {
		conn.Close()
	}
	waitFor(t, "alice's calls to end with her connections", func() bool { return g.Bridge.Pending() == total-per })
	// Mallory's stay, stalled: they end at the answer timeout.
	waitFor(t, "mallory's stalled calls to end", func() bool { return g.Bridge.Pending() == 0 && g.Bridge.parked.len() == 0 })
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base+2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before the calls:\n%s", runtime.NumGoroutine(), base, strings.Join(goroutines(), "\n\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := up.executions.Load(); n != 0 {
		t.Fatalf("%d executions, want none", n)
	}
}

// goroutines are the stacks of every goroutine.
func goroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\ngoroutine ")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestBridgeParkedAnswers: answers to a parked call. Mallory's answer
// to alice's input request (her own session: 403; alice's session id:
// 404) changes nothing, and alice's completes it; a replay is 404. An
// answer raced with its client leaving: the upstream runs the call only
// if the answer was taken (202), at most once, and never after a 404.
func TestBridgeParkedAnswers(t *testing.T) {
	up := &bridgeUpstream{}
	u, g, _ := attackGateway(t, &Bridge{}, up, nil)
	alice := &legacyClient{t: t, url: u, who: "alice", caps: `{"elicitation":{}}`}
	alice.init()
	mallory := &legacyClient{t: t, url: u, who: "mallory", caps: `{"elicitation":{}}`}
	mallory.init()
	thief := &legacyClient{t: t, url: u, who: "mallory", sid: alice.sid}

	conn, br := rawCall(t, nil, u, alice.sid, "alice", 1, "pay", "")
	sr := bufio.NewReader(testkit.Must(http.ReadResponse(br, nil)).Body)
	id := nextEvent(t, sr)["id"].(string)
	waitFor(t, "the call to park", func() bool { return g.Bridge.parked.len() == 1 })
	if code, b := mallory.answer(id, `{"action":"accept","content":{"evil":true}}`); code != 403 {
		t.Fatalf("mallory's answer in her session: %d %s, want 403", code, b)
	}
	if code, b := thief.answer(id, `{"action":"accept","content":{"evil":true}}`); code != 404 {
		t.Fatalf("mallory's answer in alice's session: %d %s, want 404", code, b)
	}
	if code, b := alice.answer(id, `{"action":"accept","content":{"ok":true}}`); code != 202 {
		t.Fatalf("alice's answer: %d %s", code, b)
	}
	if m := nextEvent(t, sr); !strings.Contains(fmt.Sprint(m["result"]), `"ok":true`) || strings.Contains(fmt.Sprint(m["result"]), "evil") {
		t.Fatalf("the final answer: %v", m)
	}
	conn.Close()
	if code, _ := alice.answer(id, `{"action":"accept","content":{"ok":true}}`); code != 404 {
		t.Fatalf("a replayed answer: %d, want 404", code)
	}
	if n := up.executions.Load(); n != 1 {
		t.Fatalf("%d executions, want 1", n)
	}

	// Raced with the client leaving.
	var taken int64
	for i := range 30 {
		ran, sent := up.executions.Load(), up.requests.Load()
		conn, br := rawCall(t, nil, u, alice.sid, "alice", 100+i, "pay", "")
		id := nextEvent(t, bufio.NewReader(testkit.Must(http.ReadResponse(br, nil)).Body))["id"].(string)
		waitFor(t, "the call to park", func() bool { return g.Bridge.parked.len() == 1 })
		go conn.Close()
		code, _ := alice.answer(id, `{"action":"accept","content":{"ok":true}}`)
		waitFor(t, "the call's end", func() bool { return g.Bridge.parked.len() == 0 && g.Bridge.Pending() == 0 })
		n, retries := up.executions.Load()-ran, up.requests.Load()-sent-1
		switch {
		case code == 202:
			taken++
			if n > 1 || retries > 1 {
				t.Fatalf("race %d: %d retries upstream and %d executions for one answer", i, retries, n)
			}
		case code == 404:
			if n != 0 || retries != 0 {
				t.Fatalf("race %d: refused (404), yet %d retries upstream and %d executions", i, retries, n)
			}
		default:
			t.Fatalf("race %d: %d", i, code)
		}
	}
	t.Logf("answers taken in %d of 30 races with the client leaving; %d executions, %d upstream requests", taken, up.executions.Load()-1, up.requests.Load())
}

// TestBridgeShutdownRaces: a stopping server (http.Server.Shutdown,
// closed at its deadline, then Bridge.Shutdown, as sealgate stops) cuts
// a call at each point of its way to parking: nothing stays parked or
// pending, nothing runs, its stream ends without an answer, and its
// input request's answer is refused. Shutdown twice, at once or after,
// and Shutdown with no call, return.
func TestBridgeShutdownRaces(t *testing.T) {
	expired, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	for _, at := range []string{"sent", "headers", "input request", "parked"} {
		t.Run(at, func(t *testing.T) {
			up := &bridgeUpstream{}
			u, g, gs := attackGateway(t, &Bridge{}, up, nil)
			c := &legacyClient{t: t, url: u, who: "alice", caps: `{"elicitation":{}}`}
			c.init()
			_, br := rawCall(t, nil, u, c.sid, "alice", 1, "pay", "")
			var sr *bufio.Reader
			var id any
			if at != "sent" {
				sr = bufio.NewReader(testkit.Must(http.ReadResponse(br, nil)).Body)
			}
			if at == "input request" || at == "parked" {
				id = nextEvent(t, sr)["id"]
			}
			if at == "parked" {
				waitFor(t, "the call to park", func() bool { return g.Bridge.parked.len() == 1 })
			}
			if gs.Config.Shutdown(expired) != nil {
				gs.Config.Close()
			}
			errs := make(chan error, 2)
			for range 2 {
				go func() { errs <- g.Bridge.Shutdown(expired) }()
			}
			for range 2 {
				if err := <-errs; err != nil && !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Shutdown: %v", err)
				}
			}
			waitFor(t, "the call's end", func() bool { return g.Bridge.parked.len() == 0 && g.Bridge.Pending() == 0 })
			if sr == nil {
				sr = br
			}
			if rest, err := io.ReadAll(sr); strings.Contains(string(rest), "result") {
				t.Fatalf("a cut stream: %q (%v)", rest, err)
			}
			if id != nil {
				// Its listener is closed: the answer reaches the gateway
				// as a relayed one would, past the server.
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":{"action":"accept","content":{}}}`, id)
				req := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
				req.RemoteAddr, req.Host = "127.0.0.1:1", gs.Listener.Addr().String()
				for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "X-User": "alice", headerSession: c.sid, headerVersion: "2025-11-25"} {
					req.Header.Set(k, v)
				}
				rec := httptest.NewRecorder()
				g.ServeHTTP(rec, req)
				if rec.Code != http.StatusNotFound {
					t.Fatalf("an answer to a cut call: %d %s, want 404", rec.Code, rec.Body)
				}
			}
			if err := g.Bridge.Shutdown(expired); err != nil {
				t.Fatalf("Shutdown again, nothing parked: %v", err)
			}
			if up.executions.Load() != 0 {
				t.Fatalf("%d executions, want none", up.executions.Load())
			}
		})
	}
	if err := (&Bridge{}).Shutdown(expired); err != nil {
		t.Fatalf("Shutdown of a bridge that never served: %v", err)
	}
}

// TestBridgeParkedTLS: over TLS (HTTP/1.1), a call parks on the
// tls.Conn: it completes once answered, and one whose client leaves
// ends; one left at Shutdown's deadline is cut at once; nothing runs
// but the answered call.
func TestBridgeParkedTLS(t *testing.T) {
	up := &bridgeUpstream{}
	u, g, gs := attackGatewayTLS(t, &Bridge{}, up, nil)
	hc := gs.Client()
	c := &legacyClient{t: t, url: u, who: "alice", caps: `{"elicitation":{}}`, hc: hc}
	c.init()
	for i, end := range []string{"answered", "left", "cut"} {
		resp := openCall(t, hc, u, c.sid, i+1, "pay")
		if resp.TLS == nil || resp.ProtoMajor != 1 {
			t.Fatalf("%s over TLS: %v", resp.Proto, resp.TLS != nil)
		}
		br := bufio.NewReader(resp.Body)
		q := nextEvent(t, br)
		waitFor(t, "the call to park", func() bool { return g.Bridge.parked.len() == 1 })
		switch end {
		case "answered":
			if code, _ := c.answer(q["id"], `{"action":"accept","content":{"ok":true}}`); code != 202 {
				t.Fatalf("the answer: %d", code)
			}
			if m := nextEvent(t, br); !strings.Contains(fmt.Sprint(m["result"]), "done") {
				t.Fatalf("the final answer: %v", m)
			}
		case "left":
			resp.Body.Close()
			hc.Transport.(*http.Transport).CloseIdleConnections()
		case "cut":
			expired, cancel := context.WithTimeout(context.Background(), 0)
			defer cancel()
			start := time.Now()
			if err := g.Bridge.Shutdown(expired); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
				t.Fatalf("Shutdown: %v in %v", err, time.Since(start))
			}
			if rest, err := io.ReadAll(br); strings.Contains(string(rest), "result") {
				t.Fatalf("a cut stream: %q (%v)", rest, err)
			}
		}
		waitFor(t, "the call's end", func() bool { return g.Bridge.parked.len() == 0 && g.Bridge.Pending() == 0 })
		resp.Body.Close()
	}
	if n := up.executions.Load(); n != 1 {
		t.Fatalf("%d executions, want 1", n)
	}
}
