//lint:file-ignore SA1019 sampling and roots are deprecated in MCP 2026-07-28 (SEP-2577) but still in the protocol, and the input-required fixtures use them.

package gatewaytest

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// RunFixtures connects the go-sdk client to the MCP endpoint (through hc;
// nil: the default client), runs every input-required fixture of
// examples/mcpserver with it (the client answers each input request
// itself: elicitation, sampling, roots) and checks each answer, then
// the prompt's. It returns the session, open until the test ends, for
// the caller's own calls.
func RunFixtures(t *testing.T, endpoint string, hc *http.Client) *mcp.ClientSession {
	t.Helper()
	return RunFixturesAt(t, endpoint, hc, "")
}

// RunFixturesAt is RunFixtures with the client's protocol version
// pinned ("" for the go-sdk's default, 2026-07-28): at 2025-11-25 the
// client initializes, and each input request reaches it as a request of
// the server's.
func RunFixturesAt(t *testing.T, endpoint string, hc *http.Client, version string) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada", "color": "green", "ok": true, "context": "c"}}, nil
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "Hi"}}, nil
		},
	})
	c.AddRoots(&mcp.Root{URI: "file:///r", Name: "r"})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	for tool, want := range map[string]string{
		"test_input_required_result_elicitation":     "Hello, Ada!",
		"test_input_required_result_request_state":   "state-ok",
		"test_input_required_result_tampered_state":  "state-ok",
		"test_input_required_result_multi_round":     "Multi-round complete: Ada likes green",
		"test_input_required_result_sampling":        "Sampling response: Hi",
		"test_input_required_result_list_roots":      "Client exposed 1 root(s): file:///r",
		"test_input_required_result_multiple_inputs": "Hi Ada — 1 root(s) visible",
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", tool, got, want)
		}
	}
	p, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_input_required_result_prompt"})
	if err != nil || p.Messages[0].Content.(*mcp.TextContent).Text != "Context: c" {
		t.Fatalf("prompt: %v %+v", err, p)
	}
	return cs
}
