package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json/jsontext"

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
	// client must send the bytes it holds. 0 means no bound.
	MaxRequestBytesInFlight int64
	// MaxResponseBytesInFlight bounds, the same way, the memory of all
	// the JSON response bodies the gateway holds at once (read, or being
	// read, until the client has taken each) and of the SSE events it
	// holds: past it, the response is refused with a JSON-RPC error
	// (HTTP 503) for its calls, so that slow clients of large answers
	// cannot add up to more. The upstream has answered by then: a
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

	states atomic.Pointer[mrtr.States] // nil until a keyset is loaded
	dog    watchdog
	once   sync.Once
	next   atomic.Uint64

	transport http.RoundTripper // Transport, or the default
	fresh     http.RoundTripper // transport without keep-alives, for single-use requests
	ups       []upstreamState   // one per Upstreams
	known     map[string]bool   // KnownTargets
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
	})
}

const (
	headerVersion = "Mcp-Protocol-Version"
	headerSession = "Mcp-Session-Id"
	headerMethod  = "Mcp-Method"
	headerName    = "Mcp-Name"
	version2026   = "2026-07-28"
)

// ServeHTTP proxies one request, in one pass: read the request or
// refuse it (admitRequest, then the message reader), open its state,
// forward it (forward.go), read the answer or refuse it (readResponse,
// admitResponse), seal, write. A JSON answer is read whole; an SSE stream is read, sealed
// and written event by event.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.init()
	st := g.states.Load()
	if st == nil {
		http.Error(w, "gateway: no keyset loaded yet", http.StatusServiceUnavailable)
		return
	}
	ex := &exchange{g: g, st: st, r: r, version: r.Header.Get(headerVersion)}
	defer ex.settle()
	passthrough, ferr := g.admitRequest(r)
	if ferr != nil {
		g.refuseFraming(w, ferr)
		return
	}
	if !passthrough && r.Method == http.MethodPost {
		body, held, err := g.readBody(w, r)
		defer g.inFlight.Add(-held) // the body is held until the exchange ends
		if err != nil {
			g.refuseFraming(w, err)
			return
		}
		out, refusal := g.inspect(ex, st, body)
		if refusal != nil {
			g.Stats.Refused.Add(1)
			status := http.StatusOK
			// Since 2026-07-28 the go-sdk answers -32602 with HTTP 400
			// (SEP-2575), and so does the gateway.
			if refusal.Code == codeInvalidParams && ex.version >= version2026 || refusal.Code == codeParseError || refusal.Code == codeInvalidRequest {
				status = http.StatusBadRequest
			}
			writeJSON(w, status, errorMessage(refusal.id, refusal.rpcError))
			return
		}
		ex.sent = out
	}
	g.forward(ex, w, r, passthrough)
}

// refuseFraming answers a request the gateway does not read.
func (g *Gateway) refuseFraming(w http.ResponseWriter, e *framingError) {
	g.Stats.Refused.Add(1)
	if e.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", "POST, GET, HEAD, DELETE, OPTIONS")
	}
	switch e.status {
	case http.StatusRequestTimeout, http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable:
		// The rest of the body is not read: the connection ends.
		w.Header().Set("Connection", "close")
	}
	if e.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.status, errorMessage(nil, rpcError{Code: codeInvalidRequest, Message: "gateway: " + e.msg}))
}

func writeJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

const parseErrorMessage = "parse error: the gateway reads JSON strictly (no member named twice, valid UTF-8, no JSON-RPC member name in another case)"

type refusal struct {
	id jsontext.Value
	rpcError
}

// inspect reads the request's message (or batch) with readRequest, opens
// the state a state-carrying call brings, and returns the body to send
// upstream, or the refusal to send the client instead.
func (g *Gateway) inspect(ex *exchange, st *mrtr.States, body []byte) ([]byte, *refusal) {
	ex.calls = map[string]*call{}
	req, id, err := readRequest(body)
	if err != nil {
		return nil, &refusal{id: id, rpcError: rpcError{Code: codeParseError, Message: parseErrorMessage}}
	}
	if req.unread {
		// Its response most likely carries no state either: the request
		// is read only if it does (resolve).
		ex.single, ex.lazy = &call{}, body
		return body, nil
	}
	if req.batch {
		for i := range req.msgs {
			if _, _, ref := g.open(ex, st, &req.msgs[i]); ref != nil {
				return nil, ref
			}
		}
		return body, nil
	}
	out, c, ref := g.open(ex, st, &req.msg)
	if ref != nil {
		return nil, ref
	}
	ex.single = c
	if out == nil {
		return body, nil // unchanged, byte for byte
	}
	return out, nil
}

