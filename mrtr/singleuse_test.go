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
	"github.com/stateseal/stateseal/replay"
	"github.com/stateseal/stateseal/seal"
)

type unavailable struct{}

func (unavailable) Use(context.Context, []byte, time.Time, time.Time) error {
	return replay.ErrUnavailable
}

func TestSingleUse(t *testing.T) {
	m, c := newStates(t, mrtr.Options{SingleUse: mrtr.Targets("pay"), Replay: replay.NewMemory(0)})
	pay := mrtr.Request{Method: mrtr.MethodCallTool, Target: "pay", Principal: "p", Arguments: []byte(`{"amount":1}`)}
	look := pay
	look.Target = "look"
	tok := testkit.Must(m.Seal(pay, "s"))
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
	tok = testkit.Must(m.Seal(look, "s"))
	for range 3 {
		if _, err := m.Open(ctx, look, tok); err != nil {
			t.Fatalf("a target that is not single use: %v", err)
		}
	}
	if v := c.Values(); v.Rejected["replayed"] != 1 || v.Rejected["invalid"] != 1 || v.Opened != 4 {
		t.Fatalf("counters %+v", v)
	}
	if _, err := mrtr.New(sealerOf(t), &mrtr.Options{Audience: "a", SingleUse: mrtr.Targets("x")}); err == nil {
		t.Fatal("SingleUse without a guard accepted")
	}
}

func TestSingleUseUnavailable(t *testing.T) {
	m, _ := newStates(t, mrtr.Options{SingleUse: mrtr.Targets("pay"), Replay: unavailable{}})
	pay := mrtr.Request{Method: mrtr.MethodCallTool, Target: "pay", Principal: "p"}
	tok := testkit.Must(m.Seal(pay, "s"))
	if _, err := m.Open(ctx, pay, tok); !errors.Is(err, replay.ErrUnavailable) || mrtr.Reason(err) != "unavailable" {
		t.Fatalf("guard unavailable: %v", err)
	}
}

func sealerOf(t *testing.T) *seal.Sealer {
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	s := testkit.Must(seal.New(ring, nil))
	return s
}

