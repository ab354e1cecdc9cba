package keyset

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/keyring"
)

// lastReadings are the vectors of issue 37: readings of the text that no
// earlier vector decided. Kept apart from writeKeysetVectors and
// boundaryVectors, like them.
func (g *kvGen) lastReadings(s, fleet, next *kvBuild, single kvSpec, cfg kvConfig) {
	def := keyring.DefaultPolicy()
	sd, fd := g.doc(s), g.doc(fleet)
	malformed := func(name, comment string, doc []byte) { g.t.Helper(); g.refuse(name, "malformed", comment, doc, cfg) }
	after := func(names ...string) kvConfig {
		c := cfg
		c.KEKs = append([]string(nil), cfg.KEKs...)
		c.After = names
		return c
	}

	// null elements of history and retired_keys: refused, never skipped.
	malformed("history-null-element", "a null after the one link of history: an element is a link, and null is not one",
		g.edit(fd, `"history": [`, "}\n  ]", "},\n    null\n  ]"))
	malformed("retired-keys-null-element", "a null after the ids of retired_keys: an element is an id, and null is not one",
		g.edit(fd, `"retired_keys": [`, "\"\n  ]", "\",\n    null\n  ]"))

	// Versions a double cannot hold, with history; the most links.
	g.ok("valid-version-above-2-53", "version 2^53 + 1 with a link to 2^53: a double reads 2^53 + 1 as 2^53, which the tag does not cover",
		g.keyset("version 2^53+1", 1<<53+1, kvMainKEK, def, -time.Hour, single), cfg)
	full := g.keyset("history 32", 40, kvMainKEK, def, -time.Hour, single)
	full.ks.History = nil
	for v := uint64(39); v >= 8; v-- {
		full.ks.History = append(full.ks.History, Link{v, kvDerive("history 32 tag "+string(rune('A'+v)), 32)})
	}
	g.authenticate(full, "auth history 32")
	g.ok("valid-history-32", "version 40 with 32 links (39 down to 8): the most a document holds", full, cfg)
	malformed("history-link-version-zero", "version 7 whose history ends with a link to version 0: a link's version is 1 to 2^64-1",
		g.edit(fd, `"history": [`, "}\n  ]", "},\n    {\n      \"version\": 0,\n      \"tag\": \""+strings.Repeat("A", 43)+"\"\n    }\n  ]"))

	// Strings and names.
	id := `"id": "ks-`
	i := strings.Index(string(sd), id) + len(id)
	malformed("encoded-surrogate-in-id", "the keyset id holds ED A0 80, the UTF-8 form of the surrogate U+D800 (CESU-8, WTF-8): not UTF-8",
		[]byte(string(sd[:i])+"\xed\xa0\x80"+string(sd[i:])))
	malformed("duplicate-member-escaped", `kek given twice, the second name written "\u006bek": names are compared after decoding`,
		g.edit(sd, "", `"policy"`, `"\u006bek": "local:other.kek",`+"\n  "+`"policy"`))
	malformed("unknown-member-null", "an unknown top-level member whose value is null: refused like any unknown member; null stands for absent only in a member the document defines",
		g.edit(sd, "", `"version"`, `"comment": null,`+"\n  "+`"version"`))
	act := `"activation": "` + kvTime(-2*time.Hour)
	malformed("activation-hour-24", "the key's activation at 2026-07-28T24:00:00Z: hours are 00 to 23 (a reader taking it as the next midnight sees a valid time, after created)",
		g.edit(sd, "", act, `"activation": "2026-07-28T24:00:00Z`))
	malformed("activation-2100-02-29", "the key's activation on 2100-02-29: 2100 is not a leap year (divisible by 100, not by 400)",
		g.edit(sd, "", act, `"activation": "2100-02-29T10:00:00Z`))

	// Identity: names sorted by their decoded bytes; a transport
	// parameter's name is decoded before it is recognized.
	named := func(label, kek string) []byte { return g.doc(g.keyset(label, 2, kek, def, -8*kvDay, single)) }
	g.refuse("kek-identity-sorted-decoded", "stale", "configured ...?%61=1&Z=2: decoded, the names are a and Z, and Z (0x5A) sorts before a (0x61), though %61 sorts before Z as written",
		named("identity sorted decoded", "awskms://alias/k?Z=2&a=1"), kvConfigAt(kvNow, "awskms://alias/k?%61=1&Z=2"))
	g.refuse("kek-identity-encoded-endpoint", "stale", "configured ...?end%70oint=http://127.0.0.1:1&region=r: the name decodes to endpoint, a transport parameter, left out of the identity",
		named("identity encoded endpoint", "awskms://alias/k?region=r"), kvConfigAt(kvNow, "awskms://alias/k?end%70oint=http://127.0.0.1:1&region=r"))

	// The window rule with the document's own skew, not 30 s.
	skew10 := def
	skew10.Skew = 10 * time.Second
	w := g.keyset("window skew 10", 2, kvMainKEK, skew10, -time.Hour, single)
	edge := w.ks.Expires.Add(-w.ks.Policy.Freshness - w.ks.Policy.Skew).UnixMilli()
	g.ok("valid-expires-at-window-edge-skew-10", "skew_seconds 10; now is exactly expires - freshness - 10 s: at the edge", w, kvConfig{KEKs: cfg.KEKs, NowMillis: edge})
	g.refuse("expires-beyond-window-skew-10", "stale", "skew_seconds 10; now is 1 ms before expires - freshness - 10 s: too far ahead (with 30 s it would load)", g.doc(w),
		kvConfig{KEKs: cfg.KEKs, NowMillis: edge - 1})

	// A link carrying the installed tag under another version is no link
	// to the installed version.
	v9 := next.clone()
	v9.ks.Follow(next.ks)
	v9.ks.History = []Link{v9.ks.History[0], {6, fleet.ks.Auth.Tag}}
	v9.ks.Refresh(kvNow.Add(-30 * time.Minute))
	g.authenticate(v9, "auth fleet 9 tag under version 6")
	// Retired ids are remembered over every document installed, not the
	// last one only: two installs before a load.
	dropped := fleet.clone()
	dropped.ks.Keys = slices.DeleteFunc(slices.Clone(dropped.ks.Keys), func(k StoredKey) bool { return k.ID == kvRetired })
	dropped.ks.Follow(fleet.ks)
	dropped.ks.RetiredKeys = []uint32{kvPruned}
	dropped.ks.Refresh(kvNow.Add(-time.Hour))
	g.authenticate(dropped, "auth fleet 8 retired id dropped")
	g.ok("reload-retired-id-dropped", "a loader that installed version 7 reads version 8, written by someone holding the KEK, which drops the retired key and its id from retired_keys: it descends, and loads",
		dropped, after("valid-rotation"))
	revived := dropped.clone()
	revived.ks.Follow(dropped.ks)
	g.addKey(revived, kvSpec{kvRetired, keyring.AEAD, keyring.DecryptOnly, -90 * kvDay, -90*kvDay + 10*time.Minute, nil})
	revived.ks.Refresh(kvNow.Add(-30 * time.Minute))
	g.authenticate(revived, "auth fleet 9 retired key back")
	g.refuse("retired-key-revived-after-two-installs", "rollback", "a loader that installed version 7 (the key retired) and then version 8 (its id dropped from retired_keys) reads version 9, in which the key is decrypt-only again: the retired ids are those of every document installed",
		g.doc(revived), after("valid-rotation", "reload-retired-id-dropped"))

	// Configurations refused whatever the document: a configured KEK URL
	// that is not plain, the previous one too, before the document is read.
	config := func(name, comment string, doc []byte, keks ...string) {
		g.t.Helper()
		g.refuse(name, "config", comment, doc, kvConfigAt(kvNow, keks...))
	}
	config("config-kek-final-newline", "the configured KEK URL ends in a newline: not plain, refused, never trimmed", sd, kvMainKEK+"\n")
	config("config-kek-upper-case-scheme", "the configured KEK URL's scheme in upper case: not plain, never lowered", sd, "LOCAL:stateseal.kek")
	config("config-kek-fragment", "the configured KEK URL has a fragment: not plain, never dropped", sd, kvMainKEK+"#x")
	config("config-kek-user-information", "the configured KEK URL has user information: not plain, never dropped", sd, "awskms://u@alias/k?region=r")
	config("config-kek-semicolon-in-query", "a ';' in the configured KEK URL's query: not plain, never a separator", sd, "awskms://alias/k?region=r;x=1")
	config("config-kek-bad-escape", "a '%' not followed by two hex digits in the query: not plain, never dropped", sd, "awskms://alias/k?region=%zz")
	config("config-previous-kek-not-plain", "the document names the KEK, which is plain; the previous one has a fragment: the configuration is refused as a whole", sd, kvMainKEK, kvPrevious+"#x")
	config("config-and-malformed", "a configured KEK URL with a fragment, and a document that is not JSON: the configuration is refused first, whatever the document", []byte("{"), kvMainKEK+"#x")

	g.refuse("fork-link-tag-other-version", "fork", "a loader that installed version 7 reads version 9 whose links are to version 8 and to version 6 with version 7's tag: a link names a version and a tag, both",
		g.doc(v9), after("valid-rotation"))
}

