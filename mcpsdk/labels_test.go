package mcpsdk_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mcpsdk"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/mrtr/metricstest"
	"github.com/stateseal/stateseal/seal"
)

// TestBoundedLabels is the attack of the review: a client names 1,000
// tools that do not exist, each with a long name, and sends a state to
// each. Metrics and logs must name them all "unknown", whatever the sink,
// log one line a second, not one per request, and list the server's tools
// about once a second, not once per request. Registered targets, the
// template a resource URI matched included, keep their names.
func TestBoundedLabels(t *testing.T) {
	sinks := metricstest.New(t)
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	sealer := testkit.Must(seal.New(ring, nil))
	a, err := mcpsdk.New(sealer, &mcpsdk.Options{Options: mrtr.Options{Audience: "test", AllowAnonymous: true, Metrics: sinks}})
	if err != nil {
		t.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
	var lists atomic.Int32
	server.AddReceivingMiddleware(a.Middleware(), func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if strings.HasSuffix(method, "/list") {
				lists.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	ask := func(state string) (*mcp.CallToolResult, any, error) {
		if state != "" {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"ok": &mcp.ElicitParams{Message: "Sure?"}}, RequestState: "s"}, nil, nil
	}
	mcp.AddTool(server, &mcp.Tool{Name: "pay"}, func(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		return ask(req.Params.RequestState)
	})
	server.AddResourceTemplate(&mcp.ResourceTemplate{Name: "t", URITemplate: "file:///t/{name}"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		if req.Params.RequestState != "" {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "t"}}}, nil
		}
		return &mcp.ReadResourceResult{InputRequests: mcp.InputRequestMap{"ok": &mcp.ElicitParams{Message: "Sure?"}}, RequestState: "s"}, nil
	})
	st, ct := mcp.NewInMemoryTransports()
	ss := testkit.Must(server.Connect(ctx, st, nil))
	defer ss.Close()
	c := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	cs := testkit.Must(c.Connect(ctx, ct, nil))
	defer cs.Close()

	const marker = "EVIL"
	long := strings.Repeat(marker, 1024)
	start := time.Now()
	// A legitimate flow on each registered target: sealed and opened.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pay"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pay", RequestState: res.RequestState, InputResponses: accept}); err != nil {
		t.Fatal(err)
	}
	uri := "file:///t/" + long // a registered template, a URI of the client's
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri, RequestState: rr.RequestState, InputResponses: accept}); err != nil {
		t.Fatal(err)
	}
	// The flood.
	for i := range 1000 {
		name := fmt.Sprintf("%s-%d", long, i)
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, RequestState: "garbage" + name}); err == nil {
			t.Fatal("a state for a tool that does not exist was accepted")
		}
		if i%10 == 0 {
			cs.CallTool(ctx, &mcp.CallToolParams{Name: "pay", RequestState: "garbage"})
			cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: fmt.Sprintf("file:///t/%s-%d", long, i), RequestState: "garbage"})
			cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: fmt.Sprintf("file:///u/%s-%d", long, i), RequestState: "garbage"})
			cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, RequestState: "garbage"})
		}
	}
	elapsed := time.Since(start)
	if v := sinks.Counters.Values(); v.Rejected["invalid"] != 1400 || v.Sealed != 2 || v.Opened != 2 {
		t.Fatalf("counted %+v, want 1,400 rejections, 2 seals, 2 opens", v)
	}
	// Keys: tools/call unknown and pay; resources/read unknown and the
	// template; prompts/get unknown; all "invalid".
	sinks.Check(t, marker, []string{"pay", "file:///t/{name}", mrtr.Unknown}, 5, elapsed)
	// Each of the three kinds lists at most once a second (resources
	// twice: resources and templates), and once more for a second begun.
	if n, limit := int(lists.Load()), 4*(int(elapsed/time.Second)+2); n > limit {
		t.Errorf("%d listings in %v, over %d", n, elapsed, limit)
	}
	t.Logf("%d listings", lists.Load())
}
