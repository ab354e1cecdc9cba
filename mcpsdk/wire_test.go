package mcpsdk_test

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
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mcpsdk"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/replay"
	"github.com/stateseal/stateseal/seal"
)

// flakyGuard is a replay guard that cannot tell while down is set.
type flakyGuard struct {
	replay.Guard
	down atomic.Bool
}

func (g *flakyGuard) Use(ctx context.Context, id []byte, issued, exp time.Time) error {
	if g.down.Load() {
		return fmt.Errorf("%w: test guard down", replay.ErrUnavailable)
	}
	return g.Guard.Use(ctx, id, issued, exp)
}

// wireServer is a stateless go-sdk server behind the SDK's bearer-token
// auth: the bearer token is the user id ("anonymous" has none). "book"
// asks once; "pay" does too, and is single use.
func wireServer(t *testing.T) (url string, clk *clock, guard *flakyGuard) {
	clk = &clock{t: time.Now()}
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	s := testkit.Must(seal.New(ring, &seal.Options{Now: clk.now}))
	guard = &flakyGuard{Guard: replay.NewMemory(0)}
	quiet := slog.New(slog.DiscardHandler)
	a, err := mcpsdk.New(s, &mcpsdk.Options{Options: mrtr.Options{Audience: "https://mcp.example.com",
		SingleUse: mrtr.Targets("pay"), Replay: guard, Metrics: mrtr.SlogMetrics(quiet), Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "wire", Version: "1"}, nil)
	server.AddReceivingMiddleware(a.Middleware())
	ask := func(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		if req.Params.RequestState == "confirmed" {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
		}
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "Sure?", RequestedSchema: confirmSchema()}},
			RequestState:  "confirmed",
		}, nil, nil
	}
	mcp.AddTool(server, &mcp.Tool{Name: "book"}, ask)
	mcp.AddTool(server, &mcp.Tool{Name: "pay"}, ask)
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		user := token
		if token == "anonymous" {
			user = ""
		}
		return &auth.TokenInfo{UserID: user, Expiration: time.Now().Add(time.Hour)}, nil
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	ts := httptest.NewServer(auth.RequireBearerToken(verify, nil)(h))
	t.Cleanup(ts.Close)
	return ts.URL, clk, guard
}

