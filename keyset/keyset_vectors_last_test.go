package keyset

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
		c.After = names[0]
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
	g.refuse("fork-link-tag-other-version", "fork", "a loader that installed version 7 reads version 9 whose links are to version 8 and to version 6 with version 7's tag: a link names a version and a tag, both",
		g.doc(v9), after("valid-rotation"))
}

// kvReasons are Go's reasons, in its error's text, for the malformed
// vectors that must fail for one rule and not for another that fires
// first (issue 37).
var kvReasons = map[string]string{
	"version-zero":                      "has version 0",
	"version-over-64-bits":              "version",
	"retired-duplicate-key-id":          "appears twice",
	"history-null-element":              "history",
	"retired-keys-null-element":         "retired_keys",
	"history-link-version-zero":         "history: version 0 does not come before",
	"encoded-surrogate-in-id":           "UTF-8",
	"duplicate-member-escaped":          "duplicate",
	"unknown-member-null":               "unknown",
	"created-hour-24":                   "created",
	"created-2100-02-29":                "created",
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
