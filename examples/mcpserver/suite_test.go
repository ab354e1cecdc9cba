//lint:file-ignore SA1019 sampling is deprecated in MCP 2026-07-28 (SEP-2577) but still in the protocol, and test_sampling exercises it.

package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
)

// TestSuiteFixtures drives the fixtures of suite_*.go with the go-sdk
// client at 2026-07-28, through the sealing middleware: the ones the
// 2026-07-28 suite never calls (the 2025-11-25 scenarios' input tools,
// which the client answers itself here, as sealgate's bridge answers them
// for a 2025 client), and a call of each kind the suite does make, so that
// `go test` sees a broken fixture without Node.js.
func TestSuiteFixtures(t *testing.T) {
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	ts := httptest.NewServer(testkit.Must(newHandler(ring, "test")))
	defer ts.Close()
	ctx := context.Background()

	var mu sync.Mutex
	var asked []*mcp.ElicitParams
	var prompts []string
	progress := make(chan float64, 10)
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, r.Params)
			mu.Unlock()
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "ada", "email": "ada@example.test"}}, nil
		},
		CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			mu.Lock()
			prompts = append(prompts, r.Params.Messages[0].Content.(*mcp.TextContent).Text)
			mu.Unlock()
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "Paris"}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			if r.Params.ProgressToken == "tok" {
				progress <- r.Params.Progress
			}
		},
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	textOf := func(r *mcp.CallToolResult) string { return r.Content[0].(*mcp.TextContent).Text }

	if got := textOf(call("test_sampling", map[string]any{"prompt": "Capital of France?"})); got != "LLM response: Paris" {
		t.Errorf("test_sampling: %q", got)
	}
	if len(prompts) != 1 || prompts[0] != "Capital of France?" {
		t.Errorf("sampling asked %q, want the tool's prompt once", prompts)
	}
	if got := textOf(call("test_elicitation", map[string]any{"message": "Who are you?"})); got != `User response: action=accept, content={"email":"ada@example.test","username":"ada"}` {
		t.Errorf("test_elicitation: %q", got)
	}
	call("test_elicitation_sep1034_defaults", nil)
	call("test_elicitation_sep1330_enums", nil)
	if len(asked) != 3 || asked[0].Message != "Who are you?" {
		t.Fatalf("elicitations: %+v", asked)
	}
	// What reached the client is the schema each scenario checks, every
	// keyword intact (the middleware and the SDK drop nothing).
	for i, want := range map[int][]string{
		0: {`"required":["username","email"]`},
		1: {`"default":"John Doe"`, `"default":30`, `"default":95.5`, `"default":"active"`, `"default":true`},
		2: {`"enumNames":["Option One","Option Two","Option Three"]`, `"oneOf":[{"const":"value1","title":"First Option"}`,
			`"anyOf":[{"const":"value1","title":"First Choice"}`, `"minItems":1`},
	} {
		b := testkit.Must(json.Marshal(asked[i].RequestedSchema))
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("elicitation %d: schema %s lacks %s", i, b, w)
			}
		}
	}

	// The kinds of call the 2026-07-28 suite makes.
	if r := call("test_error_handling", nil); !r.IsError || !strings.Contains(textOf(r), "intentionally") {
		t.Errorf("test_error_handling: %+v", r)
	}
	if r := call("test_multiple_content_types", nil); len(r.Content) != 3 {
		t.Errorf("test_multiple_content_types: %d blocks", len(r.Content))
	}
	p := &mcp.CallToolParams{Name: "test_tool_with_progress"}
	p.SetProgressToken("tok")
	if _, err := cs.CallTool(ctx, p); err != nil {
		t.Fatal(err)
	}
	for _, want := range []float64{0, 50, 100} {
		select {
		case got := <-progress:
			if got != want {
				t.Errorf("progress %v, want %v", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no progress %v", want)
		}
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://template/123/data"})
	if err != nil || rr.Contents[0].Text != `{"data":"Data for ID: 123","id":"123","templateTest":true}` {
		t.Errorf("template: %v %+v", err, rr)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://template/123/other"}); err == nil {
		t.Error("a URI outside the template was served")
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_prompt_with_arguments", Arguments: map[string]string{"arg1": "a", "arg2": "b"}})
	if err != nil || gp.Messages[0].Content.(*mcp.TextContent).Text != "Prompt with arguments: arg1='a', arg2='b'" {
		t.Errorf("prompt: %v %+v", err, gp)
	}
	cr, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"},
		Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "par"}})
	if err != nil || strings.Join(cr.Completion.Values, ",") != "paris,park,party" {
		t.Errorf("complete: %v %+v", err, cr)
	}
}
