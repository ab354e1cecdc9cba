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
	"errors"
	"fmt"
	"time"

	"github.com/stateseal/stateseal/seal"
)

// The methods that may answer input_required (SEP-2322).
const (
	MethodCallTool     = "tools/call"
	MethodGetPrompt    = "prompts/get"
	MethodReadResource = "resources/read"
)

// Options configure a Sealer. The zero value is usable.
type Options struct {
	// Audience names this server or deployment; it is bound into every
	// token so that one cannot move to another service sharing the keyset.
	Audience string
	// DefaultTTL is the lifetime of a sealed state; 0 means the seal
	// package's default (10 minutes). The keyset's maximum TTL caps it.
	DefaultTTL time.Duration
	// TTL overrides DefaultTTL per target: tool name, prompt name or
	// resource URI.
	TTL map[string]time.Duration
	// Metrics counts sealed, opened and rejected states; nil logs through
	// slog.Default().
	Metrics Metrics
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

// ErrArguments reports arguments that cannot be digested: not a JSON
// object, duplicate member names, invalid UTF-8.
var ErrArguments = errors.New("mrtr: arguments cannot be digested")

func (m *Sealer) binding(r *Request) (seal.Binding, error) {
	d, err := seal.ArgsDigest(r.Arguments)
	if err != nil {
		return seal.Binding{}, fmt.Errorf("%w: %v", ErrArguments, err)
	}
	return seal.Binding{
		Method: r.Method, Target: r.Target, Principal: r.Principal,
		Audience: m.o.Audience, Session: r.Session, ArgsDigest: d, Context: r.Context,
	}, nil
}

// Seal seals a handler's plaintext state for r. An empty state stays
// empty: there is nothing to protect and the client echoes nothing back.
func (m *Sealer) Seal(r Request, state string) (string, error) {
	if state == "" {
		return "", nil
	}
	b, err := m.binding(&r)
	if err != nil {
		return "", err
	}
	ttl := m.o.DefaultTTL
	if t, ok := m.o.TTL[r.Target]; ok {
		ttl = t
	}
	tok, err := m.s.Seal(b, []byte(state), ttl)
	if err != nil {
		return "", fmt.Errorf("mrtr: sealing requestState for %s %s: %w", r.Method, r.Target, err)
	}
	m.metrics.Sealed(r.Method, r.Target)
	return tok, nil
}

// Open verifies a token the client sent back for r and returns the
// plaintext state. Errors match the seal package's sentinels (or
// ErrArguments); seal.Reason says what the client may be told.
func (m *Sealer) Open(r Request, token string) (string, error) {
	b, err := m.binding(&r)
	if err == nil {
		var state []byte
		if state, err = m.s.Open(b, token); err == nil {
			m.metrics.Opened(r.Method, r.Target)
			return string(state), nil
		}
	}
	m.metrics.Rejected(r.Method, r.Target, seal.Reason(err))
	return "", err
}
