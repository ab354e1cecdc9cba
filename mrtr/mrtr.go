// Package mrtr seals the requestState of MCP multi round-trip requests
// (SEP-2322, MCP 2026-07-28), independent of any MCP SDK.
//
// A tools/call, prompts/get or resources/read handler that needs input
// returns "input_required" with a requestState, and the client sends it back
// on the retry. [States.Seal] turns the handler's plaintext state into a
// token bound to the request (method, target, principal, audience, optional
// session, a digest of the arguments) with a short expiry; [States.Open]
// checks it on the retry and gives the handler its plaintext back.
//
// Most servers do not call this package directly: packages mcpsdk (for
// github.com/modelcontextprotocol/go-sdk) and mcpgo (for
// github.com/mark3labs/mcp-go) install it as middleware, so handlers never
// see a sealed token. An adapter for another SDK runs each request that
// may carry state through [States.Handle], and answers a *[StateError]
// with [ClientError]'s code, message and reason, as every path here does.
package mrtr

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/stateseal/stateseal/replay"
	"github.com/stateseal/stateseal/seal"
)

// The methods that may answer input_required (SEP-2322).
const (
	MethodCallTool     = "tools/call"
	MethodGetPrompt    = "prompts/get"
	MethodReadResource = "resources/read"
)

// Options configure States. Audience is required.
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
	// DefaultTTL is the lifetime of a sealed state; 0 means the Sealer's
	// default TTL (seal.Options.DefaultTTL: 10 minutes unless set, or its
	// maximum TTL if that is lower). The keyset's maximum TTL caps it.
	DefaultTTL time.Duration
	// TTL overrides DefaultTTL per target: tool name, prompt name or
	// resource URI.
	TTL map[string]time.Duration
	// Metrics counts sealed, opened and rejected states; nil logs through
	// slog.Default() (SlogMetrics). Setting it replaces that log: use
	// TeeMetrics to keep it beside another sink. It names each target by
	// its Request.Label, so that what a client writes into a request
	// never becomes a metric label or a log field of its choosing.
	Metrics Metrics
	// Args bounds the arguments a state is bound to; the zero value means
	// seal.DefaultMaxArgsBytes and seal.DefaultMaxArgsDepth. Arguments past
	// a bound cannot carry state.
	Args seal.ArgsOptions
	// Logger receives, from Handle, why a state a handler returned could
	// not be sealed: the client is told no more than that it could not.
	// nil means slog.Default().
	Logger *slog.Logger
	// SingleUse names the targets whose states open once: after a state
	// authenticates, Replay records it, and a second use is refused
	// (replay.ErrReplayed, reason "replayed") until it expires. Use it for
	// tools that book, pay or delete. nil: no state is single use, since
	// clients may retry an identical request after a lost response.
	// Targets builds one from names.
	//
	// Every single-use state is sealed with 16 random bytes after it, so
	// that no two seals make the same token: under a MAC key, two flows
	// with the same state, binding and second of issue would otherwise
	// get one token, and the second flow would be refused as a replay of
	// the first. A changed predicate makes the states in flight for the
	// targets it changed fail to open (reason "invalid"), never open with
	// their state misread; see docs/MCP.md. With a replay.Local guard
	// (replay.NewMemory), the first 8 of those bytes are the guard's
	// Instance, and a state carrying another is refused (reason
	// "unvouched"): it was sealed by another process, or by this one
	// before a restart, whose uses this guard never saw.
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
	// Label is what Metrics (and the adapters' logs) call Target: the
	// name the server registered it under (a tool or prompt name, a
	// resource URI, or the URI template a resource URI matched), or
	// Unknown for a target the server does not serve. Targets come from
	// clients, and a metric label or a log field a client can choose is
	// an unbounded series and a line it writes, so adapters set Label
	// from their SDK's registries. Empty, Target is named where the state
	// authenticated (this server sealed it for Target) or is being
	// sealed, and Unknown where it did not. Labels are cut to 128 bytes.
	Label string
}

// Unknown is how metrics and logs name a target the server did not
// register, a target named only by a state that did not authenticate,
// and a method other than the three that carry state.
const Unknown = "unknown"

// maxLabelLen bounds a label; maxErrLen bounds the text of an error from
// Seal or Open, which may quote a target or a member name of the
// arguments, and which a caller may log.
const (
	maxLabelLen = 128
	maxErrLen   = 512
)

