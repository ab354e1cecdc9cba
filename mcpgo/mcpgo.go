// Package mcpgo seals MCP request state in servers built with
// github.com/mark3labs/mcp-go.
//
// Create an Adapter and pass its server options when building the server;
// tool and prompt handlers then keep working with plaintext RequestState
// while clients only see sealed tokens:
//
//	a, err := mcpgo.New(sealer, &mcpgo.Options{
//		Options: mrtr.Options{Audience: "https://mcp.example.com"}, // required
//		Principal: func(ctx context.Context, _ http.Header) string {
//			return userFrom(ctx) // the user your HTTP authentication put there
//		},
//	})
//	if err != nil { ... }
//	s := server.NewMCPServer("name", "1.0.0", a.ServerOptions()...)
//
// The package's Example runs this, both rounds of a tool call included.
//
// What mcp-go does not allow, and what that means here:
//
//   - Resource handlers return []mcp.ResourceContents, with no room for an
//     input_required result, so resources/read never carries state in
//     mcp-go and the adapter has nothing to seal there.
//   - Every error a tool or prompt handler (or its middleware) returns is
//     sent as JSON-RPC -32603 (internal error) with the error's text. A
//     state that fails to open is therefore answered -32603 with the
//     go-sdk adapter's message (mrtr.ClientError: "invalid requestState:
//     expired"), not its -32602 and data.reason; the handler never runs
//     either way.
//   - mcp-go has no standard authenticated principal. Options.Principal
//     supplies one (from the context your HTTP authentication sets, or the
//     request header). A request without a principal carries no state
//     unless mrtr.Options.AllowAnonymous is set: without Principal, every
//     input_required fails with -32603 "cannot seal requestState", and
//     mrtr.Options.Logger says why (mrtr.ErrNoPrincipal). Set
//     AllowAnonymous only for a server without user authentication whose
//     tools act the same for every caller.
//
// Metrics and logs name a tool or prompt as registered (mcp-go runs the
// middleware only for one it found), a resource by its URI if that exact
// resource is registered, and any other target, or a method that carries
// no state, "unknown": a client chooses the names it sends.
//
// Clients before protocol 2026-07-28 go through mcp-go's own bridge, which
// answers input requests in-process and calls the handler again through
// this middleware: the sealed state never leaves the server.
package mcpgo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/seal"
)

// Options configure the adapter. Options.Audience is required; a request
// with no principal carries no state unless Options.AllowAnonymous is set
// (see mrtr.Options).
type Options struct {
	mrtr.Options
	// Principal returns the authenticated caller of a request from its
	// context and HTTP header. nil means none: then only a server that
	// sets AllowAnonymous can answer input_required.
	Principal func(ctx context.Context, header http.Header) string
	// Session returns an application session id to bind; nil binds none.
	Session func(ctx context.Context, header http.Header) string
}

// An Adapter holds the tool and prompt middleware.
type Adapter struct {
	m *mrtr.States
	o Options
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
	return &Adapter{m: m, o: *o}, nil
}

// ServerOptions installs the tool, prompt and resource middleware, and a
// request hook that refuses a requestState on every path the middleware
// does not see (tools added with AddTaskTool, whose handlers mcp-go calls
// without tool middleware). Pass them after any server.WithHooks, which
// replaces the server's hooks.
func (a *Adapter) ServerOptions() []server.ServerOption {
	return []server.ServerOption{
		server.WithToolHandlerMiddleware(a.Tool),
		server.WithPromptHandlerMiddleware(a.Prompt),
		server.WithResourceHandlerMiddleware(a.Resource),
		a.guard,
	}
}

// Resource is the resource handler middleware. mcp-go's resource handlers
// cannot answer input_required, so no state was ever sealed for one: any
// requestState a client sends there is refused before the handler runs.
func (a *Adapter) Resource(next server.ResourceHandlerFunc) server.ResourceHandlerFunc {
	return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		if req.Params.RequestState != "" {
			return nil, clientError(a.m.Refuse(mrtr.Request{Method: mrtr.MethodReadResource, Target: req.Params.URI, Label: resourceLabel(ctx, req.Params.URI)}))
		}
		return next(ctx, req)
	}
}

// resourceLabel names uri in metrics: uri itself if the server or the
// session registered that resource, else mrtr.Unknown. A URI that only a
// template matches is one of as many as clients care to write, and mcp-go
// does not say which template matched.
func resourceLabel(ctx context.Context, uri string) string {
	if session, ok := server.ClientSessionFromContext(ctx).(server.SessionWithResources); ok {
		if _, ok := session.GetSessionResources()[uri]; ok {
			return uri
		}
	}
	if s := server.ServerFromContext(ctx); s != nil {
		if _, ok := s.ListResources()[uri]; ok {
			return uri
		}
	}
	return mrtr.Unknown
}

// request describes a call of a tool or prompt that mcp-go found
// registered (its handler middleware runs only then), so target is its
// label.
func (a *Adapter) request(ctx context.Context, method, target string, header http.Header, args []byte) mrtr.Request {
	r := mrtr.Request{Method: method, Target: target, Label: target, Arguments: args}
	if a.o.Principal != nil {
		r.Principal = a.o.Principal(ctx, header)
	}
	if a.o.Session != nil {
		r.Session = a.o.Session(ctx, header)
	}
	return r
}

// Tool is the tool handler middleware.
func (a *Adapter) Tool(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := []byte(req.Params.RawArguments)
		if args == nil && req.Params.Arguments != nil {
			var err error
			if args, err = json.Marshal(req.Params.Arguments); err != nil {
				return nil, fmt.Errorf("invalid arguments: %w", err)
			}
		}
		r := a.request(ctx, mrtr.MethodCallTool, req.Params.Name, req.Header, args)
		return around(ctx, a, r, &req.Params.RequestState,
			func() (*mcp.CallToolResult, error) { return next(ctx, req) },
			func(res *mcp.CallToolResult) *string { return &res.RequestState })
	}
}

// Prompt is the prompt handler middleware.
func (a *Adapter) Prompt(next server.PromptHandlerFunc) server.PromptHandlerFunc {
	return func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		var args []byte
		if req.Params.Arguments != nil {
			args, _ = json.Marshal(req.Params.Arguments) // map[string]string always marshals
		}
		r := a.request(ctx, mrtr.MethodGetPrompt, req.Params.Name, req.Header, args)
		return around(ctx, a, r, &req.Params.RequestState,
			func() (*mcp.GetPromptResult, error) { return next(ctx, req) },
			func(res *mcp.GetPromptResult) *string { return &res.RequestState })
	}
}

// around runs the handler through mrtr's Handle: it opens the state *in
// points to, calls the handler, and seals the state of its result.
func around[R any](ctx context.Context, a *Adapter, r mrtr.Request, in *string, handle func() (*R, error), out func(*R) *string) (*R, error) {
	var res *R
	err := a.m.Handle(ctx, r, in, nil, func() (*string, error) {
		var err error
		if res, err = handle(); err != nil || res == nil {
			return nil, err
		}
		return out(res), nil
	})
	if _, ok := err.(*mrtr.StateError); ok {
		return nil, clientError(err)
	}
	return res, err
}

// clientError is the error a client sees for an *mrtr.StateError: mcp-go
// sends every handler error as -32603 with its text, so the text is
// mrtr.ClientError's message, which ends with the reason.
func clientError(err error) error { return errors.New(mrtr.ClientError(err).Message) }
