//lint:file-ignore SA1019 sampling and roots are deprecated in MCP 2026-07-28 (SEP-2577) but still in the protocol, and the input-required fixtures and their tests exercise them.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/mcpsdk"
)

// The fixtures keep their state in plain strings. The middleware seals it on
// the way out and opens it on the way in, so a handler that receives a
// RequestState can trust it: it is one this server issued, for this tool,
// these arguments and this caller, and it has not expired.

func addFixtures(s *mcp.Server) {
	tool := func(name, desc string, h mcp.ToolHandlerFor[map[string]any, any]) {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: desc}, h)
	}
	tool("test_input_required_result_elicitation", "asks for the caller's name by elicitation", elicitation)
	tool("test_input_required_result_sampling", "asks for an LLM completion by sampling", sampling)
	tool("test_input_required_result_list_roots", "asks for the client's roots", listRoots)
	tool("test_input_required_result_request_state", "round-trips a sealed requestState", requestState)
	tool("test_input_required_result_multiple_inputs", "asks for elicitation, sampling and roots in one round", multipleInputs)
	tool("test_input_required_result_multi_round", "two elicitation rounds, the state carried sealed", multiRound)
	tool("test_input_required_result_tampered_state", "rejects a tampered requestState (by the middleware)", tamperedState)
	tool("test_input_required_result_capabilities", "asks only for input kinds the client declared", capabilities)
	tool("test_missing_capability", "requires sampling; answers -32021 without it", missingCapability)
	s.AddPrompt(&mcp.Prompt{Name: "test_input_required_result_prompt", Description: "asks for context by elicitation"}, promptFixture)
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func objectSchema(field, typ string) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{field: {Type: typ}}, Required: []string{field}}
}

func askName(msg string) *mcp.ElicitParams {
	return &mcp.ElicitParams{Message: msg, RequestedSchema: objectSchema("name", "string")}
}

func askConfirm() *mcp.ElicitParams {
	return &mcp.ElicitParams{Message: "Please confirm", RequestedSchema: objectSchema("ok", "boolean")}
}

func askSampling(prompt string, max int64) *mcp.CreateMessageParams {
	return &mcp.CreateMessageParams{
		Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: prompt}}},
		MaxTokens: max,
	}
}

// accepted returns the content of an accepted elicitation response.
func accepted(r mcp.InputResponseMap, key string) map[string]any {
	if e, ok := r[key].(*mcp.ElicitResult); ok && e != nil && e.Action == "accept" {
		return e.Content
	}
	return nil
}

func sampled(r mcp.InputResponseMap, key string) (string, bool) {
	res, ok := r[key].(*mcp.CreateMessageWithToolsResult)
	if !ok || res == nil {
		return "", false
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text, true
		}
	}
	return "(non-text response)", true
}

func elicitation(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
	if name, _ := accepted(req.Params.InputResponses, "user_name")["name"].(string); name != "" {
		return text("Hello, " + name + "!"), nil, nil
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"user_name": askName("What is your name?")}}, nil, nil
}

func sampling(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
	if t, ok := sampled(req.Params.InputResponses, "capital_question"); ok {
		return text("Sampling response: " + t), nil, nil
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
		"capital_question": askSampling("What is the capital of France?", 100),
	}}, nil, nil
}

func listRoots(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
	if r, ok := req.Params.InputResponses["client_roots"].(*mcp.ListRootsResult); ok && r != nil {
		var uris []string
		for _, root := range r.Roots {
			uris = append(uris, root.URI)
		}
		return text(fmt.Sprintf("Client exposed %d root(s): %s", len(r.Roots), strings.Join(uris, ", "))), nil, nil
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"client_roots": &mcp.ListRootsParams{}}}, nil, nil
}

// pendingConfirm is the state requestState and tampered_state issue. The
// client sees it only sealed; it comes back only if nobody changed it.
const pendingConfirm = `{"step":"confirm","fixture":"v1"}`

func requestState(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
	return confirmRound(req, "state-ok: requestState received and confirmation accepted")
}

func tamperedState(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
	// A tampered state never gets here: the middleware answers -32602.
	return confirmRound(req, "state-ok: requestState verified")
}