// States seals and opens the request states of one server, each bound to
// its request, under the server's Options. It is safe for concurrent use.
// (It is not a seal.Sealer, which it uses: that one seals bytes under a
// binding; States makes the binding from an MCP request.)
type States struct {
	s       *seal.Sealer
	o       Options
	metrics Metrics
}

// New returns the States of a server sealing with s, configured by a copy
// of *o. A nil o is the zero Options, which New refuses: Options.Audience
// is required.
func New(s *seal.Sealer, o *Options) (*States, error) {
	if s == nil {
		return nil, errors.New("mrtr: nil seal.Sealer")
	}
	if o == nil {
		o = &Options{}
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
	return &States{s: s, o: *o, metrics: m}, nil
}

// ErrNoPrincipal reports a request without a principal, to States whose
// Options do not AllowAnonymous.
var ErrNoPrincipal = errors.New("mrtr: request has no principal; bind the authenticated user, or set Options.AllowAnonymous")

// ErrArguments reports arguments that cannot be digested (see
// seal.ArgsOptions.Digest for the rules). It is seal.ErrArguments,
// named here too because States.Seal and States.Open return it to
// callers that need not import seal.
var ErrArguments = seal.ErrArguments

// A Call is one request as the middleware handles it: the state it
// brought is opened and the state its result carries is sealed, under one
// binding. The arguments are digested once, on first use, however many
// states the call opens and seals. A Call is not safe for concurrent use.
type Call struct {
	m      *States
	r      Request
	b      seal.Binding
	err    error
	done   bool
	used   []byte                // the id of the single-use state Open recorded, for Release
	digest [sha256.Size + 1]byte // b.ArgsDigest's array, and the single-use mark: one allocation for the Call and its digest
}

// A single-use state is its plaintext followed by nonceSize bytes (with
// a replay.Local guard, its Instance and then random bytes; else all
// random), sealed under the binding whose argument digest is followed by
// singleUseMark. Every other binding mrtr makes has a digest of exactly
// sha256.Size bytes, and the binding encoding is length-prefixed, so a
// state sealed for single use never opens as one that is not, or the
// other way round: a changed SingleUse predicate cannot make the nonce
// part of a handler's state, or cut a state short.
const (
	nonceSize     = 16
	singleUseMark = 0x01
)

// singleUse reports whether the call's state opens once.
func (c *Call) singleUse() bool {
	return c.m.o.SingleUse != nil && c.m.o.SingleUse(c.r.Method, c.r.Target)
}

// singleUseBinding is b, the call's binding, marked single use.
func (c *Call) singleUseBinding(b seal.Binding) seal.Binding {
	c.digest[sha256.Size] = singleUseMark
	b.ArgsDigest = c.digest[:sha256.Size+1]
	return b
}

// Call returns the Call for r.
func (m *States) Call(r Request) *Call { return &Call{m: m, r: r} }

// Sealer returns the Sealer m seals with: for tokens of another kind
// sealed with the same keys (sealgate's bridged session ids), each under
// a binding whose Method no MCP request has, so that neither opens as
// the other.
func (m *States) Sealer() *seal.Sealer { return m.s }

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
func (m *States) Seal(r Request, state string) (string, error) { return m.Call(r).Seal(state) }

// Open verifies a token the client sent back for r and returns the
// plaintext state. Errors match the seal package's sentinels, ErrArguments,
// ErrNoPrincipal, or, for a single-use target, replay.ErrReplayed,
// replay.ErrUnvouched, replay.ErrUndetermined and replay.ErrUnavailable;
// Reason says what the
// client may be told.
func (m *States) Open(ctx context.Context, r Request, token string) (string, error) {
	return m.Call(r).Open(ctx, token)
}

// Reason reduces an error from Open to the word a client may be shown,
// each asking something else of it (docs/MCP.md's table):
//   - "replayed": a single-use state used before; its first use ran or
//     is running: do not repeat on its own.
//   - "unvouched": a single-use state the guard can never vouch for
//     (issued before its records begin, or sealed by another instance of
//     a guard that remembers only its own uses): start the flow again.
//   - "undetermined": a single-use state used before, by a call that
//     was cut before it answered: it may or may not have run. Check
//     whether the action took place before starting the flow again.
//   - "unavailable": the single-use check could not be made now; the
//     state was not used: send the same request again later.
//   - else seal.Reason's "expired" or "invalid": start the flow again.
func Reason(err error) string {
	switch {
	case errors.Is(err, replay.ErrReplayed):
		return "replayed"
	case errors.Is(err, replay.ErrUndetermined):
		return "undetermined"
	case errors.Is(err, replay.ErrUnvouched):
		return "unvouched"
	case errors.Is(err, replay.ErrUnavailable):
		return "unavailable"
	}
	return seal.Reason(err)
}

// Seal is [States.Seal] for this call.
func (c *Call) Seal(state string) (string, error) {
	if state == "" {
		return "", nil
	}
	b, err := c.binding()
	if err != nil {
		return "", bounded(err)
	}
	ttl := c.m.o.DefaultTTL
	if t, ok := c.m.o.TTL[c.r.Target]; ok {
		ttl = t
	}
	start := time.Now()
	payload := []byte(state)
	if c.singleUse() {
		b = c.singleUseBinding(b)
		payload = make([]byte, len(state)+nonceSize)
		n := copy(payload, state)
		if l, ok := c.m.o.Replay.(replay.Local); ok {
			inst := l.Instance()
			n += copy(payload[n:], inst[:])
		}
		rand.Read(payload[n:]) // never fails (crypto/rand)
	}
	tok, err := c.m.s.Seal(b, payload, ttl)
	c.m.observe("seal", start)
	if err != nil {
		return "", bounded(fmt.Errorf("mrtr: sealing requestState for %s %s: %w", clip(c.r.Method, maxLabelLen), clip(c.r.Target, maxLabelLen), err))
	}
	c.m.metrics.Sealed(c.labels(true))
	return tok, nil
}

// Open is [States.Open] for this call. A token that is malformed, too large
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
	single := err == nil && c.singleUse()
	if err == nil {
		if single {
			b = c.singleUseBinding(b)
		}
		state, err = c.m.s.Open(b, token)
	}
	// Open reports a time verdict only for a token that authenticated.
	authentic := err == nil || errors.Is(err, seal.ErrExpired) || errors.Is(err, seal.ErrNotYetValid)
	if err == nil && single {
		if len(state) < nonceSize {
			err = seal.ErrInvalid // authentic, yet not made by Seal: never so
		} else {
			nonce := state[len(state)-nonceSize:]
			state = state[:len(state)-nonceSize]
			err = c.vouch(nonce)
			if err == nil {
				err = c.use(ctx, token)
			}
		}
	}
	c.m.observe("open", start)
	if err != nil {
		method, target := c.labels(authentic)
		c.m.metrics.Rejected(method, target, Reason(err))
		return "", bounded(err)
	}
	c.m.metrics.Opened(c.labels(true))
	return string(state), nil
}

