package mcpgo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mcpgo"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/seal"
)

const secretState = `{"cart":"c-4711","step":"confirm"}`

type fixture struct {
	url     string
	metrics *mrtr.Counters
	mu      sync.Mutex
	now     time.Time
	ran     int // handler runs that received a state
}

func (f *fixture) clock() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }

func newFixture(t *testing.T) *fixture {
	f := &fixture{metrics: &mrtr.Counters{}, now: time.Now()}
	ring := testkit.Must(keyring.Generate(keyring.MAC))
	s, err := seal.New(ring, &seal.Options{Now: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	a, err := mcpgo.New(s, &mcpgo.Options{
		Options:   mrtr.Options{Audience: "test", DefaultTTL: time.Minute, Metrics: f.metrics},
		Principal: func(_ context.Context, h http.Header) string { return h.Get("X-Test-User") },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewMCPServer("fixture", "1.0.0", append(a.ServerOptions(), server.WithToolCapabilities(true), server.WithPromptCapabilities(true))...)
	confirm := func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.RequestState != "" {
			f.mu.Lock()
			f.ran++
			f.mu.Unlock()
		}
		if req.Params.RequestState == secretState {
			return mcp.NewToolResultText("done " + secretState), nil
		}
		return server.NewInputRequestBuilder(secretState).
			Elicit("confirm", mcp.ElicitationParams{Mode: mcp.ElicitationModeForm, Message: "Sure?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}}).
			ToolResult(), nil
	}
	srv.AddTool(mcp.NewTool("book", mcp.WithString("flight")), confirm)
	srv.AddTool(mcp.NewTool("cancel", mcp.WithString("flight")), confirm)
	srv.AddPrompt(mcp.NewPrompt("context"), func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		if req.Params.RequestState == "prompt-state" {
			return mcp.NewGetPromptResult("done", []mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("ok"))}), nil
		}
		return server.NewInputRequestBuilder("prompt-state").
			Elicit("user_context", mcp.ElicitationParams{Mode: mcp.ElicitationModeForm, Message: "Context?",
				RequestedSchema: map[string]any{"type": "object"}}).
			PromptResult(), nil
	})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(srv))
	t.Cleanup(ts.Close)
	f.url = ts.URL
	return f
}

// peer is a 2026-07-28 client that drives the rounds itself: mcp-go's
// client answers input requests on its own, so the tests send requests
// through its transport.
type peer struct {
	tr *transport.StreamableHTTP
	id int64
}

func connect(t *testing.T, url, user string) *peer {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"X-Test-User": user}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var init mcp.InitializeRequest
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatal(err)
	}
	if c.ProtocolVersion() != mcp.ProtocolVersion20260728 {
		t.Fatalf("negotiated %s", c.ProtocolVersion())
	}
	return &peer{tr: tr}
}

// send sends one request and decodes its result into out, or returns the
// JSON-RPC error as an error.
func (p *peer) send(method string, params map[string]any, out any) error {
	p.id++
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    mcp.ProtocolVersion20260728,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
	}
	name, _ := params["name"].(string)
	if uri, ok := params["uri"].(string); ok {
		name = uri
	}
	h := http.Header{mcp.HeaderMethod: {method}, mcp.HeaderName: {name}}
	resp, err := p.tr.SendRequest(context.Background(), transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(p.id), Method: method, Params: params, Header: h})
	if err != nil {
		return err
	}
	if resp.Error != nil {
		return fmt.Errorf("JSON-RPC %d: %s", resp.Error.Code, resp.Error.Message)
	}
	return json.Unmarshal(resp.Result, out)
}

var accept = map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}

