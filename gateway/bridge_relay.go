package gateway

import (
	"context"
	"errors"
	"strings"
	"time"
)

// A Relay carries a client's answer to the bridge instance that holds
// its call, across a fleet: a balancer may send the POST of an answer to
// any instance, and only the one that sent the input request holds the
// call waiting for it. gateway/redisrelay is one over Redis pub/sub.
//
// Whoever can write to the relay's transport can hand an instance
// answers in any session's name: it is infrastructure of the same trust
// as the single-use guard's Redis.
type Relay interface {
	// Listen receives the answers sent to instance, handing each to
	// take, whose error (nil, ErrAnswerUnknown or ErrAnswerForeign) goes
	// back to the sender. It returns once answers can arrive, and a stop
	// function.
	Listen(instance string, take func(RelayedAnswer) error) (stop func(), err error)
	// Send hands a to instance and returns what its take returned; or
	// ErrRelayGone when no instance of that name listens (it stopped or
	// was killed: its calls ended with it); or another error when it
	// cannot tell (the answer may or may not have been taken).
	Send(ctx context.Context, instance string, a RelayedAnswer) error
}

// A RelayedAnswer is a client's answer to input request ID, sent in the
// session Session by Principal, as the instance that received it read
// them: the holder checks them as it checks an answer of its own.
type RelayedAnswer struct {
	ID, Session, Principal string
	Result, Error          []byte
}

// Errors a Relay carries back from the instance that holds a call.
var (
	ErrAnswerUnknown    = errAnswerUnknown
	ErrAnswerForeign    = errAnswerForeign
	errRelayUnavailable = errors.New("gateway: the instance holding this call cannot be reached now; send the answer again (it is taken once)")
	ErrRelayGone        = errors.New("gateway: the instance that sent this input request is gone (stopped or killed): its call ended; start the call again")
)

// relayTimeout bounds a Send: the POST of an answer waits this long at
// most for the instance that holds its call.
const relayTimeout = 2 * time.Second

// holder is the instance named in an input request id ("sg-INSTANCE-..."),
// or "".
func holder(id string) string {
	rest, ok := strings.CutPrefix(id, "sg-")
	if !ok {
		return ""
	}
	inst, _, ok := strings.Cut(rest, "-")
	if !ok {
		return ""
	}
	return inst
}

// listen starts receiving the answers other instances relay here.
func (b *Bridge) listen() error {
	if b.Relay == nil {
		return nil
	}
	stop, err := b.Relay.Listen(b.instance, func(a RelayedAnswer) error {
		return b.pending.take(a.ID, a.Session, a.Principal, inputAnswer{result: a.Result, err: a.Error})
	})
	b.stopRelay = stop
	return err
}

// Close stops receiving relayed answers. The calls this instance holds
// end with their connections.
func (b *Bridge) Close() {
	b.once.Do(func() {}) // never started: nothing to stop, and nothing starts now
	if b.stopRelay != nil {
		b.stopRelay()
	}
}

// relay sends an answer that no call here waits for to the instance
// whose id it names, if that is another and a Relay is set.
func (b *Bridge) relay(ctx context.Context, id string, s *session, a inputAnswer) error {
	inst := holder(id)
	if b.Relay == nil || inst == "" || inst == b.instance {
		return errAnswerUnknown
	}
	ctx, cancel := context.WithTimeout(ctx, relayTimeout)
	defer cancel()
	return b.Relay.Send(ctx, inst, RelayedAnswer{ID: id, Session: s.Nonce, Principal: s.principal, Result: a.result, Error: a.err})
}
