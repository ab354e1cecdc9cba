package seal

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
)

// vectorPolicy is the part of a keyset's policy that bounds tokens
// (docs/FORMAT.md, "Limits from a keyset").
type vectorPolicy struct {
	MaxTTL int64 `json:"max_ttl_seconds"`
	Skew   int64 `json:"skew_seconds"`
}

// secs is a vector's duration setting: seconds, whole or not.
func secs(n float64) *float64 { return &n }

// seconds is a vector's optional setting as an Options duration: 0, the
// package's "not set", for null.
func seconds(n *float64) time.Duration {
	if n == nil {
		return 0
	}
	return duration(*n)
}

// duration is a vector's seconds, whole or not, as a time.Duration.
func duration(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

// policyRing is a ring of keys that, with p, reports p as the policy of
// the keyset they came from.
func policyRing(t testing.TB, p *vectorPolicy, keys ...keyring.Key) *keyring.Ring {
	t.Helper()
	if p == nil {
		return newRing(t, keys...)
	}
	snap, err := keyring.NewSnapshot(keys)
	if err != nil {
		t.Fatal(err)
	}
	pol := keyring.DefaultPolicy()
	pol.MaxTTL, pol.Skew = time.Duration(p.MaxTTL)*time.Second, time.Duration(p.Skew)*time.Second
	r, err := keyring.NewRing(snap.WithPolicy(pol, 1))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (b vectorBind) principal(t *testing.T) string {
	if b.PrincipalHex != "" {
		return string(unhex(t, b.PrincipalHex))
	}
	return b.Principal
}

// limitVectors are the vectors of a keyset's limits, of the sealer's clock
// range and of binding bytes that are not UTF-8 or not a 32-byte digest.
func (g *gen) limitVectors(macKey, aeadKey keyring.Key, tool Binding, older keyring.Key) {
	t := g.t
	pol := func(maxTTL, skew int64) *vectorPolicy { return &vectorPolicy{maxTTL, skew} }
	sealWith := func(ttlMillis int64, server *float64, p *vectorPolicy) vectorSeal {
		vs := sealAt(ttlMillis)
		vs.MaxTTL, vs.Policy = server, p
		return vs
	}
	openWith := func(now int64, maxTTL, skew *float64, p *vectorPolicy) vectorCheck {
		c := g.check
		c.NowMillis, c.MaxTTL, c.Skew, c.Policy = now*1000, maxTTL, skew, p
		return c
	}
	add := func(name, comment string, k keyring.Key, payload string, vs vectorSeal, open vectorCheck) vector {
		v := makeVector(t, name, comment, []keyring.Key{k}, tool, []byte(payload), vs, open)
		g.vs = append(g.vs, v)
		return v
	}
	// The keyset's maximum TTL and skew: the smaller of the keyset's and
	// the server's, or the keyset's where the server sets none.
	add("policy-max-ttl-capped", "the server's maximum TTL is 7200 s, the keyset's 3600 s: a ttl of 2 h seals for 3600 s, the smaller, and opens under the same settings",
		macKey, "p1", sealWith(7_200_000, secs(7200), pol(3600, 30)), openWith(iat+60, secs(7200), secs(30), pol(3600, 30)))
	add("policy-server-tighter", "the server's maximum TTL (1800 s) is below the keyset's (3600 s): a ttl of 2 h seals for 1800 s",
		aeadKey, "p2", sealWith(7_200_000, secs(1800), pol(3600, 30)), openWith(iat+60, secs(1800), secs(30), pol(3600, 30)))
	add("policy-above-default", "the server sets neither: the keyset's maximum TTL (7200 s) and skew (60 s) hold, not the defaults (3600 s, 30 s): a ttl of 5400 s seals for 5400 s and opens 45 s after it expires",
		macKey, "p3", sealWith(5_400_000, nil, pol(7200, 60)), openWith(iat+5400+45, nil, nil, pol(7200, 60)))
	add("policy-default-ttl-capped", "ttl 0: the default TTL (600 s) is capped at the keyset's maximum (300 s)",
		macKey, "p4", sealWith(0, nil, pol(300, 30)), openWith(iat+60, nil, nil, pol(300, 30)))
	hour := makeVector(t, "", "", []keyring.Key{macKey}, tool, []byte("p5"), sealAt(3_600_000), openWith(iat+60, secs(7200), secs(30), nil))
	g.bad(hour, "policy-lifetime-over-max", "invalid", "authentic, lifetime 3600 s; the opener's server allows 7200 s, its keyset 1800 s: invalid",
		func(v *vector) { v.Open.Policy = pol(1800, 30) })
	five := makeVector(t, "", "", []keyring.Key{macKey}, tool, []byte("p6"), sealAt(300_000), g.check)
	opened := func(name, expect, comment string, now int64, maxTTL, skew *float64, p *vectorPolicy) {
		if expect == "ok" {
			v := five
			v.Name, v.Comment, v.Open = name, comment, openWith(now, maxTTL, skew, p)
			g.vs = append(g.vs, v)
			return
		}
		g.bad(five, name, expect, comment, func(v *vector) {
			v.Open = openWith(now, maxTTL, skew, p)
		})
	}
	opened("policy-skew-last-second", "ok", "lifetime 300 s, the keyset's skew 10 s, the server sets none: opened at issued_at + 300 + 9", iat+309, nil, nil, pol(3600, 10))
	opened("policy-skew-expired", "expired", "lifetime 300 s, the keyset's skew 10 s, the server sets none: expired at issued_at + 300 + 10, not at + 30 (the default)", iat+310, nil, nil, pol(3600, 10))
	opened("policy-skew-zero-last-second", "ok", "the keyset's skew is 0 (none, not the default): opened at issued_at + 299", iat+299, nil, nil, pol(3600, 0))
	opened("policy-skew-zero", "expired", "the keyset's skew is 0 (none, not the default): expired at issued_at + 300", iat+300, nil, nil, pol(3600, 0))
	opened("policy-skew-server-tighter", "expired", "the server's skew 5 s, the keyset's 10 s: expired at issued_at + 300 + 5", iat+305, secs(3600), secs(5), pol(3600, 10))
	opened("policy-server-skew-zero", "expired", "the server sets a skew of 0 (none), the keyset 10 s: expired at issued_at + 300", iat+300, secs(3600), secs(0), pol(3600, 10))

	// A retired key never seals, though activated last.
	retired := vkey("retired", keyring.AEAD)
	retired.State, retired.Activation = keyring.Retired, time.Unix(iat-3600, 0)
	g.okKeys("seal-retired-key-skipped", "a retired key never seals, though activated later than the active one", []keyring.Key{older, retired}, tool)

	// The sealer's clock within the header's 40 bits.
	early := vkey("early", keyring.MAC)
	early.Activation = time.Unix(-day, 0)
	at := func(nowMillis int64) vectorSeal { vs := sealAt(300_000); vs.NowMillis = nowMillis; return vs }
	g.notSealed("seal-now-before-1970", "the sealer's clock reads 1 ms before 1970: issued_at would be -1, outside the header: refused", []keyring.Key{early}, tool, []byte("c"), at(-1))
	g.vs = append(g.vs, makeVector(t, "seal-now-at-1970", "the sealer's clock reads 1970-01-01T00:00:00Z: issued_at 0 is sealed", []keyring.Key{early}, tool, []byte("c"), at(0),
		openWith(60, secs(3600), secs(30), nil)))
	const maxIAT = 1<<40 - 1
	g.vs = append(g.vs, makeVector(t, "seal-now-at-max", "the sealer's clock reads 2^40 - 1 s and 999 ms: issued_at 2^40 - 1, the header's largest, is sealed", []keyring.Key{macKey}, tool, []byte("c"), at(maxIAT*1000+999),
		openWith(maxIAT+1, secs(3600), secs(30), nil)))
	g.notSealed("seal-now-past-max", "the sealer's clock reads 2^40 s: issued_at would not fit the header's 40 bits: refused", []keyring.Key{macKey}, tool, []byte("c"), at((maxIAT+1)*1000))

	// The uvarint's boundary: 127 bytes take one byte, 128 two.
	for _, n := range []int{127, 128} {
		b := tool
		b.Target = "t" + strings.Repeat("x", n-1)
		g.ok(fmt.Sprintf("mac-binding-%d-byte-field", n), fmt.Sprintf("a %d-byte target: its length takes %d byte(s) of uvarint", n, n/128+1), macKey, b, []byte("v"), 300_000)
	}

	// Binding bytes as given.
	notUTF8 := tool
	notUTF8.Principal = "user-\xff\xfe"
	g.ok("mac-binding-not-utf8", "a principal whose bytes (75 73 65 72 2d ff fe) are not UTF-8: bound as they are, never replaced by U+FFFD nor refused", macKey, notUTF8, []byte("u"), 300_000)
	single := tool
	d := testkit.Must(ArgsDigest([]byte(`{"n":1}`)))
	single.ArgsDigest = append(bytes.Clone(d), 0x01)
	g.ok("aead-single-use-digest", "a 33-byte args_digest (the digest and mrtr's single-use mark 0x01): bound as it is, whatever its length", aeadKey, single, []byte("once"), 300_000)
	if hex.EncodeToString(single.ArgsDigest[32:]) != "01" {
		t.Fatal("single-use mark")
	}

	g.lastReadings(macKey, tool, older)
}

// lastReadings are the vectors of issue 37: an opener's clock before 1970
// and at -0.5 s, a sealer's newest key a few seconds ahead of now, a
// server skew of 0 with no keyset, and a request without arguments.
func (g *gen) lastReadings(macKey keyring.Key, tool Binding, older keyring.Key) {
	t := g.t
	var at1970 vector
	for _, v := range g.vs {
		if v.Name == "seal-now-at-1970" {
			at1970 = v
		}
	}
	reopen := func(base vector, name, expect, comment string, nowMillis int64, skew *float64) {
		v := base
		v.Name, v.Comment, v.Expect = name, comment, expect
		v.Open.NowMillis, v.Open.Skew = nowMillis, skew
		if expect != "ok" {
			v.Seal, v.AD = nil, ""
		}
		g.vs = append(g.vs, v)
	}
	reopen(at1970, "open-now-before-1970", "ok", "issued_at 0, the opener's clock 30 s before 1970 (now_ms -30000), skew 30 s: issued_at - skew <= now, so it opens; a clock before 1970 is no error of its own", -30_000, secs(30))
	reopen(at1970, "open-now-before-1970-by-1ms", "not_yet_valid", "issued_at 0, the opener's clock at now_ms -30001: floor(now) is -31 (toward minus infinity, not toward 0, which gives -30), before issued_at - skew", -30_001, secs(30))
	reopen(at1970, "open-now-minus-half-second", "not_yet_valid", "issued_at 0, the server's skew 0 (none), the opener's clock at -0.5 s: floor(now) is -1, before issued_at; truncated toward 0 it would be 0 and open", -500, secs(0))

	// A sealer has no skew: a key activating 5 s after now does not seal,
	// whatever skew the server or the keyset allows.
	soon := vkey("soon", keyring.AEAD)
	soon.Activation = time.Unix(iat+5, 0)
	vs := sealAt(300_000)
	vs.Policy = &vectorPolicy{3600, 600}
	open := g.check
	open.Policy = vs.Policy
	g.vs = append(g.vs, makeVector(t, "seal-pending-within-skew", "the newest active key activates 5 s after now, within the keyset's skew of 600 s: the older key seals; skew never changes which key seals",
		[]keyring.Key{older, soon}, tool, []byte("which key"), vs, open))

	// A server skew of 0 is no skew, with no keyset too.
	five := makeVector(t, "mac-server-skew-zero-last-second", "lifetime 300 s, the server's skew 0 (none), no keyset: opened at issued_at + 299", []keyring.Key{macKey}, tool, []byte("p7"), sealAt(300_000), g.check)
	five.Open.NowMillis, five.Open.Skew = (iat+299)*1000, secs(0)
	g.vs = append(g.vs, five)
	g.bad(five, "mac-server-skew-zero", "expired", "lifetime 300 s, the server's skew 0 (none, not the default 30 s), no keyset: expired at issued_at + 300", func(v *vector) {
		v.Open.NowMillis = (iat + 300) * 1000
	})

	// A request without arguments binds the digest of {}, never an empty
	// args_digest.
	none := tool
	none.ArgsDigest = testkit.Must(ArgsDigest(nil))
	if hex.EncodeToString(none.ArgsDigest) != "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a" {
		t.Fatal("the digest of {}")
	}
	// Configurations refused when configured, never clamped: the opener's
	// (open), the sealer's (seal).
	openerConfig := func(name, comment string, edit func(*vectorCheck)) {
		v := five
		v.Name, v.Comment, v.Expect, v.Seal, v.AD = name, comment, "config", nil, ""
		edit(&v.Open)
		g.vs = append(g.vs, v)
	}
	openerConfig("config-skew-601", "the opener's skew is 601 s: refused, not clamped to 600", func(c *vectorCheck) { c.Skew = secs(601) })
	openerConfig("config-skew-negative", "the opener's skew is -1 s: refused, not taken as no skew", func(c *vectorCheck) { c.Skew = secs(-1) })
	openerConfig("config-max-ttl-over-limit", "the opener's maximum TTL is 2^24 s: refused, not clamped to 2^24 - 1", func(c *vectorCheck) { c.MaxTTL = secs(1 << 24) })
	openerConfig("config-max-token-len-70", "the opener's maximum token length is 70, which cannot hold an empty AEAD token (71): refused", func(c *vectorCheck) { c.MaxTokenLen = 70 })
	openerConfig("config-skew-600-and-a-half", "the opener's skew is 600.5 s: refused, since the range is checked on the value as given, before it is rounded down to 600", func(c *vectorCheck) { c.Skew = secs(600.5) })

	// Durations finer than seconds: the opener's rounded down, the default
	// TTL rounded up when it seals, as a requested TTL is.
	g.bad(five, "mac-fractional-skew", "expired", "lifetime 300 s, the opener's skew 30.9 s, rounded down to 30: expired at issued_at + 330 (rounded up or to the nearest, 31, it would open)", func(v *vector) {
		v.Open.NowMillis, v.Open.Skew = (iat+330)*1000, secs(30.9)
	})
	g.bad(five, "mac-fractional-max-ttl", "invalid", "lifetime 300 s, the opener's maximum TTL 299.9 s, rounded down to 299: the lifetime is over it", func(v *vector) {
		v.Open.MaxTTL = secs(299.9)
	})
	fractional := sealAt(0)
	fractional.DefaultTTL = secs(90.5)
	g.vs = append(g.vs, makeVector(t, "mac-fractional-default-ttl", "ttl 0 under a default TTL of 90.5 s: seals for 91 s, rounded up as a requested TTL is (not rounded down when configured)",
		[]keyring.Key{macKey}, tool, []byte("f"), fractional, g.check))

	sealerConfig := func(name, comment string, edit func(*vectorSeal)) {
		vs := sealAt(300_000)
		edit(&vs)
		vs.Keys = []vectorKey{keyJSON(macKey)}
		g.vs = append(g.vs, vector{Name: name, Comment: comment, Binding: bindJSON(tool), Payload: hex.EncodeToString([]byte("c")), Seal: &vs, Expect: "config"})
	}
	sealerConfig("config-default-ttl-over-max", "the sealer's default TTL (7200 s) is above its maximum TTL (3600 s): refused, not capped", func(vs *vectorSeal) {
		vs.DefaultTTL, vs.MaxTTL = secs(7200), secs(3600)
	})
	sealerConfig("config-default-ttl-over-default-max-with-keyset", "the sealer's default TTL (5400 s) with no maximum TTL set (3600 s) is refused, though its keyset allows 7200 s: checked when configured, keyset or not", func(vs *vectorSeal) {
		vs.DefaultTTL, vs.MaxTTL, vs.Policy = secs(5400), nil, &vectorPolicy{7200, 30}
	})

	noArgs := g.ok("mac-no-arguments", "a request without arguments (arguments absent, empty, null or {}): args_digest is the SHA-256 of {}, not empty", macKey, none, []byte("a"), 300_000)
	g.bad(noArgs, "mac-no-arguments-empty-digest", "invalid", "the token of mac-no-arguments opened under an empty args_digest (a server that binds no arguments): another binding", func(v *vector) {
		v.Binding.ArgsDigest = ""
	})

	g.readersVectors(macKey, tool)
	g.surrogateVectors(macKey, tool)
}

// TestFractionalDurations holds the package to docs/FORMAT.md's reading of
// durations finer than seconds, which a vector, in whole seconds, cannot
// carry: a range is checked on the value as given, then the maximum TTL
// and the skew are rounded down, and the default TTL, a requested TTL, is
// rounded up when it seals.
func TestFractionalDurations(t *testing.T) {
	k := vkey("fraction", keyring.MAC)
	at := time.Unix(iat, 0)
	now := func() time.Time { return at }
	for name, o := range map[string]*Options{
		"skew 600.5 s":      {Skew: MaxSkew + time.Second/2},
		"max TTL 0.5 s":     {MaxTTL: time.Second / 2, DefaultTTL: time.Second},
		"max TTL limit+0.5": {MaxTTL: MaxTTLLimit + time.Second/2},
	} {
		if _, err := New(newRing(t, k), o); err == nil {
			t.Errorf("%s: accepted; the range is checked before rounding", name)
		}
	}
	s := testkit.Must(New(newRing(t, k), &Options{Now: now, DefaultTTL: 90500 * time.Millisecond, MaxTTL: 3600900 * time.Millisecond, Skew: 1900 * time.Millisecond}))
	tool := Binding{Method: "tools/call", Target: "t", Principal: "p"}
	tok := testkit.Must(s.Seal(tool, []byte("x"), 0))
	h := testkit.Must(s.Inspect(tok))
	if life := h.Expiry.Sub(h.IssuedAt); life != 91*time.Second {
		t.Errorf("a default TTL of 90.5 s sealed for %v, want 91 s (rounded up, as a requested TTL)", life)
	}
	long := testkit.Must(s.Seal(tool, []byte("x"), 2*time.Hour))
	if h := testkit.Must(s.Inspect(long)); h.Expiry.Sub(h.IssuedAt) != time.Hour {
		t.Errorf("a maximum TTL of 3600.9 s sealed for %v, want 3600 s (rounded down)", h.Expiry.Sub(h.IssuedAt))
	}
	// A skew of 1.9 s is 1 s: a token 91 s long expires at issued_at + 92.
	at = time.Unix(iat+91, 0)
	if _, err := s.Open(tool, tok); err != nil {
		t.Errorf("at issued_at + lifetime + 0 s: %v, want it to open under a skew of 1 s", err)
	}
	at = time.Unix(iat+92, 0)
	if _, err := s.Open(tool, tok); !errors.Is(err, ErrExpired) {
		t.Errorf("at issued_at + lifetime + 1 s: %v, want expired under a skew of 1.9 s rounded down to 1 s", err)
	}
}