func call(p *peer, tool, state string, args map[string]any) (*mcp.CallToolResult, error) {
	params := map[string]any{"name": tool, "arguments": args}
	if state != "" {
		params["requestState"] = state
		params["inputResponses"] = accept
	}
	var res mcp.CallToolResult
	if err := p.send("tools/call", params, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func TestToolRoundTripAndAttacks(t *testing.T) {
	f := newFixture(t)
	alice, mallory := connect(t, f.url, "alice"), connect(t, f.url, "mallory")
	args := map[string]any{"flight": "LH123"}
	res, err := call(alice, "book", "", args)
	if err != nil || !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("first round: %v %+v", err, res)
	}
	state := res.RequestState
	// MAC tokens carry the state readably (that is the MAC contract), but
	// nobody can change it: the attacks below all fail.
	mid := len(state) / 2
	changed := state[:mid] + map[bool]string{true: "B", false: "A"}[state[mid] == 'A'] + state[mid+1:]
	for _, tc := range []struct {
		name string
		c    *peer
		tool string
		args map[string]any
		tok  string
	}{
		{"another tool", alice, "cancel", args, state},
		{"another user", mallory, "book", args, state},
		{"changed arguments", alice, "book", map[string]any{"flight": "LH999"}, state},
		{"one character changed", alice, "book", args, changed},
		{"plaintext", alice, "book", args, secretState},
	} {
		_, err := call(tc.c, tc.tool, tc.tok, tc.args)
		if err == nil || err.Error() != "JSON-RPC -32603: invalid requestState: invalid" {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if f.ran != 0 {
		t.Fatalf("the handler ran %d times with a rejected state", f.ran)
	}
	res, err = call(alice, "book", state, args)
	if err != nil || res.NeedsInput() || res.Content[0].(mcp.TextContent).Text != "done "+secretState {
		t.Fatalf("own state: %v %+v", err, res)
	}
	f.mu.Lock()
	f.now = f.now.Add(2 * time.Minute)
	f.mu.Unlock()
	if _, err := call(alice, "book", state, args); err == nil || !strings.HasSuffix(err.Error(), "invalid requestState: expired") {
		t.Fatalf("expired: %v", err)
	}
	v := f.metrics.Values()
	if v.Sealed != 1 || v.Opened != 1 || v.Rejected["invalid"] != 5 || v.Rejected["expired"] != 1 {
		t.Fatalf("metrics %+v", v)
	}
}

// promptResult is the part of a prompts/get result the test reads.
type promptResult struct {
	ResultType   string `json:"resultType"`
	RequestState string `json:"requestState"`
	Description  string `json:"description"`
}

func TestPrompt(t *testing.T) {
	f := newFixture(t)
	p := connect(t, f.url, "alice")
	var res promptResult
	if err := p.send("prompts/get", map[string]any{"name": "context"}, &res); err != nil || res.ResultType != "input_required" || res.RequestState == "" || res.RequestState == "prompt-state" {
		t.Fatalf("first round: %v %+v", err, res)
	}
	retry := func(args map[string]string) (promptResult, error) {
		var out promptResult
		err := p.send("prompts/get", map[string]any{"name": "context", "arguments": args, "requestState": res.RequestState,
			"inputResponses": map[string]any{"user_context": accept["confirm"]}}, &out)
		return out, err
	}
	if out, err := retry(nil); err != nil || out.ResultType == "input_required" || out.Description != "done" {
		t.Fatalf("retry: %v %+v", err, out)
	}
	if _, err := retry(map[string]string{"extra": "x"}); err == nil || !strings.Contains(err.Error(), "invalid requestState") {
		t.Fatalf("changed arguments: %v", err)
	}
}

// TestNoPrincipal: without Options.Principal (and without AllowAnonymous)
// a request carries no state, so a server that forgot to bind its users
// fails loudly: the first round of an input_required is -32603 "cannot
// seal requestState", the plaintext never reaches the client, and the log
// says why.
func TestNoPrincipal(t *testing.T) {
	var log bytes.Buffer
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	s := testkit.Must(seal.New(ring, nil))
	a, err := mcpgo.New(s, &mcpgo.Options{Options: mrtr.Options{Audience: "test", Logger: slog.New(slog.NewTextHandler(&log, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewMCPServer("f", "1.0.0", append(a.ServerOptions(), server.WithToolCapabilities(false))...)
	srv.AddTool(mcp.NewTool("book"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return server.NewInputRequestBuilder(secretState).
			Elicit("confirm", mcp.ElicitationParams{Mode: mcp.ElicitationModeForm, Message: "Sure?", RequestedSchema: map[string]any{"type": "object"}}).
			ToolResult(), nil
	})
	msg := testkit.Must(json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "book", "_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    mcp.ProtocolVersion20260728,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
	}}}))
	out := testkit.Must(json.Marshal(srv.HandleMessage(context.Background(), msg)))
	var resp struct {
		Error *struct {
			Code    int
			Message string
		}
	}
	testkit.Check(json.Unmarshal(out, &resp))
	if resp.Error == nil || resp.Error.Code != -32603 || resp.Error.Message != "cannot seal requestState" {
		t.Fatalf("got %s", out)
	}
	if strings.Contains(string(out), "c-4711") {
		t.Fatal("the plaintext state reached the client")
	}
	if l := log.String(); !strings.Contains(l, "cannot seal requestState") || !strings.Contains(l, "no principal") {
		t.Fatalf("log: %q", l)
	}
}
