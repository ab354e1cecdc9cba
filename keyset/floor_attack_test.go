package keyset_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
)

// TestAttackVersionFloor: version floors against a store writer.
func TestAttackVersionFloor(t *testing.T) {
	t.Run("huge unauthenticated version does not raise the floor", func(t *testing.T) {
		f := newFixture(t, keyring.DefaultPolicy())
		l := quietLoader(f, keyset.LoadOptions{})
		ring, err := l.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		good := testkit.Must(os.ReadFile(f.path))
		for _, v := range []string{"18446744073709551615", "9223372036854775808", "2"} {
			f.write(t, bytes.Replace(good, []byte(`"version": 1,`), []byte(`"version": `+v+`,`), 1))
			// Refused unauthenticated, or malformed: a version above 1
			// needs a history link, which nobody without the KEK can add.
			if err := l.Reload(ctx); err == nil || errors.Is(err, keyset.ErrRollback) {
				t.Errorf("version %s without the KEK: %v", v, err)
			}
		}
		// The next real version still loads: nothing unauthenticated moved the floor.
		f.write(t, f.addKey(t))
		if err := l.Reload(ctx); err != nil || ring.Current().Version() != 2 {
			t.Fatalf("legit version 2 after the forged ones: %v", err)
		}
	})
	t.Run("pinned id, AllowKeysetChange: another authentic keyset under the same KEK", func(t *testing.T) {
		a := newFixture(t, keyring.DefaultPolicy())
		b := &fixture{dir: a.dir, path: a.path, kek: a.kek}
		b.ks = &keyset.Keyset{ID: keyset.NewID(), KEK: "local:stateseal.kek", Policy: keyring.DefaultPolicy()}
		bDoc := b.addKey(t) // another tenant's, a test one: authentic
		for _, o := range []keyset.LoadOptions{{}, {KeysetID: a.ks.ID}, {KeysetID: a.ks.ID, AllowKeysetChange: true}} {
			a.write(t, mustMarshal(t, a.ks))
			l := quietLoader(a, o)
			ring, err := l.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			a.write(t, bDoc)
			if err := l.Reload(ctx); !errors.Is(err, keyset.ErrOtherKeyset) || ring.Current().Version() != a.ks.Version {
				t.Errorf("%+v: keyset B installed: %v", o, err)
			}
			if o.KeysetID != "" {
				if _, _, err := keyset.Load(ctx, a.path, &keyset.LoadOptions{KeysetID: a.ks.ID, Now: l.Options.Now}); !errors.Is(err, keyset.ErrOtherKeyset) {
					t.Errorf("fresh instance pinned to A loaded B: %v", err)
				}
			}
			l.Close()
		}
	})
	t.Run("switching ids does not reset the floor; MinVersion holds across ids", func(t *testing.T) {
		a := newFixture(t, keyring.DefaultPolicy())
		aV1 := mustMarshal(t, a.ks)
		a.write(t, a.addKey(t))
		aV2 := mustMarshal(t, a.ks)
		a.write(t, a.addKey(t))
		b := &fixture{dir: a.dir, path: a.path, kek: a.kek}
		b.ks = &keyset.Keyset{ID: keyset.NewID(), KEK: "local:stateseal.kek", Policy: keyring.DefaultPolicy()}
		l := quietLoader(a, keyset.LoadOptions{AllowKeysetChange: true, MinVersion: 2})
		ring, err := l.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for range 3 { // B up to version 3: at least MinVersion
			a.write(t, b.addKey(t))
		}
		if err := l.Reload(ctx); err != nil {
			t.Fatalf("B v3: %v", err)
		}
		for _, doc := range [][]byte{aV1, aV2} {
			a.write(t, doc)
			if err := l.Reload(ctx); !errors.Is(err, keyset.ErrRollback) {
				t.Errorf("A below its seen version after B: %v", err)
			}
		}
		if ring.Current().Version() != 3 {
			t.Fatal("ring moved")
		}
	})
}

