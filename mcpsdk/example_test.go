package mcpsdk_test

import (
	"context"
	"fmt"
	"log"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mcpsdk"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/seal"
)

// A tool asks for confirmation with input_required and a plaintext
// RequestState; the client only ever sees the sealed token, and the
// handler gets its plaintext back on the retry. Over HTTP, serve the
// server with mcp.StreamableHTTPOptions{Stateless: true}.
func Example() {
	ctx := context.Background()
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	sealer := testkit.Must(seal.New(ring, nil))
	a, err := mcpsdk.New(sealer, &mcpsdk.Options{Options: mrtr.Options{
		Audience: "https://flights.example",
		// This example's client does not authenticate; a real server
		// binds each state to Extra.TokenInfo.UserID and leaves this off.
		AllowAnonymous: true,
	}})
	if err != nil {
		log.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "flights", Version: "1"}, nil)
	server.AddReceivingMiddleware(a.Middleware())
	mcp.AddTool(server, &mcp.Tool{Name: "book"}, func(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
		if req.Params.RequestState == "fare=129" {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "booked at 129"}}}, nil, nil
		}
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "Book at 129?"}},
			RequestState:  "fare=129",
		}, nil, nil
	})

	st, ct := mcp.NewInMemoryTransports()
	ss := testkit.Must(server.Connect(ctx, st, nil))
	defer ss.Close()
	client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	cs := testkit.Must(client.Connect(ctx, ct, nil))
	defer cs.Close()

	res := testkit.Must(cs.CallTool(ctx, &mcp.CallToolParams{Name: "book"}))
	fmt.Println("client sees plaintext:", res.RequestState == "fare=129")
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "book", RequestState: res.RequestState,
		InputResponses: mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "accept"}}})
	fmt.Println(res.Content[0].(*mcp.TextContent).Text, err)
	// Output:
	// client sees plaintext: false
	// booked at 129 <nil>
}
