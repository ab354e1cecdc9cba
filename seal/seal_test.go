package seal

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
)

func TestRoundTrip(t *testing.T) {
	for _, alg := range algs {
		for _, n := range []int{0, 1, 256, 4096, 40000} {
			s, _, _ := newSealer(t, alg)
			payload := bytes.Repeat([]byte{0xa5}, n)
			tok, err := s.Seal(testBinding, payload, time.Minute)
			if err != nil {
				t.Fatalf("%v/%d: Seal: %v", alg, n, err)
			}
			got, err := s.Open(testBinding, tok)
			if err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("%v/%d: Open = %x, %v", alg, n, got, err)
			}
			// The append forms read and write the same tokens.
			btok, err := s.AppendSeal([]byte("prefix:"), testBinding, payload, time.Minute)
			if err != nil || !bytes.HasPrefix(btok, []byte("prefix:")) {
				t.Fatalf("%v/%d: AppendSeal: %v", alg, n, err)
			}
			out, err := s.AppendOpen([]byte("out:"), testBinding, btok[len("prefix:"):])
			if err != nil || !bytes.Equal(out, append([]byte("out:"), payload...)) {
				t.Fatalf("%v/%d: AppendOpen: %v", alg, n, err)
			}
			if got, err := s.Open(testBinding, string(btok[len("prefix:"):])); err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("%v/%d: Open of AppendSeal token: %v", alg, n, err)
			}
		}
	}
}

func TestTokensDiffer(t *testing.T) {
	// AEAD tokens carry a random nonce; MAC tokens of the same second and
	// input are equal by design, and differ as soon as anything bound does.
	s, _, _ := newSealer(t, keyring.AEAD)
	a := testkit.Must(s.Seal(testBinding, []byte("x"), time.Minute))
	b := testkit.Must(s.Seal(testBinding, []byte("x"), time.Minute))
	if a == b {
		t.Fatal("two AEAD tokens are equal")
	}
	pa := testkit.Must(s.Open(testBinding, a))
	pb := testkit.Must(s.Open(testBinding, b))
	if !bytes.Equal(pa, pb) {
		t.Fatal("payloads differ")
	}
}

func TestAEADHidesPayload(t *testing.T) {
	s, _, _ := newSealer(t, keyring.AEAD)
	secret := []byte("the-secret-state-value")
	tok := testkit.Must(s.Seal(testBinding, secret, time.Minute))
	raw := decode(t, tok)
	if bytes.Contains(raw, secret) {
		t.Fatal("AEAD token contains the plaintext")
	}
	m, _, _ := newSealer(t, keyring.MAC)
	tok = testkit.Must(m.Seal(testBinding, secret, time.Minute))
	if !bytes.Contains(decode(t, tok), secret) {
		t.Fatal("MAC token does not carry the payload in the clear as documented")
	}
}

func TestOverhead(t *testing.T) {
	for _, tc := range []struct {
		alg  keyring.Algorithm
		want int
	}{{keyring.MAC, 45}, {keyring.AEAD, 53}} {
		s, _, _ := newSealer(t, tc.alg)
		tok := testkit.Must(s.Seal(testBinding, make([]byte, 100), time.Minute))
		if got := len(decode(t, tok)) - 100; got != tc.want {
			t.Errorf("%v overhead = %d bytes, want %d", tc.alg, got, tc.want)
		}
	}
}

func TestTTL(t *testing.T) {
	s, clk, _ := newSealer(t, keyring.MAC, &Options{MaxTTL: time.Hour, DefaultTTL: 2 * time.Minute})
	for _, tc := range []struct {
		ttl, want time.Duration
	}{
		{0, 2 * time.Minute},                       // default
		{90 * time.Second, 90 * time.Second},       // as asked
		{1500 * time.Millisecond, 2 * time.Second}, // rounded up
		{3 * time.Hour, time.Hour},                 // capped
	} {
		tok, err := s.Seal(testBinding, nil, tc.ttl)
		if err != nil {
			t.Fatal(err)
		}
		h, err := Inspect(tok)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.Expiry.Sub(h.IssuedAt); got != tc.want {
			t.Errorf("ttl %v: lifetime %v, want %v", tc.ttl, got, tc.want)
		}
		if !h.IssuedAt.Equal(clk.t) {
			t.Errorf("issued at %v, want %v", h.IssuedAt, clk.t)
		}
	}
	if _, err := s.Seal(testBinding, nil, -time.Second); err == nil {
		t.Error("negative TTL accepted")
	}
}

