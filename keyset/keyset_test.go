package keyset

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
)

var ctx = context.Background()

// newKeysetFile writes a keyset with n keyring.AEAD keys under a new local KEK in
// a temporary directory and returns its path.
func newKeysetFile(t *testing.T, n int) (string, *Keyset, backends.KEK) {
	t.Helper()
	dir := t.TempDir()
	if err := backends.GenerateLocal(filepath.Join(dir, "kek")); err != nil {
		t.Fatal(err)
	}
	kek, err := backends.Open(ctx, "local:kek", &backends.OpenOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ks := newKeyset(t, kek, n)
	path := filepath.Join(dir, "keyset.json")
	if err := WriteFile(ctx, path, ks); err != nil {
		t.Fatal(err)
	}
	return path, ks, kek
}

// newKeyset returns an authenticated keyset of n keyring.AEAD keys under kek,
// named "local:kek".
func newKeyset(t *testing.T, kek backends.KEK, n int) *Keyset {
	t.Helper()
	ks := &Keyset{ID: NewID(), Version: 1, KEK: "local:kek", Policy: testPolicy()}
	for i := range n {
		k := key(t, keyring.AEAD, t0.Add(time.Duration(i)*time.Hour), ks.ids()...)
		sk, err := ks.Wrap(ctx, kek, k)
		if err != nil {
			t.Fatal(err)
		}
		ks.Keys = append(ks.Keys, sk)
	}
	if err := ks.Authenticate(ctx, kek); err != nil {
		t.Fatal(err)
	}
	return ks
}

// keysetUnder returns the document of a new keyset under kek.
func keysetUnder(t *testing.T, kek backends.KEK, n int) []byte {
	t.Helper()
	b, err := newKeyset(t, kek, n).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeAuth authenticates ks under kek and writes it, as every writer does.
func writeAuth(t *testing.T, path string, ks *Keyset, kek backends.KEK) error {
	t.Helper()
	if err := ks.Authenticate(ctx, kek); err != nil {
		t.Fatal(err)
	}
	return WriteFile(ctx, path, ks)
}

func TestKeysetRoundTrip(t *testing.T) {
	path, ks, _ := newKeysetFile(t, 3)
	got, err := ReadFile(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	a := testkit.Must(ks.Marshal())
	b := testkit.Must(got.Marshal())
	if !bytes.Equal(a, b) {
		t.Fatalf("round trip changed the keyset:\n%s\n%s", a, b)
	}
	fi := testkit.Must(os.Stat(path))
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("keyset mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestParseKeysetRejects(t *testing.T) {
	path, _, _ := newKeysetFile(t, 2)
	good := testkit.Must(os.ReadFile(path))
	doc := string(good)
	edits := map[string]func(string) string{
		"unknown field":     func(s string) string { return strings.Replace(s, `"version"`, `"colour": 1, "version"`, 1) },
		"unknown key field": func(s string) string { return strings.Replace(s, `"state"`, `"note": "x", "state"`, 1) },
		"future format":     func(s string) string { return strings.Replace(s, "stateseal-keyset-v4", "stateseal-keyset-v5", 1) },
		"previous format":   func(s string) string { return strings.Replace(s, "stateseal-keyset-v4", "stateseal-keyset-v3", 1) },
		"no format":         func(s string) string { return strings.Replace(s, `"format": "stateseal-keyset-v4",`, "", 1) },
		"sub-second time":   func(s string) string { return strings.Replace(s, `:00Z"`, `:00.5Z"`, 1) },
		"zero fraction":     func(s string) string { return strings.Replace(s, `:00Z"`, `:00.000Z"`, 1) },
		"offset time":       func(s string) string { return strings.Replace(s, `:00Z"`, `:00+00:00"`, 1) },
		"lower-case z":      func(s string) string { return strings.Replace(s, `:00Z"`, `:00z"`, 1) },
		"expiry, no window": func(s string) string { return strings.Replace(s, `"id"`, `"expires": "2026-07-28T12:00:00Z", "id"`, 1) },
		"trailing data":     func(s string) string { return s + "{}" },
		"version 0":         func(s string) string { return strings.Replace(s, `"version": 1,`, `"version": 0,`, 1) },
		"duplicate member": func(s string) string {
			return strings.Replace(s, `"state": "active"`, `"state": "retired", "state": "active"`, 1)
		},
		"bad state":      func(s string) string { return strings.Replace(s, `"state": "active"`, `"state": "enabled"`, 1) },
		"bad algorithm":  func(s string) string { return strings.Replace(s, `"algorithm": "aead"`, `"algorithm": "aes-gcm"`, 1) },
		"upper-case id":  func(s string) string { return upperFirstID(s) },
		"no keys":        func(s string) string { return s[:strings.Index(s, `"keys"`)] + `"keys": []}` },
		"truncated":      func(s string) string { return s[:len(s)/2] },
		"empty":          func(string) string { return "" },
		"not JSON":       func(string) string { return "keys:\n- id: 1\n" },
		"bad time":       func(s string) string { return strings.Replace(s, `"created": "`, `"created": "yesterday`, 1) },
		"negative skew":  func(s string) string { return strings.Replace(s, `"skew_seconds": 30`, `"skew_seconds": -1`, 1) },
		"zero max TTL":   func(s string) string { return strings.Replace(s, `"max_ttl_seconds": 3600`, `"max_ttl_seconds": 0`, 1) },
		"wrapped padded": func(s string) string { return strings.Replace(s, `"wrapped": "`, `"wrapped": "==`, 1) },
	}
	for name, edit := range edits {
		bad := edit(doc)
		if bad == doc {
			t.Fatalf("%s: edit did nothing", name)
		}
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	dup := strings.Replace(doc, idOf(doc, 1), idOf(doc, 0), 1)
	if _, err := Parse([]byte(dup)); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate key id: %v", err)
	}
}

// idOf returns the n-th key id in a keyset document.
func idOf(doc string, n int) string {
	rest := doc[strings.Index(doc, `"keys"`):]
	for range n {
		rest = rest[strings.Index(rest, `"wrapped"`)+1:]
	}
	i := strings.Index(rest, `"id": "`) + len(`"id": "`)
	return rest[i : i+8]
}

func upperFirstID(doc string) string {
	id := idOf(doc, 0)
	up := strings.ToUpper(id)
	if up == id {
		up = "G" + id[1:]
	}
	return strings.Replace(doc, `"id": "`+id, `"id": "`+up, 1)
}

// TestWrappedKeyMoved copies one key's wrapped data key into another
// slot, and into another keyset: it must not unwrap there.
func TestWrappedKeyMoved(t *testing.T) {
	_, ks, kek := newKeysetFile(t, 2)
	moved := ks.Clone()
	moved.Keys[1].Wrapped = moved.Keys[0].Wrapped
	if _, err := moved.UnwrapKey(ctx, kek, moved.Keys[1]); !errors.Is(err, backends.ErrUnwrap) {
		t.Fatalf("wrapped key in another slot: %v, want ErrUnwrap", err)
	}
	other := ks.Clone()
	other.ID = NewID()
	if _, err := other.UnwrapKey(ctx, kek, other.Keys[0]); !errors.Is(err, backends.ErrUnwrap) {
		t.Fatalf("wrapped key in another keyset: %v, want ErrUnwrap", err)
	}
	if _, err := ks.UnwrapKey(ctx, kek, ks.Keys[0]); err != nil {
		t.Fatalf("in its own slot: %v", err)
	}
}

func TestWriteCompareAndSwap(t *testing.T) {
	path, ks, _ := newKeysetFile(t, 1)
	a, b := ks.Clone(), ks.Clone()
	a.Follow(ks)
	b.Follow(ks)
	a.Policy.Skew = time.Minute
	if err := WriteFile(ctx, path, a); err != nil {
		t.Fatal(err)
	}
	b.Policy.Skew = 2 * time.Minute
	if err := WriteFile(ctx, path, b); !errors.Is(err, ErrConflict) {
		t.Fatalf("second writer from version 1: %v, want ErrConflict", err)
	}
	got := testkit.Must(ReadFile(ctx, path))
	if got.Version != 2 || got.Policy.Skew != time.Minute {
		t.Fatalf("loser overwrote the winner: version %d, skew %v", got.Version, got.Policy.Skew)
	}
	fresh := ks.Clone()
	fresh.Version = 1
	if err := WriteFile(ctx, path, fresh); !errors.Is(err, ErrConflict) {
		t.Fatalf("creating over an existing keyset: %v, want ErrConflict", err)
	}
	if err := WriteFile(ctx, filepath.Join(filepath.Dir(path), "new.json"), a); !errors.Is(err, ErrConflict) {
		t.Fatalf("version 2 where no keyset exists: %v, want ErrConflict", err)
	}
	stranger := a.Clone()
	stranger.ID, stranger.Version = NewID(), 3
	if err := WriteFile(ctx, path, stranger); !errors.Is(err, ErrConflict) {
		t.Fatalf("another keyset's edit: %v, want ErrConflict", err)
	}
	matches := testkit.Must(filepath.Glob(filepath.Join(filepath.Dir(path), ".*.tmp")))
	if len(matches) != 0 {
		t.Fatalf("temporary files left: %v", matches)
	}
}

func TestLoadFile(t *testing.T) {
	path, ks, _ := newKeysetFile(t, 2)
	snap, got, err := Load(ctx, path, &LoadOptions{KEK: "local:kek", Now: func() time.Time { return t0.Add(2 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != ks.ID || snap.Len() != 2 || snap.Version() != 1 {
		t.Fatalf("loaded %s v%d with %d keys", got.ID, snap.Version(), snap.Len())
	}
	if p, ok := snap.Policy(); !ok || p != testPolicy() {
		t.Fatalf("policy %+v, %v", p, ok)
	}
	// Before the first key's activation nothing can seal: an error at load.
	if _, _, err := Load(ctx, path, &LoadOptions{KEK: "local:kek", Now: func() time.Time { return t0.Add(-time.Hour) }}); err == nil || !strings.Contains(err.Error(), "no usable primary") {
		t.Fatalf("load before any activation: %v", err)
	}
	// A KEK the configuration does not name: refused before any unwrap.
	t.Setenv("OTHER_KEK", backends.NewLocalKey())
	_, _, err = Load(ctx, path, &LoadOptions{KEK: "local://env/OTHER_KEK"})
	if !errors.Is(err, ErrUntrustedKEK) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), ks.ID) {
		t.Fatalf("untrusted KEK: %v", err)
	}
	// The trusted KEK URL, but another key behind it: the error names the
	// keyset file and the key.
	testkit.Check(os.WriteFile(filepath.Join(filepath.Dir(path), "kek"), []byte(backends.NewLocalKey()+"\n"), 0o600))
	_, _, err = Load(ctx, path, &LoadOptions{KEK: "local:kek"})
	if !errors.Is(err, backends.ErrUnwrap) || !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), ks.ID) {
		t.Fatalf("wrong KEK: %v", err)
	}
}

// TestPrimaryAgreesWithSnapshot: of two keys activating in the same
// second, Keyset.Primary picks the one keyring.Snapshot seals with.
func TestPrimaryAgreesWithSnapshot(t *testing.T) {
	a := key(t, keyring.MAC, t0)
	b := key(t, keyring.MAC, t0, a)
	for _, order := range [][]keyring.Key{{a, b}, {b, a}} {
		s := testkit.Must(keyring.NewSnapshot(order))
		k := testkit.Must(s.Primary(t0))
		ks := &Keyset{Keys: []StoredKey{{ID: order[0].ID, State: keyring.Active, Activation: t0}, {ID: order[1].ID, State: keyring.Active, Activation: t0}}}
		if sk, _ := ks.Primary(t0); sk.ID != k.ID {
			t.Errorf("Keyset.Primary %08x disagrees with Snapshot.Primary %08x", sk.ID, k.ID)
		}
	}
}

var t0 = testkit.T0

func key(t *testing.T, alg keyring.Algorithm, activation time.Time, existing ...keyring.Key) keyring.Key {
	t.Helper()
	k, err := keyring.NewKey(alg, t0, activation, existing)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// testPolicy is the default policy without a freshness window: tests on a
// fixed clock far from now (t0) test freshness where they mean to.
func testPolicy() keyring.Policy {
	p := keyring.DefaultPolicy()
	p.Freshness = 0
	return p
}