// resolve reads the request that inspect left unread, when its response
// turns out to need it: to seal a state under its binding, or to name its
// id in an error. A request the gateway cannot read strictly gets no
// state sealed (the result becomes "cannot seal requestState").
func (ex *exchange) resolve() {
	body := ex.lazy
	if body == nil {
		return
	}
	ex.lazy = nil
	q, err := readLazily(body, validValue(body)) // validated by readRequest
	if err != nil {
		return
	}
	_, c, _ := ex.g.open(ex, ex.st, &q)
	if c == nil {
		return
	}
	answered, upstreamAnswered := ex.single.answered, ex.single.upstreamAnswered
	*ex.single = *c
	ex.single.answered, ex.single.upstreamAnswered = answered, upstreamAnswered
	ex.calls[idKey(c.id)] = ex.single
}

// open registers the call q makes (nil for a notification or a
// response) and opens the state it brings. It returns the message to
// send if it changed, or a refusal.
func (g *Gateway) open(ex *exchange, st *mrtr.States, q *clientMessage) ([]byte, *call, *refusal) {
	var c *call
	if q.call {
		c = &call{id: q.id}
		ex.calls[idKey(q.id)] = c
	}
	if q.refuse {
		return nil, nil, &refusal{id: q.id, rpcError: stateError(st.Refuse(mrtr.Request{Method: q.method, Label: mrtr.Unknown}))}
	}
	if !q.stateful {
		return nil, c, nil
	}
	if ref := routingMismatch(ex.r.Header, q); ref != nil {
		return nil, nil, ref
	}
	c.req = mrtr.Request{Method: q.method, Target: q.target, Arguments: q.args}
	switch {
	case g.known[q.target]:
		c.req.Label = q.target
	case q.method == mrtr.MethodReadResource:
		// A resource URI is the client's, without bound (one template
		// serves any number): metrics and logs name it only if the
		// configuration does. A tool or prompt is named once the state
		// authenticates: the upstream answered for it.
		c.req.Label = mrtr.Unknown
	}
	if g.BindSession {
		c.req.Session = ex.r.Header.Get(headerSession)
	}
	if q.state == "" {
		return nil, c, nil // absent: the first round
	}
	plain, err := ex.mrtrCall(c, st).Open(ex.r.Context(), q.state)
	if err != nil {
		return nil, nil, &refusal{id: q.id, rpcError: stateError(err)}
	}
	out, err := q.withState(plain)
	if err != nil {
		return nil, nil, &refusal{id: q.id, rpcError: stateError(errBadState)}
	}
	return out, c, nil
}

// routingMismatch refuses a call whose Mcp-Method or Mcp-Name header
// (MCP 2026-07-28 sends both, for routing) names another method or
// target than its body: an upstream that routes by the header would run
// another tool than the one the state is bound to, with its state. An
// absent header is the client's choice (earlier versions send none).
func routingMismatch(h http.Header, q *clientMessage) *refusal {
	for _, hv := range [...]struct{ name, want, what string }{{headerMethod, q.method, "method"}, {headerName, q.target, q.targetKey}} {
		v, ok := h[hv.name]
		if ok && (len(v) != 1 || v[0] != hv.want) {
			return &refusal{id: q.id, rpcError: rpcError{Code: codeInvalidRequest,
				Message: "gateway: the " + hv.name + " header does not match the request's " + hv.what}}
		}
	}
	return nil
}

// Header values the gateway sets on every request, shared: a header's
// slice is replaced or appended to (a slice of one, at capacity, is
// copied then), never written in place.
var (
	jsonType         = []string{"application/json"}
	sseType          = []string{"text/event-stream"}
	identityEncoding = []string{"identity"}
)

var (
	errUpstreamResponse = errors.New("malformed upstream response")
	errUpstreamRead     = errors.New("upstream response failed")
	// errResponseBudget is a response the gateway had no memory left to
	// hold (MaxResponseBytesInFlight).
	errResponseBudget = errors.New("the gateway is holding as many responses as it may")
)

