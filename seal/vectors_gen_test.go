package seal

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/envelope"
	"github.com/stateseal/stateseal/keyring"
)

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

const (
	iat = 1785240000 // 2026-07-28T12:00:00Z
	day = 86400
)

// gen collects vectors. Every key is active since a day before iat unless
// a vector says otherwise.
type gen struct {
	t     *testing.T
	vs    []vector
	check vectorCheck
}

// ok seals payload at iat and adds the vector; seal adjusts the sealer's
// settings (ttl in milliseconds).
func (g *gen) ok(name, comment string, k keyring.Key, b Binding, payload []byte, ttlMillis int64, edit ...func(*vector)) vector {
	v := makeVector(g.t, name, comment, k, b, payload, vectorSeal{Now: iat, TTLMillis: ttlMillis, DefaultTTL: 600, MaxTTL: 7200}, g.check)
	for _, e := range edit {
		e(&v)
	}
	g.vs = append(g.vs, v)
	return v
}

// bad adds a vector derived from base that must fail with expect.
func (g *gen) bad(base vector, name, expect, comment string, edit func(*vector)) {
	v := base
	v.Name, v.Expect, v.Comment = name, expect, comment
	v.Seal, v.AD = nil, ""
	edit(&v)
	g.vs = append(g.vs, v)
}