// kvReasons are Go's reasons, in its error's text, for the malformed
// vectors that must fail for one rule and not for another that fires
// first (issue 37).
var kvReasons = map[string]string{
	"version-zero":                      "has version 0",
	"version-over-64-bits":              "18446744073709551616",
	"retired-duplicate-key-id":          "key 3f1c9a02 appears twice",
	"history-null-element":              "history: version 0",
	"retired-keys-null-element":         "retired_keys: key id \"\"",
	"history-link-version-zero":         "history: version 0 does not come before",
	"encoded-surrogate-in-id":           "UTF-8",
	"duplicate-member-escaped":          "duplicate object member name \"kek\"",
	"unknown-member-null":               "unknown object member name \"comment\"",
	"activation-hour-24":                "activation",
	"activation-2100-02-29":             "activation",
	"history-on-version-1":              "version 1 has no history",
	"history-absent":                    "names no version it follows",
	"history-over-32":                   "history has 33 links",
	"retired-keys-lists-active":         "retired_keys lists it",
	"retired-state-unlisted":            "retired_keys does not list it",
	"retired-keys-duplicate":            "retired_keys are not distinct",
	"duplicate-key-ids":                 "appears twice",
	"no-active-key":                     "no active key",
	"key-id-zero":                       "00000000",
	"retired-activation-before-created": "before creation",
}

