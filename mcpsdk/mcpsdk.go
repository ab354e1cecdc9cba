// Package mcpsdk seals MCP request state in servers built with
// github.com/modelcontextprotocol/go-sdk.
//
// Create an Adapter with New and add its middleware to a server; handlers
// keep working with plaintext RequestState while clients only ever see
// sealed tokens:
//
//	a, err := mcpsdk.New(sealer, &mcpsdk.Options{Options: mrtr.Options{Audience: "https://mcp.example.com"}})
//	if err != nil { ... }
//	server.AddReceivingMiddleware(a.Middleware())
//	handler := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Stateless: true})
//
// Serve it stateless. Over a stateful streamable HTTP handler the go-sdk
// answers a handler's input_required itself, through its own in-process
// bridge, and the state never reaches a client: the middleware then seals
// nothing, and says nothing either.
//
// For tools/call, prompts/get and resources/read, the middleware opens the
// requestState a client sends back before the handler runs, and seals the
// RequestState a handler returns with an input_required result. The state
// is bound to the method, the tool or prompt name or resource URI, the
// principal (Extra.TokenInfo.UserID unless Options.Principal says
// otherwise), the audience, and a digest of the arguments. A state that
// fails to open is answered with JSON-RPC error -32602, the reason in the
// message and the data ("invalid requestState: expired", {"reason":
// "expired"}: mrtr.ClientError); the handler never runs.
//
// Metrics and logs name a target only as the server registered it, and
// anything else "unknown" (mrtr.Request.Label): a client chooses the name
// it sends. The go-sdk has no lookup a middleware can call, so the
// middleware lists the server's tools, prompts, resources and resource
// templates through the handler below it (the middleware added after it
// sees those list requests), when a request names a target it has not
// listed, at most once a second.
//
// Clients on protocol versions before 2026-07-28 keep working through the
// SDK's own bridge, which fulfils input requests in-process: the state then
// never leaves the server, and the middleware has nothing to seal.
// [RequireClientCapabilities] answers -32021 for a request whose client did
// not declare a capability the handler needs.
package mcpsdk

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/seal"
)

// Options configure the middleware. Options.Audience is required; a
// request with no principal carries no state unless
// Options.AllowAnonymous is set (see mrtr.Options).
type Options struct {
	mrtr.Options
	// Principal returns the authenticated caller of a request; nil means
	// the user id of Extra.TokenInfo, which is "" for unauthenticated
	// requests.
	Principal func(ctx context.Context, req mcp.Request) string
	// Session returns an application session or conversation id to bind,
	// or ""; nil means none.
	Session func(ctx context.Context, req mcp.Request) string
}

// An Adapter holds the middleware for one server.
type Adapter struct {
	m   *mrtr.States
	o   Options
	reg *registry
}

// New returns an adapter sealing with s. It fails if o is nil or names no
// audience: see mrtr.Options.
func New(s *seal.Sealer, o *Options) (*Adapter, error) {
	if o == nil {
		o = &Options{}
	}
	m, err := mrtr.New(s, &o.Options)
	if err != nil {
		return nil, err
	}
	return &Adapter{m: m, o: *o, reg: newRegistry()}, nil
}

// Middleware returns the receiving middleware that opens and seals
// requestState.
func (a *Adapter) Middleware() mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			r, state, ok := describe(method, req)
			if !ok {
				return next(ctx, method, req)
			}
			r.Principal = principal(ctx, req, &a.o)
			if a.o.Session != nil {
				r.Session = a.o.Session(ctx, req)
			}
			// The target is the client's word until the server is known
			// to serve it: metrics and logs name it by its label, looked
			// up only for a request that carries state.
			label := func() string { return a.reg.label(ctx, method, r.Target, req, next) }
			var res mcp.Result
			err := a.m.Handle(ctx, r, state, label, func() (*string, error) {
				var err error
				if res, err = next(ctx, method, req); err != nil || res == nil {
					return nil, err
				}
				return resultState(res), nil
			})
			if se, ok := err.(*mrtr.StateError); ok {
				return nil, wireError(se)
			}
			return res, err
		}
	}
}

// describe returns the binding of a request that may carry state, and a
// pointer to its RequestState.
func describe(method string, req mcp.Request) (mrtr.Request, *string, bool) {
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		if method == mrtr.MethodCallTool && r.Params != nil {
			return mrtr.Request{Method: method, Target: r.Params.Name, Arguments: r.Params.Arguments}, &r.Params.RequestState, true
		}
	case *mcp.GetPromptRequest:
		if method == mrtr.MethodGetPrompt && r.Params != nil {
			var args []byte
			if r.Params.Arguments != nil {
				args, _ = json.Marshal(r.Params.Arguments) // map[string]string always marshals
			}
			return mrtr.Request{Method: method, Target: r.Params.Name, Arguments: args}, &r.Params.RequestState, true
		}
	case *mcp.ReadResourceRequest:
		if method == mrtr.MethodReadResource && r.Params != nil {
			return mrtr.Request{Method: method, Target: r.Params.URI}, &r.Params.RequestState, true
		}
	}
	return mrtr.Request{}, nil, false
}

func resultState(res mcp.Result) *string {
	switch r := res.(type) {
	case *mcp.CallToolResult:
		return &r.RequestState
	case *mcp.GetPromptResult:
		return &r.RequestState
	case *mcp.ReadResourceResult:
		return &r.RequestState
	}
	return nil
}

func principal(ctx context.Context, req mcp.Request, o *Options) string {
	if o.Principal != nil {
		return o.Principal(ctx, req)
	}
	if e := req.GetExtra(); e != nil && e.TokenInfo != nil {
		return e.TokenInfo.UserID
	}
	return ""
}

// wireError is the error a client sees for a state that does not open,
// or that the handler's could not be sealed: mrtr.ClientError's answer,
// the reason in the message and in data.reason, nothing about which check
// failed. A single-use check that could not be made now ("unavailable")
// is an internal error, which the client may retry; "replayed" and
// "unvouched" are -32602 like every state that will never open.
func wireError(err *mrtr.StateError) error {
	a := mrtr.ClientError(err)
	e := &jsonrpc.Error{Code: int64(a.Code), Message: a.Message}
	if a.Reason != "" {
		e.Data, _ = json.Marshal(map[string]string{"reason": a.Reason})
	}
	return e
}