func mustMarshal(t *testing.T, ks *keyset.Keyset) []byte {
	t.Helper()
	b, err := ks.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAttackReformattedDocumentIsNotAFork: the store writer rewrites the
// authentic current document with other whitespace (or member order):
// same id, version and contents, same tag. It is not two writers'
// versions; a running loader must not raise ErrFork, which tells the
// operator to "find which write was lost" and to write a new version.
// (sealctl's record compares a re-marshalled digest and is not fooled;
// the loader compares the raw bytes.)
func TestAttackReformattedDocumentIsNotAFork(t *testing.T) {
	f := newFixture(t, keyring.DefaultPolicy())
	var reported []error
	l := quietLoader(f, keyset.LoadOptions{})
	l.OnError = func(err error) { reported = append(reported, err) }
	if _, err := l.Load(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	good := testkit.Must(os.ReadFile(f.path))
	var compact bytes.Buffer
	if err := json.Compact(&compact, good); err != nil {
		t.Fatal(err)
	}
	if a, b := mustParse(t, good), mustParse(t, compact.Bytes()); !bytes.Equal(a.Auth.Tag, b.Auth.Tag) || a.Version != b.Version {
		t.Fatal("not the same document")
	}
	f.write(t, compact.Bytes())
	if err := l.Run(runOnce(t, l), 5*time.Millisecond); err != nil && !strings.Contains(err.Error(), "canceled") {
		t.Fatal(err)
	}
	for _, err := range reported {
		if errors.Is(err, keyset.ErrFork) {
			t.Errorf("FINDING: the same authentic document re-indented is reported as a fork: %v", err)
		}
	}
}

func mustParse(t *testing.T, b []byte) *keyset.Keyset {
	t.Helper()
	ks, err := keyset.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// TestAttackFreshness: the freshness window against a store writer.
func TestAttackFreshness(t *testing.T) {
	t.Run("tampered window or expiry", func(t *testing.T) {
		p := keyring.DefaultPolicy()
		f := newFixture(t, p)
		good := testkit.Must(os.ReadFile(f.path))
		exp := `"expires": "2026-08-04T12:00:00Z",`
		if !bytes.Contains(good, []byte(exp)) {
			t.Fatalf("no %s in %s", exp, good)
		}
		at := &keyset.LoadOptions{Now: func() time.Time { return t0.Add(30 * 24 * time.Hour) }}
		for name, doc := range map[string]string{
			"window 0, no expiry":      strings.Replace(strings.Replace(string(good), exp, "", 1), `"freshness_seconds": 604800`, `"freshness_seconds": 0`, 1),
			"window 0, expiry kept":    strings.Replace(string(good), `"freshness_seconds": 604800`, `"freshness_seconds": 0`, 1),
			"no expiry":                strings.Replace(string(good), exp, "", 1),
			"expiry null":              strings.Replace(string(good), exp, `"expires": null,`, 1),
			"expiry empty":             strings.Replace(string(good), exp, `"expires": "",`, 1),
			"expiry far future":        strings.Replace(string(good), exp, `"expires": "9999-12-31T23:59:59Z",`, 1),
			"expiry negative year":     strings.Replace(string(good), exp, `"expires": "-0001-01-01T00:00:00Z",`, 1),
			"window 366 days":          strings.Replace(string(good), `"freshness_seconds": 604800`, `"freshness_seconds": 31622400`, 1),
			"window overflowing int64": strings.Replace(strings.Replace(string(good), exp, "", 1), `"freshness_seconds": 604800`, `"freshness_seconds": 18446744073709551615`, 1),
			"window negative":          strings.Replace(strings.Replace(string(good), exp, "", 1), `"freshness_seconds": 604800`, `"freshness_seconds": -604800`, 1),
		} {
			if doc == string(good) {
				t.Fatalf("%s: no change", name)
			}
			f.write(t, []byte(doc))
			if _, _, err := keyset.Load(ctx, f.path, at); err == nil {
				t.Errorf("%s: a month-old keyset loaded", name)
			}
		}
	})
	t.Run("authentic copy written by a writer whose clock ran ahead", func(t *testing.T) {
		// A scheduler whose clock is 200 days ahead writes version 2: its
		// expiry is 207 days away. The next day an honest editor writes
		// version 3 (retiring a leaked key, say). 100 days later the store
		// writer puts version 2 back. docs/KEYSET.md: "a fresh instance
		// accepts a copy superseded at most one window ago", here 7 days.
		p := keyring.DefaultPolicy()
		f := newFixture(t, p)
		ahead := t0.Add(200 * 24 * time.Hour)
		f.ks.Follow(f.ks.Clone())
		f.ks.Refresh(ahead)
		if err := f.ks.Authenticate(ctx, f.kek); err != nil {
			t.Fatal(err)
		}
		v2 := mustMarshal(t, f.ks)
		f.write(t, v2)
		f.write(t, f.addKey(t)) // version 3, honest clock t0
		f.write(t, v2)          // the rollback, 100 days later
		now := t0.Add(100 * 24 * time.Hour)
		_, ks, err := keyset.Load(ctx, f.path, &keyset.LoadOptions{Now: func() time.Time { return now }})
		if err == nil {
			t.Errorf("FINDING: a fresh instance loaded version %d, superseded 99 days ago (window %v): its expiry %s says it was written %s, in the instance's future; a loader could refuse an expiry further ahead than the window plus the skew",
				ks.Version, p.Freshness, ks.Expires.Format(time.RFC3339), ks.Expires.Add(-p.Freshness).Format(time.RFC3339))
		}
	})
}
