package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fleet test's tools. fleet_flow asks twice before it answers, its
// state counting the rounds; fleet_pay asks once and pays, and the fleet
// runs it single use. Each echoes its arguments' "n" so the client can
// tell its own flow's answer.
func addFleetTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "fleet_flow", Description: "three rounds: two questions, then the answer"}, fleetFlow)
	mcp.AddTool(s, &mcp.Tool{Name: "fleet_pay", Description: "asks to confirm, then pays; single use in the fleet"}, fleetPay)
}

type fleetArgs struct {
	N int `json:"n"`
}

// ask asks to confirm. The schema names its property, optional (the fleet
// test answers "accept" with no content): every official client refuses a
// schema without "properties" (the TypeScript SDK's answers -32602).
func ask(state string) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: "Continue?",
			RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"ok": {Type: "boolean"}}}}},
		RequestState: state,
	}
}

func done(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

func fleetFlow(_ context.Context, req *mcp.CallToolRequest, a fleetArgs) (*mcp.CallToolResult, any, error) {
	round, _ := strconv.Atoi(req.Params.RequestState)
	if round < 2 {
		return ask(strconv.Itoa(round + 1)), nil, nil
	}
	return done(fmt.Sprintf("flow %d done after %d rounds", a.N, round+1)), nil, nil
}

// fleetPay pays only once the user accepted: a state that opens proves
// the question was asked, not that it was answered (statescan's
// no-responses and declined checks).
func fleetPay(_ context.Context, req *mcp.CallToolRequest, a fleetArgs) (*mcp.CallToolResult, any, error) {
	e, _ := req.Params.InputResponses["confirm"].(*mcp.ElicitResult)
	if req.Params.RequestState != "confirmed" || e == nil || e.Action != "accept" {
		return ask("confirmed"), nil, nil
	}
	return done(fmt.Sprintf("paid %d", a.N)), nil, nil
}
