package main

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The conformance suite's resources, prompts and completions (resources-*,
// prompts-*, completion-complete, caching), stateless: each answer comes
// from the request alone.

func addSuiteResources(s *mcp.Server) {
	static := func(uri, name, desc string, c *mcp.ResourceContents) {
		s.AddResource(&mcp.Resource{URI: uri, Name: name, Description: desc, MIMEType: c.MIMEType},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}}, nil
			})
	}
	static("test://static-text", "static-text", "A static text resource",
		&mcp.ResourceContents{URI: "test://static-text", MIMEType: "text/plain", Text: "This is the content of the static text resource."})
	static("test://static-binary", "static-binary", "A static binary resource (a PNG image)",
		&mcp.ResourceContents{URI: "test://static-binary", MIMEType: "image/png", Blob: testPNG})
	static("test://watched-resource", "watched-resource", "A resource clients subscribe to",
		&mcp.ResourceContents{URI: "test://watched-resource", MIMEType: "text/plain", Text: "Watched resource content"})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://template/{id}/data", Name: "template",
		Description: "A resource template with parameter substitution", MIMEType: "application/json"}, templateData)
}

// templateData serves test://template/{id}/data. The go-sdk routes only
// URIs that match the template here, so the id is what lies between the
// prefix and the suffix.
func templateData(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id := strings.TrimSuffix(strings.TrimPrefix(uri, "test://template/"), "/data")
	b, err := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}

func addSuitePrompts(s *mcp.Server) {
	addSimplePrompt(s)
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_arguments", Description: "A prompt with required arguments",
		Arguments: []*mcp.PromptArgument{{Name: "arg1", Description: "First test argument", Required: true},
			{Name: "arg2", Description: "Second test argument", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			a := req.Params.Arguments
			return userSays(&mcp.TextContent{Text: "Prompt with arguments: arg1='" + a["arg1"] + "', arg2='" + a["arg2"] + "'"}), nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_embedded_resource", Description: "A prompt that includes an embedded resource",
		Arguments: []*mcp.PromptArgument{{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return userSays(
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: req.Params.Arguments["resourceUri"], MIMEType: "text/plain", Text: "Embedded resource content for testing."}},
				&mcp.TextContent{Text: "Please process the embedded resource above."}), nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_image", Description: "A prompt that includes image content"},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return userSays(&mcp.ImageContent{Data: testPNG, MIMEType: "image/png"}, &mcp.TextContent{Text: "Please analyze the image above."}), nil
		})
}

// addSimplePrompt adds test_simple_prompt; test_trigger_prompt_change adds
// it again, which changes nothing but tells listening clients the list
// changed.
func addSimplePrompt(s *mcp.Server) {
	s.AddPrompt(&mcp.Prompt{Name: "test_simple_prompt", Description: "A simple prompt without arguments"},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return userSays(&mcp.TextContent{Text: "This is a simple prompt for testing."}), nil
		})
}

func userSays(c ...mcp.Content) *mcp.GetPromptResult {
	r := &mcp.GetPromptResult{}
	for _, x := range c {
		r.Messages = append(r.Messages, &mcp.PromptMessage{Role: "user", Content: x})
	}
	return r
}

// staticURIs are the resources a client may subscribe to.
var staticURIs = map[string]bool{"test://static-text": true, "test://static-binary": true, "test://watched-resource": true}

// subscribe accepts a subscription to a resource this server has
// (resources-subscribe, resources-unsubscribe; subscriptions/listen's
// resourceSubscriptions at 2026-07-28), and refuses any other URI. The
// resources never change, so a subscription is owed no update: the
// go-sdk forgets it when the request's stateless session ends, and
// nothing is lost.
func subscribe(_ context.Context, req *mcp.SubscribeRequest) error {
	if !staticURIs[req.Params.URI] {
		return mcp.ResourceNotFoundError(req.Params.URI)
	}
	return nil
}

func unsubscribe(context.Context, *mcp.UnsubscribeRequest) error { return nil }

// complete answers completion/complete: the values of a known argument
// that start with what the user typed (none for the others).
func complete(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	values := []string{}
	if r := req.Params.Ref; r != nil && r.Type == "ref/prompt" && r.Name == "test_prompt_with_arguments" {
		for _, v := range []string{"paris", "park", "party", "test-value"} {
			if strings.HasPrefix(v, req.Params.Argument.Value) {
				values = append(values, v)
			}
		}
	}
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
}