// The wrong readings lastReadings catches, in KEYSET-FORMAT.md's third
// table.
func init() {
	kmMutations = append(kmMutations,
		"null-history-elements-skipped", "null-retired-elements-skipped", "version-as-double", "history-max-exclusive",
		"history-link-zero-accepted", "identity-sort-escaped", "transport-names-raw", "window-skew-30",
		"history-link-by-tag-only", "times-hour-24", "times-leap-every-4-years", "unknown-null-members-ignored",
		"retired-ids-from-last-install",
		"config-after-document", "previous-kek-unchecked", "config-url-trimmed", "config-scheme-lowered",
		"config-fragment-dropped", "config-user-dropped", "config-semicolon-separator", "config-bad-escape-dropped",
	)
}

// TestTwoConfiguredFirstOpened: when both configured URLs have the
// document's identity, the KEK's (the first) is the one opened at step 6,
// with its transport parameters. No vector shows it: the two differ only
// in how a KMS is reached, and no vector reaches one.
func TestTwoConfiguredFirstOpened(t *testing.T) {
	g := &kvGen{t: t}
	single := kvSpec{kvSingle, keyring.AEAD, keyring.Active, -2 * time.Hour, -2 * time.Hour, nil}
	doc := g.doc(g.keyset("two configured", 2, "awskms://alias/k?region=r", keyring.DefaultPolicy(), -time.Hour, single))
	path := filepath.Join(t.TempDir(), "keyset.json")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	var opened []string
	reg := new(backends.Registry)
	reg.Register("awskms", func(_ context.Context, u *url.URL, _ *backends.OpenOptions) (backends.KEK, error) {
		opened = append(opened, u.String())
		return nil, errors.New("no KMS in this test")
	})
	first, second := "awskms://alias/k?endpoint=http://127.0.0.1:1&region=r", "awskms://alias/k?region=r&endpoint=http://127.0.0.1:2"
	_, _, err := Load(ctx, path, &LoadOptions{KEK: first, PreviousKEK: second, Backends: reg, Now: func() time.Time { return kvNow }})
	if err == nil {
		t.Fatal("loaded with no KMS")
	}
	if len(opened) != 1 || opened[0] != first {
		t.Fatalf("opened %q; want the KEK's URL %q alone", opened, first)
	}
}

