package gateway

import (
	"context"
	"errors"
	"net/http"

	"github.com/go-json-experiment/json/jsontext"
)

// refuse answers the client when a step of the walk refused the request
// or its answer: err is a *framingError (a request the gateway does not
// read), a *refusal (a message it read and refuses), or the upstream's
// failure.
func (ex *exchange) refuse(w http.ResponseWriter, err error) {
	switch e := err.(type) {
	case *framingError:
		ex.g.refuseFraming(w, e)
	case *refusal:
		ex.refuseMessage(w, e)
	default:
		ex.g.upstreamFailed(w, ex, err)
	}
}

// A refusal is a JSON-RPC error for a message the gateway read and
// refuses: it goes to the client, and the request nowhere.
type refusal struct {
	id jsontext.Value
	rpcError
}

func (r *refusal) Error() string { return r.Message }

// refuseMessage answers a request refused for one of its messages.
func (ex *exchange) refuseMessage(w http.ResponseWriter, ref *refusal) {
	ex.g.Stats.Refused.Add(1)
	status := http.StatusOK
	// Since 2026-07-28 the go-sdk answers -32602 with HTTP 400
	// (SEP-2575), and so does the gateway.
	if ref.Code == codeInvalidParams && ex.version >= version2026 || ref.Code == codeParseError || ref.Code == codeInvalidRequest {
		status = http.StatusBadRequest
	}
	writeJSON(w, status, errorMessage(ref.id, ref.rpcError))
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

// upstreamFailed answers a request whose upstream failed: a JSON-RPC
// error for its call if it was one.
func (g *Gateway) upstreamFailed(w http.ResponseWriter, ex *exchange, err error) {
	g.Stats.UpstreamErrors.Add(1)
	status, msg := http.StatusBadGateway, "upstream unavailable"
	switch {
	case errors.Is(err, errNoUpstream):
		msg = errNoUpstream.Error()
	case errors.Is(err, errUpstreamResponse):
		g.Stats.Malformed.Add(1)
		msg = errUpstreamResponse.Error()
	case errors.Is(err, errResponseBudget):
		// The upstream answered; the gateway cannot hold the answer.
		status, msg = http.StatusServiceUnavailable, "upstream response dropped: "+errResponseBudget.Error()
	case errors.Is(err, errIdle), errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		status, msg = http.StatusGatewayTimeout, "upstream timed out"
	}
	g.logger().Warn("gateway: upstream failed", "status", status, "err", err)
	if ex.calls == nil {
		http.Error(w, msg, status)
		return
	}
	ex.resolve()
	var id jsontext.Value
	if ex.single != nil {
		id = ex.single.id
	}
	writeJSON(w, status, errorMessage(id, rpcError{Code: codeInternalError, Message: msg}))
}
