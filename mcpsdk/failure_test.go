package mcpsdk_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mcpsdk"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/seal"
)

// TestAmbiguousArguments: arguments that two parsers could read two ways
// (a member named twice) are never vouched for; the retry is refused.
func TestAmbiguousArguments(t *testing.T) {
	f := newFixture(t)
	cs := connect(t, f.serve(t), "alice", true)
	state := firstRound(t, cs, "book", map[string]any{"seats": 1})
	before := len(f.seen)
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "book", Arguments: json.RawMessage(`{"seats":1,"seats":9}`),
		InputResponses: accept, RequestState: state})
	checkRejected(t, "duplicate argument names", err, "invalid")
	if len(f.seen) != before {
		t.Fatal("the handler ran")
	}
}

// TestSealFailure: when the state cannot be sealed (here: the ring's only
// key activates in an hour), the request fails with -32603 and the
// plaintext never reaches the client.
func TestSealFailure(t *testing.T) {
	k := testkit.Must(keyring.NewKey(keyring.AEAD, time.Now(), time.Now().Add(time.Hour), nil))
	snap := testkit.Must(keyring.NewSnapshot([]keyring.Key{k}))
	ring := testkit.Must(keyring.NewRing(snap))
	s := testkit.Must(seal.New(ring, nil))
	a, err := mcpsdk.New(s, &mcpsdk.Options{Options: mrtr.Options{Audience: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	server := mcp.NewServer(&mcp.Implementation{Name: "f", Version: "1"}, nil)
	server.AddReceivingMiddleware(a.Middleware())
	mcp.AddTool(server, &mcp.Tool{Name: "book"}, f.confirm)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}))
	defer ts.Close()
	cs := connect(t, ts.URL, "alice", true)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "book"})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError || je.Message != "cannot seal requestState" {
		t.Fatalf("got %+v, %v; want -32603", res, err)
	}
	if strings.Contains(err.Error(), "c-4711") {
		t.Fatal("the plaintext state reached the client")
	}
}

// TestUnauthenticatedCarriesNoState: without AllowAnonymous, a request
// with no principal cannot carry state, so a server that forgot to bind
// its users fails loudly instead of letting one user's state replay for
// another. The plaintext never reaches the client.
func TestUnauthenticatedCarriesNoState(t *testing.T) {
	f := newFixture(t)
	cs := connect(t, f.serve(t), "", true)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "book", Arguments: map[string]any{"flight": "LH123"}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError || je.Message != "cannot seal requestState" {
		t.Fatalf("unauthenticated first round: %v %+v", err, res)
	}
}
