package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/replay"
	"github.com/stateseal/stateseal/seal"
)

// bridgeUpstream is a stateless 2026-07-28 server: server/discover, and
// tools that answer input_required until they get their answers, then
// count an execution. Its state is plain (the gateway seals it).
type bridgeUpstream struct {
	executions atomic.Int64
	requests   atomic.Int64
	mu         sync.Mutex
	got        []map[string]any
	quiet      bool // records nothing (benchmarks)
}

func (u *bridgeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.requests.Add(1)
	var msg map[string]any
	testkit.Check(json.NewDecoder(r.Body).Decode(&msg))
	if !u.quiet {
		u.mu.Lock()
		u.got = append(u.got, msg)
		u.mu.Unlock()
	}
	p, _ := msg["params"].(map[string]any)
	reply := func(result any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg["id"], "result": result})
	}
	if r.Header.Get(headerVersion) != version2026 {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	switch msg["method"] {
	case "server/discover":
		reply(map[string]any{"supportedVersions": []string{version2026}, "capabilities": map[string]any{"tools": map[string]any{}},
			"_meta": map[string]any{metaServer: map[string]any{"name": "up", "version": "9"}}})
		return
	case "tools/call":
	default:
		reply(map[string]any{"tools": []any{}})
		return
	}
	name, _ := p["name"].(string)
	answers, _ := p["inputResponses"].(map[string]any)
	state, _ := p["requestState"].(string)
	ask := func(reqs map[string]any) {
		reply(map[string]any{"resultType": "input_required", "inputRequests": reqs, "requestState": "plain:" + name})
	}
	elicit := map[string]any{"method": "elicitation/create", "params": map[string]any{"mode": "form", "message": "ok?", "requestedSchema": map[string]any{"type": "object"}}}
	switch name {
	case "leak": // a state outside input_required: the walk seals it; the bridge must drop it
		reply(map[string]any{"resultType": "complete", "requestState": "plain:leak", "inputRequests": map[string]any{}, "content": []any{}})
		return
	case "escaped": // input_required spelled with an escape: the same value
		if answers != nil {
			break
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"input\u005frequired","inputRequests":{"ok":{"method":"elicitation/create","params":{"message":"ok?"}}},"requestState":"plain:escaped"}}`, testkit.Must(json.Marshal(msg["id"])))
		return
	case "mode":
		if answers == nil {
			ask(map[string]any{"u": map[string]any{"method": "elicitation/create", "params": map[string]any{"mode": "URL", "url": "https://x.test", "message": "go"}}})
			return
		}
	}
	if answers == nil || state != "plain:"+name || name == "forever" {
		switch name {
		case "many":
			reqs := map[string]any{}
			for i := range 40 {
				reqs[fmt.Sprint("k", i)] = elicit
			}
			ask(reqs)
		case "roots":
			ask(map[string]any{"r": map[string]any{"method": "roots/list"}})
		case "url":
			ask(map[string]any{"u": map[string]any{"method": "elicitation/create", "params": map[string]any{"mode": "url", "url": "https://x.test", "message": "go", "elicitationId": "e"}}})
		case "two":
			ask(map[string]any{"a": elicit, "b": map[string]any{"method": "sampling/createMessage", "params": map[string]any{"messages": []any{}, "maxTokens": 1}}})
		default:
			ask(map[string]any{"ok": elicit})
		}
		return
	}
	u.executions.Add(1)
	b := testkit.Must(json.Marshal(answers))
	reply(map[string]any{"resultType": "complete", "content": []any{map[string]any{"type": "text", "text": "done " + string(b)}},
		"_meta": map[string]any{metaServer: map[string]any{"name": "up", "version": "9"}, "app/trace": "t1"}})
}

// bridgeFixture is a gateway with a bridge in front of a bridgeUpstream,
// with principals from X-User (loopback trusted), single use for "pay".
func bridgeFixture(t testing.TB, b *Bridge, now func() time.Time) (*bridgeUpstream, string, *Gateway) {
	t.Helper()
	up := &bridgeUpstream{}
	us := httptest.NewServer(up)
	t.Cleanup(us.Close)
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	s := testkit.Must(seal.New(ring, &seal.Options{Now: now}))
	st := testkit.Must(mrtr.New(s, &mrtr.Options{Audience: "https://gw.test", SingleUse: mrtr.Targets("pay"), Replay: replay.NewMemory(0),
		Logger: slog.New(slog.DiscardHandler), Metrics: &mrtr.Counters{}}))
	b.Audience = "https://gw.test"
	g := &Gateway{Upstreams: []*url.URL{testkit.Must(url.Parse(us.URL))}, Bridge: b, MaxRequestBytes: 1 << 20, MaxResponseBytes: 1 << 20, MaxEventBytes: 1 << 20,
		Logger: slog.New(slog.DiscardHandler), Principal: &HeaderPrincipal{Header: "X-User", Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}
	g.SetStates(st)
	gs := httptest.NewServer(g)
	t.Cleanup(gs.Close)
	return up, gs.URL + "/mcp", g
}

// legacyClient speaks 2025-11-25 to the gateway by hand: every byte it
// receives is kept, to check that no requestState ever reaches it.
type legacyClient struct {
	t        testing.TB
	url, who string
	caps     string
	sid      string
	hc       *http.Client // nil: http.DefaultClient
	mu       sync.Mutex
	seen     bytes.Buffer
}

func (c *legacyClient) do(method, body string, hdr map[string]string) (*http.Response, []byte) {
	c.t.Helper()
	req := testkit.Must(http.NewRequest(method, c.url, strings.NewReader(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-User", c.who)
	if c.sid != "" {
		req.Header.Set(headerSession, c.sid)
		req.Header.Set(headerVersion, "2025-11-25")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	hc := c.hc
	if hc == nil {
		hc = http.DefaultClient
	}
	resp := testkit.Must(hc.Do(req))
	b := testkit.Must(io.ReadAll(resp.Body))
	resp.Body.Close()
	c.mu.Lock()
	c.seen.Write(b)
	c.mu.Unlock()
	return resp, b
}

// seenText is every byte the client received so far.
func (c *legacyClient) seenText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen.String()
}

func (c *legacyClient) init() {
	c.t.Helper()
	if c.caps == "" {
		c.caps = `{"elicitation":{"form":{}},"sampling":{}}`
	}
	resp, b := c.do("POST", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+c.caps+`,"clientInfo":{"name":"t","version":"1"}}}`, nil)
	if resp.StatusCode != 200 || resp.Header.Get(headerSession) == "" || !strings.Contains(string(b), `"name":"up"`) {
		c.t.Fatalf("initialize: %d %s", resp.StatusCode, b)
	}
	c.sid = resp.Header.Get(headerSession)
}

// call starts a tools/call and returns its stream's messages as they
// come; the channel closes when the stream ends.
func (c *legacyClient) call(id int, tool string) (<-chan map[string]any, func()) {
	c.t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool)
	req := testkit.Must(http.NewRequest("POST", c.url, strings.NewReader(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-User", c.who)
	req.Header.Set(headerSession, c.sid)
	req.Header.Set(headerVersion, "2025-11-25")
	tr := &http.Transport{}
	resp := testkit.Must((&http.Client{Transport: tr}).Do(req))
	ch := make(chan map[string]any, 64)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			c.mu.Lock()
			c.seen.Write(line)
			c.seen.WriteByte('\n')
			c.mu.Unlock()
			var m map[string]any
			if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok && json.Unmarshal(d, &m) == nil {
				ch <- m
			} else if len(line) > 0 && line[0] == '{' && json.Unmarshal(line, &m) == nil {
				ch <- m
			}
		}
	}()
	return ch, func() { resp.Body.Close(); tr.CloseIdleConnections() }
}

func (c *legacyClient) answer(id any, result string) (int, string) {
	b := testkit.Must(json.Marshal(id))
	resp, body := c.do("POST", `{"jsonrpc":"2.0","id":`+string(b)+`,"result":`+result+`}`, nil)
	return resp.StatusCode, string(body)
}

func next(t *testing.T, ch <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("nothing on the stream in 10 s")
	}
	return nil
}

// TestBridgeFlow: a 2025-11-25 client initializes (the upstream's info,
// asked with server/discover), calls a tool that needs two inputs,
// answers both on the call's stream, and gets the result; the upstream
// got 2026-07-28 requests with the client's capabilities in _meta, and
// executed once; the client never saw a requestState.
func TestBridgeFlow(t *testing.T) {
	up, u, _ := bridgeFixture(t, &Bridge{}, nil)
	c := &legacyClient{t: t, url: u, who: "alice"}
	c.init()
	if resp, b := c.do("POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); resp.StatusCode != 202 {
		t.Fatalf("initialized: %d %s", resp.StatusCode, b)
	}
	if resp, b := c.do("POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil); resp.StatusCode != 200 || !strings.Contains(string(b), `"result":{}`) {
		t.Fatalf("ping: %d %s", resp.StatusCode, b)
	}
	if resp, _ := c.do("GET", "", nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d, want 405", resp.StatusCode)
	}
	ch, _ := c.call(2, "two")
	reqs := map[string]map[string]any{}
	for range 2 {
		m := next(t, ch)
		reqs[m["method"].(string)] = m
	}
	if code, b := c.answer(reqs["elicitation/create"]["id"], `{"action":"accept","content":{"ok":true}}`); code != 202 {
		t.Fatalf("answer: %d %s", code, b)
	}
	if code, b := c.answer(reqs["sampling/createMessage"]["id"], `{"role":"assistant","model":"m","content":{"type":"text","text":"hi"}}`); code != 202 {
		t.Fatalf("answer: %d %s", code, b)
	}
	final := next(t, ch)
	if final["id"] != float64(2) || !strings.Contains(fmt.Sprint(final["result"]), `done {"a":{"action":"accept"`) {
		t.Fatalf("final: %v", final)
	}
	if _, ok := final["result"].(map[string]any)["resultType"]; ok {
		t.Fatalf("resultType reached a 2025 client: %v", final)
	}
	if m, _ := final["result"].(map[string]any)["_meta"].(map[string]any); m["app/trace"] != "t1" || m[metaServer] != nil {
		t.Fatalf("the result's _meta: %v; want the upstream's own keys, without 2026-07-28's serverInfo", m)
	}
	for range ch {
		// the stream's end: every byte of it is in seen
	}
	if n := up.executions.Load(); n != 1 {
		t.Fatalf("%d executions, want 1", n)
	}
	up.mu.Lock()
	last := up.got[len(up.got)-1]
	up.mu.Unlock()
	meta := last["params"].(map[string]any)["_meta"].(map[string]any)
	if meta[metaVersion] != version2026 || meta[metaCaps] == nil {
		t.Fatalf("the upstream's _meta: %v", meta)
	}
	if strings.Contains(c.seenText(), "requestState") || strings.Contains(c.seenText(), "plain:") {
		t.Fatalf("a 2025 client saw a requestState: %s", c.seenText())
	}
}

// TestBridgeSessions: a missing id is 400, a forged one, another
// principal's and an expired one 404 (the client initializes again); a
// DELETE is 405 (sessions end at expiry) and ends the calls it holds.
func TestBridgeSessions(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	_, u, _ := bridgeFixture(t, &Bridge{SessionTTL: time.Minute}, clock)
	c := &legacyClient{t: t, url: u, who: "alice"}
	c.init()
	good := c.sid
	c.sid = ""
	if resp, _ := c.do("POST", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil); resp.StatusCode != 400 {
		t.Fatalf("no session: %d, want 400", resp.StatusCode)
	}
	for name, sid := range map[string]string{"forged": flip(good), "truncated": good[:len(good)-1], "padded": good + "A"} {
		c.sid = sid
		if resp, b := c.do("POST", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil); resp.StatusCode != 404 {
			t.Errorf("%s session: %d %s, want 404", name, resp.StatusCode, b)
		}
	}
	c.sid = good
	bob := &legacyClient{t: t, url: u, who: "bob", sid: good}
	if resp, _ := bob.do("POST", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil); resp.StatusCode != 404 {
		t.Fatalf("alice's session as bob: %d, want 404", resp.StatusCode)
	}
	if resp, b := c.do("POST", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil); resp.StatusCode != 200 {
		t.Fatalf("the session itself: %d %s", resp.StatusCode, b)
	}
	ch, _ := c.call(2, "pay")
	next(t, ch)
	if resp, _ := c.do("DELETE", "", nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE: %d, want 405", resp.StatusCode)
	}
	if m, ok := <-ch; ok {
		t.Fatalf("the call went on after DELETE: %v", m)
	}
	now.Add(int64(2 * time.Minute)) // past the minute and the keyset's skew
	if resp, _ := c.do("POST", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil); resp.StatusCode != 404 {
		t.Fatalf("an expired session: %d, want 404", resp.StatusCode)
	}
}

// TestBridgeAnswers: an answer is taken only for an input request the
// gateway issued, from the call's session and principal, once. Another
// user's answer to alice's request changes nothing (403), a repeat is
// 404, and the single-use tool runs once.
func TestBridgeAnswers(t *testing.T) {
	up, u, g := bridgeFixture(t, &Bridge{}, nil)
	alice := &legacyClient{t: t, url: u, who: "alice"}
	alice.init()
	bob := &legacyClient{t: t, url: u, who: "bob"}
	bob.init()
	other := &legacyClient{t: t, url: u, who: "alice"} // alice's second session
	other.init()
	ch, _ := alice.call(1, "pay")
	q := next(t, ch)
	id := q["id"].(string)
	if code, b := bob.answer(id, `{"action":"accept","content":{}}`); code != 403 {
		t.Fatalf("bob answering alice's request: %d %s, want 403", code, b)
	}
	if code, b := other.answer(id, `{"action":"accept","content":{}}`); code != 403 {
		t.Fatalf("alice's other session answering: %d %s, want 403", code, b)
	}
	if code, _ := alice.answer(id+"0", `{"action":"accept","content":{}}`); code != 404 {
		t.Fatalf("an id the gateway never issued: %d, want 404", code)
	}
	if code, _ := alice.answer(id, `"not an object"`); code != 400 {
		t.Fatalf("a result that is not an object: %d, want 400", code)
	}
	if code, b := alice.answer(id, `{"action":"accept","content":{"ok":true}}`); code != 202 {
		t.Fatalf("alice's answer: %d %s", code, b)
	}
	if m := next(t, ch); m["result"] == nil {
		t.Fatalf("final: %v", m)
	}
	if code, _ := alice.answer(id, `{"action":"accept","content":{"ok":true}}`); code != 404 {
		t.Fatalf("the answer again: %d, want 404", code)
	}
	if n := up.executions.Load(); n != 1 {
		t.Fatalf("%d executions, want 1", n)
	}
	if n := g.Bridge.Pending(); n != 0 {
		t.Fatalf("%d pending after the call", n)
	}
}

// TestBridgeEnds: a call ends with nothing more upstream when the client
// cancels it, leaves, or does not answer in time; an upstream that asks
// forever is cut at MaxRounds; one that asks too much at once, or for
// what the client did not declare, ends the call at once.
func TestBridgeEnds(t *testing.T) {
	up, u, g := bridgeFixture(t, &Bridge{AnswerTimeout: 300 * time.Millisecond, MaxRounds: 3}, nil)
	c := &legacyClient{t: t, url: u, who: "alice", caps: `{"elicitation":{}}`}
	c.init()
	before := up.requests.Load()
	// Cancelled.
	ch, _ := c.call(1, "pay")
	next(t, ch)
	c.do("POST", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, nil)
	if m, ok := <-ch; ok {
		t.Fatalf("a cancelled call answered: %v", m)
	}
	// Left (a reconnect: the stream cut, then the answer on a new
	// connection): the call ended with its stream, and its answer is
	// refused.
	ch, cut := c.call(2, "pay")
	left := next(t, ch)
	cut()
	waitFor(t, "the call's end", func() bool { return g.Bridge.Pending() == 0 })
	if code, _ := c.answer(left["id"], `{"action":"accept","content":{"ok":true}}`); code != 404 {
		t.Fatalf("an answer after the client left: %d, want 404", code)
	}
	// Timed out.
	ch, _ = c.call(3, "pay")
	q := next(t, ch)
	if m := next(t, ch); !strings.Contains(fmt.Sprint(m["error"]), "did not answer within") {
		t.Fatalf("timeout: %v", m)
	}
	if code, _ := c.answer(q["id"], `{"action":"accept","content":{"ok":true}}`); code != 404 {
		t.Fatalf("an answer after the timeout: %d, want 404", code)
	}
	if got := up.requests.Load() - before; got != 3 || up.executions.Load() != 0 {
		t.Fatalf("%d upstream requests and %d executions, want 3 first rounds and none", got, up.executions.Load())
	}
	for tool, want := range map[string]string{"many": "inputs at once", "roots": "declared no roots", "url": "declared no elicitation.url"} {
		ch, _ := c.call(4, tool)
		if m := next(t, ch); !strings.Contains(fmt.Sprint(m["error"]), want) {
			t.Errorf("%s: %v, want an error saying %q", tool, m, want)
		}
	}
	// Forever: answered rounds up to the bound, then cut.
	before = up.requests.Load()
	ch, _ = c.call(5, "forever")
	for {
		m := next(t, ch)
		if m["error"] != nil {
			if !strings.Contains(fmt.Sprint(m["error"]), "the bound is 3") {
				t.Fatalf("forever: %v", m)
			}
			break
		}
		c.answer(m["id"], `{"action":"accept","content":{}}`)
	}
	if got := up.requests.Load() - before; got != 4 {
		t.Fatalf("forever: %d upstream requests, want 4 (the first and 3 retries)", got)
	}
	if strings.Contains(c.seenText(), "requestState") {
		t.Fatal("a 2025 client saw a requestState")
	}
}

// TestBridgeBounds: past MaxPendingPerPrincipal, or MaxPending, a call
// that needs input is refused 503 before any input request goes out;
// another principal still gets through below the overall bound.
func TestBridgeBounds(t *testing.T) {
	_, u, g := bridgeFixture(t, &Bridge{MaxPending: 3, MaxPendingPerPrincipal: 2}, nil)
	alice := &legacyClient{t: t, url: u, who: "alice"}
	alice.init()
	bob := &legacyClient{t: t, url: u, who: "bob"}
	bob.init()
	carol := &legacyClient{t: t, url: u, who: "carol"}
	carol.init()
	var cuts []func()
	t.Cleanup(func() {
		for _, cut := range cuts {
			cut() // the calls end with their clients, not at the answer timeout
		}
	})
	for i := range 2 {
		ch, cut := alice.call(i, "pay")
		cuts = append(cuts, cut)
		next(t, ch)
	}
	ch, _ := alice.call(9, "pay")
	if m := next(t, ch); !strings.Contains(fmt.Sprint(m["error"]), "too many calls") {
		t.Fatalf("alice's third: %v", m)
	}
	ch, cut := bob.call(1, "pay")
	cuts = append(cuts, cut)
	next(t, ch)
	if n := g.Bridge.Pending(); n != 3 {
		t.Fatalf("%d pending, want 3", n)
	}
	ch, _ = carol.call(1, "pay")
	if m := next(t, ch); !strings.Contains(fmt.Sprint(m["error"]), "too many calls") {
		t.Fatalf("carol past the overall bound: %v", m)
	}
}

// TestBridgeStrict: what the attack review found loose. A legacy client
// never gets a requestState, even from a final result that carries one,
// and an input_required spelled with an escape is carried out, not
// passed on; an elicitation of an unknown mode is not sent; ids that
// are not strings or integers, and an id already in progress in the
// session, are refused.
func TestBridgeStrict(t *testing.T) {
	up, u, _ := bridgeFixture(t, &Bridge{}, nil)
	c := &legacyClient{t: t, url: u, who: "alice", caps: `{"elicitation":{"form":{}}}`}
	c.init()
	ch, _ := c.call(1, "leak")
	if m := next(t, ch); m["result"] == nil {
		t.Fatalf("leak: %v", m)
	}
	ch, _ = c.call(2, "escaped")
	q := next(t, ch)
	if q["method"] != "elicitation/create" {
		t.Fatalf("an escaped input_required was not carried out: %v", q)
	}
	c.answer(q["id"], `{"action":"accept","content":{}}`)
	if m := next(t, ch); m["result"] == nil {
		t.Fatalf("escaped: %v", m)
	}
	ch, _ = c.call(3, "mode")
	if m := next(t, ch); !strings.Contains(fmt.Sprint(m["error"]), "mode") {
		t.Fatalf("an elicitation of mode URL: %v", m)
	}
	for _, id := range []string{"null", "{}", "[1]", "true", "1e400", "1.5", "123456789012345678901"} {
		if resp, b := c.do("POST", `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/list"}`, nil); resp.StatusCode != 400 {
			t.Errorf("id %s: %d %s, want 400", id, resp.StatusCode, b)
		}
	}
	first, cut := c.call(7, "pay")
	defer cut()
	next(t, first)
	dup, _ := c.call(7, "pay")
	if m := next(t, dup); !strings.Contains(fmt.Sprint(m["error"]), "already in progress") {
		t.Fatalf("a second call with an id in progress: %v", m)
	}
	if s := c.seenText(); strings.Contains(s, "requestState") || strings.Contains(s, "plain:") {
		t.Fatalf("a 2025 client saw a requestState: %s", s)
	}
	if up.executions.Load() != 1 {
		t.Fatalf("%d executions, want 1 (escaped)", up.executions.Load())
	}
}
