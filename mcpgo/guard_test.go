package mcpgo_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mcpgo"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/replay"
	"github.com/stateseal/stateseal/seal"
)

// guarded is a server with a handler on each path mcp-go has: a typed tool,
// a task tool, a resource and a resource template. Each counts the runs
// that received a requestState.
type guarded struct {
	url                  string
	metrics              *mrtr.Counters
	task, resource, tmpl atomic.Int32
	charged              atomic.Int64 // the amount the typed tool last saw confirmed
}

func newGuarded(t *testing.T) *guarded {
	g := &guarded{metrics: &mrtr.Counters{}}
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	s := testkit.Must(seal.New(ring, nil))
	a, err := mcpgo.New(s, &mcpgo.Options{
		Options: mrtr.Options{Audience: "test", Metrics: g.metrics,
			SingleUse: mrtr.Targets("pay"), Replay: replay.NewMemory(0)},
		Principal: func(_ context.Context, h http.Header) string { return h.Get("X-Test-User") },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewMCPServer("guarded", "1.0.0", append(a.ServerOptions(),
		server.WithToolCapabilities(true), server.WithResourceCapabilities(false, false),
		server.WithTaskCapabilities(true, true, true))...)
	// The typed handler reads its arguments with encoding/json, as
	// BindArguments does: names match case-insensitively, the last wins.
	srv.AddTool(mcp.NewTool("pay", mcp.WithNumber("amount")), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			Amount int64 `json:"amount"`
		}
		if err := req.BindArguments(&args); err != nil {
			return nil, err
		}
		if req.Params.RequestState == "confirmed" {
			g.charged.Store(args.Amount)
			return mcp.NewToolResultText("paid"), nil
		}
		return server.NewInputRequestBuilder("confirmed").
			Elicit("confirm", mcp.ElicitationParams{Mode: mcp.ElicitationModeForm, Message: "Pay?",
				RequestedSchema: map[string]any{"type": "object"}}).
			ToolResult(), nil
	})
	srv.AddTaskTool(mcp.NewTool("export", mcp.WithTaskSupport(mcp.TaskSupportRequired)), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CreateTaskResult, error) {
		if req.Params.RequestState != "" {
			g.task.Add(1)
		}
		return nil, nil
	})
	srv.AddResource(mcp.NewResource("file:///a", "a"), func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		if req.Params.RequestState != "" {
			g.resource.Add(1)
		}
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: "file:///a", Text: "a"}}, nil
	})
	srv.AddResourceTemplate(mcp.NewResourceTemplate("file:///t/{name}", "t"), func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		if req.Params.RequestState != "" {
			g.tmpl.Add(1)
		}
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, Text: "t"}}, nil
	})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(srv))
	t.Cleanup(ts.Close)
	g.url = ts.URL
	return g
}

// TestCaseFoldedArguments is the attack of the hardening issue: a state
// sealed after confirming amount=1 must not open on a retry whose typed
// handler reads 1000. RFC 8785 sorts {"Amount":1000,"amount":1} and
// {"amount":1,"Amount":1000} to one text, while encoding/json keeps the
// last match of each.
func TestCaseFoldedArguments(t *testing.T) {
	g := newGuarded(t)
	p := connect(t, g.url, "alice")
	var res mcp.CallToolResult
	first := json.RawMessage(`{"Amount":1000,"amount":1}`) // the handler reads 1
	err := p.send("tools/call", map[string]any{"name": "pay", "arguments": first}, &res)
	if err == nil || !strings.Contains(err.Error(), "cannot seal requestState") {
		t.Fatalf("ambiguous arguments sealed: %v %+v", err, res)
	}
	// The same flow with arguments read one way seals and completes.
	if err := p.send("tools/call", map[string]any{"name": "pay", "arguments": json.RawMessage(`{"amount":1}`)}, &res); err != nil || res.RequestState == "" {
		t.Fatalf("first round: %v", err)
	}
	retry := json.RawMessage(`{"amount":1,"Amount":1000}`) // the handler would read 1000
	err = p.send("tools/call", map[string]any{"name": "pay", "arguments": retry, "requestState": res.RequestState, "inputResponses": accept}, &res)
	if err == nil || !strings.Contains(err.Error(), "invalid requestState") {
		t.Fatalf("retry with a case-folded duplicate: %v", err)
	}
	if got := g.charged.Load(); got != 0 {
		t.Fatalf("the handler charged %d", got)
	}
	big := json.RawMessage(`{"amount":9007199254740993}`)
	if err := p.send("tools/call", map[string]any{"name": "pay", "arguments": big}, &res); err == nil {
		t.Fatal("a state was sealed over an integer a double cannot hold")
	}
}

func TestNoStateReachesUnguardedPaths(t *testing.T) {
	g := newGuarded(t)
	p := connect(t, g.url, "alice")
	forged := `{"admin":true}`
	var out json.RawMessage
	cases := []struct {
		name   string
		method string
		params map[string]any
		ran    *atomic.Int32
	}{
		{"task tool", "tools/call", map[string]any{"name": "export", "task": map[string]any{}, "requestState": forged}, &g.task},
		{"resource", "resources/read", map[string]any{"uri": "file:///a", "requestState": forged}, &g.resource},
		{"resource template", "resources/read", map[string]any{"uri": "file:///t/x", "requestState": forged}, &g.tmpl},
	}
	for _, c := range cases {
		err := p.send(c.method, c.params, &out)
		if err == nil || !strings.Contains(err.Error(), "invalid requestState") {
			t.Errorf("%s: %v %s", c.name, err, out)
		}
		if n := c.ran.Load(); n != 0 {
			t.Errorf("%s: the handler ran %d times with a forged state", c.name, n)
		}
	}
	// Without a state, each path still works.
	for _, c := range cases {
		delete(c.params, "requestState")
		if err := p.send(c.method, c.params, &out); err != nil {
			t.Errorf("%s without a state: %v", c.name, err)
		}
	}
	if v := g.metrics.Values(); v.Rejected["invalid"] != 3 {
		t.Errorf("rejections counted: %+v", v)
	}
}

// TestSingleUse: mcp-go's adapter refuses a single-use state the second
// time, and the handler runs once.
func TestSingleUse(t *testing.T) {
	g := newGuarded(t)
	p := connect(t, g.url, "alice")
	var res mcp.CallToolResult
	args := json.RawMessage(`{"amount":7}`)
	if err := p.send("tools/call", map[string]any{"name": "pay", "arguments": args}, &res); err != nil || res.RequestState == "" {
		t.Fatalf("first round: %v", err)
	}
	retry := map[string]any{"name": "pay", "arguments": args, "requestState": res.RequestState, "inputResponses": accept}
	var done mcp.CallToolResult
	if err := p.send("tools/call", retry, &done); err != nil || g.charged.Load() != 7 {
		t.Fatalf("second round: %v, charged %d", err, g.charged.Load())
	}
	g.charged.Store(0)
	if err := p.send("tools/call", retry, &done); err == nil || !strings.Contains(err.Error(), "invalid requestState: replayed") {
		t.Fatalf("replay: %v", err)
	}
	if g.charged.Load() != 0 {
		t.Fatal("the handler ran twice on one state")
	}
}
