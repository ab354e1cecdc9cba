package gateway

import (
	"errors"
	"fmt"
	"sort"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/stateseal/stateseal/mrtr"
)

// seal is the walk's fifth step: in a JSON body, it seals the state of
// every result (sealMessage), for write. An SSE stream needs nothing
// here: its reader seals each event's message as write takes it, with
// the exchange as its sealer.
func (ex *exchange) seal(a *answer) error {
	if !a.json {
		return nil
	}
	out, err := ex.sealBody(a)
	if out != nil {
		a.body = out
		// The copy is held, beside the body it was made from, until
		// the client has it: counted, never refused, since the
		// upstream has acted on its call. The next body finds the
		// budget the lower, as after an SSE event's rewrite (sse.go).
		// A request's copy, made before anything went upstream, is
		// refused past the bound instead (open.go).
		ex.g.respInFlight.Add(int64(cap(out)))
		ex.respHeld += int64(cap(out))
	}
	return err
}

// sealBody returns a's body with every state sealed, or nil if none was.
func (ex *exchange) sealBody(a *answer) ([]byte, error) {
	// readUpstreamBody validated the body, and with it every message.
	if !a.batch {
		return ex.sealMessage(a.body, validValue(a.body))
	}
	changed := false
	out := make([][]byte, len(a.msgs))
	for i, raw := range a.msgs {
		m, err := ex.sealMessage(raw, raw) // inside the valid body
		if err != nil {
			return nil, err
		}
		out[i] = raw
		if m != nil {
			out[i], changed = m, true
		}
	}
	if !changed {
		return nil, nil
	}
	return joinArray(out), nil
}

// A streamSealer is what an SSE reader (sse.go) asks of the exchange
// whose stream it reads, event by event: the reader frames the events,
// the exchange seals their messages and knows which calls still wait
// for an answer.
type streamSealer interface {
	// sealMessage is seal's for one message: nil if it is unchanged.
	sealMessage(raw []byte, valid validValue) ([]byte, error)
	// allAnswered reports whether every call has had its response.
	allAnswered() bool
	// unanswered marks answered the calls still waiting and returns
	// their ids, in order: each gets an error event as the stream ends.
	unanswered() []jsontext.Value
	// progress says something arrived, for the idle timeout; timedOut,
	// that the stream ended for want of it.
	progress()
	timedOut() bool
}

// allAnswered reports whether every call has had its response.
func (ex *exchange) allAnswered() bool {
	if ex.single != nil {
		return ex.single.answered
	}
	for _, c := range ex.calls {
		if !c.answered {
			return false
		}
	}
	return true
}

// unanswered marks answered the calls still waiting, and returns their
// ids in the order of their keys.
func (ex *exchange) unanswered() []jsontext.Value {
	ex.resolve()
	keys := make([]string, 0, len(ex.calls))
	for k, c := range ex.calls {
		if !c.answered {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	ids := make([]jsontext.Value, len(keys))
	for i, k := range keys {
		c := ex.calls[k]
		c.answered = true
		ids[i] = c.id
	}
	return ids
}

// sealMessage seals the state of one message from upstream if it is a
// result that carries one. It returns nil if the message is unchanged.
// A message that names a call of the exchange marks it answered. valid
// is raw as validated already, or nil.
func (ex *exchange) sealMessage(raw []byte, valid validValue) ([]byte, error) {
	if ex.single != nil {
		if startsArray(raw) {
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
