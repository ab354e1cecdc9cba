// Package mrtr seals the requestState of MCP multi round-trip requests
// (SEP-2322, MCP 2026-07-28), independent of any MCP SDK.
//
// A tools/call, prompts/get or resources/read handler that needs input
// returns "input_required" with a requestState, and the client sends it back
// on the retry. [Sealer.Seal] turns the handler's plaintext state into a
// token bound to the request (method, target, principal, audience, optional
// session, a digest of the arguments) with a short expiry; [Sealer.Open]
// checks it on the retry and gives the handler its plaintext back.
//
// Most servers do not call this package directly: packages mcpsdk (for
// github.com/modelcontextprotocol/go-sdk) and mcpgo (for
// github.com/mark3labs/mcp-go) install it as middleware, so handlers never
// see a sealed token.
package mrtr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stateseal/stateseal/replay"
	"github.com/stateseal/stateseal/seal"
)

// The methods that may answer input_required (SEP-2322).
const (
	MethodCallTool     = "tools/call"
	MethodGetPrompt    = "prompts/get"
	MethodReadResource = "resources/read"
)

// Options configure a Sealer. Audience is required.
type Options struct {
	// Audience names this server or deployment, such as its URL; it is
	// bound into every token so that one cannot move to another service
	// sharing the keyset. New refuses an empty Audience.
	Audience string
	// AllowAnonymous lets requests without a principal carry state. Such
	// a state is bound to no user: any client that obtains it can use it
	// for the same tool and arguments. Off, a request without a principal
	// cannot carry state (ErrNoPrincipal): a server that forgot to pass
	// its authenticated user fails loudly instead of letting one user's
	// state replay for another. Set it only for a server without user
	// authentication whose tools act the same for every caller.
	AllowAnonymous bool
	// DefaultTTL is the lifetime of a sealed state; 0 means the seal
	// package's default (10 minutes). The keyset's maximum TTL caps it.
	DefaultTTL time.Duration
	// TTL overrides DefaultTTL per target: tool name, prompt name or
	// resource URI.
	TTL map[string]time.Duration
	// Metrics counts sealed, opened and rejected states; nil logs through
	// slog.Default().
	Metrics Metrics
	// Args bounds the arguments a state is bound to; the zero value means
	// seal.DefaultMaxArgsBytes and seal.DefaultMaxArgsDepth. Arguments past
	// a bound cannot carry state.
	Args seal.ArgsOptions
	// SingleUse names the targets whose states open once: after a state
	// authenticates, Replay records it, and a second use is refused
	// (replay.ErrReplayed, reason "replayed") until it expires. Use it for
	// tools that book, pay or delete. nil: no state is single use, since
	// clients may retry an identical request after a lost response.
	// Targets builds one from names.
	SingleUse func(method, target string) bool
	// Replay records uses for SingleUse; required with it.
	Replay replay.Guard
}

// Targets returns a SingleUse predicate true for the named targets (tool
// or prompt names, resource URIs), whatever the method.
func Targets(names ...string) func(method, target string) bool {
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	return func(_, target string) bool { return set[target] }
}

// A Request is what a state is bound to.
type Request struct {
	Method    string // tools/call, prompts/get or resources/read
	Target    string // tool name, prompt name or resource URI
	Principal string // authenticated caller, or ""
	Session   string // application session or conversation id, or ""
	// Arguments is the request's arguments as JSON (an object, or empty).
	// They are digested with seal.ArgsDigest, which leaves out _meta,
	// inputResponses and requestState.
	Arguments []byte
	// Context is optional caller context, bound as opaque bytes.
	Context []byte
}

// A Sealer seals and opens request states. It is safe for concurrent use.
type Sealer struct {
	s       *seal.Sealer
	o       Options
	metrics Metrics
}

// New returns a Sealer over s.
func New(s *seal.Sealer, o Options) (*Sealer, error) {
	if s == nil {
		return nil, errors.New("mrtr: nil seal.Sealer")
	}
	if o.SingleUse != nil && o.Replay == nil {
		return nil, errors.New("mrtr: Options.SingleUse needs a replay.Guard in Options.Replay")
	}
	if o.Audience == "" {
		return nil, errors.New("mrtr: Options.Audience is empty; name this server or deployment (its URL, say) so its states cannot move to another service that shares the keyset")
	}
	for target, ttl := range o.TTL {
		if ttl < 0 {
			return nil, fmt.Errorf("mrtr: negative TTL for %q", target)
		}
	}
	m := o.Metrics
	if m == nil {
		m = SlogMetrics(nil)
	}
	return &Sealer{s: s, o: o, metrics: m}, nil
}

// ErrNoPrincipal reports a request without a principal, on a Sealer whose
// Options do not AllowAnonymous.
var ErrNoPrincipal = errors.New("mrtr: request has no principal; bind the authenticated user, or set Options.AllowAnonymous")

