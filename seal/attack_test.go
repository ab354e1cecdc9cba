package seal

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/envelope"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
)

// decode and encode use encoding/base64, not the package's own codec, so
// the tests also cross-check it.
func decode(t testing.TB, tok string) []byte {
	t.Helper()
	raw, err := base64.RawURLEncoding.Strict().DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func encode(raw []byte) string { return base64.RawURLEncoding.EncodeToString(raw) }

// TestFlippedBit flips every bit of every decoded token byte. Nothing may
// open, and each region fails the way the validation order says.
func TestFlippedBit(t *testing.T) {
	for _, alg := range algs {
		s, _, _ := newSealer(t, alg)
		tok := testkit.Must(s.Seal(testBinding, []byte("state: step 2 of 3"), time.Minute))
		raw := decode(t, tok)
		for i := range raw {
			for bit := range 8 {
				m := bytes.Clone(raw)
				m[i] ^= 1 << bit
				_, err := s.Open(testBinding, encode(m))
				var want []error
				switch {
				case i == 0:
					want = []error{ErrMalformed, ErrInvalid} // unknown version, or the other kind
				case i < 5:
					want = []error{ErrUnknownKey}
				default:
					want = []error{ErrInvalid}
				}
				if !isOneOf(err, want) {
					t.Fatalf("%v: byte %d bit %d: %v, want one of %v", alg, i, bit, err, want)
				}
			}
		}
	}
}

func isOneOf(err error, want []error) bool {
	for _, w := range want {
		if errors.Is(err, w) {
			return true
		}
	}
	return false
}

// TestMovedToken opens a token under every binding that differs in one
// field: another tool, user, method, audience, session, arguments or
// context. Each fails like a forgery.
func TestMovedToken(t *testing.T) {
	argsA := testkit.Must(ArgsDigest([]byte(`{"from":"BER","to":"LIS"}`)))
	argsB := testkit.Must(ArgsDigest([]byte(`{"from":"BER","to":"OPO"}`)))
	base := testBinding
	base.Session = "conv-1"
	base.ArgsDigest = argsA
	base.Context = []byte("ctx")
	moves := map[string]func(*Binding){
		"another tool":      func(b *Binding) { b.Target = "cancel_flight" },
		"another user":      func(b *Binding) { b.Principal = "user-9999" },
		"no user":           func(b *Binding) { b.Principal = "" },
		"another method":    func(b *Binding) { b.Method = "prompts/get" },
		"another audience":  func(b *Binding) { b.Audience = "https://other.example.test" },
		"another session":   func(b *Binding) { b.Session = "conv-2" },
		"changed arguments": func(b *Binding) { b.ArgsDigest = argsB },
		"no arguments":      func(b *Binding) { b.ArgsDigest = nil },
		"another context":   func(b *Binding) { b.Context = []byte("cty") },
		// Length prefixes keep a byte from sliding between fields.
		"shifted field": func(b *Binding) { b.Method, b.Target = "tools/callb", "ook_flight" },
	}
	for _, alg := range algs {
		s, _, _ := newSealer(t, alg)
		tok, err := s.Seal(base, []byte("state"), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Open(base, tok); err != nil {
			t.Fatalf("%v: own binding: %v", alg, err)
		}
		for name, move := range moves {
			b := base
			move(&b)
			if _, err := s.Open(b, tok); !errors.Is(err, ErrInvalid) {
				t.Errorf("%v: %s: %v, want ErrInvalid", alg, name, err)
			}
		}
	}
}

// TestEncoding tries every way to spell a token differently.
func TestEncoding(t *testing.T) {
	for _, alg := range algs {
		s, _, _ := newSealer(t, alg)
		// 20 bytes of payload make a raw length that is not a multiple of
		// 3, so the last character carries trailing bits.
		tok := testkit.Must(s.Seal(testBinding, make([]byte, 20), time.Minute))
		raw := decode(t, tok)
		if len(raw)%3 == 0 {
			t.Fatal("test needs a partial final group")
		}
		last := strings.IndexByte(b64alphabet, tok[len(tok)-1])
		cases := map[string]string{
			"padded":           tok + strings.Repeat("=", (4-len(tok)%4)%4),
			"one pad char":     tok + "=",
			"standard +":       strings.Replace(tok[:1], tok[:1], "+", 1) + tok[1:],
			"standard /":       "/" + tok[1:],
			"newline inside":   tok[:10] + "\n" + tok[10:],
			"CR inside":        tok[:10] + "\r" + tok[10:],
			"trailing newline": tok + "\n",
			"space":            tok[:10] + " " + tok[10:],
			"non-zero trailing bits": tok[:len(tok)-1] +
				string(b64alphabet[last|1]),
			"empty":       "",
			"header only": encode(raw[:envelope.HeaderSize]),
		}
		if last|1 == last {
			cases["non-zero trailing bits"] = tok[:len(tok)-1] + string(b64alphabet[last&^1|2])
		}
		for name, bad := range cases {
			if _, err := s.Open(testBinding, bad); !errors.Is(err, ErrMalformed) {
				t.Errorf("%v: %s: %v, want ErrMalformed", alg, name, err)
			}
		}
		// One character fewer is either an impossible length or, when the
		// new last character's spare bits happen to be zero, a canonical
		// encoding of a shorter envelope that fails authentication.
		if _, err := s.Open(testBinding, tok[:len(tok)-1]); !isOneOf(err, []error{ErrMalformed, ErrInvalid}) {
			t.Errorf("%v: truncated by one character: %v", alg, err)
		}
		// Truncated or extended at the byte level, re-encoded canonically:
		// well-formed base64 of the wrong bytes fails authentication, or is
		// too short to be an envelope.
		for n := range len(raw) {
			_, err := s.Open(testBinding, encode(raw[:n]))
			if !isOneOf(err, []error{ErrMalformed, ErrInvalid}) {
				t.Fatalf("%v: truncated to %d bytes: %v", alg, n, err)
			}
		}
		for _, extra := range [][]byte{{0}, {0, 0, 0}, []byte("trailing bytes")} {
			if _, err := s.Open(testBinding, encode(append(bytes.Clone(raw), extra...))); !errors.Is(err, ErrInvalid) {
				t.Errorf("%v: %d trailing bytes: %v, want ErrInvalid", alg, len(extra), err)
			}
		}
	}
}

const b64alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// TestKindConfusion seals a MAC envelope with the material and id of an
// AEAD key. The token is authentic under that material, but the key is an
// AEAD key, so it must not open: the token never chooses the algorithm.
func TestKindConfusion(t *testing.T) {
	k := newKey(t, keyring.AEAD, t0.Add(-time.Hour))
	forged := k
	forged.Algorithm = keyring.MAC
	clk := &fakeClock{t: t0}
	forger := testkit.Must(New(newRing(t, forged), &Options{Now: clk.now}))
	tok, err := forger.Seal(testBinding, []byte("state"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	victim := testkit.Must(New(newRing(t, k), &Options{Now: clk.now}))
	if _, err := victim.Open(testBinding, tok); !errors.Is(err, ErrInvalid) {
		t.Fatalf("MAC token under an AEAD key id: %v, want ErrInvalid", err)
	}
	// And the other way round.
	tok = testkit.Must(victim.Seal(testBinding, []byte("state"), time.Minute))
	if _, err := forger.Open(testBinding, tok); !errors.Is(err, ErrInvalid) {
		t.Fatalf("AEAD token under a MAC key id: %v, want ErrInvalid", err)
	}
}

// TestValidationOrder: a forged token is reported invalid even when its
// header says it expired; only an authentic one is reported expired.
func TestValidationOrder(t *testing.T) {
	for _, alg := range algs {
		s, clk, _ := newSealer(t, alg)
		tok := testkit.Must(s.Seal(testBinding, []byte("state"), time.Minute))
		raw := decode(t, tok)
		clk.advance(time.Hour)
		if _, err := s.Open(testBinding, tok); !errors.Is(err, ErrExpired) {
			t.Fatalf("%v: authentic and old: %v, want ErrExpired", alg, err)
		}
		raw[len(raw)-1] ^= 1
		if _, err := s.Open(testBinding, encode(raw)); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%v: forged and old: %v, want ErrInvalid", alg, err)
		}
		// An unknown key id is reported before authentication is tried.
		binary.BigEndian.PutUint32(raw[1:5], binary.BigEndian.Uint32(raw[1:5])+1)
		if _, err := s.Open(testBinding, encode(raw)); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("%v: unknown key: %v, want ErrUnknownKey", alg, err)
		}
	}
}

// TestAppendOpenLeavesNothing: a token that fails after decryption (it is
// authentic but expired) leaves no plaintext in the caller's buffer.
func TestAppendOpenLeavesNothing(t *testing.T) {
	for _, alg := range algs {
		s, clk, _ := newSealer(t, alg)
		secret := bytes.Repeat([]byte("S"), 64)
		tok := testkit.Must(s.AppendSeal(nil, testBinding, secret, time.Minute))
		clk.advance(time.Hour)
		dst := make([]byte, 3, 256)
		copy(dst, "abc")
		out, err := s.AppendOpen(dst, testBinding, tok)
		if !errors.Is(err, ErrExpired) {
			t.Fatalf("%v: %v, want ErrExpired", alg, err)
		}
		if string(out) != "abc" {
			t.Fatalf("%v: dst changed to %q", alg, out)
		}
		if bytes.Contains(dst[:cap(dst)], []byte("SSSS")) {
			t.Fatalf("%v: plaintext left in spare capacity", alg)
		}
	}
}
