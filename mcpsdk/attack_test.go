package mcpsdk_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stateseal/stateseal/internal/testkit"
)

// TestRoundTrip: the SDK client answers the elicitation and retries by
// itself; the handler gets its plaintext state back.
func TestRoundTrip(t *testing.T) {
	f := newFixture(t)
	cs := connect(t, f.serve(t), "alice", false)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "book", Arguments: map[string]any{"flight": "LH123"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "done "+secretState {
		t.Fatalf("result %q", got)
	}
	v := f.metrics.Values()
	if v.Sealed != 1 || v.Opened != 1 || len(v.Rejected) != 0 {
		t.Fatalf("metrics %+v", v)
	}
}

// firstRound calls tool as user with args and returns the sealed state.
func firstRound(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("first round of %s: no input_required with state: %+v", tool, res)
	}
	if strings.Contains(res.RequestState, "cart") || res.RequestState == secretState {
		t.Fatal("the client sees the plaintext state")
	}
	return res.RequestState
}

// TestAttacks moves a sealed state where it does not belong. Each retry is
// answered -32602 with data.reason and nothing else, and the handler never
// sees the state.
func TestAttacks(t *testing.T) {
	f := newFixture(t)
	url := f.serve(t)
	alice := connect(t, url, "alice", true)
	mallory := connect(t, url, "mallory", true)
	args := map[string]any{"flight": "LH123", "seats": 2}
	state := firstRound(t, alice, "book", args)

	mid := len(state) / 2
	other := byte('A')
	if state[mid] == other {
		other = 'B'
	}
	flipped := state[:mid] + string(other) + state[mid+1:]
	cases := []struct {
		name   string
		cs     *mcp.ClientSession
		tool   string
		args   map[string]any
		state  string
		reason string
	}{
		{"moved to another tool", alice, "cancel", args, state, "invalid"},
		{"replayed by another user", mallory, "book", args, state, "invalid"},
		{"changed arguments", alice, "book", map[string]any{"flight": "LH123", "seats": 3}, state, "invalid"},
		{"dropped arguments", alice, "book", nil, state, "invalid"},
		{"one character changed", alice, "book", args, flipped, "invalid"},
		{"truncated", alice, "book", args, state[:len(state)-4], "invalid"},
		{"suffix appended", alice, "book", args, state + "-TAMPERED", "invalid"},
		{"not a token", alice, "book", args, secretState, "invalid"},
	}
	for _, tc := range cases {
		before := len(f.seen)
		_, err := tc.cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args, InputResponses: accept, RequestState: tc.state})
		checkRejected(t, tc.name, err, tc.reason)
		if len(f.seen) != before {
			t.Fatalf("%s: the handler ran", tc.name)
		}
	}
	// The untouched state still works for its owner; argument order and
	// spacing do not matter.
	res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "book", Arguments: json.RawMessage(`{ "seats": 2, "flight": "LH123" }`), InputResponses: accept, RequestState: state})
	if err != nil || res.NeedsInput() {
		t.Fatalf("own state: %v %+v", err, res)
	}
	if v := f.metrics.Values(); v.Rejected["invalid"] != len(cases) {
		t.Fatalf("metrics %+v, want %d rejections", v, len(cases))
	}
}

// TestExpired: after its lifetime (plus skew), the state is refused with
// reason "expired".
func TestExpired(t *testing.T) {
	f := newFixture(t)
	cs := connect(t, f.serve(t), "alice", true)
	state := firstRound(t, cs, "book", nil)
	f.clock.advance(5*time.Minute + 31*time.Second)
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "book", InputResponses: accept, RequestState: state})
	checkRejected(t, "expired", err, "expired")
}

func checkRejected(t *testing.T, name string, err error, reason string) {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		t.Fatalf("%s: error %v, want a JSON-RPC error", name, err)
	}
	var data map[string]any
	testkit.Check(json.Unmarshal(je.Data, &data))
	if je.Code != jsonrpc.CodeInvalidParams || je.Message != "invalid requestState: "+reason || len(data) != 1 || data["reason"] != reason {
		t.Fatalf("%s: code %d, message %q, data %s; want -32602, \"invalid requestState: %[5]s\", reason %[5]q", name, je.Code, je.Message, je.Data, reason)
	}
}

// TestMultiRound: every round's sealed state differs, and the handler sees
// the plaintext of each.
func TestMultiRound(t *testing.T) {
	f := newFixture(t)
	cs := connect(t, f.serve(t), "alice", true)
	var states []string
	params := &mcp.CallToolParams{Name: "rounds"}
	for {
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if !res.NeedsInput() {
			break
		}
		for _, s := range states {
			if s == res.RequestState {
				t.Fatal("a round repeated a sealed state")
			}
		}
		states = append(states, res.RequestState)
		params = &mcp.CallToolParams{Name: "rounds", RequestState: res.RequestState,
			InputResponses: mcp.InputResponseMap{"again": &mcp.ElicitResult{Action: "accept"}}}
	}
	if len(states) != 3 || strings.Join(f.seen, ",") != ",r,rr,rrr" {
		t.Fatalf("%d rounds; handler saw %q", len(states), f.seen)
	}
}
