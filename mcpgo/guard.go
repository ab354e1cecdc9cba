package mcpgo

import (
	"context"
	"encoding/json"

	"github.com/mark3labs/mcp-go/server"

	"github.com/stateseal/stateseal/mrtr"
)

// guard adds a request-initialization hook to s. mcp-go runs it for every
// request before any handler, on every path, so it is the one place that
// sees the requestState of a call the middleware is never given: a
// task-augmented call of a tool added with AddTaskTool. Such tools return
// CreateTaskResult, never input_required, so no state was sealed for them
// and any state sent is refused.
func (a *Adapter) guard(s *server.MCPServer) {
	hooks := s.GetHooks()
	if hooks == nil {
		hooks = &server.Hooks{}
		server.WithHooks(hooks)(s)
	}
	hooks.AddOnRequestInitialization(func(ctx context.Context, _ any, message any) error {
		raw, ok := message.(json.RawMessage)
		if !ok {
			return nil
		}
		var m struct {
			Method string `json:"method"`
			Params struct {
				Name         string `json:"name"`
				RequestState string `json:"requestState"`
			} `json:"params"`
		}
		// A message that does not decode is refused by mcp-go itself.
		if json.Unmarshal(raw, &m) != nil || m.Params.RequestState == "" {
			return nil
		}
		switch m.Method {
		case mrtr.MethodCallTool:
			if a.middlewareSees(ctx, s, m.Params.Name) {
				return nil
			}
		case mrtr.MethodGetPrompt, mrtr.MethodReadResource:
			return nil // the prompt and resource middleware see every such call
		}
		// The method and name are the client's: a task tool's name, or
		// any at all. Metrics name neither (mrtr.Unknown).
		return clientError(a.m.Refuse(mrtr.Request{Method: m.Method, Target: m.Params.Name, Label: mrtr.Unknown}))
	})
}

// middlewareSees reports whether a tools/call of name reaches a handler
// through the tool middleware: a tool added with AddTool, to the server or
// the session. A task tool does not.
func (a *Adapter) middlewareSees(ctx context.Context, s *server.MCPServer, name string) bool {
	if session, ok := server.ClientSessionFromContext(ctx).(server.SessionWithTools); ok {
		if _, ok := session.GetSessionTools()[name]; ok {
			return true
		}
	}
	return s.GetTool(name) != nil
}
