package seal

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/envelope"
	"github.com/stateseal/stateseal/keyring"
)

// The test vectors live in testdata/vectors.json at the top of the module,
// where a second implementation can find them. docs/FORMAT.md describes
// the fields. Regenerate with: go test ./seal -run TestVectors -update
var update = flag.Bool("update", false, "rewrite ../testdata/vectors.json")

const vectorsFile = "../testdata/vectors.json"

type vectorFile struct {
	Format  string   `json:"format"`
	Note    string   `json:"note"`
	Vectors []vector `json:"vectors"`
}

type vector struct {
	Name    string      `json:"name"`
	Comment string      `json:"comment"`
	Key     vectorKey   `json:"key"`
	Binding vectorBind  `json:"binding"`
	Payload string      `json:"payload"`             // hex
	Issued  int64       `json:"issued_at,omitempty"` // Unix seconds; ok vectors
	TTL     int64       `json:"ttl,omitempty"`       // seconds; ok vectors
	Nonce   string      `json:"nonce,omitempty"`     // hex; ok AEAD vectors
	AD      string      `json:"associated_data,omitempty"`
	Token   string      `json:"token"`
	Open    vectorCheck `json:"open"`
	Expect  string      `json:"expect"`
}

type vectorKey struct {
	ID        string `json:"id"` // 8 hex digits
	Algorithm string `json:"algorithm"`
	Material  string `json:"material"` // hex
}

type vectorBind struct {
	Method     string `json:"method"`
	Target     string `json:"target"`
	Principal  string `json:"principal"`
	Audience   string `json:"audience"`
	Session    string `json:"session"`
	ArgsDigest string `json:"args_digest"` // hex
	Context    string `json:"context"`     // hex
}

type vectorCheck struct {
	Now         int64 `json:"now"`
	MaxTTL      int64 `json:"max_ttl"`
	Skew        int64 `json:"skew"`
	MaxTokenLen int   `json:"max_token_len"`
}

var expectErr = map[string]error{
	"ok": nil, "malformed": ErrMalformed, "too_large": ErrTooLarge,
	"unknown_key": ErrUnknownKey, "invalid": ErrInvalid,
	"expired": ErrExpired, "not_yet_valid": ErrNotYetValid,
}

func TestVectors(t *testing.T) {
	if *update {
		writeVectors(t)
	}
	data, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var vf vectorFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&vf); err != nil {
		t.Fatal(err)
	}
	if len(vf.Vectors) < 12 {
		t.Fatalf("%d vectors, want at least 12", len(vf.Vectors))
	}
	kinds := map[string]bool{}
	for _, v := range vf.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			kinds[v.Expect] = true
			want, ok := expectErr[v.Expect]
			if !ok {
				t.Fatalf("unknown expectation %q", v.Expect)
			}
			s, b := v.sealer(t)
			payload, err := s.Open(b, v.Token)
			if want == nil {
				if err != nil || !bytes.Equal(payload, unhex(t, v.Payload)) {
					t.Fatalf("Open = %x, %v; want payload %s", payload, err, v.Payload)
				}
				v.checkSeal(t, s, b)
				return
			}
			if !errors.Is(err, want) {
				t.Fatalf("Open: %v, want %v", err, want)
			}
		})
	}
	for name := range expectErr {
		if !kinds[name] {
			t.Errorf("no vector expects %q", name)
		}
	}
}

// sealer builds the opener a vector describes.
func (v *vector) sealer(t *testing.T) (*Sealer, Binding) {
	t.Helper()
	alg, err := keyring.ParseAlgorithm(v.Key.Algorithm)
	if err != nil {
		t.Fatal(err)
	}
	id, err := hex.DecodeString(v.Key.ID)
	if err != nil || len(id) != 4 {
		t.Fatalf("key id %q", v.Key.ID)
	}
	ring := newRing(t, keyring.Key{
		ID: binary.BigEndian.Uint32(id), Algorithm: alg, State: keyring.Active,
		Material: unhex(t, v.Key.Material),
	})
	now := time.Unix(v.Open.Now, 0)
	s, err := New(ring, WithClock(func() time.Time { return now }),
		WithMaxTTL(time.Duration(v.Open.MaxTTL)*time.Second),
		WithDefaultTTL(time.Second),
		WithSkew(time.Duration(v.Open.Skew)*time.Second),
		WithMaxTokenLen(v.Open.MaxTokenLen))
	if err != nil {
		t.Fatal(err)
	}
	return s, Binding{
		Method: v.Binding.Method, Target: v.Binding.Target, Principal: v.Binding.Principal,
		Audience: v.Binding.Audience, Session: v.Binding.Session,
		ArgsDigest: unhex(t, v.Binding.ArgsDigest), Context: unhex(t, v.Binding.Context),
	}
}

