package keyset

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/stateseal/stateseal/internal/keymaterial"
	"github.com/stateseal/stateseal/internal/keysetjson"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
)

// The generator of testdata/keyset-vectors.json. Every value in it is
// derived from a label (SHA-256), nonces included, so that regenerating
// changes nothing unless a vector changes. They are public test values,
// never keys for real use.

const kvT0 = 1785240000 // 2026-07-28T12:00:00Z, the clock of most vectors

var kvNow = time.Unix(kvT0, 0).UTC()

const kvDay = 24 * time.Hour

// kvDerive returns n bytes derived from label.
func kvDerive(label string, n int) []byte {
	var out []byte
	for i := 0; len(out) < n; i++ {
		sum := sha256.Sum256(fmt.Appendf(nil, "stateseal keyset test vector %d %s", i, label))
		out = append(out, sum[:]...)
	}
	return out[:n]
}

// kvLocal is a local KEK (XChaCha20-Poly1305, the layout of
// backends/local.go) whose nonce is derived from what it wraps, so that
// the vectors are reproducible. The real local backend unwraps what it
// wraps: TestKeysetVectors checks that.
type kvLocal struct{ url string }

func (k kvLocal) Wrap(_ context.Context, plaintext, ad []byte) ([]byte, error) {
	a, err := chacha20poly1305.NewX(kvDerive("kek "+k.url, 32))
	if err != nil {
		return nil, err
	}
	nonce := kvDerive(fmt.Sprintf("nonce %s %x %x", k.url, ad, plaintext), chacha20poly1305.NonceSizeX)
	return a.Seal(append([]byte{1}, nonce...), nonce, plaintext, ad), nil
}

func (k kvLocal) Unwrap(context.Context, []byte, []byte) ([]byte, error) {
	panic("the generator never unwraps")
}

const (
	kvMainKEK  = "local:stateseal.kek"
	kvPrevious = "local:previous.kek"
	kvOther    = "local:other.kek"
)

// kvSpec describes a key: its id, kind, state and times (offsets from
// kvNow), and its material, derived from the id unless set.
type kvSpec struct {
	id                  uint32
	alg                 keyring.Algorithm
	state               keyring.State
	created, activation time.Duration
	material            []byte
}

// kvBuild is a keyset as the generator makes it, with what it needs to
// say what the keyset loads to.
type kvBuild struct {
	ks       *Keyset
	wrapKEK  string // the KEK whose value wraps, which may differ from ks.KEK
	material map[uint32][]byte
	authKey  []byte
}

type kvGen struct {
	t  *testing.T
	vs []kvVector
}

func (g *kvGen) fatalf(format string, args ...any) {
	g.t.Helper()
	g.t.Fatalf(format, args...)
}

// keyset builds an authenticated keyset: the keys wrapped under wrapKEK,
// written (Refresh) at written.
func (g *kvGen) keyset(label string, version uint64, kekName string, p keyring.Policy, written time.Duration, keys ...kvSpec) *kvBuild {
	g.t.Helper()
	b := &kvBuild{
		ks:      &Keyset{ID: "ks-" + hex.EncodeToString(kvDerive("keyset id "+label, 8)), Version: version, KEK: kekName, Policy: p},
		wrapKEK: kekName, material: map[uint32][]byte{},
	}
	if !strings.HasPrefix(kekName, "local:") {
		b.wrapKEK = kvMainKEK
	}
	if version > 1 {
		// The version it follows, by a tag derived from the label.
		b.ks.History = []Link{{version - 1, kvDerive("previous tag "+label, 32)}}
	}
	for _, s := range keys {
		g.addKey(b, s)
	}
	b.ks.Refresh(kvNow.Add(written))
	g.authenticate(b, "auth "+label)
	return b
}

func (g *kvGen) addKey(b *kvBuild, s kvSpec) {
	g.t.Helper()
	m := s.material
	if m == nil {
		m = kvDerive(fmt.Sprintf("data key %08x", s.id), 32)
	}
	k := keyring.Key{ID: s.id, Algorithm: s.alg, State: s.state, Created: kvNow.Add(s.created), Activation: kvNow.Add(s.activation)}
	keymaterial.Set(&k, m) // sizes the tests choose, not only 32 bytes
	sk, err := b.ks.Wrap(ctx, kvLocal{b.wrapKEK}, k)
	if err != nil {
		g.fatalf("%v", err)
	}
	b.ks.Keys = append(b.ks.Keys, sk)
	b.material[s.id] = m
}

// authenticate sets the keyset's auth with the authentication key derived
// from label, as Authenticate does with a random one.
func (g *kvGen) authenticate(b *kvBuild, label string) {
	g.authenticateWith(b, kvDerive(label, 32))
}

func (g *kvGen) authenticateWith(b *kvBuild, key []byte) {
	g.t.Helper()
	w, err := kvLocal{b.wrapKEK}.Wrap(ctx, key, authAD(keysetjson.Format, b.ks.ID))
	if err != nil {
		g.fatalf("%v", err)
	}
	b.ks.Auth = Auth{Wrapped: w}
	b.ks.keepRetired()
	b.ks.Auth.Tag = b.ks.tag(keysetjson.Format, key)
	b.authKey = key
	if !hmac.Equal(kvHMAC(key, kvTagInput(b.ks)), b.ks.Auth.Tag) {
		g.fatalf("the generator's tag input disagrees with Keyset.tag")
	}
}

func (b *kvBuild) clone() *kvBuild {
	c := *b
	c.ks = b.ks.Clone()
	c.material = map[uint32][]byte{}
	for id, m := range b.material {
		c.material[id] = m
	}
	return &c
}

func (b *kvBuild) key(id uint32) *StoredKey {
	k, ok := b.ks.Key(id)
	if !ok {
		panic(fmt.Sprintf("no key %08x", id))
	}
	return k
}

// doc marshals the keyset as it stands: authenticated or not.
func (g *kvGen) doc(b *kvBuild) []byte {
	g.t.Helper()
	d, err := b.ks.Marshal()
	if err != nil {
		g.fatalf("%v", err)
	}
	return d
}

// raw marshals the keyset as it stands, unchecked, after edit changes
// its document: for documents no writer makes.
func (g *kvGen) raw(b *kvBuild, edit func(*keysetjson.Doc)) []byte {
	g.t.Helper()
	d := b.ks.doc()
	edit(d)
	out, err := keysetjson.Marshal(d)
	if err != nil {
		g.fatalf("%v", err)
	}
	return out
}

// kvTagInput is the tag's input as docs/KEYSET-FORMAT.md spells it,
// written again here so that the vectors can show it.
func kvTagInput(ks *Keyset) []byte {
	field := func(b, f []byte) []byte { return append(binary.BigEndian.AppendUint32(b, uint32(len(f))), f...) }
	u64 := binary.BigEndian.AppendUint64
	b := field(nil, []byte("stateseal-keyset-v4 auth"))
	b = field(b, []byte(ks.ID))
	b = u64(b, ks.Version)
	b = field(b, []byte(ks.KEK))
	p := ks.Policy
	for _, d := range []time.Duration{p.PropagationDelay, p.MaxTTL, p.Skew, p.RotationInterval, p.Freshness} {
		b = u64(b, uint64(d))
	}
	var exp uint64
	if !ks.Expires.IsZero() {
		exp = uint64(ks.Expires.Unix())
	}
	b = u64(b, exp)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ks.History)))
	for _, h := range ks.History {
		b = field(u64(b, h.Version), h.Tag)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(ks.RetiredKeys)))
	for _, id := range ks.RetiredKeys {
		b = binary.BigEndian.AppendUint32(b, id)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(ks.Keys)))
	for _, k := range ks.Keys {
		b = binary.BigEndian.AppendUint32(b, k.ID)
		b = field(b, []byte(k.Algorithm.String()))
		b = field(b, []byte(k.State.String()))
		b = u64(b, uint64(k.Created.Unix()))
		b = u64(b, uint64(k.Activation.Unix()))
		b = field(b, k.Wrapped)
	}
	return field(b, ks.Auth.Wrapped)
}

