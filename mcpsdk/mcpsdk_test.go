package mcpsdk_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mcpsdk"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/seal"
)

var ctx = context.Background()

// secretState is the plaintext a fixture keeps in requestState. It must
// never appear on the wire.
const secretState = `{"cart":"c-4711","step":"confirm"}`

// clock is the sealer's clock, movable by tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// fixture is a server with the middleware and three tools: "book" and
// "cancel" ask for a confirmation and keep secretState; "rounds" runs three
// rounds and counts them in its state.
type fixture struct {
	server  *mcp.Server
	clock   *clock
	metrics *mrtr.Counters
	seen    []string // states the handlers received
	mu      sync.Mutex
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{clock: &clock{t: time.Now()}, metrics: &mrtr.Counters{}}
	ring, err := keyring.Generate(keyring.AEAD)
	if err != nil {
		t.Fatal(err)
	}
	s, err := seal.New(ring, &seal.Options{Now: f.clock.now})
	if err != nil {
		t.Fatal(err)
	}
	a, err := mcpsdk.New(s, &mcpsdk.Options{
		Options: mrtr.Options{Audience: "test", DefaultTTL: 5 * time.Minute, Metrics: f.metrics},
		// The tests authenticate by header; production uses TokenInfo.
		Principal: func(_ context.Context, req mcp.Request) string {
			if e := req.GetExtra(); e != nil && e.Header != nil {
				return e.Header.Get("X-Test-User")
			}
			return ""
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.server = mcp.NewServer(&mcp.Implementation{Name: "fixture", Version: "1"}, nil)
	f.server.AddReceivingMiddleware(a.Middleware())
	for _, name := range []string{"book", "cancel"} {
		mcp.AddTool(f.server, &mcp.Tool{Name: name}, f.confirm)
	}
	mcp.AddTool(f.server, &mcp.Tool{Name: "rounds"}, f.rounds)
	return f
}

func (f *fixture) record(state string) {
	f.mu.Lock()
	f.seen = append(f.seen, state)
	f.mu.Unlock()
}

func confirmSchema() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"ok": {Type: "boolean"}}}
}

func (f *fixture) confirm(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
	f.record(req.Params.RequestState)
	if req.Params.RequestState == secretState {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done " + secretState}}}, nil, nil
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "Sure?", RequestedSchema: confirmSchema()}},
		RequestState:  secretState,
	}, nil, nil
}

func (f *fixture) rounds(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
	f.record(req.Params.RequestState)
	n := len(req.Params.RequestState)
	if n == 3 {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "three rounds"}}}, nil, nil
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{"again": &mcp.ElicitParams{Message: "Again?", RequestedSchema: confirmSchema()}},
		RequestState:  strings.Repeat("r", n+1),
	}, nil, nil
}

// serve runs the fixture over Streamable HTTP, stateless, on loopback.
func (f *fixture) serve(t *testing.T) string {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.server }, &mcp.StreamableHTTPOptions{Stateless: true})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

type userHeader struct {
	user string
	next http.RoundTripper
}

func (u userHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Test-User", u.user)
	return u.next.RoundTrip(r)
}

// connect returns a 2026-07-28 client session for user. With manual set,
// the client returns input_required results instead of answering them.
func connect(t *testing.T, url, user string, manual bool) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
		},
	}
	if manual {
		opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, opts)
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: userHeader{user, http.DefaultTransport}}}
	cs, err := c.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

var accept = mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}}
