//lint:file-ignore SA1019 logging is deprecated in MCP 2026-07-28 (SEP-2577) but still in the protocol, and the suite's logging scenarios exercise it.

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The conformance suite's tools that need no input from the user, in their
// stateless form: each answers from its arguments alone. Names, arguments
// and contents are the ones the suite's scenarios call and check (tools-*,
// server-stateless, json-schema-2020-12, http-custom-header-server-validation).

// testPNG is a 1x1 red pixel, testWAV a WAV header with no samples: the
// smallest image and audio the suite accepts.
var (
	testPNG = mustBase64("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
	testWAV = mustBase64("UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=")
)

func mustBase64(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func addSuiteTools(s *mcp.Server) {
	content := func(name, desc string, c ...mcp.Content) {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: desc},
			func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: c}, nil, nil
			})
	}
	content("test_simple_text", "returns one text block", &mcp.TextContent{Text: "This is a simple text response for testing."})
	content("test_image_content", "returns a PNG image", &mcp.ImageContent{Data: testPNG, MIMEType: "image/png"})
	content("test_audio_content", "returns a WAV clip", &mcp.AudioContent{Data: testWAV, MIMEType: "audio/wav"})
	content("test_embedded_resource", "returns an embedded text resource", &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
		URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content."}})
	content("test_multiple_content_types", "returns text, an image and a resource",
		&mcp.TextContent{Text: "Multiple content types test:"},
		&mcp.ImageContent{Data: testPNG, MIMEType: "image/png"},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`}})
	mcp.AddTool(s, &mcp.Tool{Name: "test_error_handling", Description: "always fails, as a tool error (isError)"},
		func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
			// A tool error, not a protocol one: the result with isError set.
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{
				&mcp.TextContent{Text: "This tool intentionally returns an error for testing"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "test_tool_with_progress", Description: "reports progress 0, 50, 100 of 100 to the request's progressToken"}, withProgress)
	mcp.AddTool(s, &mcp.Tool{Name: "test_tool_with_logging", Description: "logs three info messages, if the request asked for logs"}, withLogging)
	mcp.AddTool(s, &mcp.Tool{Name: "test_logging_tool", Description: "logs three info messages, if the request asked for logs (none without)"}, withLogging)
	mcp.AddTool(s, &mcp.Tool{Name: "test_streaming_elicitation", Description: "answers input_required (elicitation), never a request of its own"},
		func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"user_name": askName("What is your name?")}}, nil, nil
		})
	addToolTrigger(s)
	mcp.AddTool(s, &mcp.Tool{Name: "test_trigger_prompt_change", Description: "sends notifications/prompts/list_changed to listening clients"},
		func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
			addSimplePrompt(s)
			return text("Mutation triggered"), nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "json_schema_2020_12_tool", Description: "declares its input in JSON Schema 2020-12 ($defs, $anchor, allOf, if/then/else)",
		InputSchema: json.RawMessage(schema2020)}, echoArguments("JSON Schema 2020-12 tool called with: "))
	s.AddTool(&mcp.Tool{Name: "test_header_param", Description: "its region argument travels in the Mcp-Param-Region header too, checked against the body (SEP-2243)",
		InputSchema: &jsonschema.Schema{Type: "object", Required: []string{"region"}, Properties: map[string]*jsonschema.Schema{
			"region": {Type: "string", Extra: map[string]any{"x-mcp-header": "Region"}}}}}, echoArguments("region: "))
}

// The triggers replace an entry with itself: the lists stay as they are,
// and the go-sdk, which notifies on every add, tells the
// subscriptions/listen streams that asked that the list changed.
var triggerTool = &mcp.Tool{Name: "test_trigger_tool_change", Description: "sends notifications/tools/list_changed to listening clients",
	InputSchema: &jsonschema.Schema{Type: "object"}}

func addToolTrigger(s *mcp.Server) {
	s.AddTool(triggerTool, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		addToolTrigger(s)
		return text("Mutation triggered"), nil
	})
}

// withProgress reports to the request's progressToken, if it has one,
// on the response stream of the call: a stateless server has no other.
func withProgress(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
	tok := req.Params.GetProgressToken()
	if tok == nil {
		return text("no progressToken: nothing reported"), nil, nil
	}
	for _, p := range []float64{0, 50, 100} {
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: p, Total: 100}); err != nil {
			return nil, nil, err
		}
	}
	return text(fmt.Sprint(tok)), nil, nil
}

// withLogging logs at info. The go-sdk sends a log only to a request that
// set a level (_meta's io.modelcontextprotocol/logLevel, or
// logging/setLevel before 2026-07-28), and drops it otherwise.
func withLogging(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
	for _, m := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
		if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "stateseal-example", Data: m}); err != nil {
			return nil, nil, err
		}
	}
	return text("Tool with logging executed successfully"), nil, nil
}

// echoArguments answers with the call's arguments as sent. The raw
// handlers (s.AddTool) validate nothing: the go-sdk checks the x-mcp-header
// parameter against the body before the call gets here.
func echoArguments(prefix string) mcp.ToolHandler {
	return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text(prefix + string(req.Params.Arguments)), nil
	}
}

// schema2020 is the suite's json_schema_2020_12_tool input schema, kept as
// bytes so that every keyword reaches tools/list as written.
const schema2020 = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {"address": {"$anchor": "addressDef", "type": "object",
    "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
  "properties": {
    "name": {"type": "string"},
    "address": {"$ref": "#/$defs/address"},
    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
    "phone": {"type": "string"},
    "email": {"type": "string"}
  },
  "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
  "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
  "then": {"required": ["phone"]},
  "else": {"required": ["email"]},
  "additionalProperties": false
}`