// kvKEKFile is a local KEK's file (or environment variable) text and what
// a reader makes of it: the key, or a refusal.
type kvKEKFile struct {
	Name    string `json:"name"`
	Comment string `json:"comment"`
	Text    string `json:"text"`
	Expect  string `json:"expect"`        // "ok" or "refused"
	Key     string `json:"key,omitempty"` // hex, for ok
}

// kekFileVectors are the KEK file vectors, each decided by Go's local
// backend.
func kekFileVectors(t *testing.T) []kvKEKFile {
	key := kvDerive("kek file", 32)
	line := "stateseal-kek-v1:" + base64.RawURLEncoding.EncodeToString(key)
	var out []kvKEKFile
	add := func(name, comment, text string) {
		v := kvKEKFile{Name: name, Comment: comment, Text: text, Expect: "refused"}
		if got, ok := goKEKFile(t, text); ok {
			v.Expect, v.Key = "ok", hex.EncodeToString(got)
		}
		out = append(out, v)
	}
	add("kek-file-line", "the line alone", line)
	add("kek-file-final-newline", "a final LF, as sealctl kek writes it", line+"\n")
	add("kek-file-crlf", "a final CR LF", line+"\r\n")
	add("kek-file-blanks-around", "spaces, tabs and line breaks before and after: all trimmed", " \t\r\n"+line+" \t\n\n")
	add("kek-file-form-feed", `a final form feed (\f): not one of the four bytes trimmed (Go's strings.TrimSpace, JavaScript's trim() and Python's strip() take it)`, line+"\f")
	add("kek-file-vertical-tab", `a final vertical tab (\v)`, line+"\v")
	add("kek-file-no-break-space", "a final U+00A0 NO-BREAK SPACE", line+"\u00a0")
	add("kek-file-next-line", "a final U+0085 NEXT LINE (Go's and Python's whitespace)", line+"\u0085")
	add("kek-file-byte-order-mark", "a leading U+FEFF byte-order mark (JavaScript's trim() takes it)", "\ufeff"+line)
	add("kek-file-unit-separator", "a final U+001F (Python's strip() takes U+001C to U+001F)", line+"\x1f")
	add("kek-file-line-separator", "a final U+2028 LINE SEPARATOR", line+"\u2028")
	add("kek-file-two-lines", "the line twice: one line only", line+"\n"+line+"\n")
	add("kek-file-space-after-prefix", "a space after the prefix: nothing is trimmed inside", "stateseal-kek-v1: "+line[len("stateseal-kek-v1:"):])
	add("kek-file-padded", "the base64url padded with '='", line+"=")
	add("kek-file-31-bytes", "a key of 31 bytes", "stateseal-kek-v1:"+base64.RawURLEncoding.EncodeToString(key[:31]))
	add("kek-file-upper-case-prefix", "the prefix in upper case", "STATESEAL-KEK-V1:"+line[len("stateseal-kek-v1:"):])
	return out
}

// goKEKFile opens text as a local KEK file with Go's backend and returns
// its key, found by opening what the KEK wraps.
func goKEKFile(t *testing.T, text string) ([]byte, bool) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "k.kek"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	kek, err := backends.Open(ctx, "local:k.kek", &backends.OpenOptions{Dir: dir})
	if err != nil {
		return nil, false
	}
	w, err := kek.Wrap(ctx, []byte("probe"), []byte("ad"))
	if err != nil {
		t.Fatal(err)
	}
	// The key is 32 bytes of base64url after the prefix, and it must open
	// what the KEK wrapped: Go's backend read exactly that key.
	enc := strings.Trim(text, " \t\r\n")[len("stateseal-kek-v1:"):]
	key, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil {
		t.Fatalf("Go read a key from %q, which the test cannot", text)
	}
	a, err := chacha20poly1305.NewX(key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Open(nil, w[1:25], w[25:], []byte("ad")); err != nil {
		t.Fatalf("Go's KEK from %q is not the key the text holds", text)
	}
	return key, true
}

