package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
)

// TestForkRemedy runs docs/ROTATION.md's "Forks" on a keyset file: the
// writer puts version 1 back and a CronJob's sealctl (no record) rotates
// it to versions 2, 3 and 4; the running instance, at version 3, refuses
// the fork. The operator, whose record holds version 3, restores the
// backup of version 3 with import --as-version 5 over the fork: the
// restore links to version 3, so the running instance installs it, and
// the key retired in version 3 stays retired.
func TestForkRemedy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "keyset.json")
	record, cron := filepath.Join(dir, "seen.json"), filepath.Join(dir, "cron-seen.json")
	sc := sealctlAs(t, path)
	sc(record, 0, "init")
	v1 := testkit.Must(os.ReadFile(path))
	first := testkit.Must(keyset.Parse(v1))
	leaked := first.Keys[0].ID
	running := &keyset.Loader{Path: path, Logger: quiet}
	ring, err := running.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer running.Close()
	sc(record, 0, "rotate", "--now")
	sc(record, 0, "retire", "--force", keyring.FormatID(leaked))
	backup := filepath.Join(dir, "v3.json")
	sc(record, 0, "export", "--out", backup)
	if err := running.Reload(ctx); err != nil || ring.Current().Version() != 3 {
		t.Fatalf("the running instance, version 3: %v", err)
	}

	testkit.Check(os.WriteFile(path, v1, 0o600)) // the writer
	for range 3 {
		sc(cron, 0, "rotate")
	}
	if err := running.Reload(ctx); !errors.Is(err, keyset.ErrFork) {
		t.Fatalf("the running instance, the CronJob's version 4: %v, want ErrFork", err)
	}
	if out := sc(record, 1, "verify"); !strings.Contains(out, "does not descend from version 3") {
		t.Fatalf("verify with the record of version 3: %s", out)
	}

	out := sc(record, 0, "import", "--as-version", "5", backup)
	if !strings.Contains(out, "version 5") {
		t.Fatalf("the restore: %s", out)
	}
	if err := running.Reload(ctx); err != nil || ring.Current().Version() != 5 {
		t.Fatalf("the running instance, the restore linked to version 3: %v", err)
	}
	ks := testkit.Must(keyset.ReadFile(ctx, path))
	if k, ok := ks.Key(leaked); !ok || k.State != keyring.Retired {
		t.Fatalf("the retired key after the restore: %+v", k)
	}
	sc(record, 0, "verify")
}
