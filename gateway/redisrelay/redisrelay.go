// Package redisrelay carries sealgate's bridged answers across a fleet
// through Redis pub/sub: a client's answer to an input request that
// reaches another instance than the one holding its call is published
// on the holder's channel, and the holder's verdict comes back on the
// sender's. New makes one; set it as gateway.Bridge.Relay.
//
// PUBLISH tells how many listen: none means the holder is gone (its
// calls ended with it), and the client is told so at once. Redis keeps
// nothing: a Redis restart loses only answers in flight, whose senders
// time out and answer 503 (the client's retry is told whether its answer
// was taken). Use one Redis server (or a Sentinel group): in a Cluster,
// PUBLISH counts only one node's listeners.
//
// Whoever can publish on this Redis can hand an instance answers in any
// session's name, if it also learns the input requests' ids (they travel
// here too): give the relay a Redis no less guarded than the single-use
// guard's.
package redisrelay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/gateway"
)

// Prefix starts every channel name.
const Prefix = "stateseal:bridge:"

// A Relay is a gateway.Relay over one Redis.
type Relay struct {
	c       goredis.UniversalClient
	mu      sync.Mutex
	self    string
	waiting map[string]chan string // by message id
}

// New returns a Relay over c.
func New(c goredis.UniversalClient) *Relay {
	return &Relay{c: c, waiting: map[string]chan string{}}
}

// envelope is one message on a channel: an answer for the listener, or
// the verdict on one it sent.
type envelope struct {
	Kind   string                 `json:"k"` // "answer" or "verdict"
	Msg    string                 `json:"m"` // the message id a verdict answers
	From   string                 `json:"f,omitempty"`
	Answer *gateway.RelayedAnswer `json:"a,omitempty"`
	Code   string                 `json:"c,omitempty"` // "ok", "unknown", "foreign"
}

// Listen subscribes to instance's channel; verdicts on the answers this
// Relay sends come back on it too. The stop it returns ends the
// subscription, sends the verdict on an answer already taken, and
// returns once Redis counts no listener on the channel (or after 2 s):
// from then on, an answer sent to instance is told gateway.ErrRelayGone
// at once.
func (r *Relay) Listen(instance string, take func(gateway.RelayedAnswer) error) (func(), error) {
	ctx, cancel := context.WithCancel(context.Background())
	sub := r.c.Subscribe(ctx, Prefix+instance)
	// The subscription's confirmation, within a bound: a Redis down now
	// is said, and the subscription is kept (go-redis subscribes again
	// once Redis answers); until then this instance's answers relayed
	// from others are refused as its calls' being gone.
	cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
	_, serr := sub.Receive(cctx)
	ccancel()
	if serr != nil {
		serr = fmt.Errorf("redisrelay: subscribe: %w (kept: it subscribes once Redis answers)", serr)
	}
	r.mu.Lock()
	r.self = instance
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range sub.Channel() {
			var e envelope
			if json.Unmarshal([]byte(m.Payload), &e) != nil {
				continue
			}
			switch e.Kind {
			case "answer":
				if e.Answer == nil || e.From == "" {
					continue
				}
				code := "ok"
				switch err := take(*e.Answer); {
				case errors.Is(err, gateway.ErrAnswerForeign):
					code = "foreign"
				case err != nil:
					code = "unknown"
				}
				// Its own bound, not the subscription's: a stop waits for
				// this verdict, so that an answer taken here is never told
				// to its sender as lost (the call it completed may be the
				// last thing a stopping instance does).
				v, _ := json.Marshal(envelope{Kind: "verdict", Msg: e.Msg, Code: code})
				pctx, pcancel := context.WithTimeout(context.Background(), verdictTimeout)
				r.c.Publish(pctx, Prefix+e.From, v)
				pcancel()
			case "verdict":
				r.mu.Lock()
				ch := r.waiting[e.Msg]
				r.mu.Unlock()
				if ch != nil {
					select {
					case ch <- e.Code:
					default:
					}
				}
			}
		}
	}()
	stop := func() {
		// Close alone returns before Redis has seen the connection go:
		// until it has, PUBLISH still counts this instance, and an
		// answer sent then waits out its sender's timeout instead of
		// being told gone. So stop returns once Redis counts no
		// listener here (within a bound, for a Redis slow or down).
		uctx, ucancel := context.WithTimeout(context.Background(), stopWait)
		defer ucancel()
		sub.Unsubscribe(uctx, Prefix+instance)
		sub.Close()
		<-done // the answer in hand is taken and its verdict sent
		r.unheard(uctx, Prefix+instance)
		cancel()
	}
	return stop, serr
}

// stopWait bounds how long a stop waits for Redis to drop its listener;
// verdictTimeout, the sending of one verdict.
const (
	stopWait       = 2 * time.Second
	verdictTimeout = 2 * time.Second
)

// unheard waits, within ctx, until Redis counts no subscriber on
// channel.
func (r *Relay) unheard(ctx context.Context, channel string) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		n, err := r.c.PubSubNumSub(ctx, channel).Result()
		if err == nil && n[channel] == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Send publishes a on instance's channel and waits, within ctx, for its
// verdict.
func (r *Relay) Send(ctx context.Context, instance string, a gateway.RelayedAnswer) error {
	r.mu.Lock()
	self := r.self
	r.mu.Unlock()
	if self == "" {
		return errors.New("redisrelay: not listening: no verdict could come back")
	}
	var n [12]byte
	rand.Read(n[:])
	id := hex.EncodeToString(n[:])
	ch := make(chan string, 1)
	r.mu.Lock()
	r.waiting[id] = ch
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.waiting, id)
		r.mu.Unlock()
	}()
	v, _ := json.Marshal(envelope{Kind: "answer", Msg: id, From: self, Answer: &a})
	got, err := r.c.Publish(ctx, Prefix+instance, v).Result()
	if err != nil {
		return fmt.Errorf("redisrelay: publish: %w", err)
	}
	if got == 0 {
		return gateway.ErrRelayGone
	}
	select {
	case code := <-ch:
		switch code {
		case "ok":
			return nil
		case "foreign":
			return gateway.ErrAnswerForeign
		}
		return gateway.ErrAnswerUnknown
	case <-ctx.Done():
		return fmt.Errorf("redisrelay: no verdict from the holder: %w", ctx.Err())
	}
}