// TestSingleUseLargeState: a single-use state over the default 64 KiB
// bound opens once, and then is refused as replayed, on a sealer that
// accepts such tokens. The id used to be read with the default bound, so
// such a state never opened.
func TestSingleUseLargeState(t *testing.T) {
	for _, alg := range []keyring.Algorithm{keyring.MAC, keyring.AEAD} {
		ring := testkit.Must(keyring.Generate(alg))
		s, err := seal.New(ring, &seal.Options{MaxTokenLen: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		m, err := mrtr.New(s, &mrtr.Options{Audience: "a", SingleUse: mrtr.Targets("pay"), Replay: replay.NewMemory(0), Metrics: &mrtr.Counters{}})
		if err != nil {
			t.Fatal(err)
		}
		pay := mrtr.Request{Method: mrtr.MethodCallTool, Target: "pay", Principal: "p", Arguments: []byte(`{"amount":1}`)}
		state := strings.Repeat("large state ", 100<<10/12)
		tok, err := m.Seal(pay, state)
		if err != nil {
			t.Fatal(err)
		}
		if len(tok) <= seal.DefaultMaxTokenLen {
			t.Fatalf("token of %d characters: not over the default bound", len(tok))
		}
		if got, err := m.Open(ctx, pay, tok); err != nil || got != state {
			t.Fatalf("%v: first use of a %d-character token: %v (state intact: %v)", alg, len(tok), err, got == state)
		}
		if _, err := m.Open(ctx, pay, tok); !errors.Is(err, replay.ErrReplayed) {
			t.Fatalf("%v: second use: %v, want ErrReplayed", alg, err)
		}
	}
}

// TestSingleUseSameSecond: a user runs a single-use tool twice, with the
// same arguments, in the same second, under a MAC key, whose tokens are a
// function of payload, binding and second. Each flow gets its own token,
// so the second flow is not refused as a replay of the first, and each
// token still opens once.
func TestSingleUseSameSecond(t *testing.T) {
	ring := testkit.Must(keyring.Generate(keyring.MAC))
	now := time.Now() // stopped: every seal is in this second; the guard's own clock runs
	s := testkit.Must(seal.New(ring, &seal.Options{Now: func() time.Time { return now }}))
	m, err := mrtr.New(s, &mrtr.Options{Audience: "a", Metrics: &mrtr.Counters{},
		SingleUse: mrtr.Targets("pay"), Replay: replay.NewMemory(0)})
	if err != nil {
		t.Fatal(err)
	}
	pay := mrtr.Request{Method: mrtr.MethodCallTool, Target: "pay", Principal: "p", Arguments: []byte(`{"amount":1}`)}
	look := pay
	look.Target = "look"

	// Without single use, a MAC seal is deterministic: the same token.
	l1 := testkit.Must(m.Seal(look, "confirm"))
	l2 := testkit.Must(m.Seal(look, "confirm"))
	if l1 != l2 {
		t.Fatal("two MAC seals of one state, binding and second differ: the test no longer shows the case")
	}

	first := testkit.Must(m.Seal(pay, "confirm"))
	second := testkit.Must(m.Seal(pay, "confirm")) // the second flow, same second
	if first == second {
		t.Fatal("two single-use flows got one token: the second would be refused as a replay")
	}
	for i, tok := range []string{first, second} {
		if got, err := m.Open(ctx, pay, tok); err != nil || got != "confirm" {
			t.Fatalf("flow %d, first use: %q, %v", i+1, got, err)
		}
	}
	for i, tok := range []string{first, second} {
		if _, err := m.Open(ctx, pay, tok); !errors.Is(err, replay.ErrReplayed) {
			t.Fatalf("flow %d, replayed: %v, want ErrReplayed", i+1, err)
		}
	}
}

// TestSingleUseChangedPredicate: a state sealed while its target was not
// single use does not open once it is, and the other way round: it fails
// as invalid, rather than reach the handler with 16 bytes of nonce added
// to its state or cut from it.
func TestSingleUseChangedPredicate(t *testing.T) {
	s := sealerOf(t)
	plain := testkit.Must(mrtr.New(s, &mrtr.Options{Audience: "a", Metrics: &mrtr.Counters{}}))
	single := testkit.Must(mrtr.New(s, &mrtr.Options{Audience: "a", Metrics: &mrtr.Counters{},
		SingleUse: mrtr.Targets("pay"), Replay: replay.NewMemory(0)}))
	pay := mrtr.Request{Method: mrtr.MethodCallTool, Target: "pay", Principal: "p"}
	state := strings.Repeat("s", 40)
	for _, c := range []struct {
		name       string
		seal, open *mrtr.States
	}{{"made single use", plain, single}, {"no longer single use", single, plain}} {
		tok, err := c.seal.Seal(pay, state)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := c.open.Open(ctx, pay, tok); !errors.Is(err, seal.ErrInvalid) {
			t.Errorf("%s: Open = %q, %v; want ErrInvalid", c.name, got, err)
		}
		if got, err := c.seal.Open(ctx, pay, tok); err != nil || got != state {
			t.Errorf("%s: under the predicate it was sealed with: %q, %v", c.name, got, err)
		}
	}
}

// TestSingleUseUnvouched: with the in-memory guard, a single-use state
// sealed by another instance on the same keyset (a second replica, or
// this server before a restart: a new guard) is refused as unvouched,
// never run a second time, even by an instance that never saw it used;
// the instance that sealed it opens it once. Under a MAC key too, whose
// states a client can read: the instance id is authenticated with them.
func TestSingleUseUnvouched(t *testing.T) {
	for _, alg := range []keyring.Algorithm{keyring.MAC, keyring.AEAD} {
		ring := testkit.Must(keyring.Generate(alg))
		s := testkit.Must(seal.New(ring, nil))
		states := func(g replay.Guard) *mrtr.States {
			m, err := mrtr.New(s, &mrtr.Options{Audience: "a", SingleUse: mrtr.Targets("pay"), Replay: g, Metrics: &mrtr.Counters{}})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		a, restarted := states(replay.NewMemory(0)), states(replay.NewMemory(0))
		pay := mrtr.Request{Method: mrtr.MethodCallTool, Target: "pay", Principal: "p"}
		tok, err := a.Seal(pay, "s")
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			_, err := restarted.Open(ctx, pay, tok)
			if !errors.Is(err, replay.ErrUnvouched) || mrtr.Reason(err) != "unvouched" {
				t.Fatalf("%v: another instance's state: %v (reason %s), want unvouched", alg, err, mrtr.Reason(err))
			}
		}
		if got, err := a.Open(ctx, pay, tok); err != nil || got != "s" {
			t.Fatalf("%v: the sealing instance: %q %v", alg, got, err)
		}
		if _, err := a.Open(ctx, pay, tok); mrtr.Reason(err) != "replayed" {
			t.Fatalf("%v: second use: %v", alg, err)
		}
	}
}

// TestSingleUseRelease: a state whose use was taken back opens once more,
// then is replayed; a Call that recorded nothing releases nothing; Used
// says which.
func TestSingleUseRelease(t *testing.T) {
	m, _ := newStates(t, mrtr.Options{SingleUse: mrtr.Targets("pay"), Replay: replay.NewMemory(0)})
	pay := mrtr.Request{Method: mrtr.MethodCallTool, Target: "pay", Principal: "p"}
	tok := testkit.Must(m.Seal(pay, "s"))
	c := m.Call(pay)
	if _, err := c.Open(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if !c.Used() {
		t.Fatal("Used: false after a single-use Open")
	}
	if !c.Release(ctx) || c.Release(ctx) || c.Used() {
		t.Fatal("Release: want true once, then false, and Used false")
	}
	if _, err := m.Open(ctx, pay, tok); err != nil {
		t.Fatalf("after release: %v", err)
	}
	if _, err := m.Open(ctx, pay, tok); mrtr.Reason(err) != "replayed" {
		t.Fatalf("then: %v", err)
	}
	if c := m.Call(pay); c.Used() || c.Release(ctx) {
		t.Fatal("a Call that opened nothing is used or released")
	}
}