func kvHMAC(key, data []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(data)
	return m.Sum(nil)
}

func kvConfigAt(now time.Time, keks ...string) kvConfig {
	if len(keks) == 0 {
		keks = []string{kvMainKEK}
	}
	return kvConfig{KEKs: keks, NowMillis: now.UnixMilli()}
}

// ok adds a vector that loads, with what it loads to.
func (g *kvGen) ok(name, comment string, b *kvBuild, cfg kvConfig, edit ...func([]byte) []byte) {
	g.t.Helper()
	doc := g.doc(b)
	for _, e := range edit {
		doc = e(doc)
	}
	ks := b.ks
	l := &kvLoaded{
		ID: ks.ID, Version: ks.Version, KEK: ks.KEK,
		Policy: kvPolicy{int64(ks.Policy.PropagationDelay / time.Second), int64(ks.Policy.MaxTTL / time.Second), int64(ks.Policy.Skew / time.Second),
			int64(ks.Policy.RotationInterval / time.Second), int64(ks.Policy.Freshness / time.Second)},
		Auth: kvAuth{AD: hex.EncodeToString(authAD(keysetjson.Format, ks.ID)), Key: hex.EncodeToString(b.authKey), TagInput: hex.EncodeToString(kvTagInput(ks))},
		Keys: []kvKey{},
	}
	if !ks.Expires.IsZero() {
		l.Expires = keysetjson.FormatTime(ks.Expires)
	}
	for _, k := range ks.Keys {
		if k.State == keyring.Retired {
			continue
		}
		l.Keys = append(l.Keys, kvKey{ID: keyring.FormatID(k.ID), Algorithm: k.Algorithm.String(), State: k.State.String(),
			Created: keysetjson.FormatTime(k.Created), Activation: keysetjson.FormatTime(k.Activation),
			AD: hex.EncodeToString(wrapAD(ks.ID, k.ID)), Material: hex.EncodeToString(b.material[k.ID])})
	}
	p, found := ks.Primary(time.UnixMilli(cfg.NowMillis))
	if !found {
		g.fatalf("%s: no primary", name)
	}
	l.Primary = keyring.FormatID(p.ID)
	g.add(kvVector{Name: name, Comment: comment, Document: string(doc), Config: cfg, Expect: "ok", Loaded: l})
}

// refuse adds a vector that does not load.
func (g *kvGen) refuse(name, expect, comment string, doc []byte, cfg kvConfig) {
	g.t.Helper()
	v := kvVector{Name: name, Comment: comment, Config: cfg, Expect: expect}
	if strings.ToValidUTF8(string(doc), "") == string(doc) {
		v.Document = string(doc)
	} else {
		v.DocumentHex = hex.EncodeToString(doc)
	}
	g.add(v)
}

// okAfter adds a vector that a loader which installed another vector's
// document accepts without a change: the same content.
func (g *kvGen) okAfter(name, comment string, doc []byte, cfg kvConfig) {
	g.t.Helper()
	v := kvVector{Name: name, Comment: comment, Document: string(doc), Config: cfg, Expect: "ok"}
	for _, o := range g.vs {
		if o.Name == cfg.After[len(cfg.After)-1] {
			v.Loaded = o.Loaded
		}
	}
	if v.Loaded == nil {
		g.fatalf("%s: no ok vector %s before it", name, cfg.After)
	}
	g.add(v)
}

func (g *kvGen) add(v kvVector) {
	g.t.Helper()
	for _, o := range g.vs {
		if o.Name == v.Name {
			g.fatalf("two vectors named %s", v.Name)
		}
	}
	g.vs = append(g.vs, v)
}

// edit replaces the first old in doc, after the first occurrence of
// within if within is not "".
func (g *kvGen) edit(doc []byte, within, old, new string) []byte {
	g.t.Helper()
	s := string(doc)
	at := 0
	if within != "" {
		if at = strings.Index(s, within); at < 0 {
			g.fatalf("no %q in the document", within)
		}
	}
	i := strings.Index(s[at:], old)
	if i < 0 {
		g.fatalf("no %q in the document after %q", old, within)
	}
	return []byte(s[:at+i] + new + s[at+i+len(old):])
}

func kvTime(d time.Duration) string { return keysetjson.FormatTime(kvNow.Add(d)) }

func kvID(id uint32) string { return `"id": "` + keyring.FormatID(id) + `"` }

