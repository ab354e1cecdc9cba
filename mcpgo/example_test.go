package mcpgo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mcpgo"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/seal"
)

type userKey struct{}

// A tool asks for confirmation with input_required; the adapter seals its
// RequestState, bound to the user your HTTP authentication put in the
// context, and opens it on the retry.
func Example() {
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	sealer := testkit.Must(seal.New(ring, nil))
	a, err := mcpgo.New(sealer, &mcpgo.Options{
		Options: mrtr.Options{Audience: "https://flights.example"},
		Principal: func(ctx context.Context, _ http.Header) string {
			user, _ := ctx.Value(userKey{}).(string)
			return user
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := server.NewMCPServer("flights", "1.0.0", append(a.ServerOptions(), server.WithToolCapabilities(false))...)
	srv.AddTool(mcp.NewTool("book"), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.RequestState == "fare=129" {
			return mcp.NewToolResultText("booked at 129"), nil
		}
		return server.NewInputRequestBuilder("fare=129").
			Elicit("confirm", mcp.ElicitationParams{Mode: mcp.ElicitationModeForm, Message: "Book at 129?",
				RequestedSchema: map[string]any{"type": "object"}}).
			ToolResult(), nil
	})

	ctx := context.WithValue(context.Background(), userKey{}, "alice")
	call := func(state string) map[string]any {
		params := map[string]any{"name": "book", "_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    mcp.ProtocolVersion20260728,
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
		}}
		if state != "" {
			params["requestState"] = state
			params["inputResponses"] = map[string]any{"confirm": map[string]any{"action": "accept"}}
		}
		msg := testkit.Must(json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}))
		out := testkit.Must(json.Marshal(srv.HandleMessage(ctx, msg)))
		var resp struct{ Result map[string]any }
		testkit.Check(json.Unmarshal(out, &resp))
		return resp.Result
	}
	first := call("")
	token, _ := first["requestState"].(string)
	fmt.Println(first["resultType"], "plaintext sent:", token == "fare=129")
	fmt.Println(call(token)["content"])
	// Output:
	// input_required plaintext sent: false
	// [map[text:booked at 129 type:text]]
}