// ErrArguments reports arguments that cannot be digested (see
// seal.ArgsOptions.Digest for the rules). It is seal.ErrArguments.
var ErrArguments = seal.ErrArguments

// A Call is one request as the middleware handles it: the state it
// brought is opened and the state its result carries is sealed, under one
// binding. The arguments are digested once, on first use, however many
// states the call opens and seals. A Call is not safe for concurrent use.
type Call struct {
	m      *Sealer
	r      Request
	b      seal.Binding
	err    error
	done   bool
	digest [32]byte // b.ArgsDigest's array: one allocation for the Call and its digest
}

// Call returns the Call for r.
func (m *Sealer) Call(r Request) *Call { return &Call{m: m, r: r} }

func (c *Call) binding() (seal.Binding, error) {
	if !c.done {
		c.done = true
		if c.r.Principal == "" && !c.m.o.AllowAnonymous {
			c.err = ErrNoPrincipal
			return c.b, c.err
		}
		d, err := c.m.o.Args.AppendDigest(c.digest[:0], c.r.Arguments)
		if err != nil {
			c.err = err
		} else {
			c.b = seal.Binding{
				Method: c.r.Method, Target: c.r.Target, Principal: c.r.Principal,
				Audience: c.m.o.Audience, Session: c.r.Session, ArgsDigest: d, Context: c.r.Context,
			}
		}
	}
	return c.b, c.err
}

// Seal seals a handler's plaintext state for r. An empty state stays
// empty: there is nothing to protect and the client echoes nothing back.
func (m *Sealer) Seal(r Request, state string) (string, error) { return m.Call(r).Seal(state) }

// Open verifies a token the client sent back for r and returns the
// plaintext state. Errors match the seal package's sentinels, ErrArguments,
// ErrNoPrincipal, or, for a single-use target, replay.ErrReplayed and
// replay.ErrUnavailable; Reason says what the client may be told.
func (m *Sealer) Open(ctx context.Context, r Request, token string) (string, error) {
	return m.Call(r).Open(ctx, token)
}

// Reason reduces an error from Open to the word a client may be shown:
// "replayed" for a single-use state used before, "unavailable" when the
// single-use check could not be made, else seal.Reason's "expired" or
// "invalid".
func Reason(err error) string {
	switch {
	case errors.Is(err, replay.ErrReplayed):
		return "replayed"
	case errors.Is(err, replay.ErrUnavailable):
		return "unavailable"
	}
	return seal.Reason(err)
}

// Seal is Sealer.Seal for this call.
func (c *Call) Seal(state string) (string, error) {
	if state == "" {
		return "", nil
	}
	b, err := c.binding()
	if err != nil {
		return "", err
	}
	ttl := c.m.o.DefaultTTL
	if t, ok := c.m.o.TTL[c.r.Target]; ok {
		ttl = t
	}
	start := time.Now()
	tok, err := c.m.s.Seal(b, []byte(state), ttl)
	c.m.observe("seal", start)
	if err != nil {
		return "", fmt.Errorf("mrtr: sealing requestState for %s %s: %w", c.r.Method, c.r.Target, err)
	}
	c.m.metrics.Sealed(c.r.Method, c.r.Target)
	return tok, nil
}

// Open is Sealer.Open for this call. A token that is malformed, too large
// or names a key the ring does not hold is rejected before the arguments
// are digested, so that rejection costs the same whatever their size.
func (c *Call) Open(ctx context.Context, token string) (string, error) {
	start := time.Now()
	err := c.m.s.Check(token)
	var b seal.Binding
	if err == nil {
		b, err = c.binding()
	}
	var state []byte
	if err == nil {
		state, err = c.m.s.Open(b, token)
	}
	if err == nil && c.m.o.SingleUse != nil && c.m.o.SingleUse(c.r.Method, c.r.Target) {
		err = c.use(ctx, token)
	}
	c.m.observe("open", start)
	if err != nil {
		c.m.metrics.Rejected(c.r.Method, c.r.Target, Reason(err))
		return "", err
	}
	c.m.metrics.Opened(c.r.Method, c.r.Target)
	return string(state), nil
}

// use records an authentic token's first use.
func (c *Call) use(ctx context.Context, token string) error {
	id, issued, keep, err := replay.ID(token)
	if err != nil {
		return err
	}
	if err := c.m.o.Replay.Use(ctx, id, issued, keep); err != nil {
		return fmt.Errorf("mrtr: %s %s: %w", c.r.Method, c.r.Target, err)
	}
	return nil
}

func (m *Sealer) observe(op string, start time.Time) {
	if l, ok := m.metrics.(LatencyMetrics); ok {
		l.Latency(op, time.Since(start))
	}
}

// Reject counts a state refused without being opened, by an adapter that
// knows none can be valid on the path it arrived on.
func (m *Sealer) Reject(method, target string) {
	m.metrics.Rejected(method, target, "invalid")
}
