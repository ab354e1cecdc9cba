package keyset_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
)

// TestRollbackBeforeKEKChange: the store is put back to a copy from
// before the leaked-key procedure's KEK change. An instance that installed
// a newer version, or is configured with a minimum above the copy's,
// names the rollback first (ErrRollback, and the message begins with it
// and warns against trusting the old KEK again), not only the untrusted
// KEK, whose own advice (-previous-kek) would undo the procedure. A fresh
// instance with neither cannot tell a rollback from a misconfiguration,
// and says only that the KEK is not trusted.
func TestRollbackBeforeKEKChange(t *testing.T) {
	ctx := context.Background()
	path, _, newKEK, v1 := rewrapped(t)

	running := &keyset.Loader{Path: path, Options: keyset.LoadOptions{KEK: newKEK}, Logger: slog.New(slog.DiscardHandler)}
	ring, err := running.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer running.Close()
	testkit.Check(os.WriteFile(path, v1, 0o600)) // the rollback

	rollbackFirst := func(who string, err error) {
		t.Helper()
		if !errors.Is(err, keyset.ErrRollback) || !errors.Is(err, keyset.ErrUntrustedKEK) ||
			!strings.HasPrefix(err.Error(), keyset.ErrRollback.Error()) || !strings.Contains(err.Error(), "Do not trust the old KEK again") {
			t.Fatalf("%s, on the copy from before the KEK change: %v; want the rollback named first", who, err)
		}
	}
	err = running.Reload(ctx)
	rollbackFirst("the running instance", err)
	if !strings.Contains(err.Error(), "below version 2 (the version this instance installed)") {
		t.Fatalf("the running instance does not say what it saw: %v", err)
	}
	if ring.Current().Version() != 2 || running.Health().Error != err.Error() {
		t.Fatalf("the running instance: version %d, health %+v", ring.Current().Version(), running.Health())
	}
	_, _, err = keyset.Load(ctx, path, &keyset.LoadOptions{KEK: newKEK, MinVersion: 2})
	rollbackFirst("a fresh instance with -min-version 2", err)
	rollbackFirst("keyset.Check with MinVersion 2", keyset.Check(testkit.Must(keyset.ReadFile(ctx, path)), path, &keyset.LoadOptions{KEK: newKEK, MinVersion: 2}))

	_, _, err = keyset.Load(ctx, path, &keyset.LoadOptions{KEK: newKEK})
	if !errors.Is(err, keyset.ErrUntrustedKEK) || errors.Is(err, keyset.ErrRollback) {
		t.Fatalf("a fresh instance with no floor: %v; it cannot know of a newer version", err)
	}
}

// rewrapped makes a keyset under an old KEK (version 1, whose document it
// returns), then rewraps it under a new one (version 2): a KEK change, as
// the leaked-key procedure makes, for a store writer to roll back.
func rewrapped(t *testing.T) (string, string, string, []byte) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "keyset.json")
	oldKEK, newKEK := "local:"+filepath.Join(dir, "old.kek"), "local:"+filepath.Join(dir, "new.kek")
	testkit.Check(backends.GenerateLocal(filepath.Join(dir, "old.kek")))
	testkit.Check(backends.GenerateLocal(filepath.Join(dir, "new.kek")))
	quiet := &rotation.Options{KEK: oldKEK, Logger: slog.New(slog.DiscardHandler)}
	testkit.Must(rotation.Init(ctx, path, oldKEK, keyring.AEAD, keyring.DefaultPolicy(), quiet))
	v1 := testkit.Must(os.ReadFile(path))
	testkit.Must(rotation.Rewrap(ctx, path, newKEK, quiet)) // version 2, under the new KEK
	return path, oldKEK, newKEK, v1
}
