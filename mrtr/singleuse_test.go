package mrtr_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/replay"
	"github.com/stateseal/stateseal/seal"
)

type unavailable struct{}

func (unavailable) Use(context.Context, []byte, time.Time, time.Time) error {
	return replay.ErrUnavailable
}

func TestSingleUse(t *testing.T) {
	m, c := newSealer(t, mrtr.Options{SingleUse: mrtr.Targets("pay"), Replay: replay.NewMemory(0)})
	pay := mrtr.Request{Method: mrtr.MethodCallTool, Target: "pay", Principal: "p", Arguments: []byte(`{"amount":1}`)}
	look := pay
	look.Target = "look"
	tok, _ := m.Seal(pay, "s")
	if got, err := m.Open(ctx, pay, tok); err != nil || got != "s" {
		t.Fatalf("first use: %q %v", got, err)
	}
	_, err := m.Open(ctx, pay, tok)
	if !errors.Is(err, replay.ErrReplayed) || mrtr.Reason(err) != "replayed" {
		t.Fatalf("second use: %v (reason %s)", err, mrtr.Reason(err))
	}
	// A forged token never reaches the guard, so it cannot burn a real one.
	if _, err := m.Open(ctx, pay, tok[:len(tok)-2]+"AA"); mrtr.Reason(err) != "invalid" {
		t.Fatalf("forged: %v", err)
	}
	// Targets not named stay reusable within their lifetime.
	tok, _ = m.Seal(look, "s")
	for range 3 {
		if _, err := m.Open(ctx, look, tok); err != nil {
			t.Fatalf("a target that is not single use: %v", err)
		}
	}
	if v := c.Values(); v.Rejected["replayed"] != 1 || v.Rejected["invalid"] != 1 || v.Opened != 4 {
		t.Fatalf("counters %+v", v)
	}
	if _, err := mrtr.New(sealerOf(t), mrtr.Options{Audience: "a", SingleUse: mrtr.Targets("x")}); err == nil {
		t.Fatal("SingleUse without a guard accepted")
	}
}

func TestSingleUseUnavailable(t *testing.T) {
	m, _ := newSealer(t, mrtr.Options{SingleUse: mrtr.Targets("pay"), Replay: unavailable{}})
	pay := mrtr.Request{Method: mrtr.MethodCallTool, Target: "pay", Principal: "p"}
	tok, _ := m.Seal(pay, "s")
	if _, err := m.Open(ctx, pay, tok); !errors.Is(err, replay.ErrUnavailable) || mrtr.Reason(err) != "unavailable" {
		t.Fatalf("guard unavailable: %v", err)
	}
}

func sealerOf(t *testing.T) *seal.Sealer {
	ring, _ := keyring.Generate(keyring.AEAD)
	s, _ := seal.New(ring)
	return s
}