// labels returns the method and target as metrics and logs may name
// them: authentic says the target is this server's choice, not only a
// client's claim.
func (c *Call) labels(authentic bool) (method, target string) {
	return labels(c.r, authentic)
}

func labels(r Request, authentic bool) (method, target string) {
	switch r.Method {
	case MethodCallTool, MethodGetPrompt, MethodReadResource:
		method = r.Method
	default:
		method = Unknown
	}
	switch {
	case r.Label != "":
		target = clip(r.Label, maxLabelLen)
	case authentic:
		target = clip(r.Target, maxLabelLen)
	default:
		target = Unknown
	}
	return method, target
}

// clip cuts s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "..."
	i := n - len(more)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + more
}

// bounded returns err, with its text cut to maxErrLen bytes if longer:
// errors.Is and errors.As see through the cut.
func bounded(err error) error {
	if err == nil || len(err.Error()) <= maxErrLen {
		return err
	}
	return boundedError{err}
}

type boundedError struct{ err error }

func (e boundedError) Error() string { return clip(e.err.Error(), maxErrLen) }
func (e boundedError) Unwrap() error { return e.err }

// vouch refuses a single-use state that a Local guard cannot vouch for:
// one sealed under another guard's instance (another process, or this
// one before a restart), whose uses that guard never saw.
func (c *Call) vouch(nonce []byte) error {
	l, ok := c.m.o.Replay.(replay.Local)
	if !ok {
		return nil
	}
	if inst := l.Instance(); !bytes.Equal(nonce[:len(inst)], inst[:]) {
		return fmt.Errorf("mrtr: %s %s: %w: the state was sealed by another instance (another process, or this one before a restart), whose uses this in-memory guard cannot see",
			clip(c.r.Method, maxLabelLen), clip(c.r.Target, maxLabelLen), replay.ErrUnvouched)
	}
	return nil
}

