package mrtr_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/seal"
)

// TestHandle runs two rounds of a call through Handle, as an adapter
// does: the handler sees plaintext both ways, the client only a token,
// and the label is looked up only for the rounds that carry state.
func TestHandle(t *testing.T) {
	m, c := newStates(t, mrtr.Options{})
	lookups := 0
	r := mrtr.Request{Method: mrtr.MethodCallTool, Target: "book", Principal: "p", Arguments: []byte(`{"a":1}`)}
	label := func() string { lookups++; return "book" }

	// A call that carries no state, either way: no label lookup.
	in := ""
	if err := m.Handle(ctx, r, &in, label, func() (*string, error) { return nil, nil }); err != nil || lookups != 0 {
		t.Fatalf("stateless call: %v, %d lookups", err, lookups)
	}

	// The first round: the handler's state leaves sealed.
	out := "round=1"
	if err := m.Handle(ctx, r, &in, label, func() (*string, error) { return &out, nil }); err != nil {
		t.Fatal(err)
	}
	if out == "round=1" || out == "" || lookups != 1 {
		t.Fatalf("first round sent %q, %d lookups", out, lookups)
	}

	// The retry: the handler sees the plaintext, and its next state
	// leaves sealed; one lookup for both.
	lookups = 0
	in, out = out, "round=2"
	var seen string
	if err := m.Handle(ctx, r, &in, label, func() (*string, error) { seen = in; return &out, nil }); err != nil {
		t.Fatal(err)
	}
	if seen != "round=1" || out == "round=2" || lookups != 1 {
		t.Fatalf("retry: handler saw %q, sent %q, %d lookups", seen, out, lookups)
	}

	// A handler's error comes back as it is.
	errHandler := errors.New("handler failed")
	in = ""
	if err := m.Handle(ctx, r, &in, label, func() (*string, error) { return nil, errHandler }); err != errHandler {
		t.Fatalf("handler error became %v", err)
	}

	// A state that does not open: the handler does not run.
	in = out + "A"
	ran := false
	err := m.Handle(ctx, r, &in, label, func() (*string, error) { ran = true; return nil, nil })
	var se *mrtr.StateError
	if !errors.As(err, &se) || se.Op != "open" || mrtr.Reason(err) != "invalid" || ran {
		t.Fatalf("bad token: %v (ran %v)", err, ran)
	}
	if v := c.Values(); v.Sealed != 2 || v.Opened != 1 || v.Rejected["invalid"] != 1 {
		t.Fatalf("counters %+v", v)
	}
}

// TestHandleSealFailure: a state that cannot be sealed (here: no
// principal) is cleared, never sent in plaintext, and the cause is logged,
// since the client is told no more than that it could not be sealed.
func TestHandleSealFailure(t *testing.T) {
	var log bytes.Buffer
	m, _ := newStates(t, mrtr.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	r := mrtr.Request{Method: mrtr.MethodCallTool, Target: "book", Label: "book"}
	in, out := "", "secret"
	err := m.Handle(ctx, r, &in, nil, func() (*string, error) { return &out, nil })
	var se *mrtr.StateError
	if !errors.As(err, &se) || se.Op != "seal" || !errors.Is(err, mrtr.ErrNoPrincipal) {
		t.Fatalf("got %v", err)
	}
	if out != "" {
		t.Fatalf("the plaintext state was left for the client: %q", out)
	}
	if l := log.String(); !strings.Contains(l, "cannot seal requestState") || !strings.Contains(l, "target=book") || !strings.Contains(l, "no principal") {
		t.Fatalf("log: %s", l)
	}
}

// TestRefuse: a state on a path where none is sealed is refused unopened,
// counted as invalid, and its target named only by its label.
func TestRefuse(t *testing.T) {
	m, c := newStates(t, mrtr.Options{})
	err := m.Refuse(mrtr.Request{Method: mrtr.MethodReadResource, Target: "file:///x"})
	var se *mrtr.StateError
	if !errors.As(err, &se) || se.Op != "open" || !errors.Is(err, seal.ErrInvalid) || mrtr.Reason(err) != "invalid" {
		t.Fatalf("got %v", err)
	}
	if v := c.Values(); v.Rejected["invalid"] != 1 {
		t.Fatalf("counters %+v", v)
	}
}
