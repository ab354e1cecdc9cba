package keyset

import (
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/keysetjson"
	"github.com/stateseal/stateseal/keyring"
)

// boundaryVectors are the vectors of issue 25: KEK URL identities, the
// JSON rules' corners, bounds at exactly their value, the primary, retired
// keys' validation, exact comparisons, which configured KEK unwraps, an
// empty authentication key. Kept apart from writeKeysetVectors so that the
// format's own changes merge without touching them.
func (g *kvGen) boundaryVectors(s, fleet, mac, next *kvBuild, single kvSpec, cfg kvConfig) {
	def := keyring.DefaultPolicy()
	sd, fd, nd := g.doc(s), g.doc(fleet), g.doc(mac)
	malformed := func(name, comment string, doc []byte) { g.t.Helper(); g.refuse(name, "malformed", comment, doc, cfg) }
	with := func(edit func(*kvConfig)) kvConfig {
		c := cfg
		c.KEKs = append([]string(nil), cfg.KEKs...)
		edit(&c)
		return c
	}

	// KEK URL identity: each document names an identity and is expired, so
	// "stale" says the configured URL's identity is what it names (trusted,
	// and nothing unwrapped), "untrusted_kek" that it is not.
	named := func(label, kek string) []byte { return g.doc(g.keyset(label, 2, kek, def, -8*kvDay, single)) }
	identity := func(name, expect, comment, configured, documentKEK string) {
		g.t.Helper()
		g.refuse(name, expect, comment, named("identity "+name, documentKEK), kvConfigAt(kvNow, configured))
	}
	identity("kek-identity-empty-pieces", "stale", "configured ...?&region=eu-west-1&&: empty pieces of the query are skipped; the identity is ...?region=eu-west-1",
		"awskms://alias/k?&region=eu-west-1&&", "awskms://alias/k?region=eu-west-1")
	identity("kek-identity-first-equals", "stale", "configured ...?region=r&tag=a=b: a parameter splits at its first '=', the value a=b is written a%3Db",
		"awskms://alias/k?region=r&tag=a=b", "awskms://alias/k?region=r&tag=a%3Db")
	identity("kek-identity-first-equals-raw", "untrusted_kek", "configured ...?region=r&tag=a=b; the document names the query as configured, with a raw '=' in the value: not the identity",
		"awskms://alias/k?region=r&tag=a=b", "awskms://alias/k?region=r&tag=a=b")
	identity("kek-identity-bare-question-mark", "stale", "configured vault://transit/keys/k? (a bare '?'): an empty query is dropped, the identity has no '?'",
		"vault://transit/keys/k?", "vault://transit/keys/k")
	identity("kek-identity-percent-decoded", "stale", "configured ...?region=eu%2dwest%2D1&x=%c3%a9: decoded, then escaped again: unreserved bytes as themselves, others in upper-case hex",
		"awskms://alias/k?region=eu%2dwest%2D1&x=%c3%a9", "awskms://alias/k?region=eu-west-1&x=%C3%A9")
	identity("kek-identity-space", "stale", "configured ...?x=a%20b&y=a+b: both values are 'a b', written a+b",
		"awskms://alias/k?x=a%20b&y=a+b", "awskms://alias/k?x=a+b&y=a+b")
	identity("kek-identity-sorted", "stale", "configured ...?z=1&a=2&a=1: sorted by name, bytewise; one name's values keep their order",
		"awskms://alias/k?z=1&a=2&a=1", "awskms://alias/k?a=2&a=1&z=1")
	g.refuse("kek-identity-two-configured", "stale", "two configured URLs of one identity (two endpoints of one key): trusted; the first that matches is opened",
		named("identity two", "awskms://alias/k?region=r"),
		kvConfigAt(kvNow, "awskms://alias/k?endpoint=http://127.0.0.1:1&region=r", "awskms://alias/k?region=r&endpoint=http://127.0.0.1:2"))
	caseKEK := g.keyset("kek case", 2, kvMainKEK, def, -time.Hour, single)
	caseKEK.ks.KEK = "local:Stateseal.kek"
	g.authenticate(caseKEK, "auth kek case")
	g.refuse("kek-case-differs", "untrusted_kek", "the document names local:Stateseal.kek, the configuration local:stateseal.kek: compared exactly, byte for byte", g.doc(caseKEK), cfg)
	g.refuse("other-keyset-case", "other_keyset", "the configured keyset id is the document's in upper case: compared exactly", sd,
		with(func(c *kvConfig) { c.KeysetID = strings.ToUpper(s.ks.ID) }))

	// JSON.
	g.ok("valid-del-in-id", "a raw U+007F DELETE in the keyset id: JSON's control characters are U+0000 to U+001F only", g.rebuildID(s, single, "ks-del\x7fid"), cfg)
	malformed("raw-control-in-id", "a raw U+001F in the keyset id", g.edit(sd, "", `"id": "ks-`, "\"id\": \"ks-\x1f"))
	malformed("raw-tab-in-id", "a raw tab in the keyset id: whitespace between tokens, not inside a string", g.edit(sd, "", `"id": "ks-`, "\"id\": \"ks-\t"))
	kw := base64.RawURLEncoding.EncodeToString(s.key(kvSingle).Wrapped)
	created := `"created": "` + kvTime(-2*time.Hour)
	g.ok("valid-escapes-in-base64-and-time", `a wrapped key's first character and a created time's T written as \u escapes: escapes are decoded before base64url and times are read`, s, cfg,
		func(d []byte) []byte { return g.edit(d, "", kw, `\u00`+hex2(kw[0])+kw[1:]) },
		func(d []byte) []byte { return g.edit(d, "", created, strings.Replace(created, "T", `\u0054`, 1)) })
	keysAt := strings.Index(string(sd), `"keys": [`) + len(`"keys": [`)
	malformed("keys-null-element", "a null element in keys: an element is an object; null stands for an absent member, not an absent key",
		[]byte(string(sd[:keysAt])+"\n    null,"+string(sd[keysAt:])))
	malformed("version-leading-zero", "version 01: not a JSON number", g.edit(sd, "", `"version": 1,`, `"version": 01,`))
	malformed("version-plus-sign", "version +1: not a JSON number", g.edit(sd, "", `"version": 1,`, `"version": +1,`))
	malformed("form-feed-whitespace", `a form feed (\f) before a member: JSON's whitespace is space, tab, LF and CR`, g.edit(sd, "", `"version"`, "\f\"version\""))
	malformed("no-break-space-whitespace", "U+00A0 before a member", g.edit(sd, "", `"version"`, "\u00a0\"version\""))
	malformed("created-non-ascii-digits", "a created time written with fullwidth digits (U+FF10 to U+FF19): times are ASCII digits", g.edit(sd, "", created, `"created": "２０２６`+created[len(`"created": "2026`):]))

	// Bounds at exactly their value.
	g.ok("valid-document-1-mib", "the single keyset followed by spaces to exactly 1 048 576 bytes (pad_to)", s, cfg)
	g.vs[len(g.vs)-1].PadTo = 1 << 20
	g.refuse("document-over-1-mib", "malformed", "the single keyset followed by spaces to 1 048 577 bytes (pad_to): refused before it is parsed", sd, cfg)
	g.vs[len(g.vs)-1].PadTo = 1<<20 + 1
	big := fleet.clone()
	big.key(kvRetired).Wrapped = kvDerive2048("retired 2048")
	g.authenticate(big, "auth retired 2048")
	g.ok("valid-retired-wrapped-2048-bytes", "the retired key's wrapped bytes are 2 048 bytes (2 731 characters) of garbage: at the bound, and never unwrapped", big, cfg)
	over := string(g.doc(big))
	bw := base64.RawURLEncoding.EncodeToString(big.key(kvRetired).Wrapped)
	malformed("retired-wrapped-2049-bytes", "the retired key's wrapped bytes are 2 049 bytes: over the bound, whatever the state",
		[]byte(strings.Replace(over, bw, base64.RawURLEncoding.EncodeToString(append(big.key(kvRetired).Wrapped, 0)), 1)))
	maxProp := def
	maxProp.PropagationDelay, maxProp.RotationInterval = 9223372036*time.Second, 0
	g.ok("valid-propagation-max", "propagation_delay_seconds 9 223 372 036, the most whose nanoseconds fit an int64 (rotation off)", g.keyset("propagation max", 2, kvMainKEK, maxProp, -time.Hour, single), cfg)
	malformed("rotation-overflow", "rotation_interval_seconds 9 223 372 037: its nanoseconds overflow an int64", g.edit(sd, "", `"rotation_interval_seconds": 2592000`, `"rotation_interval_seconds": 9223372037`))
	edge := s.ks.Expires.Add(-s.ks.Policy.Freshness - s.ks.Policy.Skew).UnixMilli()
	g.ok("valid-expires-at-window-edge", "now is exactly expires - freshness - skew: expires <= now + freshness + skew holds with equality", s, kvConfig{KEKs: cfg.KEKs, NowMillis: edge})
	g.refuse("expires-beyond-window-by-1ms", "stale", "now is 1 ms before expires - freshness - skew: expires is 1 ms too far ahead", sd, kvConfig{KEKs: cfg.KEKs, NowMillis: edge - 1})
	g.ok("valid-expires-empty-no-freshness", `"expires": "" with freshness 0: an empty string is no expiry, like an absent member`, mac, cfg,
		func(d []byte) []byte { return g.edit(d, "", `"policy"`, `"expires": "",`+"\n  "+`"policy"`) })
	_ = nd

	// The primary: the latest activation, not the list's order nor the
	// creation time; no skew on activation.
	order := g.keyset("primary order", 2, kvMainKEK, def, -time.Hour,
		kvSpec{0xe0000001, keyring.AEAD, keyring.Active, -2 * kvDay, -30 * time.Minute, nil},
		kvSpec{0xe0000002, keyring.MAC, keyring.Active, -kvDay, -time.Hour, nil})
	g.ok("valid-primary-latest-activation", "two active keys: the first listed was created earlier but activated later; it is the primary (not the last listed, nor the last created)", order, cfg)
	soon := g.keyset("pending within skew", 2, kvMainKEK, def, -time.Hour,
		kvSpec{0xe1000001, keyring.AEAD, keyring.Active, -kvDay, -kvDay, nil},
		kvSpec{0xe1000002, keyring.AEAD, keyring.Active, -time.Hour, time.Second, nil})
	g.ok("valid-pending-within-skew", "a key activating 1 s after now, within the 30 s skew: not the primary; activation is compared with no skew", soon, cfg)

	// Retired keys are validated like any other.
	// Two retired keys of one id, so that retired_keys (which lists it
	// once) agrees with both: only the uniqueness of ids is broken.
	rs := strings.Index(string(fd), "{\n      "+kvID(kvRetired))
	re := rs + strings.Index(string(fd[rs:]), "\n    }") + len("\n    }")
	malformed("retired-duplicate-key-id", "the retired key listed twice, both retired, its id once in retired_keys: key ids are unique among retired keys too",
		[]byte(string(fd[:re])+",\n    "+string(fd[rs:re])+string(fd[re:])))
	rc := `"created": "` + kvTime(-90*kvDay)
	malformed("retired-invalid-date", "the retired key created on February 30", g.edit(fd, kvID(kvRetired), rc, `"created": "2026-02-30T10:00:00Z`))
	malformed("retired-activation-before-created", "the retired key activated a second before it was created",
		g.edit(fd, kvID(kvRetired), `"activation": "`+kvTime(-90*kvDay+10*time.Minute), `"activation": "`+kvTime(-90*kvDay-time.Second)))

	// The configured minimum and the installed version: both floors hold.
	g.refuse("rollback-installed-above-min-version", "rollback", "min_version 7 configured, version 8 installed: version 7 is refused (the higher floor holds)", fd,
		with(func(c *kvConfig) { c.MinVersion, c.After = 7, []string{"valid-next-version"} }))

	// Which KEK unwraps: the configured URL the document's kek matches,
	// never another trusted one.
	under := g.keyset("under previous", 2, kvMainKEK, def, -time.Hour, single)
	under.wrapKEK = kvPrevious
	under.ks.Keys = nil
	g.addKey(under, single)
	g.authenticate(under, "auth under previous")
	g.refuse("wrapped-under-other-trusted-kek", "unauthenticated", "names the KEK, but its keys and authentication key are wrapped under the previous KEK, which the loader trusts too: only the KEK the document names unwraps",
		g.doc(under), kvConfigAt(kvNow, kvMainKEK, kvPrevious))

	// An empty authentication key.
	empty := s.clone()
	g.authenticateWith(empty, []byte{})
	g.refuse("auth-key-0-bytes", "unauthenticated", "the authentication key unwraps to 0 bytes: refused (HMAC takes it, WebCrypto does not; no writer makes it)", g.doc(empty), cfg)

	// Fork state: a loader remembers the installed version's tag as its
	// 32 bytes, and compares tags as bytes, however they are written.
	after := with(func(c *kvConfig) { c.After = []string{"valid-rotation"} })
	tag7 := base64.RawURLEncoding.EncodeToString(fleet.ks.Auth.Tag)
	g.okAfter("fork-tag-escaped", `the installed version 7 again, its auth.tag's first character written as a \u escape: the same 32 bytes, the same tag, not a fork`,
		g.edit(fd, `"auth": {`, `"tag": "`+tag7[:1], `"tag": "\u00`+hex2(tag7[0])), after)
	nd8 := g.doc(next)
	g.ok("descendant-link-tag-escaped", `version 8, whose link to the installed version 7 writes the tag's first character as a \u escape: the link's tag is its 32 bytes`, next, after,
		func(d []byte) []byte {
			return g.edit(d, `"history": [`, `"tag": "`+tag7[:1], `"tag": "\u00`+hex2(tag7[0]))
		})
	_ = nd8
}