// use records an authentic token's first use: its id is its
// authentication tag, kept until its expiry plus replay.Margin, the
// largest skew an opener allows. The token is decoded with the
// seal.Sealer's own length bound, which Open has just applied: the
// default one of seal.Inspect would refuse every token over 64 KiB that a
// seal.Sealer configured for longer ones accepts.
func (c *Call) use(ctx context.Context, token string) error {
	h, err := c.m.s.Inspect(token)
	if err != nil {
		return err
	}
	if err := c.m.o.Replay.Use(ctx, h.Tag, h.IssuedAt, h.Expiry.Add(replay.Margin)); err != nil {
		return fmt.Errorf("mrtr: %s %s: %w", clip(c.r.Method, maxLabelLen), clip(c.r.Target, maxLabelLen), err)
	}
	c.used = h.Tag
	return nil
}

func (m *States) observe(op string, start time.Time) {
	if l, ok := m.metrics.(LatencyMetrics); ok {
		l.Latency(op, time.Since(start))
	}
}

func (m *States) logger() *slog.Logger {
	if m.o.Logger != nil {
		return m.o.Logger
	}
	return slog.Default()
}

// A StateError is an error of Handle or Refuse about a request's state,
// as opposed to an error of the handler. Reason(err) says what a client
// may be told about an Op "open" error.
type StateError struct {
	// Op is "open" for a state the request brought that did not open, or
	// was refused: the handler did not run. It is "seal" for a state the
	// handler returned that could not be sealed: the handler ran, its
	// state has been cleared so that the plaintext never reaches the
	// client, and Handle has logged the cause to Options.Logger; tell the
	// client no more than that the state could not be sealed.
	Op  string
	Err error
}

func (e *StateError) Error() string {
	return clip("mrtr: cannot "+e.Op+" requestState: "+e.Err.Error(), maxErrLen)
}

func (e *StateError) Unwrap() error { return e.Err }

// Handle runs one request that may carry state through its handler, as an
// adapter for an MCP SDK does: it opens the state the request brought,
// calls next, and seals the state next's result carries, all under r (the
// arguments are digested at most once).
//
// state points to the request's requestState. A token there is replaced
// by its plaintext before next runs; "" (the first round of every call)
// stays "" and is not opened. next runs the handler and returns a pointer
// to its result's requestState, or nil for a result without one; a
// plaintext state there is replaced by its token.
//
// label, if not nil and r.Label is empty, supplies r.Label: Handle calls
// it at most once, and only when there is a state to open or seal, so an
// adapter whose lookup of registered targets costs something (mcpsdk
// lists the server's tools) pays for it only then.
//
// Handle returns next's error as it is. Its own errors are a *StateError,
// returned as it is too: Op "open" when the state did not open (next did
// not run), Op "seal" when the handler's state could not be sealed.
func (m *States) Handle(ctx context.Context, r Request, state *string, label func() string, next func() (*string, error)) error {
	c := m.Call(r)
	name := func() {
		if label != nil && c.r.Label == "" {
			c.r.Label, label = label(), nil
		}
	}
	if *state != "" {
		name()
		plain, err := c.Open(ctx, *state)
		if err != nil {
			return &StateError{Op: "open", Err: err}
		}
		*state = plain
	}
	out, err := c.run(ctx, next)
	if err != nil || out == nil || *out == "" {
		return err
	}
	name()
	tok, err := c.Seal(*out)
	if err != nil {
		*out = "" // the plaintext must not reach the client
		method, target := c.labels(true)
		// err's text is bounded.
		m.logger().Error("stateseal: cannot seal requestState; failing the request", "method", method, "target", target, "err", err)
		return &StateError{Op: "seal", Err: err}
	}
	*out = tok
	return nil
}

// errRefused is the cause of Refuse's errors.
var errRefused = fmt.Errorf("%w: no state is sealed on this path", seal.ErrInvalid)

// Refuse refuses, without opening it, the state a request carries on a
// path for which no state is ever sealed: an adapter calls it where its
// SDK routes a request past the middleware that calls Handle, or to a
// handler that cannot answer input_required. It counts a rejection with
// reason "invalid", naming the target by r.Label, else Unknown, since
// nothing authenticated it, and returns a *StateError (Op "open") whose
// Reason is "invalid".
func (m *States) Refuse(r Request) error {
	method, target := labels(r, false)
	m.metrics.Rejected(method, target, "invalid")
	return &StateError{Op: "open", Err: errRefused}
}