// rewriteBody seals the state of every result in a JSON body: one message
// or a batch.
func (ex *exchange) rewriteBody(body []byte) ([]byte, error) {
	msgs, batch, err := readUpstreamBody(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUpstreamResponse, err)
	}
	if batch && ex.single != nil {
		// A client reads each element as a message: one of them may
		// be the call's answer, which the gateway would not have read.
		return nil, fmt.Errorf("%w: a batch answering a request that is not one", errUpstreamResponse)
	}
	// readUpstreamBody validated the body, and with it every message.
	if !batch {
		out, err := ex.rewriteMessage(body, validValue(body))
		if err != nil || out == nil {
			return body, err
		}
		return out, nil
	}
	changed := false
	out := make([][]byte, len(msgs))
	for i, raw := range msgs {
		m, err := ex.rewriteMessage(raw, raw) // inside the valid body
		if err != nil {
			return nil, err
		}
		out[i] = raw
		if m != nil {
			out[i], changed = m, true
		}
	}
	if !changed {
		return body, nil
	}
	return joinArray(out), nil
}

// rewriteMessage seals the state of one message from upstream if it is a
// result that carries one. It returns nil if the message is unchanged.
// A message that names a call of the exchange marks it answered. valid
// is raw as validated already, or nil.
func (ex *exchange) rewriteMessage(raw []byte, valid validValue) ([]byte, error) {
	if ex.single != nil {
		if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) > 0 && t[0] == '[' {
			return nil, fmt.Errorf("%w: a batch answering a request that is not one", errUpstreamResponse)
		}
	}
	if ex.single != nil && !hasState(raw) {
		// The common case: the one call's response, without state,
		// passed unchanged; marked answered if it is the call's
		// (another id answers nothing: the call still gets its error
		// if the stream breaks, and its state's use is in doubt).
		if !ex.single.answered && mayAnswer(raw) && ex.answersSingle(raw, valid) {
			ex.single.answered, ex.single.upstreamAnswered = true, true
		}
		return nil, nil
	}
	ex.resolve()
	u, err := readUpstreamMessage(raw, valid)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUpstreamResponse, err)
	}
	var c *call
	if u.answers {
		if c = ex.calls[idKey(u.id)]; c != nil {
			c.answered, c.upstreamAnswered = true, true
		}
	}
	if u.stray {
		// A requestState the gateway would not seal: its plaintext must
		// not reach the client.
		ex.g.logger().Error("gateway: upstream sent a requestState outside a result's own; refusing it", "method", methodOf(c))
		if u.answers {
			return errorMessage(u.id, strayError), nil
		}
		return nil, fmt.Errorf("%w: a notification or request carrying a requestState", errUpstreamResponse)
	}
	if u.state == "" {
		return nil, nil
	}
	st := ex.st
	if c == nil || !c.stateful() {
		// A state for a request that cannot carry one back (another
		// method, a batch, an id the gateway did not send): its
		// plaintext must not reach the client.
		ex.g.logger().Error("gateway: upstream returned a requestState for a request that cannot carry state; answering an error", "method", methodOf(c))
		return errorMessage(u.id, sealError), nil
	}
	tok, err := ex.mrtrCall(c, st).Seal(u.state)
	if err != nil {
		method, target := c.req.Method, mrtr.Unknown
		switch {
		case !ex.g.sealLog.allow():
			// Logged at most once a second: clients choose how often.
		case errors.Is(err, mrtr.ErrNoPrincipal):
			// mrtr's advice names its Go option; a gateway's user sets a flag.
			ex.g.logger().Warn("gateway: cannot seal requestState for a request without a principal (its credentials were refused or absent: see the reason logged, and sealgate_principal_failures_total); -principal anonymous binds states to no user", "method", method)
		default:
			ex.g.logger().Error("gateway: cannot seal requestState; failing the request", "method", method, "target", target, "err", err)
		}
		return errorMessage(u.id, sealError), nil
	}
	out, err := u.withState(tok)
	if err != nil {
		return errorMessage(u.id, sealError), nil
	}
	ex.g.Stats.Sealed.Add(1)
	return out, nil
}

// answersSingle reports whether raw, a message from upstream without a
// state, is a response to the exchange's one call: its id read, not
// guessed from the bytes. valid is raw as validated, or nil.
func (ex *exchange) answersSingle(raw []byte, valid validValue) bool {
	ex.resolve() // the call's id, if the request was left unread
	if ex.single.id == nil {
		return false
	}
	if valid == nil {
		var err error
		if valid, err = validated(raw); err != nil {
			return false
		}
	}
	m, err := splitObject(valid)
	if err != nil {
		return false
	}
	id, ok := m.get("id")
	_, isResult := m.get("result")
	_, isError := m.get("error")
	return ok && (isResult || isError) && idKey(id) == idKey(ex.single.id)
}

func methodOf(c *call) string {
	if c == nil {
		return "unknown id"
	}
	if c.req.Method == "" {
		return "other"
	}
	return c.req.Method
}