// kvCompactReordered writes doc without insignificant whitespace, its
// members in another order.
func (g *kvGen) compactReordered(doc []byte) []byte {
	g.t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		g.fatalf("%v", err)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, name := range []string{"auth", "retired_keys", "keys", "policy", "history", "expires", "kek", "version", "id", "format"} {
		raw, ok := m[name]
		if !ok {
			continue
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:", name)
		if err := json.Compact(&b, raw); err != nil {
			g.fatalf("%v", err)
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

// The keys of the fleet keyset: one of each state, in an order that is
// not the order of their ids.
const (
	kvRetired     = 0x3f1c9a02 // aead, retired
	kvDecryptOnly = 0xb7e4d110 // mac, decrypt-only
	kvPrimary     = 0x8d88a244 // aead, active: the primary
	kvPending     = 0x1a2b3c4d // mac, active, activates 5 minutes after now
	kvSingle      = 0x5e1f0c3a // the one key of the single keysets
	kvNext        = 0xc4e0f9d7 // added by the fleet keyset's next version
	kvPruned      = 0x0c0ffee5 // retired and pruned before the fleet keyset's version 7
)

func writeKeysetVectors(t *testing.T) {
	g := &kvGen{t: t}
	def := keyring.DefaultPolicy()
	noWindow := def
	noWindow.Freshness = 0
	cfg := kvConfigAt(kvNow)
	cfgBoth := kvConfigAt(kvNow, kvMainKEK, kvPrevious)
	withCfg := func(c kvConfig, edit func(*kvConfig)) kvConfig {
		c.KEKs = slices.Clone(c.KEKs)
		edit(&c)
		return c
	}
	fleetKeys := []kvSpec{
		{kvRetired, keyring.AEAD, keyring.Retired, -90 * kvDay, -90*kvDay + 10*time.Minute, nil},
		{kvDecryptOnly, keyring.MAC, keyring.DecryptOnly, -60 * kvDay, -60*kvDay + 10*time.Minute, nil},
		{kvPrimary, keyring.AEAD, keyring.Active, -30 * kvDay, -30*kvDay + 10*time.Minute, nil},
		{kvPending, keyring.MAC, keyring.Active, -5 * time.Minute, 5 * time.Minute, nil},
	}
	single := kvSpec{kvSingle, keyring.AEAD, keyring.Active, -2 * time.Hour, -2 * time.Hour, nil}

	// Keysets that load.
	fleet := g.keyset("fleet", 7, kvMainKEK, def, -kvDay, fleetKeys...)
	fleet.ks.RetiredKeys = []uint32{kvPruned}
	g.authenticate(fleet, "auth fleet")
	g.ok("valid-rotation", "a keyset mid-rotation: a retired AEAD key (never unwrapped), a decrypt-only MAC key, the primary AEAD key and a MAC key that activates in 5 minutes; keys listed out of id order; a pruned key in retired_keys beside the retired one; freshness window on",
		fleet, cfg)
	s := g.keyset("single", 1, kvMainKEK, def, -time.Hour, single)
	g.ok("valid-single-aead", "one AEAD key, the default policy, written an hour ago: expires in 7 days less an hour", s, cfg)
	mac := g.keyset("mac no window", 3, kvMainKEK, noWindow, -time.Hour, kvSpec{0x9c0ffee1, keyring.MAC, keyring.Active, -time.Hour, -time.Hour, nil})
	g.ok("valid-no-freshness", "one MAC key, freshness 0: no expires member; the tag carries 0 for both the window and the expiry", mac, cfg)
	next := fleet.clone()
	next.ks.Follow(fleet.ks)
	g.addKey(next, kvSpec{kvNext, keyring.AEAD, keyring.Active, -time.Hour, 9 * time.Minute, nil})
	next.ks.Refresh(kvNow.Add(-time.Hour))
	g.authenticate(next, "auth fleet 8")
	g.ok("valid-next-version", "the fleet keyset's next version: a key added; the wrapped keys it kept are the same bytes", next, cfg)
	tie := g.keyset("tie", 2, kvMainKEK, def, -time.Hour,
		kvSpec{0xf0000001, keyring.MAC, keyring.Active, -2 * time.Hour, -time.Hour, nil},
		kvSpec{0x10000001, keyring.MAC, keyring.Active, -2 * time.Hour, -time.Hour, nil},
		kvSpec{0x80000001, keyring.MAC, keyring.Active, -2 * time.Hour, -time.Hour, nil})
	g.ok("valid-tie-last-listed", "three active keys activated in the same second: the one listed last seals, not the highest or lowest id", tie, cfg)
	atNow := g.keyset("at now", 2, kvMainKEK, def, -time.Hour,
		kvSpec{0xa1000001, keyring.AEAD, keyring.Active, -kvDay, -kvDay, nil},
		kvSpec{0xa1000002, keyring.AEAD, keyring.Active, -time.Hour, 0, nil})
	g.ok("valid-activation-at-now", "a key whose activation is exactly now is the primary: activation <= now", atNow, cfg)
	newerDO := g.keyset("decrypt-only newer", 4, kvMainKEK, def, -time.Hour,
		kvSpec{0xd0000001, keyring.AEAD, keyring.Active, -kvDay, -kvDay, nil},
		kvSpec{0xd0000002, keyring.MAC, keyring.DecryptOnly, -time.Hour, -time.Hour, nil})
	g.ok("valid-decrypt-only-newer", "a decrypt-only key with a later activation than the active key never seals", newerDO, cfg)
	garbage := fleet.clone()
	garbage.key(kvRetired).Wrapped = append([]byte{1}, kvDerive("garbage retired", 72)...)
	g.authenticate(garbage, "auth fleet garbage retired")
	g.ok("valid-retired-key-garbage", "the retired key's wrapped bytes do not unwrap, and are authenticated: a loader never unwraps a retired key, so the keyset loads", garbage, cfg)
	g.ok("valid-last-fresh-millisecond", "now is 1 ms before expires: fresh", s, kvConfig{KEKs: []string{kvMainKEK}, NowMillis: s.ks.Expires.UnixMilli() - 1})
	prev := g.keyset("previous", 4, kvPrevious, def, -time.Hour, kvSpec{0x0b5e7a11, keyring.AEAD, keyring.Active, -time.Hour, -time.Hour, nil})
	g.ok("valid-previous-kek", "a keyset under the KEK configured as the previous one (a rewrap in progress) loads", prev, cfgBoth)
	v5 := g.keyset("version five", 5, kvMainKEK, def, -time.Hour, kvSpec{0x55555555, keyring.AEAD, keyring.Active, -time.Hour, -time.Hour, nil})
	g.ok("valid-at-min-version", "version equal to the configured minimum loads", v5, withCfg(cfg, func(c *kvConfig) { c.MinVersion = 5 }))
	g.ok("valid-pinned-id", "the configured keyset id is the document's", s, withCfg(cfg, func(c *kvConfig) { c.KeysetID = s.ks.ID }))
	maxPolicy := keyring.Policy{PropagationDelay: kvDay, MaxTTL: (1<<24 - 1) * time.Second, Skew: 10 * time.Minute,
		RotationInterval: 9223372036 * time.Second, Freshness: keyring.MaxFreshness}
	g.ok("valid-policy-maximums", "every policy value at its upper bound: max TTL 2^24-1 s, skew 600 s, freshness 366 days, rotation interval 9223372036 s (its nanoseconds fit an int64)",
		g.keyset("policy maximums", 2, kvMainKEK, maxPolicy, -time.Hour, single), cfg)
	minPolicy := keyring.Policy{MaxTTL: time.Second, RotationInterval: time.Second, Freshness: keyring.MinFreshness}
	g.ok("valid-policy-minimums", "every policy value at its lower bound: propagation 0, max TTL 1 s, skew 0 (written -0), rotation 1 s, freshness 1 hour",
		g.keyset("policy minimums", 2, kvMainKEK, minPolicy, -30*time.Minute, single), cfg,
		func(d []byte) []byte { return g.edit(d, "", `"skew_seconds": 0`, `"skew_seconds": -0`) })
	absent := g.keyset("absent members", 2, kvMainKEK, keyring.Policy{MaxTTL: time.Hour, Skew: 30 * time.Second}, -time.Hour, single)
	g.ok("valid-null-and-absent-members", "propagation_delay_seconds, rotation_interval_seconds and freshness_seconds absent, expires null: each reads as its zero value, as it enters the tag", absent, cfg,
		func(d []byte) []byte { return g.edit(d, "", `"propagation_delay_seconds": 0,`+"\n    ", ``) },
		func(d []byte) []byte {
			return g.edit(d, "", `"skew_seconds": 30,`+"\n    "+`"rotation_interval_seconds": 0,`+"\n    "+`"freshness_seconds": 0`, `"skew_seconds": 30`)
		},
		func(d []byte) []byte { return g.edit(d, "", `"policy"`, `"expires": null,`+"\n  "+`"policy"`) })
	g.ok("valid-escaped-strings", "strings and member names written with JSON escapes (\\u002d, \\u0061, \\u002e) are their unescaped values", s, cfg,
		func(d []byte) []byte { return g.edit(d, "", `"stateseal-keyset-v4"`, `"stateseal\u002dkeyset-v4"`) },
		func(d []byte) []byte { return g.edit(d, "", `"state": "active"`, `"st\u0061te": "\u0061ctive"`) },
		func(d []byte) []byte { return g.edit(d, "", `"local:stateseal.kek"`, `"local:stateseal\u002ekek"`) })
	g.ok("valid-compact-reordered", "no insignificant whitespace, members in another order: neither matters", s, cfg, g.compactReordered)
	uni := g.keyset("unicode", 1, kvMainKEK, def, -time.Hour, single)
	uni.ks.ID = "ks-café-☕"
	uni.ks.Keys = nil
	g.addKey(uni, single)
	uni.ks.Refresh(kvNow.Add(-time.Hour))
	g.authenticate(uni, "auth unicode")
	g.ok("valid-non-ascii-id", "a keyset id with non-ASCII characters: its field length counts UTF-8 bytes (12), not characters (9)", uni, cfg)
	short := s.clone()
	g.authenticateWith(short, kvDerive("short authentication key", 16))
	g.ok("valid-auth-key-16-bytes", "the authentication key unwraps to 16 bytes: HMAC takes any key, and a reader does not check its length (writers use 32)", short, cfg)
	maxVersion := g.keyset("max version", 1<<64-1, kvMainKEK, def, -time.Hour, single)
	g.ok("valid-version-max", "version 2^64-1: a u64 in the tag, beyond a double's exact integers", maxVersion, cfg)

	// Loading after another document.
	after := func(names ...string) kvConfig { return withCfg(cfg, func(c *kvConfig) { c.After = names }) }
	g.ok("reload-same-document", "the same loader reads the same document again", fleet, after("valid-rotation"))
	g.ok("reload-next-version", "the same loader reads the next version", next, after("valid-rotation"))
	g.refuse("rollback-running", "rollback", "a loader that installed version 8 reads version 7, authentic and fresh", g.doc(fleet), after("valid-next-version"))
	forked := fleet.clone()
	forked.key(kvPending).Activation = kvNow.Add(-time.Minute)
	g.authenticate(forked, "auth fleet fork")
	g.refuse("fork", "fork", "a loader that installed version 7 reads another authentic version 7 (a second writer moved a key's activation)", g.doc(forked), after("valid-rotation"))
	g.okAfter("fork-reformatted", "the installed version 7 written again without whitespace and with its members reordered: the same content, other bytes; a fork is judged on the content, so this is the version installed", g.compactReordered(g.doc(fleet)), after("valid-rotation"))
	tamperedSkew := fleet.clone()
	tamperedSkew.ks.Policy.Skew = 10 * time.Minute
	fd7 := string(g.doc(fleet))
	ti := strings.Index(fd7, `"auth"`)
	ti += strings.Index(fd7[ti:], `"tag": "`) + len(`"tag": "`)
	flip := byte('A')
	if fd7[ti] == 'A' {
		flip = 'B'
	}
	g.refuse("fork-tampered-tag", "unauthenticated", "the installed version 7 with one character of its tag changed: not authentic, so not a fork, however its bytes or tag differ",
		[]byte(fd7[:ti]+string(flip)+fd7[ti+1:]), after("valid-rotation"))
	g.refuse("fork-tampered", "unauthenticated", "the installed version 7 with its skew changed and no new tag: a document that does not authenticate is never a fork", g.doc(tamperedSkew), after("valid-rotation"))
	v9 := next.clone()
	v9.ks.Follow(next.ks)
	v9.ks.Refresh(kvNow.Add(-30 * time.Minute))
	g.authenticate(v9, "auth fleet 9")
	g.ok("reload-two-versions-later", "a loader that installed version 7 reads version 9, whose history links to version 8 and to version 7 as installed", v9, after("valid-rotation"))
	fork8 := forked.clone()
	fork8.ks.Follow(forked.ks)
	g.authenticate(fork8, "auth fleet fork 8")
	g.refuse("fork-higher-version", "fork", "a loader that installed version 7 reads version 8 edited from another version 7: authentic, higher, and its link to version 7 names another tag", g.doc(fork8), after("valid-rotation"))
	short9 := v9.clone()
	short9.ks.History = short9.ks.History[:1]
	g.authenticate(short9, "auth fleet 9 short history")
	g.refuse("fork-beyond-history", "fork", "a loader that installed version 7 reads version 9 whose history names version 8 alone: it cannot tell that it descends from version 7", g.doc(short9), after("valid-rotation"))
	revived := fleet.clone()
	revived.ks.Follow(fleet.ks)
	revived.key(kvRetired).State = keyring.DecryptOnly
	revived.ks.RetiredKeys = []uint32{kvPruned}
	g.authenticate(revived, "auth fleet revived")
	g.refuse("retired-key-revived", "rollback", "a loader that installed version 7 reads version 8, descending from it, authentic, in which the key retired in version 7 is decrypt-only again (written by someone holding the KEK)", g.doc(revived), after("valid-rotation"))
	g.refuse("other-keyset-after-first", "other_keyset", "a loader that installed the fleet keyset reads another keyset, authentic under the same KEK: the first id loaded is pinned", g.doc(s), after("valid-rotation"))

	// Documents that do not parse or validate.
	sd := g.doc(s)
	fd := g.doc(fleet)
	nd := g.doc(mac)
	malformed := func(name, comment string, doc []byte) { g.t.Helper(); g.refuse(name, "malformed", comment, doc, cfg) }
	malformed("format-v3", "format stateseal-keyset-v3: read only by an upgrade, never loaded", g.edit(sd, "", "stateseal-keyset-v4", "stateseal-keyset-v3"))
	malformed("format-v2", "format stateseal-keyset-v2: read only by an upgrade, never loaded", g.edit(sd, "", "stateseal-keyset-v4", "stateseal-keyset-v2"))
	malformed("format-v1", "format stateseal-keyset-v1", g.edit(sd, "", "stateseal-keyset-v4", "stateseal-keyset-v1"))
	malformed("format-future", "format stateseal-keyset-v5", g.edit(sd, "", "stateseal-keyset-v4", "stateseal-keyset-v5"))
	malformed("format-absent", "no format member", g.edit(sd, "", `"format": "stateseal-keyset-v4",`, ""))
	malformed("unknown-member", "an unknown top-level member", g.edit(sd, "", `"version"`, `"comment": "x",`+"\n  "+`"version"`))
	malformed("unknown-member-in-policy", "an unknown member in policy", g.edit(sd, "", `"max_ttl_seconds"`, `"max_ttl": 3600,`+"\n    "+`"max_ttl_seconds"`))
	malformed("unknown-member-in-key", "an unknown member in a key", g.edit(sd, "", `"state"`, `"label": "primary",`+"\n      "+`"state"`))
	malformed("auth-wrapped-too-long", "auth.wrapped decodes to over 2048 bytes (2,049 more than the real one), over the bound on wrapped bytes", g.edit(sd, `"auth"`, `"wrapped": "`, `"wrapped": "`+strings.Repeat("A", 2732)))
	malformed("unknown-member-in-auth", "an unknown member in auth", g.edit(sd, "", `"tag"`, `"alg": "HS256",`+"\n    "+`"tag"`))
	malformed("duplicate-member", "kek given twice: a reader keeping the last would see local:other.kek", g.edit(sd, "", `"policy"`, `"kek": "local:other.kek",`+"\n  "+`"policy"`))
	malformed("duplicate-member-in-key", "the pending key's activation given twice, the second a minute ago: a reader keeping the last would let it seal now",
		g.edit(fd, kvID(kvPending), `"activation": "`+kvTime(5*time.Minute)+`",`, `"activation": "`+kvTime(5*time.Minute)+`",`+"\n      "+`"activation": "`+kvTime(-time.Minute)+`",`))
	malformed("case-variant-member", `the pending key's activation, and then "Activation" a minute ago: names match exactly, so "Activation" is unknown (encoding/json would match it to activation and keep the last)`,
		g.edit(fd, kvID(kvPending), `"activation": "`+kvTime(5*time.Minute)+`",`, `"activation": "`+kvTime(5*time.Minute)+`",`+"\n      "+`"Activation": "`+kvTime(-time.Minute)+`",`))
	malformed("trailing-data", "a second object after the document", append(slices.Clone(sd), "{}"...))
	malformed("not-an-object", "the document inside an array", append(append([]byte("["), sd...), ']'))
	malformed("byte-order-mark", "a UTF-8 byte-order mark before the object", append([]byte("\ufeff"), sd...))
	malformed("invalid-utf8", "a byte 0xff inside the keyset id", g.edit(sd, "", `"id": "ks-`, "\"id\": \"ks-\xff"))
	malformed("lone-surrogate", `an escaped lone surrogate \ud800 inside the keyset id`, g.edit(sd, "", `"id": "ks-`, `"id": "ks-\ud800`))
	malformed("version-zero", "version 0", g.edit(sd, "", `"version": 1,`, `"version": 0,`))
	malformed("version-absent", "no version member: version 0", g.edit(sd, "", `"version": 1,`, ``))
	malformed("version-negative", "version -1", g.edit(sd, "", `"version": 1,`, `"version": -1,`))
	malformed("version-fraction", "version 1.0: integers have no fraction", g.edit(sd, "", `"version": 1,`, `"version": 1.0,`))
	malformed("version-exponent", "version 1e0: integers have no exponent", g.edit(sd, "", `"version": 1,`, `"version": 1e0,`))
	malformed("version-string", `version "1"`, g.edit(sd, "", `"version": 1,`, `"version": "1",`))
	malformed("version-over-64-bits", "version 2^64, its link to 2^64-2 otherwise valid: only the version's bound is broken", g.edit(g.doc(maxVersion), "", `"version": 18446744073709551615,`, `"version": 18446744073709551616,`))
	malformed("id-empty", "an empty keyset id", g.edit(sd, "", `"id": "ks-`+hex.EncodeToString(kvDerive("keyset id single", 8))+`"`, `"id": ""`))
	malformed("kek-empty", "an empty kek", g.edit(sd, "", `"kek": "local:stateseal.kek"`, `"kek": ""`))
	keysAt, authAt := bytes.Index(sd, []byte(`"keys": [`)), bytes.Index(sd, []byte(`"auth": {`))
	malformed("no-keys", "an empty keys array", slices.Concat(sd[:keysAt], []byte(`"keys": [],`+"\n  "), sd[authAt:]))
	malformed("no-active-key", "the only key decrypt-only", g.edit(sd, "", `"state": "active"`, `"state": "decrypt-only"`))
	malformed("duplicate-key-ids", "the pending key renumbered to the primary's id", g.edit(fd, "", kvID(kvPending), kvID(kvPrimary)))
	malformed("key-id-zero", "key id 00000000", g.edit(sd, "", kvID(kvSingle), `"id": "00000000"`))
	malformed("key-id-upper-case", "key id in upper-case hex", g.edit(sd, "", kvID(kvSingle), `"id": "`+strings.ToUpper(keyring.FormatID(kvSingle))+`"`))
	malformed("key-id-seven-digits", "key id of 7 hex digits", g.edit(sd, "", kvID(kvSingle), `"id": "`+keyring.FormatID(kvSingle)[1:]+`"`))
	malformed("algorithm-unknown", "algorithm hmac", g.edit(sd, "", `"algorithm": "aead"`, `"algorithm": "hmac"`))
	malformed("algorithm-upper-case", "algorithm AEAD", g.edit(sd, "", `"algorithm": "aead"`, `"algorithm": "AEAD"`))
	malformed("state-unknown", "state revoked", g.edit(sd, "", `"state": "active"`, `"state": "revoked"`))
	malformed("state-underscore", "state decrypt_only", g.edit(fd, "", `"state": "decrypt-only"`, `"state": "decrypt_only"`))
	created := `"created": "` + kvTime(-2*time.Hour)
	malformed("created-with-fraction", "created with a zero fraction, .000", g.edit(sd, "", created+`"`, created[:len(created)-1]+`.000Z"`))
	malformed("created-with-offset", "created with the offset +00:00 instead of Z", g.edit(sd, "", created+`"`, created[:len(created)-1]+`+00:00"`))
	malformed("created-lower-case-z", "created ending in z", g.edit(sd, "", created+`"`, created[:len(created)-1]+`z"`))
	malformed("created-space-separator", "a space instead of T", g.edit(sd, "", created, strings.Replace(created, "T", " ", 1)))
	malformed("created-before-1970", "created 1969-12-31T23:59:59Z: times are from 1970 on", g.edit(sd, "", created, `"created": "1969-12-31T23:59:59Z`))
	malformed("created-invalid-date", "created on February 30", g.edit(sd, "", created, `"created": "2026-02-30T10:00:00Z`))
	malformed("created-leap-second", "created at 23:59:60", g.edit(sd, "", created, `"created": "2026-06-30T23:59:60Z`))
	malformed("activation-before-created", "activation a second before created", g.edit(sd, "", `"activation": "`+kvTime(-2*time.Hour), `"activation": "`+kvTime(-2*time.Hour-time.Second)))
	malformed("expires-without-freshness", "an expires member with freshness 0", g.edit(nd, "", `"policy"`, `"expires": "`+kvTime(kvDay)+`",`+"\n  "+`"policy"`))
	malformed("freshness-without-expires", "freshness 604800 and no expires", g.edit(sd, "", `"expires": "`+keysetjson.FormatTime(s.ks.Expires)+`",`, ""))
	malformed("expires-empty", `freshness 604800 and "expires": "": an empty string is no expiry`, g.edit(sd, "", `"expires": "`+keysetjson.FormatTime(s.ks.Expires)+`"`, `"expires": ""`))
	malformed("expires-with-fraction", "expires with a fraction", g.edit(sd, "", `"expires": "`+keysetjson.FormatTime(s.ks.Expires)[:19], `"expires": "`+keysetjson.FormatTime(s.ks.Expires)[:19]+".5"))
	policy := func(name, comment, old, new string) { g.t.Helper(); malformed(name, comment, g.edit(sd, "", old, new)) }
	policy("max-ttl-zero", "max_ttl_seconds 0", `"max_ttl_seconds": 3600`, `"max_ttl_seconds": 0`)
	policy("max-ttl-absent", "no max_ttl_seconds: 0", `"max_ttl_seconds": 3600,`, ``)
	policy("max-ttl-over-cap", "max_ttl_seconds 2^24", `"max_ttl_seconds": 3600`, `"max_ttl_seconds": 16777216`)
	policy("skew-over-cap", "skew_seconds 601", `"skew_seconds": 30`, `"skew_seconds": 601`)
	policy("skew-negative", "skew_seconds -1", `"skew_seconds": 30`, `"skew_seconds": -1`)
	policy("propagation-negative", "propagation_delay_seconds -1", `"propagation_delay_seconds": 600`, `"propagation_delay_seconds": -1`)
	policy("rotation-equals-propagation", "rotation_interval_seconds equal to propagation_delay_seconds (600)", `"rotation_interval_seconds": 2592000`, `"rotation_interval_seconds": 600`)
	policy("rotation-negative", "rotation_interval_seconds -1", `"rotation_interval_seconds": 2592000`, `"rotation_interval_seconds": -1`)
	policy("freshness-under-an-hour", "freshness_seconds 3599", `"freshness_seconds": 604800`, `"freshness_seconds": 3599`)
	policy("freshness-over-366-days", "freshness_seconds 31622401", `"freshness_seconds": 604800`, `"freshness_seconds": 31622401`)
	policy("policy-fraction", "skew_seconds 30.0", `"skew_seconds": 30`, `"skew_seconds": 30.0`)
	policy("policy-exponent", "skew_seconds 3e1", `"skew_seconds": 30`, `"skew_seconds": 3e1`)
	policy("policy-string", `skew_seconds "30"`, `"skew_seconds": 30`, `"skew_seconds": "30"`)
	malformed("propagation-overflow", "propagation_delay_seconds 9223372037: its nanoseconds overflow an int64 (rotation 0, so that nothing else is wrong)",
		g.edit(g.edit(sd, "", `"propagation_delay_seconds": 600`, `"propagation_delay_seconds": 9223372037`), "", `"rotation_interval_seconds": 2592000`, `"rotation_interval_seconds": 0`))
	kw := base64.RawURLEncoding.EncodeToString(s.key(kvSingle).Wrapped)
	malformed("wrapped-padded", "a wrapped key with its base64 padding", g.edit(sd, "", kw, kw+"=="))
	malformed("wrapped-empty", "an empty wrapped key", g.edit(sd, "", kw, ""))
	malformed("wrapped-line-break", `a wrapped key with an escaped line break (\n) inside`, g.edit(sd, "", kw, kw[:40]+`\n`+kw[40:]))
	last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", kw[len(kw)-1])
	malformed("wrapped-noncanonical", "a wrapped key whose last character has a non-zero unused bit", g.edit(sd, "", kw, kw[:len(kw)-1]+string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last|1])))
	std := ""
	for _, f := range []string{kw, base64.RawURLEncoding.EncodeToString(s.ks.Auth.Wrapped), base64.RawURLEncoding.EncodeToString(s.ks.Auth.Tag)} {
		if strings.ContainsAny(f, "-_") {
			std = f
			break
		}
	}
	if std == "" {
		g.fatalf("no '-' or '_' in the single keyset's base64")
	}
	malformed("wrapped-standard-alphabet", "a base64url value written with the standard alphabet's + and /", g.edit(sd, "", std, strings.NewReplacer("-", "+", "_", "/").Replace(std)))
	tag := base64.RawURLEncoding.EncodeToString(s.ks.Auth.Tag)
	malformed("tag-31-bytes", "an authentication tag of 31 bytes", g.edit(sd, "", tag, base64.RawURLEncoding.EncodeToString(s.ks.Auth.Tag[:31])))
	htag := keysetjson.FormatWrapped(kvDerive("previous tag fleet", 32))
	malformed("history-absent", "version 7 with no history", g.raw(fleet, func(d *keysetjson.Doc) { d.History = nil }))
	malformed("history-on-version-1", "version 1 with a history link to version 0", g.raw(s, func(d *keysetjson.Doc) { d.History = []keysetjson.Link{{Version: 0, Tag: htag}} }))
	malformed("history-not-below", "version 7 linking to version 7", g.raw(fleet, func(d *keysetjson.Doc) { d.History[0].Version = 7 }))
	malformed("history-not-descending", "links to versions 5 then 6: newest first", g.raw(fleet, func(d *keysetjson.Doc) {
		d.History = []keysetjson.Link{{Version: 5, Tag: htag}, {Version: 6, Tag: htag}}
	}))
	malformed("history-tag-31-bytes", "a history tag of 31 bytes", g.raw(fleet, func(d *keysetjson.Doc) { d.History[0].Tag = keysetjson.FormatWrapped(kvDerive("x", 31)) }))
	malformed("history-over-32", "33 links", g.raw(maxVersion, func(d *keysetjson.Doc) {
		d.History = nil
		for i := range 33 {
			d.History = append(d.History, keysetjson.Link{Version: 1<<64 - 2 - uint64(i), Tag: htag})
		}
	}))
	malformed("history-unknown-member", "a link with an unknown member", g.edit(fd, `"history"`, `"version": 6`, `"version": 6,`+"\n      "+`"at": 1`))
	malformed("retired-keys-unsorted", "retired_keys out of ascending order", g.raw(fleet, func(d *keysetjson.Doc) { slices.Reverse(d.RetiredKeys) }))
	malformed("retired-keys-duplicate", "an id twice in retired_keys", g.raw(fleet, func(d *keysetjson.Doc) { d.RetiredKeys = append(d.RetiredKeys, d.RetiredKeys[1]) }))
	malformed("retired-keys-zero", "00000000 in retired_keys", g.raw(fleet, func(d *keysetjson.Doc) { d.RetiredKeys = append([]string{"00000000"}, d.RetiredKeys...) }))
	malformed("retired-keys-upper-case", "an id in upper-case hex in retired_keys", g.raw(fleet, func(d *keysetjson.Doc) { d.RetiredKeys[1] = strings.ToUpper(d.RetiredKeys[1]) }))
	malformed("retired-keys-lists-active", "retired_keys lists the primary, which is active", g.raw(fleet, func(d *keysetjson.Doc) {
		d.RetiredKeys = []string{keyring.FormatID(kvPruned), keyring.FormatID(kvRetired), keyring.FormatID(kvPrimary)}
	}))
	malformed("retired-state-unlisted", "the retired key is not in retired_keys", g.raw(fleet, func(d *keysetjson.Doc) { d.RetiredKeys = d.RetiredKeys[:1] }))
	malformed("auth-wrapped-empty", "an empty auth.wrapped", g.edit(sd, "", base64.RawURLEncoding.EncodeToString(s.ks.Auth.Wrapped), ""))

	// Refused by the configuration, before any KMS call.
	other := g.keyset("other", 3, kvOther, def, -time.Hour, kvSpec{0x07e4c0de, keyring.AEAD, keyring.Active, -time.Hour, -time.Hour, nil})
	g.refuse("untrusted-kek", "untrusted_kek", "an authentic keyset under another local KEK, which it names: the configuration does not name it", g.doc(other), cfg)
	aws := "awskms://alias/stateseal?region=eu-west-1"
	named := func(label, kek string, written time.Duration) []byte {
		b := g.keyset(label, 2, kek, def, written, single)
		return g.doc(b)
	}
	g.refuse("kek-identity-with-endpoint", "untrusted_kek", "the document names the configured AWS KMS key with an endpoint of its own: an identity carries no transport settings, so it is another KEK",
		named("aws endpoint", "awskms://alias/stateseal?endpoint=https://kms.attacker.example&region=eu-west-1", -time.Hour), kvConfigAt(kvNow, aws))
	g.refuse("kek-local-with-query", "untrusted_kek", "the document names the configured local KEK with a query appended",
		named("local query", "local:stateseal.kek?endpoint=https://kms.attacker.example", -time.Hour), cfg)
	g.refuse("kek-other-transit-key", "untrusted_kek", "the document names another Vault transit key",
		named("transit", "vault://transit/keys/attacker", -time.Hour), kvConfigAt(kvNow, "vault://transit/keys/stateseal"))
	g.refuse("config-kek-with-endpoint", "stale", "the configuration's URL has an endpoint, the document names its identity: trusted; and expired, so nothing is unwrapped",
		named("aws identity", aws, -8*kvDay), kvConfigAt(kvNow, "awskms://alias/stateseal?endpoint=http://127.0.0.1:4599&region=eu-west-1"))
	gcp := "gcpkms://projects/p/locations/global/keyRings/r/cryptoKeys/stateseal"
	g.refuse("config-kek-insecure-endpoint", "stale", "the configuration's Cloud KMS URL has endpoint and insecure, the document names the key alone: trusted; and expired",
		named("gcp identity", gcp, -8*kvDay), kvConfigAt(kvNow, gcp+"?endpoint=127.0.0.1:8443&insecure=1"))
	g.refuse("other-keyset-pinned", "other_keyset", "an authentic keyset whose id is not the configured one", sd, withCfg(cfg, func(c *kvConfig) { c.KeysetID = fleet.ks.ID }))
	g.refuse("below-min-version", "rollback", "version 1, below the configured minimum 2", sd, withCfg(cfg, func(c *kvConfig) { c.MinVersion = 2 }))
	g.refuse("expires-beyond-window", "stale", "expires further ahead than the window plus the skew from now (a day more): written by a clock running ahead", sd,
		kvConfig{KEKs: []string{kvMainKEK}, NowMillis: s.ks.Expires.Add(-s.ks.Policy.Freshness - s.ks.Policy.Skew - 24*time.Hour).UnixMilli()})
	g.refuse("expired-at-now", "stale", "now is exactly expires: expired", sd, kvConfig{KEKs: []string{kvMainKEK}, NowMillis: s.ks.Expires.UnixMilli()})
	old := g.keyset("single", 1, kvMainKEK, def, -8*kvDay, single)
	od := g.doc(old)
	g.refuse("expired", "stale", "written 8 days ago with a 7-day window", od, cfg)
	g.refuse("expired-and-tampered", "stale", "expired, and its skew changed without the KEK: the expiry is judged before the authentication", g.edit(od, "", `"skew_seconds": 30`, `"skew_seconds": 31`), cfg)
	otherOld := g.keyset("other", 3, kvOther, def, -8*kvDay, kvSpec{0x07e4c0de, keyring.AEAD, keyring.Active, -time.Hour, -time.Hour, nil})
	g.refuse("untrusted-and-expired", "untrusted_kek", "an untrusted KEK and expired: the KEK is judged first", g.doc(otherOld), cfg)
	g.refuse("untrusted-and-other-keyset", "untrusted_kek", "an untrusted KEK and another keyset id than the configured one: the KEK is judged first", g.doc(other), withCfg(cfg, func(c *kvConfig) { c.KeysetID = fleet.ks.ID }))
	g.refuse("other-keyset-and-expired", "other_keyset", "another keyset id than the configured one, and expired: the id is judged first", od, withCfg(cfg, func(c *kvConfig) { c.KeysetID = fleet.ks.ID }))
	g.refuse("other-keyset-below-min-version", "other_keyset", "another keyset id than the configured one, and below the minimum version: the id is judged first", sd,
		withCfg(cfg, func(c *kvConfig) { c.KeysetID = fleet.ks.ID; c.MinVersion = 2 }))
	g.refuse("below-min-version-and-expired", "rollback", "below the minimum version and expired: the version is judged first", od, withCfg(cfg, func(c *kvConfig) { c.MinVersion = 2 }))

	// Changed without the KEK: the authentication fails.
	unauth := func(name, comment string, b *kvBuild) {
		g.t.Helper()
		g.refuse(name, "unauthenticated", comment, g.doc(b), cfg)
	}
	tamper := func(edit func(*kvBuild)) *kvBuild { b := fleet.clone(); edit(b); return b }
	fid := []byte(fleet.ks.ID)
	fid[len(fid)-1] ^= 1
	unauth("tampered-id", "the keyset id changed: the authentication key does not unwrap (its associated data names the id)", tamper(func(b *kvBuild) { b.ks.ID = string(fid) }))
	unauth("tampered-version", "version 7 changed to 8", tamper(func(b *kvBuild) { b.ks.Version = 8 }))
	g.refuse("tampered-kek", "unauthenticated", "kek changed to the other configured KEK: the authentication key does not unwrap under it",
		g.doc(tamper(func(b *kvBuild) { b.ks.KEK = kvPrevious })), cfgBoth)
	unauth("tampered-expires", "expires a day later", tamper(func(b *kvBuild) { b.ks.Expires = b.ks.Expires.Add(kvDay) }))
	unauth("tampered-propagation-delay", "propagation delay 600 s changed to 60 s", tamper(func(b *kvBuild) { b.ks.Policy.PropagationDelay = time.Minute }))
	unauth("tampered-max-ttl", "max TTL 3600 s changed to 86400 s", tamper(func(b *kvBuild) { b.ks.Policy.MaxTTL = kvDay }))
	unauth("tampered-skew", "skew 30 s changed to 600 s", tamper(func(b *kvBuild) { b.ks.Policy.Skew = 10 * time.Minute }))
	unauth("tampered-rotation-interval", "rotation interval changed to 0", tamper(func(b *kvBuild) { b.ks.Policy.RotationInterval = 0 }))
	unauth("tampered-freshness", "freshness 7 days changed to 30 days", tamper(func(b *kvBuild) { b.ks.Policy.Freshness = 30 * kvDay }))
	unauth("tampered-algorithm", "the primary's algorithm aead changed to mac", tamper(func(b *kvBuild) { b.key(kvPrimary).Algorithm = keyring.MAC }))
	unauth("tampered-state-revived", "the retired key changed to decrypt-only, and left out of retired_keys", tamper(func(b *kvBuild) {
		b.key(kvRetired).State = keyring.DecryptOnly
		b.ks.RetiredKeys = []uint32{kvPruned}
	}))
	unauth("tampered-history", "the history's link to version 6 names another tag", tamper(func(b *kvBuild) { b.ks.History = []Link{{6, kvDerive("another tag", 32)}} }))
	unauth("tampered-retired-keys", "the pruned key left out of retired_keys", tamper(func(b *kvBuild) { b.ks.RetiredKeys = []uint32{kvRetired} }))
	unauth("tampered-state-promoted", "the decrypt-only key changed to active", tamper(func(b *kvBuild) { b.key(kvDecryptOnly).State = keyring.Active }))
	unauth("tampered-created", "the primary's created a second earlier", tamper(func(b *kvBuild) { k := b.key(kvPrimary); k.Created = k.Created.Add(-time.Second) }))
	unauth("tampered-activation", "the pending key's activation moved before now: it would seal early", tamper(func(b *kvBuild) { b.key(kvPending).Activation = kvNow.Add(-time.Minute) }))
	unauth("tampered-key-id", "the primary renumbered", tamper(func(b *kvBuild) { b.key(kvPrimary).ID = 0x8d88a245 }))
	unauth("tampered-wrapped-swapped", "the wrapped keys of the primary and the decrypt-only key swapped", tamper(func(b *kvBuild) {
		p, d := b.key(kvPrimary), b.key(kvDecryptOnly)
		p.Wrapped, d.Wrapped = d.Wrapped, p.Wrapped
	}))
	unauth("tampered-keys-reordered", "the primary and the pending key swap places in the list", tamper(func(b *kvBuild) { b.ks.Keys[2], b.ks.Keys[3] = b.ks.Keys[3], b.ks.Keys[2] }))
	unauth("tampered-key-removed", "the decrypt-only key removed", tamper(func(b *kvBuild) { b.ks.Keys = slices.Delete(b.ks.Keys, 1, 2) }))
	unauth("tampered-key-added", "the key of version 8 added to version 7, with its wrapped bytes", tamper(func(b *kvBuild) { b.ks.Keys = append(b.ks.Keys, *next.key(kvNext)) }))
	unauth("tampered-auth-wrapped", "auth.wrapped taken from version 8: its key unwraps, the tag does not match", tamper(func(b *kvBuild) { b.ks.Auth.Wrapped = next.ks.Auth.Wrapped }))
	unauth("tampered-tag", "one bit of the tag flipped", tamper(func(b *kvBuild) { b.ks.Auth.Tag = slices.Clone(b.ks.Auth.Tag); b.ks.Auth.Tag[0] ^= 1 }))
	wrong := g.keyset("single", 1, kvMainKEK, def, -time.Hour, single)
	wrong.wrapKEK = kvOther
	wrong.ks.Keys = nil
	g.addKey(wrong, single)
	g.authenticate(wrong, "auth wrong KEK value")
	unauth("wrong-kek-value", "authentic under another KEK value, but naming the configured local KEK", wrong)
	otherKS := g.keyset("single B", 1, kvMainKEK, def, -time.Hour, single)
	borrowed := s.clone()
	borrowed.ks.Auth.Wrapped = otherKS.ks.Auth.Wrapped
	borrowed.ks.Auth.Tag = borrowed.ks.tag(keysetjson.Format, otherKS.authKey)
	unauth("auth-key-for-other-keyset", "auth.wrapped is another keyset's (same KEK), and the tag is right under its key: the authentication key does not unwrap for this keyset id", borrowed)

	// Authentic, but a key does not unwrap.
	unwrap := func(name, comment string, b *kvBuild) {
		g.t.Helper()
		g.authenticate(b, "auth "+name)
		g.refuse(name, "unwrap", comment, g.doc(b), cfg)
	}
	reb := func(b *kvBuild, edit func(*kvBuild)) *kvBuild { c := b.clone(); edit(c); return c }
	unwrap("wrapped-keys-swapped", "the primary's and the decrypt-only key's wrapped bytes swapped, and the keyset authenticated again (by someone with the KEK): a wrapped key is bound to its key id", reb(fleet, func(b *kvBuild) {
		p, d := b.key(kvPrimary), b.key(kvDecryptOnly)
		p.Wrapped, d.Wrapped = d.Wrapped, p.Wrapped
	}))
	sameID := g.keyset("single B", 1, kvMainKEK, def, -time.Hour, kvSpec{kvSingle, keyring.AEAD, keyring.Active, -2 * time.Hour, -2 * time.Hour, kvDerive("another keyset's key", 32)})
	unwrap("wrapped-key-from-other-keyset", "the key's wrapped bytes taken from another keyset's key of the same id, authenticated again: a wrapped key is bound to its keyset id", reb(s, func(b *kvBuild) {
		b.key(kvSingle).Wrapped = sameID.key(kvSingle).Wrapped
	}))
	unwrap("wrapped-key-under-other-kek", "the key wrapped under another KEK value with the right associated data, authenticated again", reb(s, func(b *kvBuild) {
		b.key(kvSingle).Wrapped = testkit.Must(kvLocal{kvOther}.Wrap(ctx, b.material[kvSingle], wrapAD(b.ks.ID, kvSingle)))
	}))
	unwrap("data-key-16-bytes", "the key unwraps to 16 bytes: a data key is 32", reb(s, func(b *kvBuild) {
		b.key(kvSingle).Wrapped = testkit.Must(kvLocal{kvMainKEK}.Wrap(ctx, kvDerive("short data key", 16), wrapAD(b.ks.ID, kvSingle)))
	}))
	unwrap("data-key-format-v3-domain", `the key wrapped with "stateseal-keyset-v3" leading its associated data: data keys keep "stateseal-keyset-v2"`, reb(s, func(b *kvBuild) {
		b.key(kvSingle).Wrapped = testkit.Must(kvLocal{kvMainKEK}.Wrap(ctx, b.material[kvSingle], fmt.Appendf(nil, "stateseal-keyset-v3\x00%s\x00%08x", b.ks.ID, kvSingle)))
	}))
	unwrap("local-version-byte-2", "the wrapped key's first byte 0x02, the rest as wrapped: the local layout's version is 0x01", reb(s, func(b *kvBuild) {
		w := slices.Clone(b.key(kvSingle).Wrapped)
		w[0] = 2
		b.key(kvSingle).Wrapped = w
	}))
	unwrap("decrypt-only-key-does-not-unwrap", "the decrypt-only key's wrapped bytes do not unwrap (authenticated): decrypt-only keys are unwrapped, unlike retired ones", reb(fleet, func(b *kvBuild) {
		b.key(kvDecryptOnly).Wrapped = append([]byte{1}, kvDerive("garbage decrypt-only", 72)...)
	}))

	// Authentic, but no key can seal now.
	pending := g.keyset("pending", 2, kvMainKEK, def, -time.Hour, kvSpec{0x7e5d1a9b, keyring.AEAD, keyring.Active, -time.Hour, time.Minute, nil})
	g.refuse("pending-only", "no_primary", "the only active key activates a minute after now", g.doc(pending), cfg)
	pendingBad := pending.clone()
	g.addKey(pendingBad, kvSpec{0x7e5d1a9c, keyring.MAC, keyring.DecryptOnly, -kvDay, -kvDay, nil})
	pendingBad.key(0x7e5d1a9c).Wrapped = append([]byte{1}, kvDerive("garbage pending", 72)...)
	unwrap("pending-only-and-bad-key", "no key can seal now, and a decrypt-only key does not unwrap: keys are unwrapped before the primary is looked for", pendingBad)

	g.boundaryVectors(s, fleet, mac, next, single, cfg)
	g.lastReadings(s, fleet, next, single, cfg)
	g.readersVectors(s, single, cfg)

	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	keks := []kvKEK{}
	for _, u := range []string{kvMainKEK, kvPrevious, kvOther} {
		keks = append(keks, kvKEK{URL: u, Key: hex.EncodeToString(kvDerive("kek "+u, 32))})
	}
	if err := enc.Encode(kvFile{
		Format:   "stateseal keyset vectors v1",
		Note:     "KEK values, data keys, authentication keys and nonces are derived test values (SHA-256 of a label). Never use them for anything else. See docs/KEYSET-FORMAT.md.",
		KEKs:     keks,
		Vectors:  g.vs,
		KEKFiles: kekFileVectors(t),
	}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kvPath, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
