package mrtr_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/seal"
)

func newStates(t *testing.T, o mrtr.Options) (*mrtr.States, *mrtr.Counters) {
	t.Helper()
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	s := testkit.Must(seal.New(ring, nil))
	c := &mrtr.Counters{}
	o.Metrics = c
	if o.Audience == "" {
		o.Audience = "test"
	}
	m, err := mrtr.New(s, &o)
	if err != nil {
		t.Fatal(err)
	}
	return m, c
}

func TestSealOpen(t *testing.T) {
	m, c := newStates(t, mrtr.Options{Audience: "a", TTL: map[string]time.Duration{"slow": time.Hour}})
	r := mrtr.Request{Method: mrtr.MethodCallTool, Target: "t", Principal: "p", Arguments: []byte(`{"x":1}`)}
	tok, err := m.Seal(r, "state")
	if err != nil || tok == "" || tok == "state" {
		t.Fatalf("Seal = %q, %v", tok, err)
	}
	reordered := r
	reordered.Arguments = []byte(` { "x" : 1.0 } `)
	if got, err := m.Open(ctx, reordered, tok); err != nil || got != "state" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	other := r
	other.Principal = "q"
	if _, err := m.Open(ctx, other, tok); !errors.Is(err, seal.ErrInvalid) {
		t.Fatalf("another principal: %v", err)
	}
	bad := r
	bad.Arguments = []byte(`[1]`)
	if _, err := m.Open(ctx, bad, tok); !errors.Is(err, mrtr.ErrArguments) {
		t.Fatalf("bad arguments: %v", err)
	}
	if _, err := m.Seal(bad, "s"); !errors.Is(err, mrtr.ErrArguments) {
		t.Fatalf("sealing with bad arguments: %v", err)
	}
	if tok, err := m.Seal(r, ""); tok != "" || err != nil {
		t.Fatalf("empty state sealed to %q, %v", tok, err)
	}
	slow := r
	slow.Target = "slow"
	tok = testkit.Must(m.Seal(slow, "s"))
	if h := testkit.Must(seal.Inspect(tok)); h.Expiry.Sub(h.IssuedAt) != time.Hour {
		t.Fatalf("per-target TTL: %v", h.Expiry.Sub(h.IssuedAt))
	}
	v := c.Values()
	if v.Sealed != 2 || v.Opened != 1 || v.Rejected["invalid"] != 2 {
		t.Fatalf("counters %+v", v)
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := mrtr.New(nil, &mrtr.Options{}); err == nil {
		t.Fatal("nil sealer accepted")
	}
	ring := testkit.Must(keyring.Generate(keyring.MAC))
	s := testkit.Must(seal.New(ring, nil))
	if _, err := mrtr.New(s, &mrtr.Options{Audience: "a", TTL: map[string]time.Duration{"t": -1}}); err == nil {
		t.Fatal("negative TTL accepted")
	}
	if _, err := mrtr.New(s, &mrtr.Options{}); err == nil || !strings.Contains(err.Error(), "Audience") {
		t.Fatalf("no audience: %v", err)
	}
	if _, err := mrtr.New(s, nil); err == nil || !strings.Contains(err.Error(), "Audience") {
		t.Fatalf("nil options: %v", err)
	}
}

// TestCall opens the state a request brought and seals the next one under
// the same binding, as a multi-round handler's middleware does.
func TestCall(t *testing.T) {
	m, c := newStates(t, mrtr.Options{})
	r := mrtr.Request{Method: mrtr.MethodCallTool, Target: "t", Principal: "p", Arguments: []byte(`{"a":1}`)}
	first := testkit.Must(m.Seal(r, "round=1"))
	call := m.Call(r)
	if got, err := call.Open(ctx, first); err != nil || got != "round=1" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	next, err := call.Seal("round=2")
	if err != nil || next == first {
		t.Fatalf("Seal = %q, %v", next, err)
	}
	if got := testkit.Must(m.Open(ctx, r, next)); got != "round=2" {
		t.Fatalf("next round opens to %q", got)
	}
	bad := m.Call(mrtr.Request{Principal: "p", Arguments: []byte(`{"a":1,"a":2}`)})
	if _, err := bad.Open(ctx, first); !errors.Is(err, mrtr.ErrArguments) {
		t.Fatalf("Open with duplicate names: %v", err)
	}
	if _, err := bad.Seal("x"); !errors.Is(err, mrtr.ErrArguments) {
		t.Fatalf("Seal with duplicate names: %v", err)
	}
	if v := c.Values(); v.Sealed != 2 || v.Opened != 2 || v.Rejected["invalid"] != 1 {
		t.Fatalf("counters %+v", v)
	}
}

// TestAnonymous: a request without a principal carries no state unless the
// server chose AllowAnonymous, so forgetting to pass the authenticated
// user cannot let one user's state replay for another.
func TestAnonymous(t *testing.T) {
	m, _ := newStates(t, mrtr.Options{})
	anon := mrtr.Request{Method: mrtr.MethodCallTool, Target: "t", Arguments: []byte(`{}`)}
	if _, err := m.Seal(anon, "s"); !errors.Is(err, mrtr.ErrNoPrincipal) {
		t.Fatalf("sealed for no principal: %v", err)
	}
	alice := anon
	alice.Principal = "alice"
	tok, err := m.Seal(alice, "s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Open(ctx, anon, tok); !errors.Is(err, mrtr.ErrNoPrincipal) {
		t.Fatalf("opened for no principal: %v", err)
	}
	open, _ := newStates(t, mrtr.Options{AllowAnonymous: true})
	tok, err = open.Seal(anon, "s")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := open.Open(ctx, anon, tok); err != nil || got != "s" {
		t.Fatalf("AllowAnonymous: %q, %v", got, err)
	}
}

var ctx = context.Background()
