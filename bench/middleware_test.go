package bench

import (
	"context"
	"encoding/json"
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
		s, _ := seal.New(ring, nil)
		a, err := mcpsdk.New(s, &mcpsdk.Options{Options: mrtr.Options{Audience: "bench", AllowAnonymous: true, Metrics: nopMetrics{}}})
		if err != nil {
			b.Fatal(err)
		}
		server.AddReceivingMiddleware(a.Middleware())
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

// BenchmarkMiddlewareDirect is BenchmarkMiddleware without the transport:
// the same two rounds call the server's method handler, wrapped or not,
// directly, so that the difference is the middleware alone and not lost in
// the noise of a millisecond of JSON-RPC. Target: sealed minus plain at
// most 5 µs and 10 allocations.
func BenchmarkMiddlewareDirect(b *testing.B) {
	b.Run("plain", func(b *testing.B) { middlewareDirect(b, false) })
	b.Run("sealed", func(b *testing.B) { middlewareDirect(b, true) })
}

func middlewareDirect(b *testing.B, sealed bool) {
	ctx := context.Background()
	plain := string(state)
	handler := mcp.MethodHandler(func(_ context.Context, _ string, req mcp.Request) (mcp.Result, error) {
		if req.(*mcp.CallToolRequest).Params.RequestState == plain {
			return &mcp.CallToolResult{}, nil
		}
		return &mcp.CallToolResult{RequestState: plain}, nil
	})
	if sealed {
		ring, _ := keyring.Generate(keyring.AEAD)
		s, _ := seal.New(ring, nil)
		a, err := mcpsdk.New(s, &mcpsdk.Options{Options: mrtr.Options{Audience: "bench", Metrics: nopMetrics{}},
			Principal: func(context.Context, mcp.Request) string { return "alice" }})
		if err != nil {
			b.Fatal(err)
		}
		handler = a.Middleware()(handler)
	}
	args := json.RawMessage(`{"from":"BER","to":"LIS"}`)
	b.ReportAllocs()
	for b.Loop() {
		first := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "book_flight", Arguments: args}}
		res, err := handler(ctx, "tools/call", first)
		if err != nil {
			b.Fatal(err)
		}
		retry := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "book_flight", Arguments: args, RequestState: res.(*mcp.CallToolResult).RequestState}}
		if res, err = handler(ctx, "tools/call", retry); err != nil || res.(*mcp.CallToolResult).RequestState != "" {
			b.Fatalf("retry: %v", err)
		}
	}
}
