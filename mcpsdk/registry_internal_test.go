package mcpsdk

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/mrtr"
)

// TestRegistryRefresh: a target the registry does not hold makes it list
// again, at most once a period: a tool added since is named within a
// period, and a flood of unknown names lists once a period.
func TestRegistryRefresh(t *testing.T) {
	now := time.Unix(1785240000, 0)
	r := newRegistry()
	r.now = func() time.Time { return now }
	tools := []string{"pay"}
	lists := 0
	var fail error
	next := func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/list" {
			t.Fatalf("listed %s", method)
		}
		lists++
		if fail != nil {
			return nil, fail
		}
		// Two pages, to follow the cursor.
		if req.(*mcp.ListToolsRequest).Params.Cursor == "" {
			return &mcp.ListToolsResult{Tools: []*mcp.Tool{{Name: tools[0]}}, NextCursor: "2"}, nil
		}
		res := &mcp.ListToolsResult{}
		for _, n := range tools[1:] {
			res.Tools = append(res.Tools, &mcp.Tool{Name: n})
		}
		return res, nil
	}
	req := &mcp.CallToolRequest{Session: &mcp.ServerSession{}}
	label := func(name string) string { return r.label(context.Background(), mrtr.MethodCallTool, name, req, next) }
	if got := label("pay"); got != "pay" || lists != 2 {
		t.Fatalf("label(pay) = %q after %d list calls", got, lists)
	}
	for range 100 {
		if got := label("nope"); got != mrtr.Unknown {
			t.Fatalf("label(nope) = %q", got)
		}
	}
	if lists != 2 {
		t.Fatalf("%d list calls for a flood inside one period, want 2 (one listing)", lists)
	}
	tools = append(tools, "late")
	if got := label("late"); got != mrtr.Unknown {
		t.Fatalf("a tool added inside the period: %q", got)
	}
	now = now.Add(time.Second)
	if got := label("late"); got != "late" || lists != 4 {
		t.Fatalf("a tool added, a period later: %q after %d list calls", got, lists)
	}
	if got := label("pay"); got != "pay" || lists != 4 {
		t.Fatalf("a known tool listed again: %d list calls", lists)
	}
	if got := label("nope"); got != mrtr.Unknown || lists != 4 {
		t.Fatalf("listed again inside the period: %d", lists)
	}
	// A listing that fails (its request cancelled, say) keeps the names
	// listed before.
	fail = context.Canceled
	now = now.Add(time.Second)
	if got := label("nope"); got != mrtr.Unknown || lists != 5 {
		t.Fatalf("failed listing: %q, %d list calls", got, lists)
	}
	if got := label("late"); got != "late" || lists != 5 {
		t.Fatalf("after a failed listing: %q, %d list calls", got, lists)
	}
}

// TestRegistryNoSession: a request that did not come through a server
// (a test or benchmark calling the handler) has no server to list; the
// registry does not call the handler with list requests it never serves.
func TestRegistryNoSession(t *testing.T) {
	r := newRegistry()
	next := func(context.Context, string, mcp.Request) (mcp.Result, error) {
		t.Fatal("listed without a session")
		return nil, nil
	}
	if got := r.label(context.Background(), mrtr.MethodCallTool, "pay", &mcp.CallToolRequest{}, next); got != mrtr.Unknown {
		t.Fatalf("label = %q", got)
	}
}
