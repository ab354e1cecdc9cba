package gcpkms_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
)

// TestDisabledVersion runs the Cloud KMS leaked-key procedure's end (a
// new primary version, the keyset rewrapped, the old version disabled,
// -min-version 2), then a store writer puts back version 1 with its
// unauthenticated version raised. The KMS refuses the disabled version:
// that is backends.ErrKeyDisabled, not an outage (it was, and the loader
// called the KMS again at every poll and reported a KMS failure that
// invited enabling the old version); the loader warns against it first,
// and, the failure not being transient, polls skip the same bytes without
// a KMS call; the copy put back as it was is a rollback.
func TestDisabledVersion(t *testing.T) {
	g := testservers.StartGCPKMS(t)
	ctx := context.Background()
	name := g.NewKey("ring", id())
	url := keyURL(g.Addr, name)
	path := filepath.Join(t.TempDir(), "keyset.json")
	o := &rotation.Options{KEK: url, Logger: slog.New(slog.DiscardHandler)}
	testkit.Must(rotation.Init(ctx, path, url, keyring.AEAD, keyring.DefaultPolicy(), o))
	v1 := testkit.Must(os.ReadFile(path))
	g.Rotate(name)
	testkit.Must(rotation.Rewrap(ctx, path, url, o))
	l := &keyset.Loader{Path: path, Options: keyset.LoadOptions{KEK: url, MinVersion: 2}, Logger: slog.New(slog.DiscardHandler)}
	testkit.Must(l.Load(ctx))
	defer l.Close()
	g.Disable(name, 1)

	d := json.NewDecoder(bytes.NewReader(v1))
	d.UseNumber()
	var m map[string]any
	testkit.Check(d.Decode(&m))
	m["version"] = json.Number("3")
	m["history"] = []any{map[string]any{"version": 2, "tag": strings.Repeat("A", 43)}}
	testkit.Check(os.WriteFile(path, testkit.Must(json.Marshal(m)), 0o600))
	err := l.Reload(ctx)
	msg := strings.ToLower(err.Error())
	if !errors.Is(err, backends.ErrKeyDisabled) || !strings.Contains(msg, "nor its id is authenticated") ||
		!strings.Contains(msg, "do not trust the old kek again") || l.Health().Outage {
		t.Fatalf("the raised copy: outage=%v: %v", l.Health().Outage, err)
	}

	testkit.Check(os.WriteFile(path, v1, 0o600))
	if err := l.Reload(ctx); !errors.Is(err, keyset.ErrRollback) {
		t.Errorf("the copy put back as it was: %v", err)
	}
	if _, _, err := keyset.Load(ctx, path, &keyset.LoadOptions{KEK: url, MinVersion: 2}); !errors.Is(err, keyset.ErrRollback) {
		t.Errorf("a fresh instance with -min-version 2, the copy as it was: %v", err)
	}
}