// wireAnswer is one HTTP answer: its status, content type, and the
// JSON-RPC message in it (the one SSE event's data, or the JSON body).
type wireAnswer struct {
	status int
	ctype  string
	msg    struct {
		ID     int `json:"id"`
		Result *struct {
			ResultType    string                     `json:"resultType"`
			RequestState  string                     `json:"requestState"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
		} `json:"result"`
		Error *struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	body string
}

// post sends one tools/call as a client without the Go SDK would: the
// 2026-07-28 headers, the bearer token, and the protocol version in
// params._meta.
func post(t *testing.T, url, user string, id int, tool string, params map[string]any) wireAnswer {
	t.Helper()
	p := map[string]any{"_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
	}, "name": tool}
	for k, v := range params {
		p[k] = v
	}
	body := testkit.Must(json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": p}))
	req := testkit.Must(http.NewRequest("POST", url, bytes.NewReader(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+user)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw := testkit.Must(io.ReadAll(resp.Body))
	a := wireAnswer{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), body: string(raw)}
	data := raw
	if strings.HasPrefix(a.ctype, "text/event-stream") {
		data = nil
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				data = []byte(d)
			}
		}
	}
	if strings.Contains(a.ctype, "json") || strings.HasPrefix(a.ctype, "text/event-stream") {
		if err := json.Unmarshal(data, &a.msg); err != nil {
			t.Fatalf("answer %d %s %q: %v", a.status, a.ctype, raw, err)
		}
	}
	return a
}

// TestWire checks, byte for byte where it matters, what docs/MCP.md
// ("On the wire") tells authors of clients other than the Go SDK's: the
// two rounds, and every failure's HTTP status, JSON-RPC code, message and
// data.reason.
func TestWire(t *testing.T) {
	url, clk, guard := wireServer(t)
	args := map[string]any{"flight": "LH123"}
	answers := map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}

	first := post(t, url, "alice", 1, "book", map[string]any{"arguments": args})
	if first.status != 200 || first.ctype != "text/event-stream" || first.msg.Result == nil ||
		first.msg.Result.ResultType != "input_required" || first.msg.Result.RequestState == "" || first.msg.Result.InputRequests["confirm"] == nil {
		t.Fatalf("first round: %d %s %s", first.status, first.ctype, first.body)
	}
	state := first.msg.Result.RequestState
	if !strings.Contains(string(first.msg.Result.InputRequests["confirm"]), `"method":"elicitation/create"`) {
		t.Fatalf("input request: %s", first.msg.Result.InputRequests["confirm"])
	}
	retry := map[string]any{"arguments": args, "inputResponses": answers, "requestState": state}
	done := post(t, url, "alice", 2, "book", retry)
	if done.status != 200 || done.msg.ID != 2 || done.msg.Result == nil || done.msg.Result.ResultType != "complete" {
		t.Fatalf("retry: %d %s", done.status, done.body)
	}

	// Every refusal of a state: HTTP 400, a JSON body, -32602.
	payFirst := post(t, url, "alice", 3, "pay", nil).msg.Result.RequestState
	payRetry := map[string]any{"inputResponses": answers, "requestState": payFirst}
	if a := post(t, url, "alice", 4, "pay", payRetry); a.status != 200 || a.msg.Result == nil || a.msg.Result.ResultType != "complete" {
		t.Fatalf("single-use first use: %d %s", a.status, a.body)
	}
	rejected := []struct {
		name, user, tool string
		params           map[string]any
		reason           string
	}{
		{"changed token", "alice", "book", map[string]any{"arguments": args, "inputResponses": answers, "requestState": "x" + state[1:]}, "invalid"},
		{"another user", "bob", "book", retry, "invalid"},
		{"other arguments", "alice", "book", map[string]any{"arguments": map[string]any{"flight": "LH124"}, "inputResponses": answers, "requestState": state}, "invalid"},
		{"another tool", "alice", "pay", retry, "invalid"},
		{"single use, again", "alice", "pay", payRetry, "replayed"},
	}
	for i, c := range rejected {
		a := post(t, url, c.user, 10+i, c.tool, c.params)
		want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32602,"message":"invalid requestState: %[2]s","data":{"reason":%[2]q}}}`, 10+i, c.reason)
		if a.status != 400 || a.ctype != "application/json" || a.body != want {
			t.Errorf("%s: %d %s %s\nwant 400 application/json %s", c.name, a.status, a.ctype, a.body, want)
		}
	}
	clk.advance(10*time.Minute + 31*time.Second) // the default TTL and skew
	a := post(t, url, "alice", 20, "book", retry)
	if want := `{"jsonrpc":"2.0","id":20,"error":{"code":-32602,"message":"invalid requestState: expired","data":{"reason":"expired"}}}`; a.status != 400 || a.body != want {
		t.Errorf("expired: %d %s", a.status, a.body)
	}

	// A single-use check that cannot be made, and a state that cannot be
	// sealed, are internal errors: HTTP 200, the error in the event stream.
	payFirst = post(t, url, "alice", 21, "pay", nil).msg.Result.RequestState
	guard.down.Store(true)
	a = post(t, url, "alice", 22, "pay", map[string]any{"inputResponses": answers, "requestState": payFirst})
	guard.down.Store(false)
	if e := a.msg.Error; a.status != 200 || a.ctype != "text/event-stream" || e == nil || e.Code != -32603 ||
		e.Message != "requestState not checked, try again: unavailable" || string(e.Data) != `{"reason":"unavailable"}` {
		t.Errorf("unavailable: %d %s %s", a.status, a.ctype, a.body)
	}
	if a := post(t, url, "alice", 23, "pay", map[string]any{"inputResponses": answers, "requestState": payFirst}); a.msg.Result == nil || a.msg.Result.ResultType != "complete" {
		t.Errorf("retry after unavailable: %d %s", a.status, a.body)
	}
	a = post(t, url, "anonymous", 24, "book", map[string]any{"arguments": args})
	if e := a.msg.Error; a.status != 200 || e == nil || e.Code != -32603 || e.Message != "cannot seal requestState" || e.Data != nil {
		t.Errorf("no principal: %d %s", a.status, a.body)
	}

	// The SDK's own checks, before the middleware: no bearer token, and no
	// protocol version in _meta.
	if a := post(t, url, "", 25, "book", retry); a.status != 401 {
		t.Errorf("no Authorization: %d %s", a.status, a.body)
	}
	headers := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "book", "Authorization": "Bearer alice"}
	send := func(body string, omit string) (int, string) {
		req := testkit.Must(http.NewRequest("POST", url, strings.NewReader(body)))
		for k, v := range headers {
			if k != omit {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw := testkit.Must(io.ReadAll(resp.Body))
		return resp.StatusCode, string(raw)
	}
	if st, body := send(`{"jsonrpc":"2.0","id":26,"method":"tools/call","params":{"name":"book"}}`, ""); st != 400 ||
		!strings.Contains(body, `"code":-32602`) || !strings.Contains(body, "io.modelcontextprotocol/protocolVersion") {
		t.Errorf("no _meta protocol version: %d %s", st, body)
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	if st, body := send(`{"jsonrpc":"2.0","id":27,"method":"tools/call","params":{`+meta+`,"name":"book"}}`, "Mcp-Name"); st != 400 ||
		!strings.Contains(body, `"code":-32020`) || !strings.Contains(body, "Mcp-Name") {
		t.Errorf("no Mcp-Name header: %d %s", st, body)
	}
}
