// Package bench measures stateseal against the bare primitives and the
// libraries it is compared with. It is its own module so that the library's
// go.mod does not carry Tink, PASETO and securecookie. docs/BENCHMARKS.md
// records the results and the command.
package bench

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"aidanwoods.dev/go-paseto"
	"github.com/gorilla/securecookie"
	"github.com/tink-crypto/tink-go/v2/aead"
	"github.com/tink-crypto/tink-go/v2/keyset"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/seal"
)

// The workload: a 256-byte state bound to a tool, a principal and an expiry.
var (
	state   = bytes.Repeat([]byte("s"), 256)
	binding = seal.Binding{Method: "tools/call", Target: "book_flight", Principal: "user-1234"}
	// The same binding as flat associated data, for the primitives alone.
	ad  = []byte("tools/call\x00book_flight\x00user-1234")
	ttl = 5 * time.Minute
	b64 = base64.RawURLEncoding.Strict()
)

func BenchmarkRoundTrip(b *testing.B) {
	b.Run("raw-xchacha", func(b *testing.B) { rawXChaCha(b, false) })
	b.Run("raw-hmac", func(b *testing.B) { rawHMAC(b, false) })
	b.Run("raw-xchacha-b64", func(b *testing.B) { rawXChaCha(b, true) })
	b.Run("raw-hmac-b64", func(b *testing.B) { rawHMAC(b, true) })
	b.Run("stateseal-aead", func(b *testing.B) { statesealString(b, keyring.AEAD) })
	b.Run("stateseal-mac", func(b *testing.B) { statesealString(b, keyring.MAC) })
	b.Run("stateseal-aead-append", func(b *testing.B) { statesealAppend(b, keyring.AEAD) })
	b.Run("stateseal-mac-append", func(b *testing.B) { statesealAppend(b, keyring.MAC) })
	b.Run("tink-xchacha", tinkXChaCha)
	b.Run("paseto-v4-local", pasetoV4Local)
	b.Run("securecookie", secureCookie)
	b.Run("hmac-json", hmacJSON)
}