func confirmRound(req *mcp.CallToolRequest, done string) (*mcp.CallToolResult, any, error) {
	if accepted(req.Params.InputResponses, "confirm") != nil {
		if req.Params.RequestState != pendingConfirm {
			return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "confirmation without the requestState this server issued"}
		}
		return text(done), nil, nil
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{"confirm": askConfirm()},
		RequestState:  pendingConfirm,
	}, nil, nil
}

func multipleInputs(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
	in := req.Params.InputResponses
	name, _ := accepted(in, "user_name")["name"].(string)
	greeting, hasGreeting := sampled(in, "greeting")
	roots, hasRoots := in["client_roots"].(*mcp.ListRootsResult)
	if name != "" && hasGreeting && hasRoots && roots != nil && req.Params.RequestState == "multiple_inputs" {
		return text(fmt.Sprintf("%s %s — %d root(s) visible", greeting, name, len(roots.Roots))), nil, nil
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{
			"user_name":    askName("What is your name?"),
			"greeting":     askSampling("Generate a greeting", 50),
			"client_roots": &mcp.ListRootsParams{},
		},
		RequestState: "multiple_inputs",
	}, nil, nil
}

// roundState is the multi-round fixture's state: everything it needs on the
// next round, since the server keeps nothing between rounds.
type roundState struct {
	Round int    `json:"round"`
	Name  string `json:"name,omitempty"`
}

func multiRound(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
	var st roundState
	if req.Params.RequestState != "" {
		if err := json.Unmarshal([]byte(req.Params.RequestState), &st); err != nil {
			return nil, nil, err // cannot happen: only this server mints states
		}
	}
	switch st.Round {
	case 0:
		return inputRound(roundState{Round: 1}, "step1", askName("Step 1: What is your name?"))
	case 1:
		name, _ := accepted(req.Params.InputResponses, "step1")["name"].(string)
		if name == "" {
			name = "unknown"
		}
		return inputRound(roundState{Round: 2, Name: name}, "step2",
			&mcp.ElicitParams{Message: "Step 2: What is your favorite color?", RequestedSchema: objectSchema("color", "string")})
	default:
		color, _ := accepted(req.Params.InputResponses, "step2")["color"].(string)
		if color == "" {
			color = "unknown"
		}
		return text(fmt.Sprintf("Multi-round complete: %s likes %s", st.Name, color)), nil, nil
	}
}

func inputRound(st roundState, key string, ask mcp.InputRequest) (*mcp.CallToolResult, any, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{key: ask}, RequestState: string(b)}, nil, nil
}

func capabilities(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
	if len(req.Params.InputResponses) > 0 {
		return text("Capability-aware input requests fulfilled"), nil, nil
	}
	caps := req.ClientCapabilities()
	asks := mcp.InputRequestMap{}
	if caps != nil && caps.Elicitation != nil {
		asks["user_name"] = askName("What is your name?")
	}
	if caps != nil && caps.Sampling != nil {
		asks["greeting"] = askSampling("Generate a short greeting", 50)
	}
	if mcpsdk.HasRoots(caps) {
		asks["client_roots"] = &mcp.ListRootsParams{}
	}
	if len(asks) == 0 {
		return text("No declared client capability supports an in-band input request"), nil, nil
	}
	return &mcp.CallToolResult{InputRequests: asks}, nil, nil
}

func missingCapability(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
	if err := mcpsdk.RequireClientCapabilities(req, &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}); err != nil {
		return nil, nil, err
	}
	return text("Client declared the sampling capability; tool executed."), nil, nil
}

func promptFixture(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	if c := accepted(req.Params.InputResponses, "user_context"); c != nil {
		ctxText, _ := c["context"].(string)
		return &mcp.GetPromptResult{
			Description: "A prompt with elicited context",
			Messages:    []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Context: " + ctxText}}},
		}, nil
	}
	return &mcp.GetPromptResult{InputRequests: mcp.InputRequestMap{
		"user_context": &mcp.ElicitParams{Message: "Please provide context for the prompt", RequestedSchema: objectSchema("context", "string")},
	}}, nil
}
