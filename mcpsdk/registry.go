package mcpsdk

import (
	"context"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/stateseal/stateseal/mrtr"
)

// A registry names the targets a server serves, so that metrics and logs
// name a target a client wrote only if the server registered it. The
// middleware runs before the go-sdk looks a target up, and the go-sdk has
// no lookup of its own to call, so the registry asks the server's list
// methods (tools/list, prompts/list, resources/list and
// resources/templates/list) through the handler below the middleware.
//
// It lists again only when a request names a target it does not hold, and
// at most once per refresh period: a tool added since is found within a
// period, and a flood of requests naming targets that do not exist costs
// one listing a period, not one per request.
type registry struct {
	refresh time.Duration
	now     func() time.Time
	kinds   [3]kind // tools, prompts, resources
}

// A kind is the registry of one method.
type kind struct {
	cur atomic.Pointer[listing]
	mu  sync.Mutex // held while listing
}

type listing struct {
	at        time.Time
	names     map[string]bool // tool or prompt names, resource URIs
	templates []template      // resources only
}

type template struct {
	raw string
	re  *regexp.Regexp
}

// maxPages bounds one listing, against a list method that never ends.
const maxPages = 1000

func newRegistry() *registry { return &registry{refresh: time.Second, now: time.Now} }

// label returns the name under which metrics may report target: target
// if the server registered it, the template a resource URI matched, or
// mrtr.Unknown.
func (r *registry) label(ctx context.Context, method, target string, req mcp.Request, next mcp.MethodHandler) string {
	var k *kind
	switch method {
	case mrtr.MethodCallTool:
		k = &r.kinds[0]
	case mrtr.MethodGetPrompt:
		k = &r.kinds[1]
	case mrtr.MethodReadResource:
		k = &r.kinds[2]
	default:
		return mrtr.Unknown
	}
	l := k.cur.Load()
	if name, ok := l.find(target); ok {
		return name
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if l2 := k.cur.Load(); l2 != l {
		l = l2 // listed while this request waited
	} else if l == nil || r.now().Sub(l.at) >= r.refresh {
		nl, ok := list(ctx, method, req, next)
		if !ok && l != nil {
			// Keep what was listed before: a request cancelled while
			// listing must not unname every target.
			nl = &listing{names: l.names, templates: l.templates}
		}
		nl.at = r.now()
		k.cur.Store(nl)
		l = nl
	}
	if name, ok := l.find(target); ok {
		return name
	}
	return mrtr.Unknown
}

func (l *listing) find(target string) (string, bool) {
	if l == nil {
		return "", false
	}
	if l.names[target] {
		return target, true
	}
	for _, t := range l.templates {
		if t.re.MatchString(target) {
			return t.raw, true
		}
	}
	return "", false
}

// list asks the server what it serves for method, and reports whether
// every list call succeeded.
func list(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (_ *listing, ok bool) {
	l := &listing{names: map[string]bool{}}
	// Without a session the request did not come through a server (a
	// test calling the handler), and there is no server to ask.
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return l, false
	}
	extra := req.GetExtra()
	switch method {
	case mrtr.MethodCallTool:
		ok = pages(ctx, next, "tools/list", func(cursor string) mcp.Request {
			return &mcp.ListToolsRequest{Session: ss, Extra: extra, Params: &mcp.ListToolsParams{Cursor: cursor}}
		}, func(res mcp.Result) string {
			r, _ := res.(*mcp.ListToolsResult)
			if r == nil {
				return ""
			}
			for _, t := range r.Tools {
				l.names[t.Name] = true
			}
			return r.NextCursor
		})
	case mrtr.MethodGetPrompt:
		ok = pages(ctx, next, "prompts/list", func(cursor string) mcp.Request {
			return &mcp.ListPromptsRequest{Session: ss, Extra: extra, Params: &mcp.ListPromptsParams{Cursor: cursor}}
		}, func(res mcp.Result) string {
			r, _ := res.(*mcp.ListPromptsResult)
			if r == nil {
				return ""
			}
			for _, p := range r.Prompts {
				l.names[p.Name] = true
			}
			return r.NextCursor
		})
	case mrtr.MethodReadResource:
		ok = pages(ctx, next, "resources/list", func(cursor string) mcp.Request {
			return &mcp.ListResourcesRequest{Session: ss, Extra: extra, Params: &mcp.ListResourcesParams{Cursor: cursor}}
		}, func(res mcp.Result) string {
			r, _ := res.(*mcp.ListResourcesResult)
			if r == nil {
				return ""
			}
			for _, rs := range r.Resources {
				l.names[rs.URI] = true
			}
			return r.NextCursor
		})
		ok = pages(ctx, next, "resources/templates/list", func(cursor string) mcp.Request {
			return &mcp.ListResourceTemplatesRequest{Session: ss, Extra: extra, Params: &mcp.ListResourceTemplatesParams{Cursor: cursor}}
		}, func(res mcp.Result) string {
			r, _ := res.(*mcp.ListResourceTemplatesResult)
			if r == nil {
				return ""
			}
			for _, rt := range r.ResourceTemplates {
				// The go-sdk matches templates the same way.
				if t, err := uritemplate.New(rt.URITemplate); err == nil {
					l.templates = append(l.templates, template{rt.URITemplate, t.Regexp()})
				}
			}
			return r.NextCursor
		}) && ok
	}
	return l, ok
}

// pages calls a list method until its last page, and hands each result
// to add, which returns the next cursor. It reports whether every call
// succeeded.
func pages(ctx context.Context, next mcp.MethodHandler, method string, request func(cursor string) mcp.Request, add func(mcp.Result) string) bool {
	cursor := ""
	for range maxPages {
		res, err := next(ctx, method, request(cursor))
		if err != nil {
			return false
		}
		if cursor = add(res); cursor == "" {
			return true
		}
	}
	return true
}
