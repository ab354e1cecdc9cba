package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/stateseal/stateseal/seal"
)

// legacyMessage is what the bridge reads of a 2025 client's message,
// strictly (go-json-experiment's defaults: no name twice, valid UTF-8,
// names matched exactly).
type legacyMessage struct {
	JSONRPC string         `json:"jsonrpc"`
	ID      jsontext.Value `json:"id,omitzero"`
	Method  string         `json:"method,omitzero"`
	Params  jsontext.Value `json:"params,omitzero"`
	Result  jsontext.Value `json:"result,omitzero"`
	Error   jsontext.Value `json:"error,omitzero"`
}

func (m *legacyMessage) isResponse() bool {
	return m.Method == "" && len(m.ID) > 0 && (len(m.Result) > 0) != (len(m.Error) > 0)
}

// serveBridge answers a request of a 2025 client, in the order a server
// of its version would: the HTTP method, the body read strictly, the
// session (but for initialize), then the message by kind.
func (g *Gateway) serveBridge(w http.ResponseWriter, r *http.Request) {
	b := g.Bridge
	b.init()
	st := g.states.Load()
	if st == nil {
		http.Error(w, "gateway: no keyset loaded yet", http.StatusServiceUnavailable)
		return
	}
	sl := st.Sealer()
	principal, _ := g.Principal.Principal(r) // "" when it has none: bound as such, as the walk binds states
	if _, ferr := g.admitRequest(r); ferr != nil {
		g.refuseFraming(w, ferr)
		return
	}
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		// Sessions live in their ids, not here: they end at expiry. The
		// version's own answer for a server that does not let clients
		// end sessions is 405; this instance's calls of the session end.
		s, err := b.session(sl, r, principal)
		if err != nil {
			bridgeHTTPError(w, err)
			return
		}
		b.pending.cancelSession(s.Nonce)
		w.Header().Set("Allow", "POST")
		http.Error(w, "gateway: sessions end at their expiry; this server does not end them on DELETE", http.StatusMethodNotAllowed)
		return
	default:
		// No stream for server-initiated messages outside a call (GET):
		// the version lets a server answer 405.
		w.Header().Set("Allow", "POST, DELETE")
		http.Error(w, "gateway: no standalone stream; server requests arrive on the call's stream", http.StatusMethodNotAllowed)
		return
	}
	body, held, ferr := g.readBody(w, r)
	defer func() { g.inFlight.Add(-held) }()
	if ferr != nil {
		g.refuseFraming(w, ferr)
		return
	}
	var m legacyMessage
	if len(body) > 0 && body[0] == '[' || json.Unmarshal(body, &m) != nil || m.JSONRPC != "2.0" {
		// A batch (2025-03-26) is not bridged: each of its calls could
		// need input of its own on one stream.
		writeJSON(w, http.StatusBadRequest, errorMessage(nil, rpcError{Code: codeParseError, Message: parseErrorMessage + "; one JSON-RPC message per request (batches are not bridged)"}))
		return
	}
	if len(m.ID) > 0 && m.ID.Kind() != '"' && !integerID(m.ID) {
		writeJSON(w, http.StatusBadRequest, errorMessage(nil, rpcError{Code: codeInvalidRequest, Message: "gateway: a JSON-RPC id must be a string or an integer"}))
		return
	}
	if m.Method == "initialize" {
		g.bridgeInitialize(w, r, sl, &m, principal)
		return
	}
	if len(r.Header[headerVersion]) == 0 && len(r.Header[headerSession]) == 0 {
		// No version and no session: not a 2025 client's (it sends
		// both after initialize). The walk reads it again, as it came.
		g.inFlight.Add(-held)
		held = 0
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		g.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), walkOnly{}, true)))
		return
	}
	s, err := b.session(sl, r, principal)
	if err != nil {
		bridgeHTTPError(w, err)
		return
	}
	// The body is parsed: its bytes leave the request budget, which a
	// call waiting minutes for its client would otherwise keep from
	// everyone else. Each round's request is counted by the walk.
	g.inFlight.Add(-held)
	held = 0
	switch {
	case m.isResponse():
		b.takeAnswer(w, r, s, &m)
	case len(m.ID) == 0 && m.Method != "":
		g.bridgeNotification(w, s, &m)
	case m.Method == "ping":
		writeJSON(w, http.StatusOK, resultMessage(m.ID, jsontext.Value("{}")))
	case m.Method == "logging/setLevel":
		// 2026-07-28 has no such method and the upstream keeps no level:
		// accepted, and every log message still reaches the client.
		writeJSON(w, http.StatusOK, resultMessage(m.ID, jsontext.Value("{}")))
	case m.Method != "":
		g.bridgeCall(w, r, s, &m)
	default:
		writeJSON(w, http.StatusBadRequest, errorMessage(m.ID, rpcError{Code: codeInvalidRequest, Message: "gateway: not a JSON-RPC request, notification or response"}))
	}
}

