package gateway

import "net/http"

// read is the walk's first step: the request's framing (admitRequest,
// admit.go), its body (readBody, body.go) and its message or batch (the
// message reader, readRequest in message.go), for open; or why it is
// refused: a *framingError, or a *refusal with -32700. A request on a
// pass-through path, or of another method than POST, has no body the
// gateway reads.
func (ex *exchange) read(w http.ResponseWriter) (clientRequest, error) {
	g, r := ex.g, ex.r
	passthrough, ferr := g.admitRequest(r)
	if ferr != nil {
		return clientRequest{}, ferr
	}
	ex.passthrough = passthrough
	if passthrough || r.Method != http.MethodPost {
		return clientRequest{}, nil
	}
	body, held, ferr := g.readBody(w, r)
	ex.reqHeld = held // the body is held until the exchange ends
	if ferr != nil {
		return clientRequest{}, ferr
	}
	return ex.readMessages(body)
}

const parseErrorMessage = "parse error: the gateway reads JSON strictly (no member named twice, valid UTF-8, no JSON-RPC member name in another case)"

// readMessages reads body, the request's message or batch; or refuses
// it. The body is what goes upstream (ex.sent) unless open changes it.
func (ex *exchange) readMessages(body []byte) (clientRequest, error) {
	ex.calls = map[string]*call{}
	ex.sent = body
	req, id, err := readRequest(body)
	if err != nil {
		return req, &refusal{id: id, rpcError: rpcError{Code: codeParseError, Message: parseErrorMessage}}
	}
	return req, nil
}
