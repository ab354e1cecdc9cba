package envelope

import (
	"bytes"
	"crypto/rand"
	stdb64 "encoding/base64"
	"github.com/stateseal/stateseal/internal/testkit"
	mrand "math/rand/v2"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range []Header{
		{VersionMAC, 1, 0, 0},
		{VersionAEAD, 0xffffffff, MaxIssuedAt, MaxLifetime},
		{VersionMAC, 0xdeadbeef, 1785240000, 600},
	} {
		b := AppendHeader(nil, h)
		if len(b) != HeaderSize {
			t.Fatalf("header is %d bytes", len(b))
		}
		raw := append(b, make([]byte, Overhead(h.Version))...)
		got, err := ParseHeader(raw)
		if err != nil || got != h {
			t.Fatalf("ParseHeader = %+v, %v; want %+v", got, err, h)
		}
	}
}

func TestParseHeaderRejects(t *testing.T) {
	h := AppendHeader(nil, Header{Version: VersionAEAD, KeyID: 7})
	for name, raw := range map[string][]byte{
		"empty":           nil,
		"short header":    h[:12],
		"header only":     h,
		"AEAD short body": append(bytes.Clone(h), make([]byte, NonceSize+AEADTagSize-1)...),
		"version 0":       append([]byte{0}, make([]byte, 100)...),
		"version 3":       append([]byte{3}, make([]byte, 100)...),
		"version 0xff":    append([]byte{0xff}, make([]byte, 100)...),
	} {
		if _, err := ParseHeader(raw); err != ErrMalformed {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

// TestBindingUnambiguous: moving bytes between adjacent fields changes the
// encoding.
func TestBindingUnambiguous(t *testing.T) {
	a := AppendBinding(nil, "ab", "c", "", "", "", nil, nil)
	b := AppendBinding(nil, "a", "bc", "", "", "", nil, nil)
	c := AppendBinding(nil, "", "", "", "", "", nil, []byte("abc"))
	d := AppendBinding(nil, "", "", "", "", "", []byte("abc"), nil)
	seen := map[string]bool{}
	for _, e := range [][]byte{a, b, c, d} {
		if seen[string(e)] {
			t.Fatalf("two bindings encode to %x", e)
		}
		seen[string(e)] = true
	}
	long := string(make([]byte, 300)) // a two-byte length prefix
	e := AppendBinding(nil, long, "t", "p", "a", "s", []byte{1}, []byte{2})
	if got := BindingLen(long, "t", "p", "a", "s", []byte{1}, []byte{2}); got != len(e) {
		t.Fatalf("BindingLen = %d, encoding is %d", got, len(e))
	}
}

// TestDecodeMatchesStdlib holds the AVX2 decoder to encoding/base64's strict
// one on every single-byte substitution, at every length up to 200. The
// stdlib skips line breaks; the token format does not.
func TestDecodeMatchesStdlib(t *testing.T) {
	for n := 0; n < 200; n++ {
		raw := make([]byte, n)
		rand.Read(raw)
		tok := []byte(stdb64.RawURLEncoding.EncodeToString(raw))
		if got, err := AppendDecode(nil, tok); err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("n=%d: round trip failed: %v", n, err)
		}
		if got := AppendEncode(nil, raw); !bytes.Equal(got, tok) {
			t.Fatalf("n=%d: encoding differs from encoding/base64", n)
		}
		// Every byte value at a sample of positions: all of them in short
		// tokens, and in longer ones the first two and last three (where
		// the trailing bits and the length rules bite) and four more.
		// FuzzDecode covers the rest.
		for _, i := range positions(len(tok)) {
			for c := range 256 {
				m := bytes.Clone(tok)
				m[i] = byte(c)
				checkDecode(t, m)
			}
		}
	}
}

func positions(n int) []int {
	if n <= 12 {
		p := make([]int, n)
		for i := range p {
			p[i] = i
		}
		return p
	}
	p := []int{0, 1, n - 3, n - 2, n - 1}
	for range 4 {
		p = append(p, 2+mrand.IntN(n-5))
	}
	return p
}

// checkDecode compares AppendDecode with the reference: encoding/base64's
// strict RawURLEncoding, with line breaks rejected.
func checkDecode(t *testing.T, src []byte) {
	t.Helper()
	want, werr := stdb64.RawURLEncoding.Strict().DecodeString(string(src))
	if bytes.ContainsAny(src, "\r\n") {
		werr = ErrMalformed
	}
	got, err := AppendDecode([]byte("x"), src)
	if (err == nil) != (werr == nil) {
		t.Fatalf("decode %q: got error %v, reference %v", src, err, werr)
	}
	if err == nil && !bytes.Equal(got, append([]byte("x"), want...)) {
		t.Fatalf("decode %q: got %x, reference %x", src, got[1:], want)
	}
	if err != nil && string(got) != "x" {
		t.Fatalf("decode %q: failed but changed dst to %q", src, got)
	}
}

func TestCipherRejects(t *testing.T) {
	if _, err := NewCipher(VersionAEAD, make([]byte, 31)); err == nil {
		t.Error("31-byte key accepted")
	}
	if _, err := NewCipher(9, make([]byte, 32)); err == nil {
		t.Error("unknown version accepted")
	}
	for _, v := range []byte{VersionMAC, VersionAEAD} {
		c := testkit.Must(NewCipher(v, make([]byte, 32)))
		for n := range Overhead(v) - HeaderSize {
			if _, err := c.Open(nil, nil, make([]byte, n)); err != ErrAuth {
				t.Errorf("version %d: %d-byte body: %v", v, n, err)
			}
		}
	}
}
