package seal

import (
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
)

// t0 is the fixed clock of most tests.
var t0 = testkit.T0

var testBinding = Binding{
	Method:    "tools/call",
	Target:    "book_flight",
	Principal: "user-1234",
	Audience:  "https://mcp.example.test",
}

// fakeClock is a settable clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newRing(t testing.TB, keys ...keyring.Key) *keyring.Ring {
	t.Helper()
	snap, err := keyring.NewSnapshot(keys)
	if err != nil {
		t.Fatal(err)
	}
	r, err := keyring.NewRing(snap)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newKey(t testing.TB, alg keyring.Algorithm, activation time.Time) keyring.Key {
	t.Helper()
	k, err := keyring.NewKey(alg, activation, activation, nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newSealer returns a sealer with one fresh key of alg, active since before
// t0, on a fake clock at t0.
func newSealer(t testing.TB, alg keyring.Algorithm, opts ...*Options) (*Sealer, *fakeClock, *keyring.Ring) {
	t.Helper()
	clk := &fakeClock{t: t0}
	ring := newRing(t, newKey(t, alg, t0.Add(-time.Hour)))
	var o Options
	if len(opts) > 0 {
		o = *opts[0]
	}
	o.Now = clk.now
	s, err := New(ring, &o)
	if err != nil {
		t.Fatal(err)
	}
	return s, clk, ring
}

var algs = []keyring.Algorithm{keyring.MAC, keyring.AEAD}
