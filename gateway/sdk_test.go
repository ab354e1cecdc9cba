package gateway

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os/exec"
	"regexp"
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

const exampleServer = "github.com/stateseal/stateseal/examples/mcpserver"

// startExample starts examples/mcpserver with its own sealing off
// (-no-seal) and returns its base URL: a go-sdk server that trusts
// whatever requestState it gets, as a server without protection does.
func startExample(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(testkit.Build(t, exampleServer), "-no-seal", "-addr", "127.0.0.1:0")
	stderr := testkit.Must(cmd.StderrPipe())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	re := regexp.MustCompile(`MCP server at (http://\S+)/mcp`)
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, stderr)
			return m[1]
		}
	}
	t.Fatal("the example server did not start")
	return ""
}

// headerTransport adds a principal header to every request.
type headerTransport struct{ user string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-User", h.user)
	return http.DefaultTransport.RoundTrip(r)
}

// sdkGateway starts a gateway in front of the example server, binding
// states to the X-User header, with single use for one tool.
func sdkGateway(t *testing.T) (*fixture, *mrtr.Counters) {
	t.Helper()
	base := startExample(t)
	u := testkit.Must(url.Parse(base))
	counters := &mrtr.Counters{}
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	o := &mrtr.Options{Audience: "https://gw.test", Metrics: counters,
		SingleUse: mrtr.Targets("test_input_required_result_tampered_state"), Replay: replay.NewMemory(0)}
	st, err := newStates(ring, o)
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{Upstreams: []*url.URL{u}, BindSession: true, MaxRequestBytes: 1 << 20, MaxResponseBytes: 1 << 20, MaxEventBytes: 1 << 20,
		IdleTimeout: time.Minute, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Principal: &HeaderPrincipal{Header: "X-User", Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}
	g.SetStates(st)
	gs := httptest.NewServer(g)
	t.Cleanup(gs.Close)
	return &fixture{t: t, gw: g, url: gs.URL + "/mcp", ring: ring, o: o}, counters
}

// TestGoSDKBehindGateway: the go-sdk client runs every fixture of the
// example server (sealing off) through the gateway; the states it echoes
// are the gateway's tokens.
func TestGoSDKBehindGateway(t *testing.T) {
	f, counters := sdkGateway(t)
	gatewaytest.RunFixtures(t, f.url, &http.Client{Transport: headerTransport{"alice"}})
	v := counters.Values()
	if v.Sealed < 5 || v.Opened < 5 || len(v.Rejected) != 0 {
		t.Fatalf("counters %+v: the states did not go through the gateway", v)
	}
}

// TestGoSDKClientAt2025: the go-sdk client pinned to 2025-11-25 (and
// 2025-06-18) runs every fixture of the stateless example server
// through a gateway with a bridge: it initializes, and each input
// request reaches it as the server's own request on the call's stream.
// The gateway still seals and opens every state (counted).
func TestGoSDKClientAt2025(t *testing.T) {
	f, counters := sdkGateway(t)
	f.gw.Bridge = &Bridge{Audience: "https://gw.test"}
	for _, v := range []string{"2025-11-25", "2025-06-18"} {
		cs := gatewaytest.RunFixturesAt(t, f.url, &http.Client{Transport: headerTransport{"alice"}}, v)
		if got := cs.InitializeResult().ProtocolVersion; got != v {
			t.Fatalf("negotiated %s, want %s", got, v)
		}
	}
	if v := counters.Values(); v.Sealed < 10 || v.Opened < 10 || len(v.Rejected) != 0 {
		t.Fatalf("counters %+v: the states did not go through the gateway", v)
	}
}

// sdkCall is a tools/call as a 2026-07-28 client sends it to a go-sdk
// server: the protocol version, client info and capabilities in _meta,
// the method and name in headers.
func sdkCall(f *fixture, id int, tool, user string, args map[string]any, state string) (int, map[string]any) {
	msg := rpcCall(id, mrtr.MethodCallTool, tool, args, state)
	p := msg["params"].(map[string]any)
	p["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    version2026,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "attacker", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
	}
	if state != "" {
		p["inputResponses"] = map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}
	}
	return f.post(msg, map[string]string{headerVersion: version2026, "Mcp-Method": mrtr.MethodCallTool, "Mcp-Name": tool, "X-User": user})
}

// TestAttacksThroughGateway: the attack categories against the go-sdk
// example server without its own sealing, through the gateway: every one
// refused, and the valid flow still completes.
func TestAttacksThroughGateway(t *testing.T) {
	f, counters := sdkGateway(t)
	const tool, single = "test_input_required_result_request_state", "test_input_required_result_tampered_state"
	args := map[string]any{"order": 1}
	first := func(tool string) string {
		_, m := sdkCall(f, 1, tool, "alice", args, "")
		tok, _ := resultOf(t, m)["requestState"].(string)
		if tok == "" || strings.Contains(tok, "confirm") {
			t.Fatalf("first round: %v", m)
		}
		return tok
	}
	tok, singleTok := first(tool), first(single)
	expired := func() string {
		s := testkit.Must(seal.New(f.ring, &seal.Options{Now: func() time.Time { return time.Now().Add(-time.Hour) }}))
		st := testkit.Must(mrtr.New(s, f.o))
		tk, err := st.Seal(mrtr.Request{Method: mrtr.MethodCallTool, Target: tool, Principal: "alice", Arguments: []byte(`{"order":1}`)}, `{"step":"confirm","fixture":"v1"}`)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}()
	attacks := []struct {
		name, tool, user string
		args             map[string]any
		state, reason    string
	}{
		{"moved to another tool", "test_input_required_result_elicitation", "alice", args, tok, "invalid"},
		{"moved to another principal", tool, "mallory", args, tok, "invalid"},
		{"moved to other arguments", tool, "alice", map[string]any{"order": 2}, tok, "invalid"},
		{"tampered", tool, "alice", args, tok[:10] + flip(tok[10:11]) + tok[11:], "invalid"},
		{"tampered (suffix)", tool, "alice", args, tok + "-TAMPERED", "invalid"},
		{"truncated", tool, "alice", args, tok[:len(tok)-4], "invalid"},
		{"expired", tool, "alice", args, expired, "expired"},
	}
	refusedN := 0
	for _, a := range attacks {
		status, m := sdkCall(f, 2, a.tool, a.user, a.args, a.state)
		refused(t, status, m, http.StatusBadRequest, a.reason)
		refusedN++
	}
	// Single use: the first use completes, the replay is refused.
	_, m := sdkCall(f, 3, single, "alice", args, singleTok)
	if !strings.Contains(fmt.Sprint(m["result"]), "state-ok") {
		t.Fatalf("single-use first use: %v", m)
	}
	status, m := sdkCall(f, 4, single, "alice", args, singleTok)
	refused(t, status, m, http.StatusBadRequest, "replayed")
	refusedN++
	// The valid flow completes after all that.
	_, m = sdkCall(f, 5, tool, "alice", args, tok)
	if !strings.Contains(fmt.Sprint(m["result"]), "state-ok") {
		t.Fatalf("valid retry: %v", m)
	}
	v := counters.Values()
	if v.Rejected["invalid"]+v.Rejected["expired"]+v.Rejected["replayed"] != refusedN {
		t.Fatalf("counters %+v, want %d refusals", v, refusedN)
	}
	t.Logf("attacks through the gateway: %d tried, %d refused, 0 accepted", refusedN, refusedN)
}
