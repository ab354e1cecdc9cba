//lint:file-ignore SA1019 RequireClientCapabilities must check sampling and roots, deprecated in MCP 2026-07-28 (SEP-2577) but still declared by clients.

package mcpsdk

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A CapabilityRequest is a server request that knows the capabilities its
// client declared with it: *mcp.CallToolRequest, *mcp.GetPromptRequest and
// *mcp.ReadResourceRequest are.
type CapabilityRequest interface {
	ClientCapabilities() *mcp.ClientCapabilities
}

// RequireClientCapabilities returns nil if the client declared, for this
// request, every capability need sets (elicitation, sampling, roots).
// Otherwise it returns the error a handler returns as is: JSON-RPC
// -32021 (MissingRequiredClientCapability) with data.requiredCapabilities
// listing the capabilities need sets, and only those, as SEP-2575
// specifies. A server must not send an input request the client did not
// declare.
func RequireClientCapabilities(req CapabilityRequest, need *mcp.ClientCapabilities) error {
	have := req.ClientCapabilities()
	if have == nil {
		have = &mcp.ClientCapabilities{}
	}
	var missing []string
	if need.Elicitation != nil && have.Elicitation == nil {
		missing = append(missing, "elicitation")
	}
	if need.Sampling != nil && have.Sampling == nil {
		missing = append(missing, "sampling")
	}
	if (need.RootsV2 != nil || need.Roots.ListChanged) && !HasRoots(have) {
		missing = append(missing, "roots")
	}
	if len(missing) == 0 {
		return nil
	}
	data, err := json.Marshal(map[string]any{"requiredCapabilities": required(need)})
	if err != nil {
		return err
	}
	return &jsonrpc.Error{
		Code:    mcp.CodeMissingRequiredClientCapabilities,
		Message: fmt.Sprintf("client did not declare required capabilities: %s", strings.Join(missing, ", ")),
		Data:    data,
	}
}

// HasRoots reports whether caps declare roots. Declaring roots at all
// (even without listChanged) counts.
func HasRoots(caps *mcp.ClientCapabilities) bool {
	return caps != nil && (caps.RootsV2 != nil || caps.Roots.ListChanged)
}

// required is need as JSON, with only the capabilities it sets: encoding
// *mcp.ClientCapabilities itself always writes "roots":{}, which would
// tell a client that declared roots that it lacks them.
func required(need *mcp.ClientCapabilities) map[string]any {
	out := map[string]any{}
	if need.Elicitation != nil {
		out["elicitation"] = need.Elicitation
	}
	if need.Sampling != nil {
		out["sampling"] = need.Sampling
	}
	switch {
	case need.RootsV2 != nil:
		out["roots"] = need.RootsV2
	case need.Roots.ListChanged:
		out["roots"] = need.Roots
	}
	return out
}
