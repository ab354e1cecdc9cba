package clients_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stateseal/stateseal/internal/testkit"
)

// TestGoSDKClient: the go-sdk's client (ClientSession.CallTool, which
// answers input requests and retries itself) sees each refusal's reason
// in its error's text and in the *jsonrpc.Error's data.
func TestGoSDKClient(t *testing.T) {
	rw := &rewriter{}
	c := mcp.NewClient(&mcp.Implementation{Name: "stateseal-clients", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
		},
	})
	call := func(ctx context.Context, url, tool string, n int) (string, error) {
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: rw}}, nil)
		if err != nil {
			return "", err
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"n": n}})
		if err != nil {
			return "", err
		}
		if len(res.Content) != 1 {
			return "", errors.New("no text in the result")
		}
		return res.Content[0].(*mcp.TextContent).Text, nil
	}
	flows(t, "go-sdk", rw, call, func(t *testing.T, c refusal, err error) {
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			t.Errorf("%s: %T %v, want a *jsonrpc.Error", c.name, err, err)
			return
		}
		var data struct{ Reason string }
		testkit.Check(json.Unmarshal(je.Data, &data))
		code := int64(jsonrpc.CodeInvalidParams)
		if c.reason == "unavailable" {
			code = jsonrpc.CodeInternalError
		}
		if je.Code != code || je.Message != c.message || data.Reason != c.reason {
			t.Errorf("%s: code %d, message %q, data %s; want %d, %q, reason %q", c.name, je.Code, je.Message, je.Data, code, c.message, c.reason)
		}
	})
}
