//lint:file-ignore SA1019 sampling and roots are deprecated in MCP 2026-07-28 (SEP-2577) but still in the protocol, and the input-required fixtures and their tests exercise them.

package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
)

// TestFixtures drives every fixture with the go-sdk client, which answers
// the input requests itself; conformance/run.sh runs the official suite.
func TestFixtures(t *testing.T) {
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	h, err := newHandler(ring, "test")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
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
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
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
	// The client declared sampling (it has a handler), so this runs.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_missing_capability"}); err != nil {
		t.Fatalf("missing capability with sampling declared: %v", err)
	}
}

func TestMissingCapability(t *testing.T) {
	ring := testkit.Must(keyring.Generate(keyring.MAC))
	h := testkit.Must(newHandler(ring, "test"))
	ts := httptest.NewServer(h)
	defer ts.Close()
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil) // declares no sampling
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "test_missing_capability"})
	// The streamable transport answers -32021 with HTTP 400, which the
	// client reports as a transport error carrying the message.
	if err == nil || !strings.Contains(err.Error(), "client did not declare required capabilities: sampling") || !strings.Contains(err.Error(), "Bad Request") {
		t.Fatalf("got %v", err)
	}
}
