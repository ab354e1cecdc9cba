package clients_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// accept answers every elicitation with {"ok": true}.
type accept struct{}

func (accept) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"ok": true}}}, nil
}

// TestMCPGoClient: mcp-go's client (Client.CallTool, which answers input
// requests and retries itself) drops an error's data and keeps only its
// code and message: the reason reaches its caller in the message.
func TestMCPGoClient(t *testing.T) {
	rw := &rewriter{}
	call := func(ctx context.Context, url, tool string, n int) (string, error) {
		tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPBasicClient(&http.Client{Transport: rw}))
		if err != nil {
			return "", err
		}
		c := client.NewClient(tr, client.WithElicitationHandler(accept{}))
		if err := c.Start(ctx); err != nil {
			return "", err
		}
		defer c.Close()
		var init mcp.InitializeRequest
		init.Params.ClientInfo = mcp.Implementation{Name: "stateseal-clients", Version: "1"}
		if _, err := c.Initialize(ctx, init); err != nil {
			return "", err
		}
		if v := c.ProtocolVersion(); v != mcp.ProtocolVersion20260728 {
			return "", errors.New("negotiated " + v)
		}
		var req mcp.CallToolRequest
		req.Params.Name, req.Params.Arguments = tool, map[string]any{"n": n}
		res, err := c.CallTool(ctx, req)
		if err != nil {
			return "", err
		}
		if len(res.Content) != 1 {
			return "", errors.New("no text in the result")
		}
		return res.Content[0].(mcp.TextContent).Text, nil
	}
	flows(t, "mcp-go", rw, call, func(t *testing.T, c refusal, err error) {
		want := mcp.ErrInvalidParams
		if c.reason == "unavailable" {
			want = mcp.ErrInternalError
		}
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want it to wrap %v", c.name, err, want)
		}
	})
}