func writeVectors(t *testing.T) {
	macKey, aeadKey := vkey("mac", keyring.MAC), vkey("aead", keyring.AEAD)
	args, _ := ArgsDigest([]byte(`{"from":"BER","to":"LIS","passengers":2}`))
	tool := Binding{Method: "tools/call", Target: "book_flight", Principal: "user-1234"}
	full := Binding{Method: "resources/read", Target: "file:///reports/q3.csv", Principal: "alice@example.com",
		Audience: "https://mcp.example.test", Session: "conv-42", ArgsDigest: args, Context: []byte{0, 1, 2, 0xff}}
	prompt := Binding{Method: "prompts/get", Target: "test_input_required_result_prompt", Principal: "bob"}
	large := bytes.Repeat([]byte("0123456789abcdef"), 256) // 4 KiB
	g := &gen{t: t, check: vectorCheck{Now: iat + 60, MaxTTL: 3600, Skew: 30, MaxTokenLen: DefaultMaxTokenLen}}
	flipLast := func(r []byte) []byte { r[len(r)-1] ^= 1; return r }

	macSmall := g.ok("mac-tool", "MAC envelope bound to a tool and a principal", macKey, tool, []byte(`{"step":2,"fare":"F12"}`), 300_000)
	macEmpty := g.ok("mac-empty", "MAC envelope with an empty payload: 45 bytes, the shortest MAC envelope", macKey, tool, nil, 300_000)
	g.ok("mac-large", "MAC envelope with a 4 KiB payload", macKey, full, large, 600_000)
	g.ok("mac-full-binding", "every binding field set; args_digest and context bound as raw bytes", macKey, full, []byte("state"), 300_000)
	aeadSmall := g.ok("aead-tool", "AEAD envelope bound to a tool and a principal", aeadKey, tool, []byte(`{"step":2,"fare":"F12"}`), 300_000)
	aeadEmpty := g.ok("aead-empty", "AEAD envelope with an empty payload: 53 bytes, the shortest AEAD envelope", aeadKey, tool, nil, 300_000)
	g.ok("aead-large", "AEAD envelope with a 4 KiB payload", aeadKey, full, large, 600_000)
	g.ok("aead-full-binding", "every binding field set; args_digest and context bound as raw bytes", aeadKey, full, []byte("state"), 300_000)
	g.ok("aead-prompt", "a prompts/get binding, 90-second lifetime", aeadKey, prompt, []byte("user_context"), 90_000)

	// The sealer's side: the default, the cap, rounding up.
	g.ok("mac-ttl-default", "ttl 0 seals with the sealer's default TTL (600 s)", macKey, tool, []byte("d"), 0)
	g.vs = append(g.vs, makeVector(t, "aead-ttl-capped", "ttl 2 h against the sealer's 1 h maximum seals for 1 h; the opener's maximum is 1 h too: a lifetime equal to the maximum opens",
		aeadKey, tool, []byte("c"), vectorSeal{Now: iat, TTLMillis: 7_200_000, DefaultTTL: 600, MaxTTL: 3600}, g.check))
	g.ok("mac-ttl-rounded-up", "ttl 90.5 s seals for 91 s: lifetimes round up to whole seconds", macKey, tool, []byte("r"), 90_500)

	// Time at its boundaries.
	g.ok("mac-issued-within-skew", "opened at issued_at - skew: not yet valid only before that", macKey, tool, []byte("s"), 300_000,
		func(v *vector) { v.Open.Now = iat - 30 })
	g.ok("aead-last-valid-second", "opened at issued_at + lifetime + skew - 1: the last second it opens", aeadKey, tool, []byte("e"), 300_000,
		func(v *vector) { v.Open.Now = iat + 300 + 30 - 1 })
	g.ok("mac-length-at-max", "a token exactly as long as the opener's maximum", macKey, tool, bytes.Repeat([]byte("l"), 64), 300_000,
		func(v *vector) { v.Open.MaxTokenLen = len(v.Token) })

	// Which keys open.
	g.ok("aead-decrypt-only-key", "a decrypt-only key opens", aeadKey, tool, []byte("k"), 300_000,
		func(v *vector) { v.Key.State = "decrypt-only" })
	g.ok("mac-pending-key", "an active key whose activation is in the future opens: another instance may have switched to it a moment earlier", macKey, tool, []byte("p"), 300_000,
		func(v *vector) { v.Key.Activation = iat + 3600 })

	// Tokens holding '-' and '_', for the alphabet vectors.
	dash := g.okWith(t, "mac-token-with-dash", "a token with a '-' in it", macKey, tool, '-')
	underscore := g.okWith(t, "aead-token-with-underscore", "a token with a '_' in it", aeadKey, tool, '_')

	g.bad(aeadSmall, "aead-flipped-tag", "invalid", "last byte of the tag flipped", func(v *vector) { v.Token = editRaw(t, v.Token, flipLast) })
	g.bad(macSmall, "mac-flipped-tag", "invalid", "last byte of the tag flipped", func(v *vector) { v.Token = editRaw(t, v.Token, flipLast) })
	g.bad(macSmall, "mac-flipped-payload", "invalid", "first payload byte flipped", func(v *vector) {
		v.Token = editRaw(t, v.Token, func(r []byte) []byte { r[envelope.HeaderSize] ^= 0x20; return r })
	})
	g.bad(macSmall, "mac-flipped-header", "invalid", "a bit of the lifetime flipped: the header is authenticated", func(v *vector) {
		v.Token = editRaw(t, v.Token, func(r []byte) []byte { r[envelope.HeaderSize-1] ^= 1; return r })
	})
	g.bad(aeadSmall, "aead-wrong-principal", "invalid", "opened by another user", func(v *vector) { v.Binding.Principal = "user-9999" })
	g.bad(macSmall, "mac-wrong-target", "invalid", "moved to another tool", func(v *vector) { v.Binding.Target = "cancel_flight" })
	g.bad(aeadSmall, "aead-wrong-args", "invalid", "opened with another argument digest", func(v *vector) { v.Binding.ArgsDigest = hex.EncodeToString(args) })
	g.bad(aeadSmall, "aead-expired", "expired", "opened at issued_at + lifetime + skew", func(v *vector) { v.Open.Now = iat + 300 + 30 })
	g.bad(macSmall, "mac-not-yet-valid", "not_yet_valid", "opened at issued_at - skew - 1", func(v *vector) { v.Open.Now = iat - 31 })
	g.bad(macSmall, "mac-forged-and-expired", "invalid", "tag flipped and past expiry: authentication is checked before time", func(v *vector) {
		v.Token = editRaw(t, v.Token, flipLast)
		v.Open.Now = iat + day
	})
	g.bad(aeadSmall, "aead-forged-and-not-yet-valid", "invalid", "tag flipped and issued in the future: authentication is checked before time", func(v *vector) {
		v.Token = editRaw(t, v.Token, flipLast)
		v.Open.Now = iat - day
	})
	g.bad(aeadSmall, "aead-unknown-key", "unknown_key", "the opener holds another key", func(v *vector) { v.Key = keyJSON(vkey("other", keyring.AEAD)) })
	g.bad(aeadSmall, "aead-retired-key", "unknown_key", "the opener's key with this id is retired", func(v *vector) { v.Key.State = "retired" })
	g.bad(macSmall, "mac-noncanonical-base64", "malformed", "non-zero trailing bits in the last character", func(v *vector) { v.Token = trailingBits(t, v.Token) })
	g.bad(macSmall, "mac-padded", "malformed", "base64 padding added", func(v *vector) { v.Token += strings.Repeat("=", (4-len(v.Token)%4)%4) })
	g.bad(aeadSmall, "aead-standard-alphabet", "malformed", "a '+' in place of the first character", func(v *vector) { v.Token = "+" + v.Token[1:] })
	g.bad(dash, "mac-plus-for-dash", "malformed", "the '-' replaced by the standard alphabet's '+', same 6 bits", func(v *vector) { v.Token = strings.Replace(v.Token, "-", "+", 1) })
	g.bad(underscore, "aead-slash-for-underscore", "malformed", "the '_' replaced by the standard alphabet's '/', same 6 bits", func(v *vector) { v.Token = strings.Replace(v.Token, "_", "/", 1) })
	g.bad(macSmall, "mac-line-break", "malformed", "a line break inside the token", func(v *vector) { v.Token = v.Token[:8] + "\n" + v.Token[8:] })
	g.bad(aeadSmall, "aead-unknown-version", "malformed", "version byte 0x03", func(v *vector) { v.Token = editRaw(t, v.Token, func(r []byte) []byte { r[0] = 3; return r }) })
	g.bad(aeadSmall, "unknown-version-unknown-key", "malformed", "version byte 0x03 and a key id the opener does not hold: the version is checked before the key", func(v *vector) {
		v.Token = editRaw(t, v.Token, func(r []byte) []byte { r[0] = 3; r[1] ^= 0xff; return r })
	})
	g.bad(macEmpty, "mac-short-envelope", "malformed", "44 bytes: one short of the shortest MAC envelope", func(v *vector) {
		v.Token = editRaw(t, v.Token, func(r []byte) []byte { return r[:len(r)-1] })
	})
	g.bad(aeadEmpty, "aead-short-envelope", "malformed", "52 bytes: one short of the shortest AEAD envelope", func(v *vector) {
		v.Token = editRaw(t, v.Token, func(r []byte) []byte { return r[:len(r)-1] })
	})
	g.bad(macSmall, "mac-truncated", "invalid", "last byte removed, re-encoded: long enough, so it fails authentication", func(v *vector) {
		v.Token = editRaw(t, v.Token, func(r []byte) []byte { return r[:len(r)-1] })
	})
	g.bad(aeadSmall, "aead-too-large", "too_large", "token one byte longer than the opener's bound", func(v *vector) { v.Open.MaxTokenLen = len(v.Token) - 1 })
	g.bad(macSmall, "non-ascii-too-large", "too_large", "a 2-byte character appended: one character within the bound but two bytes over it; the bound counts bytes", func(v *vector) {
		v.Open.MaxTokenLen = len(v.Token) + 1
		v.Token += "é"
	})
	long := makeVector(t, "", "", macKey, tool, []byte("x"), vectorSeal{Now: iat, TTLMillis: 7_200_000, DefaultTTL: 600, MaxTTL: 7200}, g.check)
	g.bad(long, "mac-lifetime-over-max", "invalid", "authentic, but claims 7200 s against a 3600 s maximum", func(v *vector) {})
	g.bad(long, "mac-forged-and-lifetime-over-max", "invalid", "tag flipped and claiming 7200 s: still invalid", func(v *vector) { v.Token = editRaw(t, v.Token, flipLast) })
	// The material and id of the AEAD key, used as a MAC key: authentic
	// bytes of the wrong kind.
	confused := aeadKey
	confused.Algorithm = keyring.MAC
	conf := makeVector(t, "", "", confused, tool, []byte("x"), vectorSeal{Now: iat, TTLMillis: 300_000, DefaultTTL: 600, MaxTTL: 7200}, g.check)
	g.bad(conf, "kind-confusion", "invalid", "a MAC envelope under an AEAD key's id and material", func(v *vector) { v.Key = keyJSON(aeadKey) })

	out, err := json.MarshalIndent(vectorFile{
		Format:      "stateseal v1",
		Note:        "Keys and nonces are derived test values (SHA-256 of a label). Never use them for anything else. See docs/FORMAT.md.",
		Vectors:     g.vs,
		ArgsVectors: argsVectors(t),
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vectorsFile, append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// okWith adds an ok vector whose token contains c, trying payloads in
// turn until one does.
func (g *gen) okWith(t *testing.T, name, comment string, k keyring.Key, b Binding, c byte) vector {
	for i := range 1000 {
		v := makeVector(t, name, comment, k, b, fmt.Appendf(nil, "payload %d", i), vectorSeal{Now: iat, TTLMillis: 300_000, DefaultTTL: 600, MaxTTL: 7200}, g.check)
		if strings.IndexByte(v.Token, c) >= 0 {
			g.vs = append(g.vs, v)
			return v
		}
	}
	t.Fatalf("no token with %q", c)
	return vector{}
}

func makeVector(t *testing.T, name, comment string, k keyring.Key, b Binding, payload []byte, vs vectorSeal, check vectorCheck) vector {
	t.Helper()
	at := time.Unix(vs.Now, 0)
	k.Activation = at
	s, err := New(newRing(t, k), WithClock(func() time.Time { return at }),
		WithMaxTTL(time.Duration(vs.MaxTTL)*time.Second), WithDefaultTTL(time.Duration(vs.DefaultTTL)*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var nonce []byte
	if k.Algorithm == keyring.AEAD {
		nonce = derive("nonce "+name, envelope.NonceSize)
		vs.Nonce = hex.EncodeToString(nonce)
	}
	sc := &scratch{}
	raw, err := s.sealRaw(sc, b, payload, time.Duration(vs.TTLMillis)*time.Millisecond, nonce)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := envelope.ParseHeader(raw)
	ad := appendAD(nil, h, &b)
	kj := keyJSON(k)
	kj.Activation = iat - day
	return vector{
		Name: name, Comment: comment, Key: kj,
		Binding: vectorBind{Method: b.Method, Target: b.Target, Principal: b.Principal, Audience: b.Audience,
			Session: b.Session, ArgsDigest: hex.EncodeToString(b.ArgsDigest), Context: hex.EncodeToString(b.Context)},
		Payload: hex.EncodeToString(payload), Seal: &vs,
		AD: hex.EncodeToString(ad), Token: string(envelope.AppendEncode(nil, raw)), Open: check, Expect: "ok",
	}
}

func keyJSON(k keyring.Key) vectorKey {
	return vectorKey{ID: keyring.FormatID(k.ID), Algorithm: k.Algorithm.String(), Material: hex.EncodeToString(k.Material),
		State: "active", Activation: iat - day}
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
