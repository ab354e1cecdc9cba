package mcpsdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mcpsdk"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/replay"
	"github.com/stateseal/stateseal/seal"
)

// TestSingleUseReplayed: a single-use tool runs once per state; the same
// state sent again is answered -32602 with data.reason "replayed", and
// the handler does not run; after a restart of the server, with the
// in-memory guard, it is answered -32602 "unvouched", and does not run.
func TestSingleUseReplayed(t *testing.T) {
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	sealer := testkit.Must(seal.New(ring, nil))
	paid := 0
	// start starts the server with a guard of its own, as a process does:
	// a restart is a second start.
	start := func() *mcp.ClientSession {
		a, err := mcpsdk.New(sealer, &mcpsdk.Options{Options: mrtr.Options{
			Audience: "test", AllowAnonymous: true,
			SingleUse: mrtr.Targets("pay"), Replay: replay.NewMemory(0),
		}})
		if err != nil {
			t.Fatal(err)
		}
		server := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
		server.AddReceivingMiddleware(a.Middleware())
		mcp.AddTool(server, &mcp.Tool{Name: "pay"}, func(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			if req.Params.RequestState == "confirmed" {
				paid++
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "paid"}}}, nil, nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"ok": &mcp.ElicitParams{Message: "Pay?"}}, RequestState: "confirmed"}, nil, nil
		})
		st, ct := mcp.NewInMemoryTransports()
		ss := testkit.Must(server.Connect(ctx, st, nil))
		t.Cleanup(func() { ss.Close() })
		c := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
		cs := testkit.Must(c.Connect(ctx, ct, nil))
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	refused := func(cs *mcp.ClientSession, retry *mcp.CallToolParams) string {
		t.Helper()
		_, err := cs.CallTool(ctx, retry)
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
			t.Fatalf("replay: %v, want -32602", err)
		}
		var data struct{ Reason string }
		testkit.Check(json.Unmarshal(je.Data, &data))
		return data.Reason
	}
	cs := start()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pay"})
	if err != nil {
		t.Fatal(err)
	}
	retry := &mcp.CallToolParams{Name: "pay", RequestState: res.RequestState,
		InputResponses: mcp.InputResponseMap{"ok": &mcp.ElicitResult{Action: "accept"}}}
	if _, err := cs.CallTool(ctx, retry); err != nil {
		t.Fatal(err)
	}
	if r := refused(cs, retry); r != "replayed" || paid != 1 {
		t.Fatalf("replay: reason %q, paid %d times", r, paid)
	}
	// After a restart the in-memory guard has forgotten the use: the
	// state is refused as unvouched (start again), not run again.
	if r := refused(start(), retry); r != "unvouched" || paid != 1 {
		t.Fatalf("replay after a restart: reason %q, paid %d times", r, paid)
	}
}

// TestSingleUseLargeState: through the middleware, a single-use state
// whose token is over the default 64 KiB bound completes its flow once on
// a sealer configured for such tokens, and its replay is refused.
func TestSingleUseLargeState(t *testing.T) {
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	sealer, err := seal.New(ring, &seal.Options{MaxTokenLen: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	a, err := mcpsdk.New(sealer, &mcpsdk.Options{Options: mrtr.Options{
		Audience: "test", AllowAnonymous: true,
		SingleUse: mrtr.Targets("pay"), Replay: replay.NewMemory(0),
	}})
	if err != nil {
		t.Fatal(err)
	}
	state := strings.Repeat("cart line ", 100<<10/10)
	server := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
	server.AddReceivingMiddleware(a.Middleware())
	paid := 0
	mcp.AddTool(server, &mcp.Tool{Name: "pay"}, func(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		if req.Params.RequestState == state {
			paid++
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "paid"}}}, nil, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"ok": &mcp.ElicitParams{Message: "Pay?"}}, RequestState: state}, nil, nil
	})
	st, ct := mcp.NewInMemoryTransports()
	ss := testkit.Must(server.Connect(ctx, st, nil))
	defer ss.Close()
	c := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	cs := testkit.Must(c.Connect(ctx, ct, nil))
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pay"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.RequestState); n <= seal.DefaultMaxTokenLen {
		t.Fatalf("token of %d characters: not over the default bound", n)
	}
	retry := &mcp.CallToolParams{Name: "pay", RequestState: res.RequestState,
		InputResponses: mcp.InputResponseMap{"ok": &mcp.ElicitResult{Action: "accept"}}}
	if _, err := cs.CallTool(ctx, retry); err != nil || paid != 1 {
		t.Fatalf("first use: %v, paid %d times", err, paid)
	}
	_, err = cs.CallTool(ctx, retry)
	var je *jsonrpc.Error
	if !errors.As(err, &je) || !strings.Contains(string(je.Data), "replayed") || paid != 1 {
		t.Fatalf("replay: %v, paid %d times", err, paid)
	}
}

// TestSingleUseTwoFlowsOneSecond: a user pays twice, with the same
// arguments, in the same second, under a MAC key. Both flows complete;
// replaying either is refused.
func TestSingleUseTwoFlowsOneSecond(t *testing.T) {
	ring := testkit.Must(keyring.Generate(keyring.MAC))
	now := time.Now() // stopped: both flows seal in this second
	sealer := testkit.Must(seal.New(ring, &seal.Options{Now: func() time.Time { return now }}))
	a, err := mcpsdk.New(sealer, &mcpsdk.Options{Options: mrtr.Options{
		Audience: "test", AllowAnonymous: true, Metrics: &mrtr.Counters{},
		SingleUse: mrtr.Targets("pay"), Replay: replay.NewMemory(0),
	}})
	if err != nil {
		t.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
	server.AddReceivingMiddleware(a.Middleware())
	paid := 0
	mcp.AddTool(server, &mcp.Tool{Name: "pay"}, func(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		if req.Params.RequestState == "confirmed" {
			paid++
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "paid"}}}, nil, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"ok": &mcp.ElicitParams{Message: "Pay?"}}, RequestState: "confirmed"}, nil, nil
	})
	st, ct := mcp.NewInMemoryTransports()
	ss := testkit.Must(server.Connect(ctx, st, nil))
	defer ss.Close()
	c := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	cs := testkit.Must(c.Connect(ctx, ct, nil))
	defer cs.Close()
	args := map[string]any{"amount": 5}
	var retries []*mcp.CallToolParams
	for flow := range 2 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pay", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		retry := &mcp.CallToolParams{Name: "pay", Arguments: args, RequestState: res.RequestState,
			InputResponses: mcp.InputResponseMap{"ok": &mcp.ElicitResult{Action: "accept"}}}
		if _, err := cs.CallTool(ctx, retry); err != nil {
			t.Fatalf("flow %d: %v (a false replay)", flow+1, err)
		}
		retries = append(retries, retry)
	}
	for i, retry := range retries {
		var je *jsonrpc.Error
		if _, err := cs.CallTool(ctx, retry); !errors.As(err, &je) || !strings.Contains(string(je.Data), "replayed") {
			t.Fatalf("flow %d replayed: %v", i+1, err)
		}
	}
	if paid != 2 {
		t.Fatalf("paid %d times, want 2", paid)
	}
}
