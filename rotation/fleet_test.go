package rotation

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/seal"
)

// instance is one server of a fleet: a loader on the shared keyset file
// and a sealer on its ring, on the fleet's fake clock.
type instance struct {
	name   string
	loader *keyset.Loader
	sealer *seal.Sealer
}

func newInstance(t *testing.T, name, path string, clk *clock) *instance {
	t.Helper()
	l := &keyset.Loader{Path: path, Options: keyset.LoadOptions{KEK: "local:kek", PreviousKEK: "local:kek2", Now: clk.now},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ring, err := l.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := seal.New(ring, &seal.Options{Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	return &instance{name, l, s}
}

// TestFleetRotation runs two instances that reload the keyset at different
// moments within the propagation delay, through a rotation and the old
// key's retirement. Every token either one seals opens on both, at every
// step; the old key's tokens stop opening only after retirement.
func TestFleetRotation(t *testing.T) {
	path, clk, o := setup(t)
	a := newInstance(t, "a", path, clk)
	b := newInstance(t, "b", path, clk)
	bind := seal.Binding{Method: "tools/call", Target: "t", Principal: "p"}
	type token struct {
		by, tok string
		at      time.Time
	}
	var toks []token
	step := func(what string) {
		t.Helper()
		for _, in := range []*instance{a, b} {
			tok, err := in.sealer.Seal(bind, []byte(in.name), 5*time.Minute)
			if err != nil {
				t.Fatalf("%s: %s cannot seal: %v", what, in.name, err)
			}
			toks = append(toks, token{in.name, tok, clk.t})
		}
		for _, tk := range toks {
			if clk.t.Sub(tk.at) >= 5*time.Minute {
				continue // expired by design
			}
			for _, in := range []*instance{a, b} {
				got, err := in.sealer.Open(bind, tk.tok)
				if err != nil || string(got) != tk.by {
					t.Fatalf("%s: token sealed by %s at %v does not open on %s: %v", what, tk.by, tk.at.Format(time.TimeOnly), in.name, err)
				}
			}
		}
	}
	step("before rotation")
	old := read(t, path).Keys[0].ID
	clk.advance(time.Minute)
	res, err := Rotate(ctx, path, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	step("rotated, neither reloaded")
	clk.advance(2 * time.Minute)
	reload(t, a)
	step("a reloaded")
	clk.advance(5 * time.Minute)
	reload(t, b)
	step("both reloaded, before activation")
	clk.advance(3 * time.Minute) // the new key is active now
	step("after activation")
	for _, in := range []*instance{a, b} {
		tok := testkit.Must(in.sealer.Seal(bind, nil, time.Minute))
		if h := testkit.Must(seal.Inspect(tok)); h.KeyID != res.Key {
			t.Fatalf("%s seals with %08x after activation, want the new key", in.name, h.KeyID)
		}
	}
	oldTok := toks[len(toks)-3].tok // sealed by b with the old key just before activation
	clk.advance(time.Hour + 30*time.Second)
	if _, err := Retire(ctx, path, old, nil, o); err != nil {
		t.Fatal(err)
	}
	reload(t, a)
	step("old key retired, a reloaded")
	reload(t, b)
	if _, err := b.sealer.Open(bind, oldTok); !errors.Is(err, seal.ErrUnknownKey) {
		t.Fatalf("old key's token after retirement: %v, want ErrUnknownKey", err)
	}
}

func reload(t *testing.T, in *instance) {
	t.Helper()
	if err := in.loader.Reload(ctx); err != nil {
		t.Fatalf("%s reload: %v", in.name, err)
	}
}

// TestRewrap moves every data key to a new KEK: tokens sealed before open
// after, and the old KEK no longer opens the keyset.
func TestRewrap(t *testing.T) {
	path, clk, o := setup(t)
	Rotate(ctx, path, &RotateOptions{Immediate: true}, o)
	in := newInstance(t, "a", path, clk)
	bind := seal.Binding{Target: "x"}
	tok := testkit.Must(in.sealer.Seal(bind, []byte("before"), time.Minute))

	dir := filepath.Dir(path)
	if err := backends.GenerateLocal(filepath.Join(dir, "kek2")); err != nil {
		t.Fatal(err)
	}
	before := read(t, path)
	if _, err := Rewrap(ctx, path, "local:kek2", o); err != nil {
		t.Fatal(err)
	}
	after := read(t, path)
	if after.KEK != "local:kek2" || after.Version != before.Version+1 {
		t.Fatalf("after rewrap: KEK %s, version %d", after.KEK, after.Version)
	}
	for i := range after.Keys {
		if bytes.Equal(after.Keys[i].Wrapped, before.Keys[i].Wrapped) {
			t.Fatalf("key %d still wrapped by the old KEK", i)
		}
	}
	fresh := newInstance(t, "b", path, clk)
	if got, err := fresh.sealer.Open(bind, tok); err != nil || string(got) != "before" {
		t.Fatalf("token from before the rewrap: %v", err)
	}
	if _, _, err := keyset.Load(ctx, path, &keyset.LoadOptions{KEK: "local:kek", Now: clk.now}); !errors.Is(err, keyset.ErrUntrustedKEK) {
		t.Fatalf("an instance that trusts only the old KEK loaded the rewrapped keyset: %v", err)
	}
	if _, _, err := keyset.Load(ctx, path, &keyset.LoadOptions{KEK: "local:kek2", Now: clk.now}); err != nil {
		t.Fatalf("an instance that trusts the new KEK: %v", err)
	}
	// A rewrap to a KEK that cannot be opened writes nothing.
	if _, err := Rewrap(ctx, path, "local:nope", o); err == nil || read(t, path).Version != after.Version {
		t.Fatalf("rewrap to a missing KEK: %v", err)
	}
}

// TestPolicyBoundsSealer: the keyset's max TTL and skew hold for every
// sealer of the fleet; an option may tighten them, never loosen them.
func TestPolicyBoundsSealer(t *testing.T) {
	path, clk, _ := setup(t) // policy: max TTL 1h, skew 30s
	snap, _, err := keyset.Load(ctx, path, &keyset.LoadOptions{KEK: "local:kek", Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	ring := testkit.Must(keyring.NewRing(snap))
	for _, tc := range []struct {
		maxTTL time.Duration
		want   time.Duration
	}{
		{24 * time.Hour, time.Hour},          // looser: the policy wins
		{10 * time.Minute, 10 * time.Minute}, // tighter: the option wins
	} {
		s, err := seal.New(ring, &seal.Options{Now: clk.now, MaxTTL: tc.maxTTL})
		if err != nil {
			t.Fatal(err)
		}
		tok := testkit.Must(s.Seal(seal.Binding{}, nil, 2*time.Hour))
		h := testkit.Must(seal.Inspect(tok))
		if got := h.Expiry.Sub(h.IssuedAt); got != tc.want {
			t.Errorf("lifetime %v, want %v", got, tc.want)
		}
	}
	// A looser skew option does not stretch the policy's 30 s either.
	s := testkit.Must(seal.New(ring, &seal.Options{Now: clk.now, Skew: 5 * time.Minute}))
	tok := testkit.Must(s.Seal(seal.Binding{}, nil, time.Minute))
	clk.advance(time.Minute + 31*time.Second)
	if _, err := s.Open(seal.Binding{}, tok); !errors.Is(err, seal.ErrExpired) {
		t.Fatalf("skew beyond the policy: %v, want ErrExpired", err)
	}
}
