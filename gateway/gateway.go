package gateway

import (
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stateseal/stateseal/mrtr"
)

// A Gateway is the reverse proxy: it opens the requestState a client
// sends before the request reaches the upstream, and seals the
// requestState of every result the upstream sends back, in a JSON body or
// event by event in an SSE stream. Set its fields, then serve it; the
// fields must not change after the first request.
type Gateway struct {
	// Upstreams are the MCP servers' base URLs, without a query (a
	// client's parameters would come after the URL's, and a server that
	// reads a parameter's last value would read the client's); requests
	// go to them in turn, with their path and query appended to the
	// URL's path. One
	// that refuses a connection is taken out of turn for a while, and
	// the request goes to the next (upstreams.go).
	Upstreams []*url.URL
	// KnownTargets are tool and prompt names and resource URIs that
	// metrics and logs may name whatever a state's verdict (the ones a
	// deployment configures: single use, lifetimes): a bounded set. A
	// rejected state for any other target is labelled mrtr.Unknown,
	// since the client chose its name.
	KnownTargets []string
	// HealthPath, if not empty, is a path (such as /healthz) the gateway
	// asks an upstream out of turn for, every second, to put it back in
	// turn as soon as it answers; empty, it comes back when its time out
	// ends.
	HealthPath string
	// AllowedHosts are the host names a request's Host may name (any
	// port; compared with ASCII case folded and a final dot removed; an
	// IPv6 address with or without its brackets; CheckAllowedHost), or
	// "*" for any: a request naming another gets 403 (-32600) and the
	// upstream never sees it, whatever its path and method (origin.go).
	// Empty, a request that reached the server on a loopback address
	// (its http.LocalAddrContextKey; one without a TCP address there is
	// held to the same rule) must name localhost or a loopback IP
	// address, and one that reached it
	// on another address may name any host: a web page whose name an
	// attacker rebinds to 127.0.0.1 cannot reach the gateway from the
	// user's browser, and a gateway on 0.0.0.0 serves whatever names
	// its clients use. A proxy on the same machine that forwards to the
	// gateway over loopback with its clients' Host needs their names
	// listed.
	AllowedHosts []string
	// AllowedOrigins are the web origins (scheme://host[:port],
	// https://app.example.com; CheckAllowedOrigin) whose pages may call
	// the gateway, or "*" for any. A request with an Origin header that
	// is not one of them (or "null", or unreadable, or two Origin
	// headers) gets 403 (-32600), as the MCP transport requires; one
	// without Origin is not a browser's and passes. Empty, a request
	// that reached the server on a loopback address may come from a page
	// served from loopback (http or https, localhost or a loopback IP
	// address, any port), and one that reached it on another address
	// from none.
	AllowedOrigins []string
	// Principal says who sent a request.
	Principal PrincipalSource
	// BindSession binds states to the request's Mcp-Session-Id header,
	// for an upstream that is stateful (one without the header binds "").
	BindSession bool
	// StripAuthorization removes the Authorization header before a
	// request goes upstream.
	StripAuthorization bool
	// MaxRequestBytes, MaxResponseBytes and MaxEventBytes bound a
	// request body, a JSON response body, and one SSE event.
	MaxRequestBytes, MaxResponseBytes, MaxEventBytes int64
	// MaxRequestBytesInFlight bounds the memory of all the request
	// bodies the gateway holds at once (read, or being read, until each
	// exchange ends): past it a request gets 503 and its connection is
	// closed, so that slow clients each sending most of MaxRequestBytes
	// cannot add up to more. The buffers are counted as they grow, so a
	// client must send the bytes it holds; a body rewritten with its
	// state opened counts again, and past the bound is refused the same
	// way, before anything goes upstream. 0 means no bound.
	MaxRequestBytesInFlight int64
	// MaxResponseBytesInFlight bounds, the same way, the memory of all
	// the JSON response bodies the gateway holds at once (read, or being
	// read, until the client has taken each) and of the SSE events it
	// holds: past it, the response is refused with a JSON-RPC error
	// (HTTP 503) for its calls, so that slow clients of large answers
	// cannot add up to more. A copy rewritten with its states sealed
	// counts too, but is not refused: the next response finds the
	// budget the lower. The upstream has answered by then: a
	// single-use state it took is in doubt (mrtr.ErrUndetermined). 0
	// means no bound.
	MaxResponseBytesInFlight int64
	// IdleTimeout ends a response from which nothing arrived for that
	// long (the client gets a JSON-RPC error for each call the upstream
	// did not answer); 0 means none.
	IdleTimeout time.Duration
	// BodyTimeout bounds the time to read a request's body, from the
	// moment the handler starts: a client sending it a byte at a time
	// gets 408 and the upstream nothing. 0 means none (the server's own
	// timeouts still apply). It needs a ResponseWriter that supports
	// http.ResponseController.SetReadDeadline, as net/http's do.
	BodyTimeout time.Duration
	// PassThrough lists paths that carry no MCP traffic (OAuth metadata,
	// say), each clean and absolute (CheckPassThrough): a request for
	// exactly one of them, spelled without escapes, goes upstream with
	// whatever method and body it has, unread. Its response is still
	// read as every other (a requestState in it is refused), and an
	// upgrade is refused there too. Every other path gets only what the
	// gateway reads: docs/GATEWAY.md, "What the gateway refuses".
	PassThrough []string
	// Transport reaches the upstreams; nil means a clone of
	// http.DefaultTransport that keeps 256 idle connections to each
	// upstream (the default's 2 would have it dial for most requests
	// under load). A request that used a single-use state goes on a
	// fresh connection (with a Transport of type *http.Transport, a clone
	// of it with DisableKeepAlives), so that a failure to connect proves
	// it unsent and its state is taken back; a RoundTripper of another
	// type is used as it is, and such a state may burn when a kept-alive
	// connection turns out closed.
	Transport http.RoundTripper
	// Logger receives errors; nil means slog.Default().
	Logger *slog.Logger
	// Stats counts what the gateway does.
	Stats Stats
	// Bridge, if set, serves clients of the 2025 protocols in front of
	// an upstream that speaks only 2026-07-28 (bridge.go): every request
	// that does not say 2026-07-28 in its MCP-Protocol-Version header,
	// but on a PassThrough path. nil passes such requests upstream as
	// they are, for an upstream that serves those versions itself.
	Bridge *Bridge

	states atomic.Pointer[mrtr.States] // nil until a keyset is loaded
	dog    watchdog
	once   sync.Once
	next   atomic.Uint64

	transport http.RoundTripper // Transport, or the default
	fresh     http.RoundTripper // transport without keep-alives, for single-use requests
	ups       []upstreamState   // one per Upstreams
	known     map[string]bool   // KnownTargets
	origin    originCheck       // AllowedHosts, AllowedOrigins
	// inFlight and respInFlight are the bytes of request and response
	// body buffers held now.
	inFlight, respInFlight atomic.Int64
	sealLog                everySecond // a state that could not be sealed
	localLog               everySecond // a dial that failed on this machine
}