// checkSeal seals the vector's payload again at its issue time, with its
// nonce, and expects the very same token and associated data.
func (v *vector) checkSeal(t *testing.T, s *Sealer, b Binding) {
	t.Helper()
	at := time.Unix(v.Issued, 0)
	s.cfg.now = func() time.Time { return at }
	sc := &scratch{}
	var nonce []byte
	if v.Key.Algorithm == "aead" {
		nonce = unhex(t, v.Nonce)
	}
	raw, err := s.sealRaw(sc, b, unhex(t, v.Payload), time.Duration(v.TTL)*time.Second, nonce)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(envelope.AppendEncode(nil, raw)); got != v.Token {
		t.Fatalf("sealed again:\n%s\nwant\n%s", got, v.Token)
	}
	// sealRaw leaves the associated data at the start of its buffer.
	if ad := hex.EncodeToString(sc.buf[:len(v.AD)/2]); ad != v.AD {
		t.Fatalf("associated data %s, want %s", ad, v.AD)
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	if s == "" {
		return nil
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// derive makes deterministic test values from a label. They are public
// test data, never keys for real use.
func derive(label string, n int) []byte {
	sum := sha256.Sum256([]byte("stateseal test vector " + label))
	return sum[:n]
}

func vkey(label string, alg keyring.Algorithm) keyring.Key {
	return keyring.Key{
		ID:        binary.BigEndian.Uint32(derive("id "+label, 4)) | 1,
		Algorithm: alg, State: keyring.Active, Material: derive("key "+label, 32),
	}
}

func writeVectors(t *testing.T) {
	const iat = 1785240000 // 2026-07-28T12:00:00Z
	macKey, aeadKey := vkey("mac", keyring.MAC), vkey("aead", keyring.AEAD)
	args, _ := ArgsDigest([]byte(`{"from":"BER","to":"LIS","passengers":2}`))
	tool := Binding{Method: "tools/call", Target: "book_flight", Principal: "user-1234"}
	full := Binding{Method: "resources/read", Target: "file:///reports/q3.csv", Principal: "alice@example.com",
		Audience: "https://mcp.example.test", Session: "conv-42", ArgsDigest: args, Context: []byte{0, 1, 2, 0xff}}
	prompt := Binding{Method: "prompts/get", Target: "test_input_required_result_prompt", Principal: "bob"}
	large := bytes.Repeat([]byte("0123456789abcdef"), 256) // 4 KiB
	check := vectorCheck{Now: iat + 60, MaxTTL: 3600, Skew: 30, MaxTokenLen: DefaultMaxTokenLen}

	var vs []vector
	ok := func(name, comment string, k keyring.Key, b Binding, payload []byte, ttl int64) vector {
		v := makeVector(t, name, comment, k, b, payload, iat, ttl, check)
		vs = append(vs, v)
		return v
	}
	bad := func(base vector, name, expect, comment string, edit func(*vector)) {
		v := base
		v.Name, v.Expect, v.Comment = name, expect, comment
		v.Issued, v.TTL, v.Nonce, v.AD = 0, 0, "", ""
		edit(&v)
		vs = append(vs, v)
	}
	macSmall := ok("mac-tool", "MAC envelope bound to a tool and a principal", macKey, tool, []byte(`{"step":2,"fare":"F12"}`), 300)
	ok("mac-empty", "MAC envelope with an empty payload", macKey, tool, nil, 300)
	ok("mac-large", "MAC envelope with a 4 KiB payload", macKey, full, large, 600)
	ok("mac-full-binding", "every binding field set", macKey, full, []byte("state"), 300)
	aeadSmall := ok("aead-tool", "AEAD envelope bound to a tool and a principal", aeadKey, tool, []byte(`{"step":2,"fare":"F12"}`), 300)
	ok("aead-empty", "AEAD envelope with an empty payload", aeadKey, tool, nil, 300)
	ok("aead-large", "AEAD envelope with a 4 KiB payload", aeadKey, full, large, 600)
	ok("aead-full-binding", "every binding field set", aeadKey, full, []byte("state"), 300)
	ok("aead-prompt", "a prompts/get binding, 90-second lifetime", aeadKey, prompt, []byte("user_context"), 90)

	bad(aeadSmall, "aead-flipped-tag", "invalid", "last byte of the tag flipped", func(v *vector) { v.Token = editRaw(t, v.Token, func(r []byte) []byte { r[len(r)-1] ^= 1; return r }) })
	bad(macSmall, "mac-flipped-tag", "invalid", "last byte of the tag flipped", func(v *vector) { v.Token = editRaw(t, v.Token, func(r []byte) []byte { r[len(r)-1] ^= 1; return r }) })
	bad(macSmall, "mac-flipped-payload", "invalid", "first payload byte flipped", func(v *vector) {
		v.Token = editRaw(t, v.Token, func(r []byte) []byte { r[envelope.HeaderSize] ^= 0x20; return r })
	})
	bad(aeadSmall, "aead-wrong-principal", "invalid", "opened by another user", func(v *vector) { v.Binding.Principal = "user-9999" })
	bad(macSmall, "mac-wrong-target", "invalid", "moved to another tool", func(v *vector) { v.Binding.Target = "cancel_flight" })
	bad(aeadSmall, "aead-wrong-args", "invalid", "opened with another argument digest", func(v *vector) { v.Binding.ArgsDigest = hex.EncodeToString(args) })
	bad(aeadSmall, "aead-expired", "expired", "opened at expiry plus skew", func(v *vector) { v.Open.Now = iat + 300 + 30 })
	bad(macSmall, "mac-not-yet-valid", "not_yet_valid", "opened more than the skew before issue", func(v *vector) { v.Open.Now = iat - 31 })
	bad(aeadSmall, "aead-unknown-key", "unknown_key", "the opener holds another key", func(v *vector) { v.Key = keyJSON(vkey("other", keyring.AEAD)) })
	bad(macSmall, "mac-noncanonical-base64", "malformed", "non-zero trailing bits in the last character", func(v *vector) { v.Token = trailingBits(t, v.Token) })
	bad(macSmall, "mac-padded", "malformed", "base64 padding added", func(v *vector) { v.Token += strings.Repeat("=", (4-len(v.Token)%4)%4) })
	bad(aeadSmall, "aead-standard-alphabet", "malformed", "a character of the standard alphabet", func(v *vector) { v.Token = "+" + v.Token[1:] })
	bad(aeadSmall, "aead-unknown-version", "malformed", "version byte 0x03", func(v *vector) { v.Token = editRaw(t, v.Token, func(r []byte) []byte { r[0] = 3; return r }) })
	bad(macSmall, "mac-truncated", "invalid", "last byte removed, re-encoded", func(v *vector) { v.Token = editRaw(t, v.Token, func(r []byte) []byte { return r[:len(r)-1] }) })
	bad(aeadSmall, "aead-too-large", "too_large", "token longer than the opener's bound", func(v *vector) { v.Open.MaxTokenLen = len(v.Token) - 1 })
	long := makeVector(t, "", "", macKey, tool, []byte("x"), iat, 7200, vectorCheck{Now: iat, MaxTTL: 7200, Skew: 30, MaxTokenLen: DefaultMaxTokenLen})
	bad(long, "mac-lifetime-over-max", "invalid", "authentic, but claims 7200 s against a 3600 s maximum", func(v *vector) { v.Open = check })
	// The material and id of the AEAD key, used as a MAC key: authentic
	// bytes of the wrong kind.
	confused := aeadKey
	confused.Algorithm = keyring.MAC
	conf := makeVector(t, "", "", confused, tool, []byte("x"), iat, 300, check)
	bad(conf, "kind-confusion", "invalid", "a MAC envelope under an AEAD key's id and material", func(v *vector) { v.Key = keyJSON(aeadKey) })

	out, err := json.MarshalIndent(vectorFile{
		Format:  "stateseal v1",
		Note:    "Keys and nonces are derived test values (SHA-256 of a label). Never use them for anything else. See docs/FORMAT.md.",
		Vectors: vs,
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vectorsFile, append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

func makeVector(t *testing.T, name, comment string, k keyring.Key, b Binding, payload []byte, iat, ttl int64, check vectorCheck) vector {
	t.Helper()
	at := time.Unix(iat, 0)
	s, err := New(newRing(t, k), WithClock(func() time.Time { return at }), WithMaxTTL(2*time.Hour), WithDefaultTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var nonce []byte
	if k.Algorithm == keyring.AEAD {
		nonce = derive("nonce "+name, envelope.NonceSize)
	}
	sc := &scratch{}
	raw, err := s.sealRaw(sc, b, payload, time.Duration(ttl)*time.Second, nonce)
	if err != nil {
		t.Fatal(err)
	}
	ad := appendAD(nil, envelope.Header{Version: raw[0], KeyID: k.ID, IssuedAt: iat, Lifetime: uint32(ttl)}, &b)
	return vector{
		Name: name, Comment: comment, Key: keyJSON(k),
		Binding: vectorBind{Method: b.Method, Target: b.Target, Principal: b.Principal, Audience: b.Audience,
			Session: b.Session, ArgsDigest: hex.EncodeToString(b.ArgsDigest), Context: hex.EncodeToString(b.Context)},
		Payload: hex.EncodeToString(payload), Issued: iat, TTL: ttl, Nonce: hex.EncodeToString(nonce),
		AD: hex.EncodeToString(ad), Token: string(envelope.AppendEncode(nil, raw)), Open: check, Expect: "ok",
	}
}

func keyJSON(k keyring.Key) vectorKey {
	return vectorKey{ID: keyring.FormatID(k.ID), Algorithm: k.Algorithm.String(), Material: hex.EncodeToString(k.Material)}
}

func editRaw(t *testing.T, tok string, edit func([]byte) []byte) string {
	return encode(edit(decode(t, tok)))
}

// trailingBits sets a trailing bit of the last character, which a lax
// decoder would ignore.
func trailingBits(t *testing.T, tok string) string {
	if len(tok)%4 == 0 {
		t.Fatal("token has no partial final group")
	}
	i := strings.IndexByte(b64alphabet, tok[len(tok)-1])
	return tok[:len(tok)-1] + string(b64alphabet[i^1])
}