// rebuildID is b's keyset again under another id: its keys wrapped and
// its authentication made for that id.
func (g *kvGen) rebuildID(b *kvBuild, spec kvSpec, id string) *kvBuild {
	c := b.clone()
	c.ks.ID = id
	c.ks.Keys = nil
	g.addKey(c, spec)
	g.authenticate(c, "auth id "+id)
	return c
}

func hex2(c byte) string {
	return strings.ToUpper(string("0123456789abcdef"[c>>4]) + string("0123456789abcdef"[c&15]))
}

// kvDerive2048 is 2048 bytes derived from label.
func kvDerive2048(label string) []byte {
	var out []byte
	for i := 0; len(out) < 2048; i++ {
		out = append(out, kvDerive(label+" "+string(rune('a'+i)), 32)...)
	}
	return out[:2048]
}

var _ = keysetjson.Format

// The wrong readings boundaryVectors catches, in KEYSET-FORMAT.md's second
// table.
func init() {
	kmMutations = append(kmMutations,
		"identity-empty-pieces-kept", "identity-bare-question-kept", "identity-split-at-last-equals", "identity-raw-query",
		"identity-lower-hex", "identity-space-as-percent-20", "identity-unsorted", "identity-values-sorted",
		"kek-case-insensitive", "pin-case-insensitive",
		"del-refused", "raw-control-accepted", "escapes-in-values-refused", "null-key-elements-skipped",
		"leading-zeros-accepted", "plus-sign-accepted", "whitespace-beyond-json", "unicode-digits-in-times",
		"size-limit-exclusive", "size-unbounded", "wrapped-bound-in-characters", "retired-wrapped-unchecked",
		"durations-bound-exclusive", "expiry-ahead-exclusive", "expiry-ahead-without-skew", "empty-expires-is-present",
		"primary-last-listed", "primary-latest-created", "primary-activation-with-skew", "retired-keys-unvalidated",
		"min-version-replaces-installed", "unwrap-with-any-trusted-kek", "auth-key-empty-accepted",
		"fork-tag-as-text", "history-link-by-document-digest",
	)
}

