package seal

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stateseal/stateseal/internal/envelope"
	"github.com/stateseal/stateseal/internal/keymaterial"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
)

// derive makes deterministic test values from a label. They are public
// test data, never keys for real use.
func derive(label string, n int) []byte {
	sum := sha256.Sum256([]byte("stateseal test vector " + label))
	return sum[:n]
}

// vkey makes a test key, active since a day before iat.
func vkey(label string, alg keyring.Algorithm) keyring.Key {
	k, err := keyring.ImportKey(binary.BigEndian.Uint32(derive("id "+label, 4))|1, alg, keyring.Active,
		time.Time{}, time.Unix(iat-day, 0), derive("key "+label, 32))
	if err != nil {
		panic(err)
	}
	return k
}

// sealAt are the sealer's settings of most vectors: at iat, a requested
// ttl in milliseconds, a default TTL of 600 s and a maximum of 7200 s.
func sealAt(ttlMillis int64) vectorSeal {
	return vectorSeal{NowMillis: iat * 1000, TTLMillis: ttlMillis, DefaultTTL: secs(600), MaxTTL: secs(7200), MaxTokenLen: DefaultMaxTokenLen}
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
	v := makeVector(g.t, name, comment, []keyring.Key{k}, b, payload, sealAt(ttlMillis), g.check)
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
	args := testkit.Must(ArgsDigest([]byte(`{"from":"BER","to":"LIS","passengers":2}`)))
	tool := Binding{Method: "tools/call", Target: "book_flight", Principal: "user-1234"}
	full := Binding{Method: "resources/read", Target: "file:///reports/q3.csv", Principal: "alice@example.com",
		Audience: "https://mcp.example.test", Session: "conv-42", ArgsDigest: args, Context: []byte{0, 1, 2, 0xff}}
	prompt := Binding{Method: "prompts/get", Target: "test_input_required_result_prompt", Principal: "bob"}
	large := bytes.Repeat([]byte("0123456789abcdef"), 256) // 4 KiB
	g := &gen{t: t, check: vectorCheck{NowMillis: (iat + 60) * 1000, MaxTTL: secs(3600), Skew: secs(30), MaxTokenLen: DefaultMaxTokenLen}}
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
	capped := sealAt(7_200_000)
	capped.MaxTTL = secs(3600)
	g.vs = append(g.vs, makeVector(t, "aead-ttl-capped", "ttl 2 h against the sealer's 1 h maximum seals for 1 h; the opener's maximum is 1 h too: a lifetime equal to the maximum opens",
		[]keyring.Key{aeadKey}, tool, []byte("c"), capped, g.check))
	g.ok("mac-ttl-rounded-up", "ttl 90.5 s seals for 91 s: lifetimes round up to whole seconds", macKey, tool, []byte("r"), 90_500)

	// Time at its boundaries.
	g.ok("mac-issued-within-skew", "opened at issued_at - skew: not yet valid only before that", macKey, tool, []byte("s"), 300_000,
		func(v *vector) { v.Open.NowMillis = (iat - 30) * 1000 })
	g.ok("aead-last-valid-second", "opened at issued_at + lifetime + skew - 1: the last second it opens", aeadKey, tool, []byte("e"), 300_000,
		func(v *vector) { v.Open.NowMillis = (iat + 300 + 30 - 1) * 1000 })
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
	g.bad(aeadSmall, "aead-expired", "expired", "opened at issued_at + lifetime + skew", func(v *vector) { v.Open.NowMillis = (iat + 300 + 30) * 1000 })
	g.bad(macSmall, "mac-not-yet-valid", "not_yet_valid", "opened at issued_at - skew - 1", func(v *vector) { v.Open.NowMillis = (iat - 31) * 1000 })
	g.bad(macSmall, "mac-forged-and-expired", "invalid", "tag flipped and past expiry: authentication is checked before time", func(v *vector) {
		v.Token = editRaw(t, v.Token, flipLast)
		v.Open.NowMillis = (iat + day) * 1000
	})
	g.bad(aeadSmall, "aead-forged-and-not-yet-valid", "invalid", "tag flipped and issued in the future: authentication is checked before time", func(v *vector) {
		v.Token = editRaw(t, v.Token, flipLast)
		v.Open.NowMillis = (iat - day) * 1000
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
	long := makeVector(t, "", "", []keyring.Key{macKey}, tool, []byte("x"), sealAt(7_200_000), g.check)
	g.bad(long, "mac-lifetime-over-max", "invalid", "authentic, but claims 7200 s against a 3600 s maximum", func(v *vector) {})
	g.bad(long, "mac-forged-and-lifetime-over-max", "invalid", "tag flipped and claiming 7200 s: still invalid", func(v *vector) { v.Token = editRaw(t, v.Token, flipLast) })
	// The material and id of the AEAD key, used as a MAC key: authentic
	// bytes of the wrong kind.
	confused := aeadKey
	confused.Algorithm = keyring.MAC
	conf := makeVector(t, "", "", []keyring.Key{confused}, tool, []byte("x"), sealAt(300_000), g.check)
	g.bad(conf, "kind-confusion", "invalid", "a MAC envelope under an AEAD key's id and material", func(v *vector) { v.Key = keyJSON(aeadKey) })

	// The binding's encoding past 127 bytes and past ASCII.
	longTarget := Binding{Method: "resources/read", Target: "file:///" + strings.Repeat("reports/", 40) + "q3.csv", Principal: "alice"}
	g.ok("aead-binding-long-field", "a 334-byte resource URI: its length, a uvarint with the low group first, takes two bytes", aeadKey, longTarget, []byte("x"), 300_000)
	nonASCII := Binding{Method: "tools/call", Target: "réserver", Principal: "Jose\u0301", Session: "会話-42"}
	g.ok("mac-binding-non-ascii", "strings are their UTF-8 bytes, counted in bytes and not normalized: the principal is Jose and U+0301 (6 bytes, NFD), the session 会話-42 (9 bytes)", macKey, nonASCII, []byte("x"), 300_000)

	// Opening: nothing trimmed, no dangling character, the minimum length
	// before the key, key id 0, the lifetime before the clock.
	g.bad(macSmall, "mac-surrounding-space", "malformed", "a space before and after the token: nothing is trimmed", func(v *vector) { v.Token = " " + v.Token + " " })
	full64 := g.ok("mac-no-partial-group", "a 48-byte envelope: 64 characters, no partial group", macKey, tool, []byte("abc"), 300_000)
	g.bad(full64, "mac-dangling-character", "malformed", "one more character: a length of 1 modulo 4, which no byte string encodes to", func(v *vector) { v.Token += "A" })
	g.bad(macEmpty, "short-envelope-unknown-key", "malformed", "44 bytes and a key id the opener does not hold: the minimum length is checked before the key", func(v *vector) {
		v.Token = editRaw(t, v.Token, func(r []byte) []byte { r[1] ^= 0xff; return r[:len(r)-1] })
	})
	g.bad(macSmall, "key-id-zero", "unknown_key", "key id 0, which no key has: unknown, not malformed", func(v *vector) {
		v.Token = editRaw(t, v.Token, func(r []byte) []byte { copy(r[1:5], []byte{0, 0, 0, 0}); return r })
	})
	g.bad(long, "mac-lifetime-over-max-and-expired", "invalid", "authentic, claiming 7200 s against a 3600 s maximum, opened after it would have expired: the lifetime is checked first", func(v *vector) {
		v.Open.NowMillis = (iat + 7200 + 30) * 1000
	})
	zero := g.handMAC("mac-lifetime-zero", "lifetime 0, made with the key (no sealer writes it): not special, it opens while now < issued_at + skew", macKey, tool, []byte("z"), 0, iat+29)
	g.bad(zero, "mac-lifetime-zero-expired", "expired", "lifetime 0, opened at issued_at + skew", func(v *vector) { v.Open.NowMillis = (iat + 30) * 1000 })

	// now in whole seconds, rounded down, when sealing and opening.
	g.ok("aead-last-valid-millisecond", "opened 1 ms before issued_at + lifetime + skew: now is rounded down to the second before, and it opens", aeadKey, tool, []byte("m"), 300_000,
		func(v *vector) { v.Open.NowMillis = (iat+300+30)*1000 - 1 })
	g.bad(macSmall, "mac-not-yet-valid-by-1ms", "not_yet_valid", "opened 1 ms before issued_at - skew: rounded down, a second before", func(v *vector) { v.Open.NowMillis = (iat-30)*1000 - 1 })
	late := sealAt(300_000)
	late.NowMillis += 999
	g.vs = append(g.vs, makeVector(t, "mac-sealed-late-in-second", "sealed 0.999 s after iat: issued_at is iat, rounded down", []keyring.Key{macKey}, tool, []byte("n"), late, g.check))
	g.ok("mac-ttl-rounded-up-1ms", "ttl 90.001 s seals for 91 s: rounded up, not to the nearest second", macKey, tool, []byte("q"), 90_001)

	// The sealer's refusals: a negative TTL, a token over its maximum
	// length; one exactly at it seals.
	g.notSealed("seal-negative-ttl", "a requested ttl of -1 ms: refused, not taken as the default", []keyring.Key{macKey}, tool, []byte("t"), sealAt(-1))
	atMax := sealAt(300_000)
	atMax.MaxTokenLen = envelope.EncodedLen(envelope.Overhead(envelope.VersionMAC) + 64)
	g.vs = append(g.vs, makeVector(t, "mac-sealed-at-max-len", "a 64-byte payload whose token is exactly as long as the sealer's maximum (146): sealed",
		[]keyring.Key{macKey}, tool, bytes.Repeat([]byte("l"), 64), atMax, g.check))
	g.notSealed("seal-over-max-len", "a 65-byte payload whose token (147 characters) would exceed the sealer's maximum (146): refused", []keyring.Key{macKey}, tool,
		bytes.Repeat([]byte("l"), 65), atMax)

	// Which key seals: the active key with the latest activation not after
	// now; of equal ones, the one listed last in the keyset.
	older := vkey("older", keyring.MAC)
	newer := vkey("newer", keyring.AEAD)
	newer.Activation = time.Unix(iat-3600, 0)
	g.okKeys("seal-newest-key", "of two active keys, the one activated later seals, though listed first", []keyring.Key{newer, older}, tool)
	pending := vkey("pending", keyring.AEAD)
	pending.Activation = time.Unix(iat+60, 0)
	g.okKeys("seal-pending-key-skipped", "a key activated after now does not seal yet", []keyring.Key{older, pending}, tool)
	atNow := vkey("at now", keyring.AEAD)
	atNow.Activation = time.Unix(iat, 0)
	g.okKeys("seal-key-activated-at-now", "a key activated at exactly now seals", []keyring.Key{older, atNow}, tool)
	decryptOnly := vkey("decrypt-only", keyring.AEAD)
	decryptOnly.State, decryptOnly.Activation = keyring.DecryptOnly, time.Unix(iat-3600, 0)
	g.okKeys("seal-decrypt-only-skipped", "a decrypt-only key never seals, though activated later", []keyring.Key{older, decryptOnly}, tool)
	var tie []keyring.Key
	for _, id := range []uint32{0xf0000001, 0x10000001, 0x80000001} {
		k := vkey(fmt.Sprintf("tie %08x", id), keyring.MAC)
		k.ID, k.Activation = id, time.Unix(iat-3600, 0)
		tie = append(tie, k)
	}
	g.okKeys("seal-tie-listed-last", "three keys activated in the same second: the one listed last seals (not the first, nor the highest or lowest id)", tie, tool)
	g.notSealed("seal-no-primary", "the only active key activates after now: nothing seals", []keyring.Key{pending}, tool, []byte("k"), sealAt(300_000))

	g.limitVectors(macKey, aeadKey, tool, older)

	// What a client is told: the opener's reason for each error.
	for i := range g.vs {
		if err := expectErr[g.vs[i].Expect]; err != nil {
			g.vs[i].Reason = Reason(err)
		}
	}
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

// okKeys adds an ok vector sealed by a sealer holding keys, in that order.
func (g *gen) okKeys(name, comment string, keys []keyring.Key, b Binding) {
	g.vs = append(g.vs, makeVector(g.t, name, comment, keys, b, []byte("which key"), sealAt(300_000), g.check))
}

// okWith adds an ok vector whose token contains c, trying payloads in
// turn until one does.
func (g *gen) okWith(t *testing.T, name, comment string, k keyring.Key, b Binding, c byte) vector {
	for i := range 1000 {
		v := makeVector(t, name, comment, []keyring.Key{k}, b, fmt.Appendf(nil, "payload %d", i), sealAt(300_000), g.check)
		if strings.IndexByte(v.Token, c) >= 0 {
			g.vs = append(g.vs, v)
			return v
		}
	}
	t.Fatalf("no token with %q", c)
	return vector{}
}

// makeVector seals payload under b with a sealer holding keys, in that
// order, and returns the ok vector whose opener holds the key that sealed.
func makeVector(t *testing.T, name, comment string, keys []keyring.Key, b Binding, payload []byte, vs vectorSeal, check vectorCheck) vector {
	t.Helper()
	s := vectorSealer(t, keys, vs)
	k, err := s.ring.Current().Primary(time.UnixMilli(vs.NowMillis))
	if err != nil {
		t.Fatal(err)
	}
	var nonce []byte
	if k.Algorithm == keyring.AEAD {
		nonce = derive("nonce "+name, envelope.NonceSize)
		vs.Nonce = hex.EncodeToString(nonce)
	}
	for _, k := range keys {
		vs.Keys = append(vs.Keys, keyJSON(k))
	}
	sc := &scratch{}
	raw, err := s.sealRaw(sc, b, payload, time.Duration(vs.TTLMillis)*time.Millisecond, nonce)
	if err != nil {
		t.Fatal(err)
	}
	h := testkit.Must(envelope.ParseHeader(raw))
	ad := appendAD(nil, h, &b)
	return vector{
		Name: name, Comment: comment, Key: keyJSON(*k), Binding: bindJSON(b),
		Payload: hex.EncodeToString(payload), Seal: &vs,
		AD: hex.EncodeToString(ad), Token: string(envelope.AppendEncode(nil, raw)), Open: check, Expect: "ok",
	}
}

func bindJSON(b Binding) vectorBind {
	vb := vectorBind{Method: b.Method, Target: b.Target, Principal: b.Principal, Audience: b.Audience,
		Session: b.Session, ArgsDigest: hex.EncodeToString(b.ArgsDigest), Context: hex.EncodeToString(b.Context)}
	if !utf8.ValidString(b.Principal) {
		vb.Principal, vb.PrincipalHex = "", hex.EncodeToString([]byte(b.Principal))
	}
	return vb
}

// notSealed adds a vector whose sealer, holding keys, refuses to seal.
func (g *gen) notSealed(name, comment string, keys []keyring.Key, b Binding, payload []byte, vs vectorSeal) {
	s := vectorSealer(g.t, keys, vs)
	if _, err := s.sealRaw(&scratch{}, b, payload, time.Duration(vs.TTLMillis)*time.Millisecond, nil); err == nil {
		g.t.Fatalf("%s: sealed", name)
	}
	for _, k := range keys {
		vs.Keys = append(vs.Keys, keyJSON(k))
	}
	g.vs = append(g.vs, vector{Name: name, Comment: comment, Binding: bindJSON(b), Payload: hex.EncodeToString(payload),
		Seal: &vs, Expect: "not_sealed"})
}

// handMAC makes, with the key and not with a sealer, an ok MAC vector
// whose header says lifetime: one no sealer writes.
func (g *gen) handMAC(name, comment string, k keyring.Key, b Binding, payload []byte, lifetime uint32, now int64) vector {
	h := envelope.Header{Version: envelope.VersionMAC, KeyID: k.ID, IssuedAt: iat, Lifetime: lifetime}
	ad := appendAD(nil, h, &b)
	mac := hmac.New(sha256.New, keymaterial.Of(&k))
	mac.Write(ad)
	mac.Write(payload)
	raw := mac.Sum(append(envelope.AppendHeader(nil, h), payload...))
	check := g.check
	check.NowMillis = now * 1000
	v := vector{Name: name, Comment: comment, Key: keyJSON(k), Binding: bindJSON(b), Payload: hex.EncodeToString(payload),
		AD: hex.EncodeToString(ad), Token: encode(raw), Open: check, Expect: "ok"}
	g.vs = append(g.vs, v)
	return v
}

func vectorSealer(t *testing.T, keys []keyring.Key, vs vectorSeal) *Sealer {
	t.Helper()
	at := time.UnixMilli(vs.NowMillis)
	s, err := New(policyRing(t, vs.Policy, keys...), &Options{Now: func() time.Time { return at }, MaxTTL: seconds(vs.MaxTTL), DefaultTTL: seconds(vs.DefaultTTL), MaxTokenLen: vs.MaxTokenLen})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func keyJSON(k keyring.Key) vectorKey {
	return vectorKey{ID: keyring.FormatID(k.ID), Algorithm: k.Algorithm.String(), Material: hex.EncodeToString(keymaterial.Of(&k)),
		State: k.State.String(), Activation: k.Activation.Unix()}
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
