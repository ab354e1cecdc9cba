package mrtr_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/seal"
)

// labelled records the labels of every call.
type labelled struct{ calls []string }

func (l *labelled) Sealed(method, target string) {
	l.calls = append(l.calls, "sealed "+method+" "+target)
}
func (l *labelled) Opened(method, target string) {
	l.calls = append(l.calls, "opened "+method+" "+target)
}
func (l *labelled) Rejected(method, target, reason string) {
	l.calls = append(l.calls, "rejected "+method+" "+target+" "+reason)
}

// TestLabels: a target reaches Metrics as its Label; without one, as
// itself only where the state authenticated, since a client names any
// target it likes; a method other than the three as Unknown; and never
// longer than 128 bytes.
func TestLabels(t *testing.T) {
	ring := testkit.Must(keyring.Generate(keyring.MAC))
	now := time.Now()
	s := testkit.Must(seal.New(ring, &seal.Options{Now: func() time.Time { return now }}))
	l := &labelled{}
	m, err := mrtr.New(s, &mrtr.Options{Audience: "a", Metrics: l})
	if err != nil {
		t.Fatal(err)
	}
	r := mrtr.Request{Method: mrtr.MethodCallTool, Target: "book", Principal: "p"}
	tok := testkit.Must(m.Seal(r, "s"))
	m.Open(ctx, r, tok)
	m.Open(ctx, r, tok+"A")
	now = now.Add(time.Hour)
	m.Open(ctx, r, tok) // expired: it authenticated, so "book" is this server's word
	evil := strings.Repeat("é", 1000)
	m.Open(ctx, mrtr.Request{Method: mrtr.MethodCallTool, Target: evil, Principal: "p"}, tok)
	m.Open(ctx, mrtr.Request{Method: mrtr.MethodCallTool, Target: evil, Label: "registered", Principal: "p"}, tok)
	m.Open(ctx, mrtr.Request{Method: evil, Target: evil, Principal: "p"}, tok)
	m.Refuse(mrtr.Request{Method: mrtr.MethodReadResource, Target: evil})
	long := mrtr.Request{Method: mrtr.MethodCallTool, Target: evil, Label: evil, Principal: "p"}
	m.Open(ctx, long, tok)
	want := []string{
		"sealed tools/call book",
		"opened tools/call book",
		"rejected tools/call unknown invalid",
		"rejected tools/call book expired",
		"rejected tools/call unknown invalid",
		"rejected tools/call registered invalid",
		"rejected unknown unknown invalid",
		"rejected resources/read unknown invalid",
	}
	for i, w := range want {
		if i >= len(l.calls) || l.calls[i] != w {
			t.Fatalf("call %d: %.80q, want %q", i, l.calls[i], w)
		}
	}
	last := strings.TrimSuffix(strings.TrimPrefix(l.calls[len(want)], "rejected tools/call "), " invalid")
	if len(last) > 128 || !strings.HasPrefix(evil, strings.TrimSuffix(last, "...")) {
		t.Fatalf("a long label reached Metrics as %d bytes: %.40q", len(last), last)
	}
}

// TestBoundedErrors: an error of Seal or Open quotes what the client sent
// (here, a member name of its arguments), and a caller may log it; its
// text stays short, and errors.Is still sees the sentinel.
func TestBoundedErrors(t *testing.T) {
	m, _ := newStates(t, mrtr.Options{})
	name := strings.Repeat("k", 100<<10)
	r := mrtr.Request{Method: mrtr.MethodCallTool, Target: strings.Repeat("t", 100<<10), Principal: "p",
		Arguments: []byte(`{"` + name + `":1,"` + strings.ToUpper(name) + `":2}`)} // case-folded duplicates
	_, err := m.Seal(r, "s")
	if !errors.Is(err, mrtr.ErrArguments) || len(err.Error()) > 512 {
		t.Fatalf("Seal: %d bytes of error text, ErrArguments %v", len(err.Error()), errors.Is(err, mrtr.ErrArguments))
	}
	ok := r
	ok.Arguments = nil
	tok := testkit.Must(m.Seal(ok, "s"))
	_, err = m.Open(ctx, r, tok)
	if !errors.Is(err, mrtr.ErrArguments) || len(err.Error()) > 512 {
		t.Fatalf("Open: %d bytes of error text, ErrArguments %v", len(err.Error()), errors.Is(err, mrtr.ErrArguments))
	}
}