// bridgeHTTPError answers a request whose session is missing (400) or
// not found (404: the client initializes again), as 2025 servers do.
func bridgeHTTPError(w http.ResponseWriter, err error) {
	status := http.StatusNotFound
	if err == errNoSession {
		status = http.StatusBadRequest
	}
	writeJSON(w, status, errorMessage(nil, rpcError{Code: codeInvalidRequest, Message: err.Error()}))
}

// bridgeInitialize answers initialize with the upstream's info and
// capabilities, asked the 2026-07-28 way (server/discover), and a new
// session id.
func (g *Gateway) bridgeInitialize(w http.ResponseWriter, r *http.Request, sl *seal.Sealer, m *legacyMessage, principal string) {
	var p struct {
		ProtocolVersion string         `json:"protocolVersion"`
		Capabilities    jsontext.Value `json:"capabilities"`
		ClientInfo      jsontext.Value `json:"clientInfo,omitzero"`
	}
	if len(m.ID) == 0 || json.Unmarshal(m.Params, &p) != nil || len(p.Capabilities) == 0 || p.Capabilities.Kind() != '{' {
		writeJSON(w, http.StatusBadRequest, errorMessage(m.ID, rpcError{Code: codeInvalidParams, Message: "gateway: initialize needs params with protocolVersion and capabilities (an object)"}))
		return
	}
	version := bridgeVersions[0]
	if slices.Contains(bridgeVersions, p.ProtocolVersion) {
		version = p.ProtocolVersion
	}
	s := &session{Version: version, Caps: compact(p.Capabilities), Info: compact(p.ClientInfo), principal: principal}
	d, err := g.discover(r, s)
	if err != nil {
		writeJSON(w, http.StatusOK, errorMessage(m.ID, rpcError{Code: codeInternalError, Message: "gateway: the upstream did not answer server/discover: " + err.Error()}))
		return
	}
	id, err := g.Bridge.newSession(sl, s, principal)
	if err != nil {
		writeJSON(w, http.StatusOK, errorMessage(m.ID, rpcError{Code: codeInternalError, Message: err.Error()}))
		return
	}
	caps := bridgedCaps(d.Capabilities)
	res := struct {
		ProtocolVersion string         `json:"protocolVersion"`
		Capabilities    jsontext.Value `json:"capabilities"`
		ServerInfo      jsontext.Value `json:"serverInfo"`
		Instructions    string         `json:"instructions,omitzero"`
	}{version, caps, d.ServerInfo, d.Instructions}
	out, _ := json.Marshal(res)
	w.Header().Set(headerSession, id)
	writeJSON(w, http.StatusOK, resultMessage(m.ID, out))
}

// bridgeNotification takes a client's notification: a cancellation ends
// the call it names; the rest have no one to go to (2026-07-28 has no
// initialized, roots list_changed or client progress).
func (g *Gateway) bridgeNotification(w http.ResponseWriter, s *session, m *legacyMessage) {
	if m.Method == "notifications/cancelled" {
		var p struct {
			RequestID jsontext.Value `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &p) == nil && len(p.RequestID) > 0 {
			g.Bridge.pending.cancelCall(s.Nonce, string(compact(p.RequestID)))
		}
	}
	w.WriteHeader(http.StatusAccepted)
}

// resultMessage is a JSON-RPC result response to id.
func resultMessage(id, result jsontext.Value) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      jsontext.Value `json:"id"`
		Result  jsontext.Value `json:"result"`
	}{"2.0", id, result})
	return b
}

// compact is v without blanks (nil stays nil): values the bridge keeps
// or compares.
func compact(v jsontext.Value) jsontext.Value {
	if len(v) == 0 {
		return nil
	}
	c := slices.Clone(v)
	if c.Compact() != nil {
		return nil
	}
	return c
}

// bridgedCaps is the upstream's capabilities as a 2025 client may rely
// on them through the bridge: without resources.subscribe and the
// listChanged flags, whose notifications a 2025 server sends on a
// session's own stream, which the bridge does not keep (2026-07-28's
// subscriptions/listen is not bridged).
func bridgedCaps(c jsontext.Value) jsontext.Value {
	var m map[string]jsontext.Value
	if json.Unmarshal(c, &m) != nil {
		return c
	}
	for _, k := range []string{"tools", "prompts", "resources"} {
		var sub map[string]jsontext.Value
		if v, ok := m[k]; !ok || json.Unmarshal(v, &sub) != nil {
			continue
		}
		delete(sub, "listChanged")
		delete(sub, "subscribe")
		m[k], _ = json.Marshal(sub, json.Deterministic(true))
	}
	out, err := json.Marshal(m, json.Deterministic(true))
	if err != nil {
		return c
	}
	return out
}

// integerID reports whether id is a JSON integer of at most 18 digits:
// the ids a client may give besides strings (no fraction, exponent or
// null, which some readers would read as another id).
func integerID(id jsontext.Value) bool {
	d := bytes.TrimPrefix(id, []byte("-"))
	if len(d) == 0 || len(d) > 18 || len(d) > 1 && d[0] == '0' {
		return false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
