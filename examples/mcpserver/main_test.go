package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/gateway/gatewaytest"
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
	cs := gatewaytest.RunFixtures(t, ts.URL+"/mcp", nil)
	// The client declared sampling (it has a handler), so this runs.
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "test_missing_capability"}); err != nil {
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
