package seal

import (
	"errors"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
)

func TestTimeBoundaries(t *testing.T) {
	const skew = 30 * time.Second
	for _, alg := range algs {
		s, clk, _ := newSealer(t, alg, &Options{Skew: skew})
		tok := testkit.Must(s.Seal(testBinding, []byte("state"), time.Minute))
		for _, tc := range []struct {
			at   time.Duration // from issue
			want error
		}{
			{-skew - time.Second, ErrNotYetValid},
			{-skew, nil},
			{0, nil},
			{time.Minute + skew - time.Nanosecond, nil},
			{time.Minute + skew, ErrExpired},
			{24 * time.Hour, ErrExpired},
		} {
			clk.t = t0.Add(tc.at)
			_, err := s.Open(testBinding, tok)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("%v: open at issue%+v: %v, want %v", alg, tc.at, err, tc.want)
			}
		}
	}
}

// TestFutureToken: an instance whose clock runs ahead seals a token that an
// instance on time sees as issued in the future.
func TestFutureToken(t *testing.T) {
	ring := newRing(t, newKey(t, keyring.AEAD, time.Time{}))
	ahead := &fakeClock{t: t0.Add(5 * time.Minute)}
	onTime := &fakeClock{t: t0}
	a := testkit.Must(New(ring, &Options{Now: ahead.now}))
	b := testkit.Must(New(ring, &Options{Now: onTime.now, Skew: time.Minute}))
	tok := testkit.Must(a.Seal(testBinding, nil, time.Hour))
	if _, err := b.Open(testBinding, tok); !errors.Is(err, ErrNotYetValid) {
		t.Fatalf("token from 5 minutes ahead: %v, want ErrNotYetValid", err)
	}
	ahead.t = t0.Add(time.Minute)
	tok = testkit.Must(a.Seal(testBinding, nil, time.Hour))
	if _, err := b.Open(testBinding, tok); err != nil {
		t.Fatalf("token from 1 minute ahead, within skew: %v", err)
	}
}

// TestLifetimeOverMax: an authentic token that claims a longer life than
// the opener allows is invalid, whatever its expiry.
func TestLifetimeOverMax(t *testing.T) {
	ring := newRing(t, newKey(t, keyring.MAC, time.Time{}))
	clk := &fakeClock{t: t0}
	loose := testkit.Must(New(ring, &Options{Now: clk.now, MaxTTL: 24 * time.Hour}))
	strict := testkit.Must(New(ring, &Options{Now: clk.now, MaxTTL: time.Hour}))
	tok := testkit.Must(loose.Seal(testBinding, nil, 2*time.Hour))
	if _, err := strict.Open(testBinding, tok); !errors.Is(err, ErrInvalid) {
		t.Fatalf("2h token under a 1h maximum: %v, want ErrInvalid", err)
	}
	if _, err := loose.Open(testBinding, tok); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultClock(t *testing.T) {
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	s := testkit.Must(New(ring, nil))
	before := time.Now().Truncate(time.Second)
	tok := testkit.Must(s.Seal(testBinding, nil, time.Minute))
	h := testkit.Must(Inspect(tok))
	if h.IssuedAt.Before(before) || h.IssuedAt.After(time.Now()) {
		t.Fatalf("issued at %v, now %v", h.IssuedAt, time.Now())
	}
	if _, err := s.Open(testBinding, tok); err != nil {
		t.Fatal(err)
	}
	var c wallClock
	for range 3 {
		if d := time.Since(c.now()); d < -time.Millisecond || d > time.Second {
			t.Fatalf("wallClock off by %v", d)
		}
	}
}
