//go:build !race

package seal

import (
	"testing"
	"time"
)

// TestAllocs holds the allocation contract: the append forms allocate
// nothing, the string forms only what they return. It counts allocations,
// not time, so it is stable on any machine.
func TestAllocs(t *testing.T) {
	for _, alg := range algs {
		s, _, _ := newSealer(t, alg)
		payload := make([]byte, 256)
		tok := make([]byte, 0, 1024)
		out := make([]byte, 0, 1024)
		var err error
		if n := testing.AllocsPerRun(100, func() {
			tok, err = s.AppendSeal(tok[:0], testBinding, payload, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			out, err = s.AppendOpen(out[:0], testBinding, tok)
			if err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%v: append round trip: %v allocs, want 0", alg, n)
		}
		if n := testing.AllocsPerRun(100, func() {
			str, err := s.Seal(testBinding, payload, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Open(testBinding, str); err != nil {
				t.Fatal(err)
			}
		}); n > 2 {
			t.Errorf("%v: string round trip: %v allocs, want at most 2", alg, n)
		}
		// Rejecting a forgery allocates nothing either: a flood of bad
		// tokens costs no garbage.
		bad := append([]byte(nil), tok...)
		bad[len(bad)/2] ^= 1
		if n := testing.AllocsPerRun(100, func() {
			if _, err := s.AppendOpen(out[:0], testBinding, bad); err == nil {
				t.Fatal("forgery opened")
			}
		}); n != 0 {
			t.Errorf("%v: rejecting a forgery: %v allocs, want 0", alg, n)
		}
	}
}
