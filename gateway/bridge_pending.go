package gateway

import (
	"context"
	"errors"
	"sync"
)

// pendingCalls are the bridged calls this instance holds: each call by
// its session and the client's request id (for a cancellation), each
// input request it sent by the id the bridge chose (for the client's
// answer), and the counts its bounds are checked against.
type pendingCalls struct {
	mu       sync.Mutex
	calls    map[callKey]*bridgeCall
	inputs   map[string]inputSlot // by input request id
	waiting  int                  // calls admitted to wait for answers
	byWho    map[string]int       // the same, per principal
	sessions map[string]int       // calls per session nonce, for DELETE
}

type callKey struct{ nonce, id string }

// A bridgeCall is one call of a legacy client, from its POST to its
// final answer.
type bridgeCall struct {
	key       callKey
	principal string
	ctx       context.Context // the call's: an answer for an ended call is refused
	cancel    context.CancelCauseFunc
	answers   chan inputAnswer // buffered: one per input request of the round
	waiting   bool             // admitted under the bounds
	ids       []string         // the input requests of the round still unanswered; under pendingCalls.mu
}

type inputSlot struct {
	call *bridgeCall
	key  string // the inputRequests key it answers
}

type inputAnswer struct {
	key    string
	result []byte // the client's result, or nil
	err    []byte // the client's error, or nil
}

var (
	errAnswerUnknown = errors.New("gateway: no call waits for this answer: it was answered already, or the call ended (timed out, cancelled, finished); or, with no relay between instances, another instance holds it (route a session's requests to one instance)")
	errAnswerForeign = errors.New("gateway: this answer is not for a call of this session")
	errBusy          = errors.New("gateway: too many calls wait for their clients' answers; try again")
)

func (p *pendingCalls) init() {
	p.calls = map[callKey]*bridgeCall{}
	p.inputs = map[string]inputSlot{}
	p.byWho = map[string]int{}
	p.sessions = map[string]int{}
}

func (p *pendingCalls) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiting
}

// add registers a call, so that a cancellation finds it; false if the
// session has a call of that id in progress (JSON-RPC ids are unique
// among a sender's requests in progress).
func (p *pendingCalls) add(c *bridgeCall) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.calls[c.key]; ok {
		return false
	}
	p.calls[c.key] = c
	p.sessions[c.key.nonce]++
	return true
}

// admit counts c among the calls waiting for answers, within the bounds.
func (p *pendingCalls) admit(c *bridgeCall, total, per int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.waiting {
		return nil
	}
	if p.waiting >= total || p.byWho[c.principal] >= per {
		return errBusy
	}
	c.waiting = true
	p.waiting++
	p.byWho[c.principal]++
	return nil
}

// expect registers an input request c sent, under id.
func (p *pendingCalls) expect(c *bridgeCall, id, key string) {
	p.mu.Lock()
	p.inputs[id] = inputSlot{call: c, key: key}
	c.ids = append(c.ids, id)
	p.mu.Unlock()
}

// take hands the client's answer to the call that sent input request id,
// once, if that call is of the session nonce and principal; else it
// changes nothing and says why.
func (p *pendingCalls) take(id, nonce, principal string, a inputAnswer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.inputs[id]
	if !ok {
		return errAnswerUnknown
	}
	if s.call.key.nonce != nonce || s.call.principal != principal {
		return errAnswerForeign
	}
	if s.call.ctx != nil && s.call.ctx.Err() != nil {
		// Ending (its client left, it was cancelled): 404, not a 202 for
		// an answer nothing will use.
		return errAnswerUnknown
	}
	delete(p.inputs, id)
	a.key = s.key
	s.call.answers <- a // room for every input request of the round
	return nil
}

// end removes c and the input requests it still waits for.
func (p *pendingCalls) end(c *bridgeCall) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forget(c)
	if p.calls[c.key] == c {
		delete(p.calls, c.key)
		if p.sessions[c.key.nonce]--; p.sessions[c.key.nonce] <= 0 {
			delete(p.sessions, c.key.nonce)
		}
	}
	if c.waiting {
		c.waiting = false
		p.waiting--
		if p.byWho[c.principal]--; p.byWho[c.principal] <= 0 {
			delete(p.byWho, c.principal)
		}
	}
}

// forget removes the input requests c waits for (a round that ended).
// Under p.mu.
func (p *pendingCalls) forget(c *bridgeCall) {
	for _, id := range c.ids {
		delete(p.inputs, id) // an answered one is gone already
	}
	c.ids = c.ids[:0]
}

// endRound forgets the input requests of c's round.
func (p *pendingCalls) endRound(c *bridgeCall) {
	p.mu.Lock()
	p.forget(c)
	p.mu.Unlock()
}

var (
	errCancelled     = errors.New("gateway: the client cancelled the call")
	errSessionClosed = errors.New("gateway: the client ended the session")
)

// cancelCall ends the call id of session nonce, if this instance holds it.
func (p *pendingCalls) cancelCall(nonce, id string) {
	p.mu.Lock()
	c := p.calls[callKey{nonce, id}]
	p.mu.Unlock()
	if c != nil {
		c.cancel(errCancelled)
	}
}

// cancelSession ends every call of session nonce this instance holds.
func (p *pendingCalls) cancelSession(nonce string) {
	p.mu.Lock()
	var cs []*bridgeCall
	if p.sessions[nonce] > 0 {
		for k, c := range p.calls {
			if k.nonce == nonce {
				cs = append(cs, c)
			}
		}
	}
	p.mu.Unlock()
	for _, c := range cs {
		c.cancel(errSessionClosed)
	}
}
