package gateway

import (
	"errors"
	"fmt"
	"net/http"
)

var (
	errUpstreamResponse = errors.New("malformed upstream response")
	errUpstreamRead     = errors.New("upstream response failed")
	// errResponseBudget is a response the gateway had no memory left to
	// hold (MaxResponseBytesInFlight).
	errResponseBudget = errors.New("the gateway is holding as many responses as it may")
)

// An answer is what readAnswer read of the upstream's answer.
type answer struct {
	body   []byte   // a body read whole, to write as it is (once sealed, for JSON)
	stream *sseBody // or a stream, to read, seal and write event by event
	ctype  string   // the Content-Type to write; "" for none
	// json is a JSON body: its messages, msgs if it is a batch that
	// may hold a state (readUpstreamBody), have their states sealed.
	json, batch bool
	msgs        []validValue
}

// readAnswer is the walk's fourth step: it reads the upstream's answer,
// or refuses it (admitResponse, admit.go, then the body): a JSON body (or
// one of another type, or none) read whole and checked, for seal; an SSE
// stream given to a reader that reads, seals and writes it event by
// event, with the exchange as its sealer (sse.go). What a body takes from
// the response budget is given back when the exchange ends.
func (ex *exchange) readAnswer(resp *http.Response) (a answer, err error) {
	g := ex.g
	kind, ctype, err := admitResponse(resp)
	if err != nil {
		resp.Body.Close()
		return a, err
	}
	if ex.r.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		kind = respEmpty // no body, whatever its headers say
	}
	if g.IdleTimeout > 0 {
		ex.w = &watched{body: resp.Body} // unwatched when the exchange ends
		ex.progress()
		g.dog.watch(ex.w, g.IdleTimeout)
	}
	switch kind {
	case respSSE:
		a.ctype, a.stream = ctype, newSSEReader(resp.Body, g, ex)
		ex.stream = a.stream // closed when the exchange ends
		return a, nil
	case respEmpty:
		resp.Body.Close()
		if ex.r.Method == http.MethodHead {
			// The type of the body a GET would get, as the gateway
			// would write it.
			a.ctype = ctype
		}
		return a, nil
	}
	if g.MaxResponseBytes > 0 && resp.ContentLength > g.MaxResponseBytes {
		resp.Body.Close()
		return a, fmt.Errorf("%w: a JSON response over %d bytes", errUpstreamResponse, g.MaxResponseBytes)
	}
	body, held, err := readBudgeted(progressReader{resp.Body, ex}, resp.ContentLength, g.MaxResponseBytes, g.MaxResponseBytesInFlight, &g.respInFlight)
	ex.respHeld = held // the body is held until the client has it
	resp.Body.Close()
	if err != nil && ex.timedOut() {
		err = errIdle
	}
	switch {
	case errors.Is(err, errTooLarge):
		return a, fmt.Errorf("%w: a JSON response over %d bytes", errUpstreamResponse, g.MaxResponseBytes)
	case errors.Is(err, errBudget):
		return a, fmt.Errorf("%w: the gateway holds %d bytes of responses, its bound (-max-response-bytes-in-flight)", errResponseBudget, g.MaxResponseBytesInFlight)
	case err != nil:
		return a, fmt.Errorf("%w: %w", errUpstreamRead, err)
	}
	untyped := ctype == "" && kind == respJSON
	switch {
	case untyped && !looksJSON(body):
		// Read as a body of another type, and typed as the text the
		// gateway checked it is: untyped, a server would sniff a type
		// for it, a client a charset.
		kind, ctype = respOther, otherType("text/plain")
	case untyped:
		// Read as JSON: the client is told so, rather than left to
		// sniff a type of its own.
		ctype = "application/json"
	}
	a.ctype, a.body = ctype, body
	if kind == respOther {
		return a, checkOther(body)
	}
	return a, ex.readJSON(&a, body)
}

// readJSON reads a JSON body (readUpstreamBody, message.go) into a, or
// refuses it: one message, or a batch of them.
func (ex *exchange) readJSON(a *answer, body []byte) error {
	msgs, batch, err := readUpstreamBody(body)
	if err != nil {
		return fmt.Errorf("%w: %v", errUpstreamResponse, err)
	}
	if batch && ex.single != nil {
		// A client reads each element as a message: one of them may
		// be the call's answer, which the gateway would not have read.
		return fmt.Errorf("%w: a batch answering a request that is not one", errUpstreamResponse)
	}
	a.body, a.json, a.batch, a.msgs = body, true, batch, msgs
	return nil
}
