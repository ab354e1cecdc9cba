package keyset

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
)

// TestMetadataTamperRefused edits the keyset file the way someone who can
// write it but does not hold the KEK would. No edit loads, and a running
// loader keeps its last good keys.
func TestMetadataTamperRefused(t *testing.T) {
	path, ks, kek := newKeysetFile(t, 3)
	// keyring.Key 0 is the primary, key 1 retired, key 2 pending until t0+2h.
	next := ks.Clone()
	next.Follow(ks)
	next.Keys[1].State = keyring.Retired
	if err := writeAuth(t, path, next, kek); err != nil {
		t.Fatal(err)
	}
	l := &Loader{Path: path, Options: LoadOptions{KEK: "local:kek", Now: func() time.Time { return t0.Add(30 * time.Minute) }}, Logger: slog.New(slog.DiscardHandler)}
	ring, err := l.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	good := ring.Current()
	doc := testkit.Must(os.ReadFile(path))
	first, second, pending := idOf(string(doc), 0), idOf(string(doc), 1), idOf(string(doc), 2)
	other := filepath.Join(filepath.Dir(path), "other.kek")
	testkit.Check(backends.GenerateLocal(other))
	edits := map[string]func(string) string{
		"aead key switched to mac": func(s string) string { return strings.Replace(s, `"algorithm": "aead"`, `"algorithm": "mac"`, 1) },
		"retired key revived":      func(s string) string { return strings.Replace(s, `"state": "retired"`, `"state": "active"`, 1) },
		"pending key made primary early": func(s string) string {
			i := strings.Index(s, `"id": "`+pending+`"`)
			j := i + strings.Index(s[i:], `"activation": "`) + len(`"activation": "`)
			return s[:j] + t0.Format(time.RFC3339) + s[j+len(time.RFC3339)-5:]
		},
		"policy loosened": func(s string) string {
			return strings.Replace(s, `"max_ttl_seconds": 3600`, `"max_ttl_seconds": 86400`, 1)
		},
		"KEK pointed elsewhere": func(s string) string { return strings.Replace(s, `"kek": "local:kek"`, `"kek": "local:other.kek"`, 1) },
		"version bumped":        func(s string) string { return strings.Replace(s, `"version": 2`, `"version": 3`, 1) },
		"keys swapped": func(s string) string {
			s = strings.Replace(s, `"id": "`+first+`"`, `"id": "XXXXXXXX"`, 1)
			s = strings.Replace(s, `"id": "`+second+`"`, `"id": "`+first+`"`, 1)
			return strings.Replace(s, `"id": "XXXXXXXX"`, `"id": "`+second+`"`, 1)
		},
	}
	for name, edit := range edits {
		bad := edit(string(doc))
		if bad == string(doc) {
			t.Fatalf("%s: edit did nothing", name)
		}
		if _, err := Parse([]byte(bad)); err != nil {
			if name == "keys swapped" || name == "KEK pointed elsewhere" || name == "retired key revived" {
				continue // refused even earlier is fine (a revived key is still in retired_keys)
			}
			t.Fatalf("%s: the edit does not even parse, so it tests nothing: %v", name, err)
		}
		testkit.Check(os.WriteFile(path, []byte(bad), 0o600))
		_, _, err := Load(ctx, path, &LoadOptions{KEK: "local:kek"})
		if name == "KEK pointed elsewhere" && !errors.Is(err, ErrUntrustedKEK) {
			t.Errorf("%s: Load = %v, want ErrUntrustedKEK", name, err)
		} else if name != "KEK pointed elsewhere" && !errors.Is(err, ErrUnauthenticated) && !errors.Is(err, backends.ErrUnwrap) {
			t.Errorf("%s: Load = %v, want ErrUnauthenticated", name, err)
		}
		if err := l.Reload(ctx); err == nil || ring.Current() != good {
			t.Errorf("%s: a running loader installed it (%v)", name, err)
		}
	}
}

// TestReloadRefusesAnotherKeyset: a file replaced by another, authentic
// keyset (another id, or another KEK) is refused by a running loader
// unless it is configured to follow such a change.
func TestReloadRefusesAnotherKeyset(t *testing.T) {
	for _, allow := range []bool{false, true} {
		path, _, kek := newKeysetFile(t, 1)
		other := keysetUnder(t, kek, 1) // another id, the same KEK
		l := &Loader{Path: path, Options: LoadOptions{KEK: "local:kek", Now: func() time.Time { return t0.Add(time.Hour) }, AllowKeysetChange: allow}, Logger: slog.New(slog.DiscardHandler)}
		ring, err := l.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		good := ring.Current()
		testkit.Check(os.WriteFile(path, other, 0o600))
		err = l.Reload(ctx)
		switch {
		case !allow && (!errors.Is(err, ErrOtherKeyset) || ring.Current() != good):
			t.Errorf("another keyset installed without AllowKeysetChange: %v", err)
		case allow && (err != nil || ring.Current() == good):
			t.Errorf("AllowKeysetChange: %v", err)
		}
	}
}
