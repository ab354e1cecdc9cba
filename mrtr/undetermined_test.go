package mrtr_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/replay"
)

// TestUndetermined: a handler cut before it answered (its context ended
// while it ran, or it panicked) may or may not have acted: the retry of
// its single-use state is refused as "undetermined", a -32602 of its own;
// a handler that answered, even with an error, ran: its retry is
// "replayed".
func TestUndetermined(t *testing.T) {
	m, _ := newStates(t, mrtr.Options{SingleUse: mrtr.Targets("pay"), Replay: replay.NewMemory(0)})
	pay := mrtr.Request{Method: mrtr.MethodCallTool, Target: "pay", Principal: "p", Arguments: []byte(`{"amount":1}`)}
	errDeclined := errors.New("card declined")
	for _, tc := range []struct {
		name    string
		handler func(cancel context.CancelFunc) (*string, error)
		want    string
	}{
		{"client gone", func(cancel context.CancelFunc) (*string, error) { cancel(); return nil, context.Canceled }, "undetermined"},
		{"panic", func(context.CancelFunc) (*string, error) { panic("boom") }, "undetermined"},
		{"answered with an error", func(context.CancelFunc) (*string, error) { return nil, errDeclined }, "replayed"},
		{"answered", func(context.CancelFunc) (*string, error) { return nil, nil }, "replayed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := testkit.Must(m.Seal(pay, "s"))
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			func() {
				defer func() { recover() }()
				state := tok
				m.Handle(cctx, pay, &state, nil, func() (*string, error) { return tc.handler(cancel) })
			}()
			state := tok
			ran := false
			err := m.Handle(ctx, pay, &state, nil, func() (*string, error) { ran = true; return nil, nil })
			if ran || mrtr.Reason(err) != tc.want {
				t.Fatalf("retry: ran %t, %v (reason %q), want %s", ran, err, mrtr.Reason(err), tc.want)
			}
			if a := mrtr.ClientError(err); a.Code != mrtr.CodeInvalidParams || a.Message != "invalid requestState: "+tc.want {
				t.Fatalf("answer %+v", a)
			}
		})
	}
}