func BenchmarkRoundTripParallel(b *testing.B) {
	for _, alg := range []keyring.Algorithm{keyring.AEAD, keyring.MAC} {
		b.Run("stateseal-"+alg.String(), func(b *testing.B) {
			s := newSealer(b, alg)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					tok, err := s.Seal(binding, state, ttl)
					if err != nil {
						b.Error(err)
						return
					}
					if _, err := s.Open(binding, tok); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func newSealer(b *testing.B, alg keyring.Algorithm) *seal.Sealer {
	ring, err := keyring.Generate(alg)
	if err != nil {
		b.Fatal(err)
	}
	s, err := seal.New(ring, nil)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func statesealString(b *testing.B, alg keyring.Algorithm) {
	s := newSealer(b, alg)
	var tok string
	b.ReportAllocs()
	for b.Loop() {
		var err error
		tok, err = s.Seal(binding, state, ttl)
		if err != nil {
			b.Fatal(err)
		}
		got, err := s.Open(binding, tok)
		if err != nil || len(got) != len(state) {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(tok)), "tokenB")
}

func statesealAppend(b *testing.B, alg keyring.Algorithm) {
	s := newSealer(b, alg)
	tok := make([]byte, 0, 1024)
	out := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		tok, err = s.AppendSeal(tok[:0], binding, state, ttl)
		if err != nil {
			b.Fatal(err)
		}
		out, err = s.AppendOpen(out[:0], binding, tok)
		if err != nil || len(out) != len(state) {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(tok)), "tokenB")
}

func rawXChaCha(b *testing.B, encode bool) {
	key := make([]byte, chacha20poly1305.KeySize)
	rand.Read(key)
	a, _ := chacha20poly1305.NewX(key)
	sealed := make([]byte, 0, 1024)
	text := make([]byte, 0, 1024)
	dec := make([]byte, 0, 1024)
	out := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		sealed = sealed[:chacha20poly1305.NonceSizeX]
		rand.Read(sealed)
		sealed = a.Seal(sealed, sealed[:chacha20poly1305.NonceSizeX], state, ad)
		msg := sealed
		if encode {
			text = b64.AppendEncode(text[:0], sealed)
			var err error
			if dec, err = b64.AppendDecode(dec[:0], text); err != nil {
				b.Fatal(err)
			}
			msg = dec
		}
		var err error
		out, err = a.Open(out[:0], msg[:chacha20poly1305.NonceSizeX], msg[chacha20poly1305.NonceSizeX:], ad)
		if err != nil {
			b.Fatal(err)
		}
	}
	if encode {
		b.ReportMetric(float64(len(text)), "tokenB")
	}
}

func rawHMAC(b *testing.B, encode bool) {
	key := make([]byte, 32)
	rand.Read(key)
	h := hmac.New(sha256.New, key)
	sealed := make([]byte, 0, 1024)
	text := make([]byte, 0, 1024)
	dec := make([]byte, 0, 1024)
	var sum [32]byte
	b.ReportAllocs()
	for b.Loop() {
		h.Reset()
		h.Write(ad)
		h.Write(state)
		sealed = h.Sum(append(sealed[:0], state...))
		msg := sealed
		if encode {
			text = b64.AppendEncode(text[:0], sealed)
			var err error
			if dec, err = b64.AppendDecode(dec[:0], text); err != nil {
				b.Fatal(err)
			}
			msg = dec
		}
		payload, tag := msg[:len(msg)-32], msg[len(msg)-32:]
		h.Reset()
		h.Write(ad)
		h.Write(payload)
		if !hmac.Equal(h.Sum(sum[:0]), tag) {
			b.Fatal("bad mac")
		}
	}
	if encode {
		b.ReportMetric(float64(len(text)), "tokenB")
	}
}

func tinkXChaCha(b *testing.B) {
	h, err := keyset.NewHandle(aead.XChaCha20Poly1305KeyTemplate())
	if err != nil {
		b.Fatal(err)
	}
	a, err := aead.New(h)
	if err != nil {
		b.Fatal(err)
	}
	// Tink has no expiry: it rides in the plaintext, checked after Decrypt.
	pt := make([]byte, 8+len(state))
	copy(pt[8:], state)
	var tok string
	b.ReportAllocs()
	for b.Loop() {
		binary.BigEndian.PutUint64(pt, uint64(time.Now().Add(ttl).Unix()))
		ct, err := a.Encrypt(pt, ad)
		if err != nil {
			b.Fatal(err)
		}
		tok = base64.RawURLEncoding.EncodeToString(ct)
		raw, err := base64.RawURLEncoding.Strict().DecodeString(tok)
		if err != nil {
			b.Fatal(err)
		}
		got, err := a.Decrypt(raw, ad)
		if err != nil {
			b.Fatal(err)
		}
		if int64(binary.BigEndian.Uint64(got)) < time.Now().Unix() {
			b.Fatal("expired")
		}
	}
	b.ReportMetric(float64(len(tok)), "tokenB")
}

func pasetoV4Local(b *testing.B) {
	key := paseto.NewV4SymmetricKey()
	parser := paseto.NewParser() // checks exp
	s := string(state)
	var tok string
	b.ReportAllocs()
	for b.Loop() {
		t := paseto.NewToken()
		t.SetExpiration(time.Now().Add(ttl))
		t.SetString("state", s)
		tok = t.V4Encrypt(key, ad)
		got, err := parser.ParseV4Local(key, tok, ad)
		if err != nil {
			b.Fatal(err)
		}
		if v, _ := got.GetString("state"); len(v) != len(state) {
			b.Fatal("lost state")
		}
	}
	b.ReportMetric(float64(len(tok)), "tokenB")
}

func secureCookie(b *testing.B) {
	sc := securecookie.New(securecookie.GenerateRandomKey(32), securecookie.GenerateRandomKey(32))
	sc.MaxAge(int(ttl / time.Second))
	// securecookie binds only a name; the binding goes there.
	name := string(ad)
	var tok string
	b.ReportAllocs()
	for b.Loop() {
		var err error
		tok, err = sc.Encode(name, state)
		if err != nil {
			b.Fatal(err)
		}
		var got []byte
		if err := sc.Decode(name, tok, &got); err != nil || len(got) != len(state) {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(tok)), "tokenB")
}

// hmac-json is the recipe of the MCP SDK examples: a JSON payload with an
// exp claim, base64url, and an HMAC-SHA256 over it.
type hmacJSONState struct {
	State     []byte `json:"state"`
	Tool      string `json:"tool"`
	Principal string `json:"sub"`
	Exp       int64  `json:"exp"`
}

func hmacJSON(b *testing.B) {
	key := make([]byte, 32)
	rand.Read(key)
	var tok string
	b.ReportAllocs()
	for b.Loop() {
		var err error
		tok, err = hmacJSONSeal(key, hmacJSONState{State: state, Tool: "book_flight", Principal: "user-1234", Exp: time.Now().Add(ttl).Unix()})
		if err != nil {
			b.Fatal(err)
		}
		got, err := hmacJSONOpen(key, tok)
		if err != nil || got.Tool != "book_flight" || got.Principal != "user-1234" {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(tok)), "tokenB")
}

func hmacJSONSeal(key []byte, st hmacJSONState) (string, error) {
	body, err := json.Marshal(st)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return base64.RawURLEncoding.EncodeToString(body) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
}

func hmacJSONOpen(key []byte, tok string) (hmacJSONState, error) {
	var st hmacJSONState
	p, s, ok := strings.Cut(tok, ".")
	if !ok {
		return st, errors.New("malformed")
	}
	body, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return st, err
	}
	sig, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return st, err
	}
	m := hmac.New(sha256.New, key)
	m.Write(body)
	if !hmac.Equal(m.Sum(nil), sig) {
		return st, errors.New("invalid")
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, err
	}
	if st.Exp < time.Now().Unix() {
		return st, errors.New("expired")
	}
	return st, nil
}
