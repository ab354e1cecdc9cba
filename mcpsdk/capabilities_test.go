//lint:file-ignore SA1019 sampling and roots are deprecated in MCP 2026-07-28 (SEP-2577) but still in the protocol, and the input-required fixtures and their tests exercise them.

package mcpsdk_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/mcpsdk"
)

type declared struct{ caps *mcp.ClientCapabilities }

func (d declared) ClientCapabilities() *mcp.ClientCapabilities { return d.caps }

func TestRequireClientCapabilities(t *testing.T) {
	need := &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}, Elicitation: &mcp.ElicitationCapabilities{}}
	full := &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}, Elicitation: &mcp.ElicitationCapabilities{}}
	if err := mcpsdk.RequireClientCapabilities(declared{full}, need); err != nil {
		t.Fatalf("all declared: %v", err)
	}
	for name, have := range map[string]*mcp.ClientCapabilities{
		"nothing":       nil,
		"sampling only": {Sampling: &mcp.SamplingCapabilities{}},
	} {
		err := mcpsdk.RequireClientCapabilities(declared{have}, need)
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != -32021 {
			t.Fatalf("%s: %v, want -32021", name, err)
		}
		var data struct {
			RequiredCapabilities map[string]any `json:"requiredCapabilities"`
		}
		if err := json.Unmarshal(je.Data, &data); err != nil || data.RequiredCapabilities["sampling"] == nil || data.RequiredCapabilities["elicitation"] == nil {
			t.Fatalf("%s: data %s", name, je.Data)
		}
	}
	// A tool that needs sampling alone: the data lists sampling alone, not
	// the "roots":{} that encoding mcp.ClientCapabilities always adds.
	err := mcpsdk.RequireClientCapabilities(declared{nil}, &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || string(je.Data) != `{"requiredCapabilities":{"sampling":{}}}` {
		t.Fatalf("sampling alone: %v, data %s", err, je.Data)
	}
	roots := &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{}}
	if err := mcpsdk.RequireClientCapabilities(declared{&mcp.ClientCapabilities{}}, roots); err == nil {
		t.Fatal("roots not declared, yet accepted")
	}
	if err := mcpsdk.RequireClientCapabilities(declared{&mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{}}}, roots); err != nil {
		t.Fatalf("roots declared: %v", err)
	}
}
