package bench

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mcpsdk"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/seal"
)

// BenchmarkMiddleware measures what sealing adds to one input-required
// round trip of a tools/call served in process (in-memory transport, go-sdk
// client and server): the first call returns input_required with a 256-byte
// state, the retry sends it back with the answer and completes. /plain is
// the same server without the middleware, its state in the clear.
func BenchmarkMiddleware(b *testing.B) {
	b.Run("plain", func(b *testing.B) { middlewareRoundTrip(b, false) })
	b.Run("sealed", func(b *testing.B) { middlewareRoundTrip(b, true) })
}

func middlewareRoundTrip(b *testing.B, sealed bool) {
	ctx := context.Background()
	server := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	if sealed {
		ring, err := keyring.Generate(keyring.AEAD)
		if err != nil {
			b.Fatal(err)
		}
		s, _ := seal.New(ring)
		mw, err := mcpsdk.Middleware(s, &mcpsdk.Options{Options: mrtr.Options{Metrics: nopMetrics{}}})
		if err != nil {
			b.Fatal(err)
		}
		server.AddReceivingMiddleware(mw)
	}
	plain := string(state)
	mcp.AddTool(server, &mcp.Tool{Name: "book_flight"}, func(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		if req.Params.RequestState == plain {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "booked"}}}, nil, nil
		}
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "Book it?"}},
			RequestState:  plain,
		}, nil, nil
	})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	args := map[string]any{"from": "BER", "to": "LIS"}
	answer := mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept"}}
	b.ReportAllocs()
	for b.Loop() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "book_flight", Arguments: args})
		if err != nil || !res.NeedsInput() {
			b.Fatalf("first call: %v", err)
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "book_flight", Arguments: args, InputResponses: answer, RequestState: res.RequestState})
		if err != nil || res.NeedsInput() {
			b.Fatalf("retry: %v", err)
		}
	}
}

type nopMetrics struct{}

func (nopMetrics) Sealed(string, string)           {}
func (nopMetrics) Opened(string, string)           {}
func (nopMetrics) Rejected(string, string, string) {}
