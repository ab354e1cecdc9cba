package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// bridgeCall serves one request of a legacy client: sent upstream in the
// 2026-07-28 form through the walk, and while the upstream answers
// input_required, each input request goes to the client on this call's
// stream, its answers are gathered, and the upstream is retried with
// them and the requestState, at most MaxRounds times. The client gets
// the final result or error, with its own id, and never a requestState.
func (g *Gateway) bridgeCall(w http.ResponseWriter, r *http.Request, s *session, m *legacyMessage) {
	b := g.Bridge
	out := &legacyStream{w: w, wait: b.AnswerTimeout}
	params, err := upstreamParams(m.Params, s)
	if err == nil && (params["requestState"] != nil || params["inputResponses"] != nil) {
		err = errors.New("requestState and inputResponses are not in the client's protocol version")
	}
	if err != nil {
		out.send(m.ID, nil, &rpcError{Code: codeInvalidParams, Message: "gateway: " + err.Error()})
		return
	}
	name := targetOf(m.Method, params)
	// The call's context outlives the handler's once the call parks
	// (bridge_park.go); until then the request's ends it.
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	c := &bridgeCall{key: callKey{s.Nonce, string(compact(m.ID))}, principal: s.principal, ctx: ctx, cancel: cancel}
	if !b.pending.add(c) {
		cancel(nil)
		out.send(m.ID, nil, &rpcError{Code: codeInvalidRequest, Message: "gateway: a call with this id is already in progress in this session"})
		return
	}
	out.done = func() { b.pending.end(c) } // before the final answer: the client may reuse the id once it has it
	// What the rounds need of r, and nothing that holds its connection
	// (its body reads from net/http's buffers).
	rr := r.WithContext(ctx)
	rr.Body = http.NoBody
	g.runCall(w, r, out, ctx, cancel, func(ctx context.Context) {
		defer cancel(nil)
		defer b.pending.end(c)
		g.bridgeRounds(ctx, rr, out, c, s, m, params, name)
	})
}

// bridgeRounds runs a call's rounds until its final answer.
func (g *Gateway) bridgeRounds(ctx context.Context, r *http.Request, out *legacyStream, c *bridgeCall, s *session, m *legacyMessage, params map[string]jsontext.Value, name string) {
	b := g.Bridge
	for round := 0; ; round++ {
		resp, err := g.round(ctx, r, m.Method, name, params, func(note []byte) error { return out.event(note) })
		if err != nil {
			if ctx.Err() != nil {
				return // cancelled, or the client left: no answer is due
			}
			out.send(m.ID, nil, &rpcError{Code: codeInternalError, Message: "gateway: " + err.Error()})
			return
		}
		if len(resp.Error) > 0 {
			out.sendRaw(m.ID, nil, resp.Error)
			return
		}
		var res map[string]jsontext.Value
		if json.Unmarshal(resp.Result, &res) != nil {
			out.send(m.ID, nil, &rpcError{Code: codeInternalError, Message: "gateway: the upstream's result is not an object"})
			return
		}
		var kind string
		if rt, ok := res["resultType"]; ok && json.Unmarshal(rt, &kind) != nil {
			out.send(m.ID, nil, &rpcError{Code: codeInternalError, Message: "gateway: the upstream's resultType is not a string"})
			return
		}
		if kind != "input_required" {
			// 2026-07-28 members the client's version does not have; a
			// state outside an input_required answer goes nowhere.
			delete(res, "resultType")
			delete(res, "requestState")
			delete(res, "inputRequests")
			dropServerInfo(res)
			final, _ := json.Marshal(res, json.Deterministic(true))
			out.sendRaw(m.ID, final, nil)
			return
		}
		if err := b.pending.admit(c, b.MaxPending, b.MaxPendingPerPrincipal); err != nil {
			// Bounded in number, overall and per principal: refused
			// before any input request goes to the client.
			if !out.started {
				out.w.Header().Set("Retry-After", "1")
				writeJSON(out.w, http.StatusServiceUnavailable, errorMessage(m.ID, rpcError{Code: codeInternalError, Message: err.Error()}))
				return
			}
			out.send(m.ID, nil, &rpcError{Code: codeInternalError, Message: err.Error()})
			return
		}
		answers, rerr := g.bridgeInput(ctx, out, c, s, res, round)
		if answers == nil {
			if rerr != nil && ctx.Err() == nil {
				out.send(m.ID, nil, rerr)
			}
			return // else cancelled, or the client left: no answer is due
		}
		delete(params, "requestState")
		if st, ok := res["requestState"]; ok {
			params["requestState"] = st
		}
		params["inputResponses"] = answers
	}
}

