package scan_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/scan"
)

// TestNothingQuoted: a server that echoes its state and the caller's
// credential in every answer gets a report that quotes neither.
func TestNothingQuoted(t *testing.T) {
	const state = "confirm-the-payment-of-account-A1"
	const cred = "Bearer alice-credential-value"
	server := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "pay"}, func(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		if req.Params.RequestState != "" {
			auth := req.GetExtra().Header.Get("Authorization")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran " + req.Params.RequestState + " for " + strings.TrimPrefix(auth, "Bearer ")}}}, nil, nil
		}
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "Pay?",
				RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"ok": {Type: "boolean"}}}}},
			RequestState: state,
		}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	defer srv.Close()
	r, err := scan.Run(context.Background(), &scan.Config{
		URL:     srv.URL,
		Targets: []scan.Target{{Name: "pay", Arguments: json.RawMessage(`{"a":1}`), SingleUse: true}},
		Header:  http.Header{"Authorization": {cred}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Failed() {
		t.Errorf("a server that runs any state passed: %s", b)
	}
	for _, s := range []string{state, cred, "alice-credential"} {
		if strings.Contains(string(b), s) {
			t.Errorf("the report quotes %q: %s", s, b)
		}
	}
}
