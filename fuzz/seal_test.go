package fuzz

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/seal"
)

var t0 = testkit.T0

// sealers returns a MAC and an AEAD sealer on fixed test keys (derived from
// labels, so seed tokens stay valid across runs) and a fixed clock.
func sealers(t testing.TB) []*seal.Sealer {
	var out []*seal.Sealer
	for _, alg := range []keyring.Algorithm{keyring.MAC, keyring.AEAD} {
		m := sha256.Sum256([]byte("stateseal fuzz key " + alg.String()))
		k, err := keyring.ImportKey(uint32(alg)*0x01010101, alg, keyring.Active, time.Time{}, time.Time{}, m[:])
		if err != nil {
			t.Fatal(err)
		}
		snap, err := keyring.NewSnapshot([]keyring.Key{k})
		if err != nil {
			t.Fatal(err)
		}
		ring := testkit.Must(keyring.NewRing(snap))
		s, err := seal.New(ring, &seal.Options{Now: func() time.Time { return t0 }})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func binding(method, target, principal string) seal.Binding {
	return seal.Binding{Method: method, Target: target, Principal: principal}
}

// FuzzOpen feeds any token and binding to Open. It must not panic, and it
// must open nothing but what the seeds sealed: a MAC token only if it is
// byte for byte a seed token under that seed's binding, an AEAD token only
// under a seed's binding with that seed's payload. (AEAD seeds carry random
// nonces, so the fuzzer's worker processes cannot know their exact bytes.)
func FuzzOpen(f *testing.F) {
	ss := sealers(f)
	macTokens := map[string]bool{}  // token, binding, payload
	aeadSealed := map[string]bool{} // binding, payload
	for i, s := range ss {
		for _, b := range []seal.Binding{binding("tools/call", "book_flight", "user-1"), binding("prompts/get", "p", "")} {
			for _, p := range []string{"", "state", string(bytes.Repeat([]byte{0xaa}, 300))} {
				tok, err := s.Seal(b, []byte(p), time.Minute)
				if err != nil {
					f.Fatal(err)
				}
				if i == 0 {
					macTokens[key(tok, b, p)] = true
				} else {
					aeadSealed[key("", b, p)] = true
				}
				f.Add(tok, b.Method, b.Target, b.Principal)
			}
		}
	}
	f.Fuzz(func(t *testing.T, tok, method, target, principal string) {
		b := binding(method, target, principal)
		for i, s := range ss {
			payload, err := s.Open(b, tok)
			if err != nil {
				if payload != nil {
					t.Fatal("payload returned with an error")
				}
				continue
			}
			if i == 0 && !macTokens[key(tok, b, string(payload))] || i == 1 && !aeadSealed[key("", b, string(payload))] {
				t.Fatalf("opened what no seed sealed: %q under %+v", tok, b)
			}
		}
	})
}

func key(tok string, b seal.Binding, payload string) string {
	return strings.Join([]string{tok, b.Method, b.Target, b.Principal, payload}, "\x00")
}

// FuzzRoundTrip seals any payload under any binding and opens it again;
// then any single-character change to the token must fail to open.
func FuzzRoundTrip(f *testing.F) {
	ss := sealers(f)
	f.Add([]byte("state"), "tools/call", "book_flight", "user-1", uint16(0), byte('A'))
	f.Add([]byte{}, "", "", "", uint16(40), byte('_'))
	f.Add(bytes.Repeat([]byte{0}, 1000), "resources/read", "file:///x", "bob", uint16(999), byte('-'))
	f.Fuzz(func(t *testing.T, payload []byte, method, target, principal string, pos uint16, c byte) {
		b := binding(method, target, principal)
		for _, s := range ss {
			tok, err := s.Seal(b, payload, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Open(b, tok)
			if err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("round trip: %v", err)
			}
			i := int(pos) % len(tok)
			if tok[i] == c {
				c ^= 1
			}
			changed := tok[:i] + string([]byte{c}) + tok[i+1:]
			if _, err := s.Open(b, changed); err == nil {
				t.Fatalf("token with character %d changed to %q opened", i, c)
			}
		}
	})
}
