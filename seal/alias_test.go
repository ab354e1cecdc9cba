package seal

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// The append forms read their inputs whole before they write dst, so dst
// may share storage with them in any way (their doc comments say so).
// Each case lays the inputs and dst out in one array.

// TestAppendSealAliasing: a token appended over its own payload, or over
// the binding's bytes, or with dst's spare capacity running into the
// payload's, opens to the payload.
func TestAppendSealAliasing(t *testing.T) {
	payload := []byte(`{"step":"confirm","order":42}`)
	ctx := []byte("context!")
	n := len(payload)
	for _, alg := range algs {
		for _, c := range []struct {
			name string
			// lay puts payload and ctx in arr and returns dst and the
			// binding's context.
			lay func(arr []byte) (p, dst, bctx []byte)
		}{
			{"payload[:0]", func(arr []byte) ([]byte, []byte, []byte) {
				p := append(arr[:0], payload...)
				return p, p[:0], ctx
			}},
			{"dst's capacity over the payload's tail", func(arr []byte) ([]byte, []byte, []byte) {
				p := append(arr[:0], payload...)
				return p, p[5:5], ctx
			}},
			{"dst before the payload", func(arr []byte) ([]byte, []byte, []byte) {
				p := append(arr[7:7], payload...)
				return p, arr[:0], ctx
			}},
			{"dst over the binding's context and the payload", func(arr []byte) ([]byte, []byte, []byte) {
				b := append(arr[:0], ctx...)
				p := append(arr[len(ctx):len(ctx)], payload...)
				return p, arr[:0], b
			}},
		} {
			t.Run(fmt.Sprintf("%v/%s", alg, c.name), func(t *testing.T) {
				s, _, _ := newSealer(t, alg)
				arr := make([]byte, 4096)
				p, dst, bctx := c.lay(arr)
				if !bytes.Equal(p[:n], payload) {
					t.Fatal("the layout lost the payload")
				}
				b := testBinding
				b.Context = bctx
				tok, err := s.AppendSeal(dst, b, p, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if &tok[:1][0] != &dst[:1][0] {
					t.Fatal("the token was not written into dst's array: the case tests nothing")
				}
				b.Context = ctx
				got, err := s.Open(b, string(tok))
				if err != nil {
					t.Fatalf("Open of a token appended %s: %v", c.name, err)
				}
				if !bytes.Equal(got, payload) {
					t.Errorf("Open of a token appended %s: %q, want %q", c.name, got, payload)
				}
			})
		}
	}
}

// TestAppendOpenAliasing: a payload appended over its own token, or over
// the binding's bytes, or with dst's spare capacity running into the
// token, is the payload sealed.
func TestAppendOpenAliasing(t *testing.T) {
	payload := []byte(`{"step":"confirm","order":42}`)
	ctx := []byte("context!")
	for _, alg := range algs {
		s, _, _ := newSealer(t, alg)
		b := testBinding
		b.Context = ctx
		token, err := s.AppendSeal(nil, b, payload, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			lay  func(arr []byte) (tok, dst, bctx []byte)
		}{
			{"token[:0]", func(arr []byte) ([]byte, []byte, []byte) {
				tok := append(arr[:0], token...)
				return tok, tok[:0], ctx
			}},
			{"dst's capacity over the token's tail", func(arr []byte) ([]byte, []byte, []byte) {
				tok := append(arr[:0], token...)
				return tok, tok[9:9], ctx
			}},
			{"dst over the binding's context and the token", func(arr []byte) ([]byte, []byte, []byte) {
				bc := append(arr[:0], ctx...)
				tok := append(arr[len(ctx):len(ctx)], token...)
				return tok, arr[:0], bc
			}},
		} {
			t.Run(fmt.Sprintf("%v/%s", alg, c.name), func(t *testing.T) {
				tok, dst, bctx := c.lay(make([]byte, 4096))
				b := testBinding
				b.Context = bctx
				got, err := s.AppendOpen(dst, b, tok)
				if err != nil {
					t.Fatalf("AppendOpen %s: %v", c.name, err)
				}
				if !bytes.Equal(got, payload) {
					t.Errorf("AppendOpen %s: %q, want %q", c.name, got, payload)
				}
				if &got[:1][0] != &dst[:1][0] {
					t.Error("the payload was not written into dst's array: the case tests nothing")
				}
			})
		}
	}
}

// TestAppendDigestAliasing: a digest appended over its own arguments is
// their digest.
func TestAppendDigestAliasing(t *testing.T) {
	args := []byte(`{"amount": 10, "to": "bob"}`)
	want, err := ArgsOptions{}.Digest(args)
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int{0, 3} {
		buf := append(make([]byte, 0, 256), args...)
		got, err := ArgsOptions{}.AppendDigest(buf[off:off], buf)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("AppendDigest over its arguments (at %d): %x, want %x", off, got, want)
		}
	}
}