// kmKEKFile reads a KEK file's text as docs/KEYSET-FORMAT.md says, or
// with a wrong reading of which bytes are trimmed.
func kmKEKFile(text, mut string) ([]byte, bool) {
	switch mut {
	case "kek-file-untrimmed":
	case "kek-file-go-trim":
		text = strings.TrimSpace(text)
	case "kek-file-js-trim": // ECMAScript's WhiteSpace and LineTerminator
		text = strings.TrimFunc(text, func(r rune) bool {
			return unicode.Is(unicode.Zs, r) || strings.ContainsRune("\t\v\f\ufeff\n\r\u2028\u2029", r)
		})
	case "kek-file-python-strip": // str.isspace
		text = strings.TrimFunc(text, func(r rune) bool {
			return unicode.IsSpace(r) || 0x1c <= r && r <= 0x1f || unicode.In(r, unicode.Zl, unicode.Zp)
		})
	default:
		text = strings.Trim(text, " \t\n\r")
	}
	enc, ok := strings.CutPrefix(text, "stateseal-kek-v1:")
	if !ok || strings.ContainsAny(enc, "=+/ \t\r\n") {
		return nil, false
	}
	key, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil || len(key) != 32 {
		return nil, false
	}
	return key, true
}

// kmKEKFileMutations are the wrong readings of the KEK file, each with the
// vector that catches it (KEYSET-FORMAT.md's table under "KEK file").
func kmKEKFileTable(t *testing.T) map[string]string {
	data, err := os.ReadFile("../docs/KEYSET-FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	const title = "\n### KEK file rules and the vectors that pin them"
	i := strings.Index(doc, title)
	if i < 0 {
		t.Fatalf("KEYSET-FORMAT.md has no section %q", title[5:])
	}
	doc = doc[i+1:]
	if j := strings.Index(doc[4:], "\n#"); j >= 0 {
		doc = doc[:j+4]
	}
	out := map[string]string{}
	for _, r := range regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\|[^|]*\\| `([a-z0-9-]+)` \\|").FindAllStringSubmatch(doc, -1) {
		out[r[1]] = r[2]
	}
	return out
}

// TestKEKFileVectors: Go's local backend and the model written from the
// text read every KEK file vector alike, and each wrong reading the text
// lists fails the vector it names.
func TestKEKFileVectors(t *testing.T) {
	f := readKeysetVectors(t)
	if len(f.KEKFiles) < 10 {
		t.Fatalf("%d KEK file vectors, want at least 10", len(f.KEKFiles))
	}
	agrees := func(v kvKEKFile, mut string) bool {
		key, ok := kmKEKFile(v.Text, mut)
		return ok == (v.Expect == "ok") && hex.EncodeToString(key) == v.Key
	}
	byName := map[string]kvKEKFile{}
	for _, v := range f.KEKFiles {
		byName[v.Name] = v
		if v.Expect != "ok" && v.Expect != "refused" {
			t.Errorf("%s: expect %q", v.Name, v.Expect)
		}
		key, ok := goKEKFile(t, v.Text)
		if ok != (v.Expect == "ok") || hex.EncodeToString(key) != v.Key {
			t.Errorf("%s: Go reads %x, %v; the vector says %s %s", v.Name, key, ok, v.Expect, v.Key)
		}
		if !agrees(v, "") {
			t.Errorf("%s: the model disagrees", v.Name)
		}
	}
	table := kmKEKFileTable(t)
	if len(table) == 0 {
		t.Fatal("KEYSET-FORMAT.md lists no wrong reading of the KEK file")
	}
	for mut, catcher := range table {
		v, ok := byName[catcher]
		if !ok {
			t.Errorf("%s: KEYSET-FORMAT.md names %s, which is not a KEK file vector", mut, catcher)
			continue
		}
		if agrees(v, mut) {
			t.Errorf("%s: KEYSET-FORMAT.md names %s, which it passes", mut, catcher)
		}
	}
}
