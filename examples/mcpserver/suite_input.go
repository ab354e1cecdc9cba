//lint:file-ignore SA1019 sampling is deprecated in MCP 2026-07-28 (SEP-2577) but still in the protocol, and the 2025-11-25 scenarios these fixtures serve exercise it.

package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The suite's 2025-11-25 fixtures that ask the client for input
// (tools-call-sampling, tools-call-elicitation,
// elicitation-sep1034-defaults, elicitation-sep1330-enums), in their
// stateless form: where a 2025 server sends the client its own request
// and waits, these answer input_required, and answer for real on the
// retry that carries the client's response. A 2026-07-28 client runs
// them as they are; a 2025-11-25 client needs a bridge in front (sealgate's)
// that turns each input request into the client's own request.

func addSuiteInputTools(s *mcp.Server) {
	type promptArgs struct {
		Prompt string `json:"prompt" jsonschema:"The prompt to send to the LLM"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "test_sampling", Description: "asks the client's LLM for a completion of the prompt"},
		func(_ context.Context, req *mcp.CallToolRequest, a promptArgs) (*mcp.CallToolResult, any, error) {
			if t, ok := sampled(req.Params.InputResponses, "sampling"); ok {
				return text("LLM response: " + t), nil, nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"sampling": askSampling(a.Prompt, 100)}}, nil, nil
		})
	type messageArgs struct {
		Message string `json:"message" jsonschema:"The message to show the user"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "test_elicitation", Description: "asks the user for a username and an email"},
		func(_ context.Context, req *mcp.CallToolRequest, a messageArgs) (*mcp.CallToolResult, any, error) {
			return elicitOnce(req, "User response", &mcp.ElicitParams{Message: a.Message, RequestedSchema: json.RawMessage(userSchema)})
		})
	elicitTool(s, "test_elicitation_sep1034_defaults", "asks for a form whose every field has a default (SEP-1034)",
		"Please review and update the form fields with defaults", defaultsSchema)
	elicitTool(s, "test_elicitation_sep1330_enums", "asks for a form with the five kinds of enum (SEP-1330)",
		"Please select options from the enum fields", enumsSchema)
}

func elicitTool(s *mcp.Server, name, desc, msg, schema string) {
	mcp.AddTool(s, &mcp.Tool{Name: name, Description: desc},
		func(_ context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			return elicitOnce(req, "Elicitation completed", &mcp.ElicitParams{Message: msg, RequestedSchema: json.RawMessage(schema)})
		})
}

// elicitOnce asks once, then reports the user's answer, whatever the action.
func elicitOnce(req *mcp.CallToolRequest, prefix string, ask *mcp.ElicitParams) (*mcp.CallToolResult, any, error) {
	e, ok := req.Params.InputResponses["elicitation"].(*mcp.ElicitResult)
	if !ok || e == nil {
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"elicitation": ask}}, nil, nil
	}
	c, err := json.Marshal(e.Content)
	if err != nil {
		return nil, nil, err
	}
	return text(fmt.Sprintf("%s: action=%s, content=%s", prefix, e.Action, c)), nil, nil
}

const userSchema = `{"type": "object", "properties": {
  "username": {"type": "string", "description": "User's response"},
  "email": {"type": "string", "description": "User's email address"}},
  "required": ["username", "email"]}`

const defaultsSchema = `{"type": "object", "properties": {
  "name": {"type": "string", "description": "User name", "default": "John Doe"},
  "age": {"type": "integer", "description": "User age", "default": 30},
  "score": {"type": "number", "description": "User score", "default": 95.5},
  "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
  "verified": {"type": "boolean", "description": "Verification status", "default": true}},
  "required": []}`

const enumsSchema = `{"type": "object", "properties": {
  "untitledSingle": {"type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"]},
  "titledSingle": {"type": "string", "description": "Select one option with titles",
    "oneOf": [{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}]},
  "legacyEnum": {"type": "string", "description": "Select one option (legacy)",
    "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
  "untitledMulti": {"type": "array", "description": "Select multiple options", "minItems": 1, "maxItems": 3,
    "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
  "titledMulti": {"type": "array", "description": "Select multiple options with titles", "minItems": 1, "maxItems": 3,
    "items": {"anyOf": [{"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"}, {"const": "value3", "title": "Third Choice"}]}}},
  "required": []}`
