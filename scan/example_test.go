package scan_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/scan"
)

// A go-sdk server whose pay tool keeps "confirm" in its state, in the
// clear, and completes when the state and an accepted answer come back:
// it checks the state's text, so tampering is refused, but nothing binds
// the state to the arguments it was issued for.
func ExampleRun() {
	server := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "1"}, nil)
	type args struct {
		Amount int `json:"amount"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "pay"}, func(_ context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		e, _ := req.Params.InputResponses["confirm"].(*mcp.ElicitResult)
		if req.Params.RequestState == "confirm" && e != nil && e.Action == "accept" {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint("paid ", a.Amount)}}}, nil, nil
		}
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "Pay?",
				RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"ok": {Type: "boolean"}}}}},
			RequestState: "confirm",
		}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	defer srv.Close()

	report, err := scan.Run(context.Background(), &scan.Config{
		URL:     srv.URL,
		Targets: []scan.Target{{Name: "pay", Arguments: json.RawMessage(`{"amount":5}`)}},
		Checks:  []string{"tamper", "other-args", "no-responses"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range report.Checks {
		fmt.Println(f.ID, f.Result, f.Severity)
	}
	fmt.Println("failed:", report.Failed())
	// Output:
	// baseline pass info
	// tamper pass info
	// other-args fail high
	// no-responses pass info
	// failed: true
}