// Stats counts requests refused, responses rewritten and upstream
// failures. Safe for concurrent use.
type Stats struct {
	Refused, Sealed, UpstreamErrors, Malformed atomic.Int64
	// Principal counts requests whose credentials were refused, by reason.
	Principal PrincipalStats
}

// SetStates installs the States that open and seal; until then the
// gateway answers 503 (the keyset is not loaded).
func (g *Gateway) SetStates(s *mrtr.States) { g.states.Store(s) }

// Ready reports whether a keyset is loaded.
func (g *Gateway) Ready() bool { return g.states.Load() != nil }

func (g *Gateway) logger() *slog.Logger {
	if g.Logger != nil {
		return g.Logger
	}
	return slog.Default()
}

func (g *Gateway) init() {
	g.once.Do(func() {
		g.transport = g.Transport
		if g.transport == nil {
			g.transport = defaultTransport()
		}
		g.fresh = g.transport
		if t, ok := g.transport.(*http.Transport); ok {
			f := t.Clone()
			f.DisableKeepAlives = true
			g.fresh = f
		}
		g.ups = make([]upstreamState, len(g.Upstreams))
		g.known = map[string]bool{}
		for _, t := range g.KnownTargets {
			g.known[t] = true
		}
		g.origin.hosts = newAllowList(g.AllowedHosts, hostEntry)
		g.origin.origins = newAllowList(g.AllowedOrigins, originEntry)
	})
}

const (
	headerVersion = "Mcp-Protocol-Version"
	headerSession = "Mcp-Session-Id"
	headerMethod  = "Mcp-Method"
	headerName    = "Mcp-Name"
	version2026   = "2026-07-28"
)

// ServeHTTP proxies one request, in one pass that reads top to bottom,
// each step in a file named for it, once the request's Host and Origin
// are admitted (origin.go): read the request or refuse it
// (read.go: admitRequest, readBody, then the message reader), open its
// state (open.go), forward it (forward.go), read the answer or refuse it
// (answer.go: admitResponse, then the body or the stream), seal it
// (seal.go), write it (write.go). A step that refuses returns why, and
// refuse (refuse.go) answers the client; end (exchange.go) gives back
// what the exchange held, whichever way it ends. A JSON answer is read
// and sealed whole; an SSE stream is read, sealed and written event by
// event, by a reader that has the exchange as its sealer (sse.go).
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.init()
	if err := g.admitOrigin(r); err != nil { // before anything: who may ask at all (origin.go)
		g.refuseFraming(w, err)
		return
	}
	if g.bridged(r) {
		g.serveBridge(w, r) // a client of the 2025 protocols (bridge.go)
		return
	}
	st := g.states.Load() // once: one exchange, one configuration
	if st == nil {
		http.Error(w, "gateway: no keyset loaded yet", http.StatusServiceUnavailable)
		return
	}
	ex := &exchange{g: g, st: st, r: r, version: r.Header.Get(headerVersion)}
	defer ex.end()
	req, err := ex.read(w)
	if err != nil {
		ex.refuse(w, err)
		return
	}
	if err := ex.open(&req); err != nil {
		ex.refuse(w, err)
		return
	}
	resp, err := ex.forward()
	if err != nil {
		ex.refuse(w, err)
		return
	}
	a, err := ex.readAnswer(resp)
	if err != nil {
		ex.refuse(w, err)
		return
	}
	if err := ex.seal(&a); err != nil {
		ex.refuse(w, err)
		return
	}
	ex.write(w, resp, &a)
}

// Header values the gateway sets on every request, shared: a header's
// slice is replaced or appended to (a slice of one, at capacity, is
// copied then), never written in place.
var (
	jsonType         = []string{"application/json"}
	sseType          = []string{"text/event-stream"}
	identityEncoding = []string{"identity"}
)