// TestIdentityModel: for plain URLs, the model's identity (written from
// KEYSET-FORMAT.md) is Go's, and Go refuses what the text says is not
// plain.
func TestIdentityModel(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 1))
	pieces := []string{"a", "Z", "0", "-", ".", "_", "~", "/", ":", "$", "&", "+", ",", ";", "=", "?", "%", "%2d", "%C3%a9", "%zz",
		"@", "#", " ", "endpoint=x", "insecure", "region=r", "é", "!", "*", "'", "(", "[", "\\"}
	agreed := 0
	for range 20000 {
		u := []string{"awskms://alias/k", "local:k", "vault://t/keys/k", "x:"}[r.IntN(4)]
		for range r.IntN(8) {
			u += pieces[r.IntN(len(pieces))]
		}
		id, err := backends.Identity(u)
		if err != nil {
			continue
		}
		agreed++
		if want := kmIdentity(u, ""); id != want {
			t.Fatalf("Identity(%q) = %q, the text's %q", u, id, want)
		}
		base, _, _ := strings.Cut(u, "?")
		if strings.ContainsAny(base, "@%!*'([\\ ") || strings.ContainsAny(u, "# é") {
			t.Fatalf("Identity(%q) = %q: not plain, but accepted", u, id)
		}
		if !kmPlain(u, "") {
			t.Fatalf("Identity(%q) = %q: the text's plainness refuses it", u, id)
		}
	}
	if agreed < 1000 {
		t.Fatalf("only %d plain URLs of 20000", agreed)
	}
}
