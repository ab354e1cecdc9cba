package mcpsdk_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestLegacyClient: a client on 2025-11-25 knows nothing of input_required.
// The SDK's bridge asks it by elicitation and calls the handler again
// in-process, so the call completes and the state, sealed or not, never
// crosses the wire.
func TestLegacyClient(t *testing.T) {
	f := newFixture(t)
	st, ct := mcp.NewInMemoryTransports()
	wire := new(lockedBuffer)
	ss, err := f.server.Connect(ctx, &mcp.LoggingTransport{Transport: st, Writer: wire}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	c := mcp.NewClient(&mcp.Implementation{Name: "legacy", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
		},
	})
	cs, err := c.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("negotiated %s", v)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "book"})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "done "+secretState {
		t.Fatalf("result %q", got)
	}
	log := wire.String()
	if !strings.Contains(log, "elicitation/create") {
		t.Fatalf("the bridge did not ask the client:\n%s", log)
	}
	// The final result quotes the state on purpose; before it, nothing may.
	before, _, _ := strings.Cut(log, "done ")
	if strings.Contains(before, "c-4711") || strings.Contains(log, "requestState") {
		t.Fatalf("state on the wire:\n%s", log)
	}
	if v := f.metrics.Values(); v.Sealed != 0 || v.Opened != 0 {
		t.Fatalf("the middleware sealed for a legacy client: %+v", v)
	}
}

// lockedBuffer is a bytes.Buffer the transport's goroutines may write while
// the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