// bridgeInput carries out one input_required answer: it checks it, sends
// each input request to the client, and waits for every answer. It
// returns the inputResponses for the retry, or the error that ends the
// call.
func (g *Gateway) bridgeInput(ctx context.Context, out *legacyStream, c *bridgeCall, s *session, res map[string]jsontext.Value, round int) (jsontext.Value, *rpcError) {
	b := g.Bridge
	if round+1 > b.MaxRounds {
		return nil, &rpcError{Code: codeInternalError, Message: fmt.Sprintf("gateway: the upstream asked for input %d times; the bound is %d (Bridge.MaxRounds: sealgate -bridge-max-rounds)", round+1, b.MaxRounds)}
	}
	var st string
	var reqs map[string]struct {
		Method string         `json:"method"`
		Params jsontext.Value `json:"params,omitzero"`
	}
	if json.Unmarshal(res["requestState"], &st) != nil && len(res["requestState"]) > 0 ||
		json.Unmarshal(res["inputRequests"], &reqs) != nil || len(reqs) == 0 {
		return nil, &rpcError{Code: codeInternalError, Message: "gateway: the upstream's input_required has no inputRequests object"}
	}
	if len(reqs) > b.MaxInputRequests {
		return nil, &rpcError{Code: codeInternalError, Message: fmt.Sprintf("gateway: the upstream asked for %d inputs at once; the bound is %d", len(reqs), b.MaxInputRequests)}
	}
	keys := make([]string, 0, len(reqs))
	for k, q := range reqs {
		if why := declared(s, q.Method, q.Params); why != "" {
			return nil, &rpcError{Code: codeInternalError, Message: "gateway: the upstream asked for input the client cannot give: " + why}
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	defer b.pending.endRound(c)
	// The round's time runs from before the first input request is
	// written: a client that does not read its stream is cut when it
	// ends, as one that does not answer (each write has the round's
	// deadline).
	timer := time.NewTimer(b.AnswerTimeout)
	defer timer.Stop()
	out.deadline = time.Now().Add(b.AnswerTimeout)
	defer func() { out.deadline = time.Time{} }()
	c.answers = make(chan inputAnswer, len(keys))
	for _, k := range keys {
		id := b.inputID()
		b.pending.expect(c, id, k)
		q := reqs[k]
		msg, _ := json.Marshal(struct {
			JSONRPC string         `json:"jsonrpc"`
			ID      string         `json:"id"`
			Method  string         `json:"method"`
			Params  jsontext.Value `json:"params,omitzero"`
		}{"2.0", id, q.Method, q.Params})
		if err := out.event(msg); err != nil {
			return nil, &rpcError{Code: codeInternalError, Message: "gateway: " + err.Error()}
		}
	}
	out.park() // the call waits: its connection's memory goes back
	got := make(map[string]jsontext.Value, len(keys))
	for len(got) < len(keys) {
		select {
		case a := <-c.answers:
			if a.err != nil {
				return nil, &rpcError{Code: codeInternalError, Message: "gateway: the client answered input request " + strconv.Quote(a.key) + " with an error: " + short(string(a.err))}
			}
			got[a.key] = a.result
		case <-timer.C:
			return nil, &rpcError{Code: codeInternalError, Message: fmt.Sprintf("gateway: the client did not answer within %v", b.AnswerTimeout)}
		case <-ctx.Done():
			return nil, nil
		}
	}
	v, _ := json.Marshal(got, json.Deterministic(true))
	return v, nil
}

// dropServerInfo removes 2026-07-28's serverInfo from a result's _meta
// (a 2025 client had it in initialize), and _meta with it if nothing
// else is left; the upstream's own keys stay.
func dropServerInfo(res map[string]jsontext.Value) {
	var meta map[string]jsontext.Value
	if v, ok := res["_meta"]; !ok || json.Unmarshal(v, &meta) != nil {
		return
	}
	if _, ok := meta[metaServer]; !ok {
		return
	}
	delete(meta, metaServer)
	if len(meta) == 0 {
		delete(res, "_meta")
		return
	}
	res["_meta"], _ = json.Marshal(meta, json.Deterministic(true))
}

// declared says why the client cannot be sent an input request of
// method: it did not declare the capability (a URL-mode elicitation
// needs elicitation.url), or the method is none a 2025 server may send.
// "" means it can.
func declared(s *session, method string, params jsontext.Value) string {
	var caps struct {
		Elicitation *struct {
			Form jsontext.Value `json:"form,omitzero"`
			URL  jsontext.Value `json:"url,omitzero"`
		} `json:"elicitation,omitzero"`
		Sampling jsontext.Value `json:"sampling,omitzero"`
		Roots    jsontext.Value `json:"roots,omitzero"`
	}
	json.Unmarshal(s.Caps, &caps, json.RejectUnknownMembers(false))
	switch method {
	case "elicitation/create":
		if caps.Elicitation == nil || s.Version < "2025-06-18" {
			return "elicitation/create, and it declared no elicitation capability"
		}
		var p struct {
			Mode string `json:"mode,omitzero"`
		}
		if params.Kind() != '{' || json.Unmarshal(params, &p, json.RejectUnknownMembers(false)) != nil {
			return "an elicitation whose params are not an object"
		}
		switch p.Mode {
		case "url":
			if len(caps.Elicitation.URL) == 0 || s.Version < "2025-11-25" {
				return "a URL-mode elicitation, and it declared no elicitation.url capability"
			}
		case "", "form":
			// An elicitation capability that names modes must name form
			// (an empty one means form, as before URL mode existed).
			if len(caps.Elicitation.Form) == 0 && len(caps.Elicitation.URL) > 0 {
				return "a form elicitation, and it declared only elicitation.url"
			}
		default:
			return "an elicitation of mode " + strconv.Quote(short(p.Mode))
		}
	case "sampling/createMessage":
		if len(caps.Sampling) == 0 {
			return "sampling/createMessage, and it declared no sampling capability"
		}
	case "roots/list":
		if len(caps.Roots) == 0 {
			return "roots/list, and it declared no roots capability"
		}
	default:
		return strconv.Quote(short(method)) + ", which is no request a server sends a client"
	}
	return ""
}

// inputID is a new input request id: this instance's, and unguessable.
func (b *Bridge) inputID() string {
	var n [16]byte
	rand.Read(n[:])
	return "sg-" + b.instance + "-" + hex.EncodeToString(n[:])
}

// targetOf is what 2026-07-28's Mcp-Name header names for method.
func targetOf(method string, params map[string]jsontext.Value) string {
	key := "name"
	switch method {
	case "tools/call", "prompts/get":
	case "resources/read":
		key = "uri"
	default:
		return ""
	}
	var v string
	if json.Unmarshal(params[key], &v) != nil {
		return ""
	}
	return v
}

// takeAnswer takes a client's answer to an input request: 202 once it
// reaches the call that waits for it; else a clear error, and nothing
// changes.
func (b *Bridge) takeAnswer(w http.ResponseWriter, r *http.Request, s *session, m *legacyMessage) {
	var id string
	err := errAnswerUnknown
	if json.Unmarshal(m.ID, &id) == nil {
		a := inputAnswer{}
		if len(m.Error) > 0 {
			a.err = compact(m.Error)
		} else if m.Result.Kind() == '{' {
			a.result = compact(m.Result)
		}
		if a.err == nil && a.result == nil {
			writeJSON(w, http.StatusBadRequest, errorMessage(nil, rpcError{Code: codeInvalidRequest, Message: "gateway: an answer's result must be an object"}))
			return
		}
		err = b.pending.take(id, s.Nonce, s.principal, a)
		if err == errAnswerUnknown {
			err = b.relay(context.WithoutCancel(r.Context()), id, s, a)
		}
	}
	if err != nil {
		status := http.StatusNotFound
		switch {
		case err == errAnswerForeign:
			status = http.StatusForbidden
		case err != errAnswerUnknown && err != ErrRelayGone:
			// The holder could not be reached in time: the answer may
			// have been taken; a retry is told which. The relay's own
			// words (an address) are for the log.
			b.logger().Warn("sealgate bridge: cannot relay an answer", "err", err)
			err = errRelayUnavailable
			status = http.StatusServiceUnavailable
			w.Header().Set("Retry-After", "1")
		}
		writeJSON(w, status, errorMessage(nil, rpcError{Code: codeInvalidRequest, Message: err.Error()}))
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// legacyStream is the answer to a legacy client's call: JSON if the
// final answer comes before anything else, else an SSE stream whose
// events are the notifications, the input requests and the answer.
type legacyStream struct {
	w        http.ResponseWriter // nil once parked
	started  bool
	deadline time.Time     // for each write, if not zero
	wait     time.Duration // else each write's bound (AnswerTimeout), if not zero
	done     func()        // called before the final answer is written
	hand     *handoff      // nil: the call cannot park
	conn     net.Conn      // once parked: the connection, written in chunks
}

// event writes one message as an SSE event, starting the stream.
func (o *legacyStream) event(msg []byte) error {
	if !o.started {
		o.started = true
		h := o.w.Header()
		h["Content-Type"] = sseType
		h.Set("Cache-Control", "no-cache")
		if o.hand != nil {
			h.Set("Connection", "close") // it may park: the connection is not given back
		}
		o.w.WriteHeader(http.StatusOK)
	}
	var c jsontext.Value = append([]byte(nil), msg...)
	if c.Compact() != nil {
		return errors.New("a message that is not JSON")
	}
	// Outside a round's wait too (the upstream's notifications while
	// it runs a round): a client that takes no event within
	// AnswerTimeout is gone, or it would hold its call, and its place
	// under MaxPending, for as long as it keeps its connection.
	d := o.deadline
	if d.IsZero() && o.wait > 0 {
		d = time.Now().Add(o.wait)
	}
	if o.conn != nil {
		return o.chunk(sseEvent(c), false, d)
	}
	rc := http.NewResponseController(o.w)
	if !d.IsZero() {
		rc.SetWriteDeadline(d)
		defer rc.SetWriteDeadline(time.Time{})
	}
	if _, err := o.w.Write(sseEvent(c)); err != nil {
		return err
	}
	return rc.Flush()
}

// send writes the final answer: a result or an error.
func (o *legacyStream) send(id jsontext.Value, result []byte, e *rpcError) {
	if e != nil {
		o.final(errorMessage(id, *e))
		return
	}
	o.final(resultMessage(id, result))
}

// sendRaw writes the final answer from a result or an error object as
// the upstream gave it.
func (o *legacyStream) sendRaw(id jsontext.Value, result, rpcErr []byte) {
	if rpcErr != nil {
		b, _ := json.Marshal(struct {
			JSONRPC string         `json:"jsonrpc"`
			ID      jsontext.Value `json:"id"`
			Error   jsontext.Value `json:"error"`
		}{"2.0", id, rpcErr})
		o.final(b)
		return
	}
	o.final(resultMessage(id, result))
}

func (o *legacyStream) final(msg []byte) {
	if o.done != nil {
		o.done()
	}
	if !o.started {
		o.started = true
		writeJSON(o.w, http.StatusOK, msg)
		return
	}
	// A client that does not read its stream does not hold the handler
	// past this, whatever ended the call.
	o.deadline = time.Now().Add(finalWriteTimeout)
	if o.conn != nil {
		var c jsontext.Value = append([]byte(nil), msg...)
		if c.Compact() == nil {
			o.chunk(sseEvent(c), true, o.deadline)
		}
		return
	}
	o.event(msg)
}

// sseEvent is msg, compact JSON, as one SSE event.
func sseEvent(msg []byte) []byte {
	return fmt.Appendf(nil, "event: message\ndata: %s\n\n", msg)
}

// finalWriteTimeout bounds the write of a call's last event.
const finalWriteTimeout = time.Minute
