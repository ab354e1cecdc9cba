package gateway

import (
	"context"
	"net/http"

	"github.com/stateseal/stateseal/mrtr"
)

// open is the walk's second step: it registers the calls of the
// request read (req), opens the state a call brings (openMessage), and
// replaces the body to send upstream (ex.sent) if that changed it; or
// refuses the request (a *refusal). A request whose body was not read (a
// pass-through path, a GET) opens nothing.
func (ex *exchange) open(req *clientRequest) error {
	if ex.calls == nil {
		return nil
	}
	if req.unread {
		// Its response most likely carries no state either: the request
		// is read only if it does (resolve).
		ex.single, ex.lazy = &call{}, ex.sent
		return nil
	}
	if req.batch {
		for i := range req.msgs {
			if _, _, ref := ex.openMessage(&req.msgs[i]); ref != nil {
				return ref
			}
		}
		return nil
	}
	out, c, ref := ex.openMessage(&req.msg)
	if ref != nil {
		return ref
	}
	ex.single = c
	if out != nil {
		// The copy is held, beside the body read, until the exchange
		// ends. It may be several times the body: a state's plaintext
		// can take more bytes as JSON than its token did (a control
		// byte, six). Nothing has gone upstream yet, so a copy past the
		// bound is refused as a body would be (settle gives a
		// single-use state back).
		if !take(&ex.g.inFlight, ex.g.MaxRequestBytesInFlight, int64(cap(out))) {
			return refuseFraming(http.StatusServiceUnavailable, "the gateway holds %d bytes of request bodies, its bound; try again", ex.g.MaxRequestBytesInFlight)
		}
		ex.reqHeld += int64(cap(out))
		ex.sent = out // else unchanged, byte for byte
	}
	return nil
}

// resolve reads the request that open left unread, when its response
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
	_, c, _ := ex.openMessage(&q)
	if c == nil {
		return
	}
	answered, upstreamAnswered := ex.single.answered, ex.single.upstreamAnswered
	*ex.single = *c
	ex.single.answered, ex.single.upstreamAnswered = answered, upstreamAnswered
	ex.calls[idKey(c.id)] = ex.single
}

// openMessage registers the call q makes (nil for a notification or a
// response) and opens the state it brings. It returns the message to
// send if it changed, or a refusal.
func (ex *exchange) openMessage(q *clientMessage) ([]byte, *call, *refusal) {
	g, st := ex.g, ex.st
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
		// A state that opened but cannot be written as JSON (not UTF-8:
		// sealed by a Go server sharing the keyset, not by a gateway,
		// which seals only what it read as JSON) is refused, and never
		// sent: a single use its open recorded is given back.
		c.mc.Release(context.WithoutCancel(ex.r.Context()))
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