func TestTooLarge(t *testing.T) {
	s, _, _ := newSealer(t, keyring.AEAD, &Options{MaxTokenLen: 200})
	// 200 characters hold 150 bytes: 53 of overhead and 97 of payload.
	if _, err := s.Seal(testBinding, make([]byte, 97), time.Minute); err != nil {
		t.Fatalf("largest payload: %v", err)
	}
	if _, err := s.Seal(testBinding, make([]byte, 98), time.Minute); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("payload one byte over: %v, want ErrTooLarge", err)
	}
	// Open refuses long input before decoding it: this is not base64 at all.
	if _, err := s.Open(testBinding, strings.Repeat("!", 201)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("long garbage: %v, want ErrTooLarge", err)
	}
	if _, err := s.AppendOpen(nil, testBinding, bytes.Repeat([]byte("!"), 201)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("long garbage (append): %v, want ErrTooLarge", err)
	}
	// The default bound is 64 KiB.
	d, _, _ := newSealer(t, keyring.MAC)
	if _, err := d.Open(testBinding, strings.Repeat("A", DefaultMaxTokenLen+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("64 KiB + 1: %v, want ErrTooLarge", err)
	}
}

func TestOptionsValidated(t *testing.T) {
	ring := testkit.Must(keyring.Generate(keyring.MAC))
	for name, o := range map[string]*Options{
		"default over max": {MaxTTL: time.Minute, DefaultTTL: 2 * time.Minute},
		"max under 1s":     {MaxTTL: time.Millisecond},
		"max over format":  {MaxTTL: MaxTTLLimit + time.Second},
		"negative skew":    {Skew: -time.Second},
		"huge skew":        {Skew: time.Hour},
		"tiny max length":  {MaxTokenLen: 10},
		"max length 70":    {MaxTokenLen: 70},
		"negative length":  {MaxTokenLen: -1},
		"skew over 600s":   {Skew: MaxSkew + time.Second},
		"default over 1h":  {DefaultTTL: 2 * time.Hour},
		"default under 1s": {DefaultTTL: time.Millisecond},
	} {
		if _, err := New(ring, o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Each range's ends are accepted: refused outside, never clamped.
	for name, o := range map[string]*Options{
		"max length 71": {MaxTokenLen: 71},
		"max TTL 1s":    {MaxTTL: time.Second, DefaultTTL: time.Second},
		"max TTL limit": {MaxTTL: MaxTTLLimit},
		"skew 600s":     {Skew: MaxSkew},
		"no skew":       {Skew: NoSkew},
	} {
		if _, err := New(ring, o); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := New(nil, nil); err == nil {
		t.Error("nil ring accepted")
	}
}

func TestReason(t *testing.T) {
	for err, want := range map[error]string{
		ErrExpired: "expired", ErrInvalid: "invalid", ErrMalformed: "invalid",
		ErrUnknownKey: "invalid", ErrNotYetValid: "invalid", ErrTooLarge: "invalid",
		errLifetime: "invalid",
	} {
		if got := Reason(err); got != want {
			t.Errorf("Reason(%v) = %q, want %q", err, got, want)
		}
	}
}

func TestInspect(t *testing.T) {
	s, _, ring := newSealer(t, keyring.AEAD)
	tok := testkit.Must(s.Seal(testBinding, make([]byte, 10), 5*time.Minute))
	h, err := Inspect(tok)
	if err != nil {
		t.Fatal(err)
	}
	k := testkit.Must(ring.Current().Primary(t0))
	if h.Algorithm != keyring.AEAD || h.KeyID != k.ID || h.Version != 2 ||
		!h.IssuedAt.Equal(t0) || !h.Expiry.Equal(t0.Add(5*time.Minute)) ||
		h.TokenLen != len(tok) || h.PayloadLen != 10 {
		t.Fatalf("Inspect = %+v", h)
	}
	for _, bad := range []string{"", "AAAA", tok + "=", tok[:20], "!" + tok[1:]} {
		if _, err := Inspect(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("Inspect(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}

// TestSealerInspectBound: a Sealer's Inspect decodes every token the
// Sealer accepts, where the package's Inspect stops at the default bound.
func TestSealerInspectBound(t *testing.T) {
	ring := testkit.Must(keyring.Generate(keyring.MAC))
	s, err := New(ring, &Options{MaxTokenLen: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.Seal(testBinding, make([]byte, 100<<10), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Inspect(tok); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Inspect of a %d-character token: %v, want ErrTooLarge (the default bound)", len(tok), err)
	}
	h, err := s.Inspect(tok)
	if err != nil || h.TokenLen != len(tok) || h.PayloadLen != 100<<10 {
		t.Fatalf("Sealer.Inspect = %+v, %v", h, err)
	}
	if _, err := s.Inspect(tok + strings.Repeat("A", 1<<20)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Sealer.Inspect over its bound: %v", err)
	}
}
