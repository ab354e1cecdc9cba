package mcpgo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mcpgo"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/mrtr/metricstest"
	"github.com/stateseal/stateseal/seal"
)

// TestBoundedLabels is the attack of the review against mcp-go: a client
// names 1,000 tools that do not exist, and methods of its own, each with
// a long name and a state. Metrics and logs must name them "unknown" in
// both sinks, and log one line a second, not one per request; registered
// targets keep their names.
func TestBoundedLabels(t *testing.T) {
	sinks := metricstest.New(t)
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	s := testkit.Must(seal.New(ring, nil))
	a, err := mcpgo.New(s, &mcpgo.Options{
		Options:   mrtr.Options{Audience: "test", Metrics: sinks},
		Principal: func(_ context.Context, h http.Header) string { return h.Get("X-Test-User") },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewMCPServer("labels", "1.0.0", append(a.ServerOptions(),
		server.WithToolCapabilities(true), server.WithResourceCapabilities(false, false))...)
	srv.AddTool(mcp.NewTool("book", mcp.WithString("flight")), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.RequestState != "" {
			return mcp.NewToolResultText("booked"), nil
		}
		return server.NewInputRequestBuilder("s").
			Elicit("confirm", mcp.ElicitationParams{Mode: mcp.ElicitationModeForm, Message: "Sure?",
				RequestedSchema: map[string]any{"type": "object"}}).
			ToolResult(), nil
	})
	srv.AddResource(mcp.NewResource("file:///a", "a"), func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: "file:///a", Text: "a"}}, nil
	})
	srv.AddResourceTemplate(mcp.NewResourceTemplate("file:///t/{name}", "t"), func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, Text: "t"}}, nil
	})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(srv))
	t.Cleanup(ts.Close)
	p := connect(t, ts.URL, "alice")

	const marker = "EVIL"
	long := strings.Repeat(marker, 1024)
	start := time.Now()
	res, err := call(p, "book", "", nil)
	if err != nil || res.RequestState == "" {
		t.Fatalf("first round: %v", err)
	}
	if _, err := call(p, "book", res.RequestState, nil); err != nil {
		t.Fatal(err)
	}
	var out json.RawMessage
	for i := range 1000 {
		name := fmt.Sprintf("%s-%d", long, i)
		if _, err := call(p, name, "garbage", nil); err == nil {
			t.Fatal("a state for a tool that does not exist was accepted")
		}
		if i%10 == 0 {
			call(p, "book", "garbage", nil)
			p.send("resources/read", map[string]any{"uri": "file:///a", "requestState": "garbage"}, &out)
			p.send("resources/read", map[string]any{"uri": "file:///t/" + name, "requestState": "garbage"}, &out)
			p.send("x/"+name, map[string]any{"name": name, "requestState": "garbage"}, &out)
		}
	}
	elapsed := time.Since(start)
	if v := sinks.Counters.Values(); v.Rejected["invalid"] != 1400 || v.Sealed != 1 || v.Opened != 1 {
		t.Fatalf("counted %+v, want 1,400 rejections, 1 seal, 1 open", v)
	}
	// Keys: tools/call unknown and book, resources/read file:///a and
	// unknown (mcp-go does not say which template matched), a method of
	// the client's as unknown unknown; all "invalid".
	sinks.Check(t, marker, []string{"book", "file:///a", mrtr.Unknown}, 5, elapsed)
}
