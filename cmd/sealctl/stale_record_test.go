package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
)

// TestRecordBehindDoesNotRenew: operator B's sealctl recorded version 2;
// operator A then rotates --now and retires the leaked key by force
// (version 4), and the store writer puts version 2 back. B cannot tell
// that copy from a keyset nobody edited since. If B's record is older
// than half the freshness window (a scheduler would have refreshed a
// keyset in use by then), B's refresh is refused (ErrUnvouched, nothing
// written). The residual, if B saw version 2 more recently: B renews it
// as version 3, which the running instance and A's sealctl both refuse at
// once (ErrRollback below version 4; ErrFork at a higher version) (docs/KEYSET.md, "Trust").
func TestRecordBehindDoesNotRenew(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "keyset.json")
	recA, recB := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	sc := sealctlAs(t, path)
	sc(recA, 0, "init")
	first, err := keyset.ReadFile(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	leaked := first.Keys[0].ID
	sc(recA, 0, "rotate")
	sc(recB, 0, "verify") // B records version 2
	v2, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	running := &keyset.Loader{Path: path, Logger: quiet}
	if _, err := running.Load(ctx); err != nil {
		t.Fatal(err)
	}
	defer running.Close()
	sc(recA, 0, "rotate", "--now")
	sc(recA, 0, "retire", "--force", keyring.FormatID(leaked))
	if err := running.Reload(ctx); err != nil || running.Health().Version != 4 {
		t.Fatalf("the running instance at version 4: %v", err)
	}
	testkit.Check(os.WriteFile(path, v2, 0o600)) // the writer

	// B saw version 2 four days ago (more than half of the 7-day window).
	ageRecord(t, recB, 4*24*time.Hour)
	out := sc(recB, 1, "refresh")
	if !strings.Contains(out, "--current") || !strings.Contains(out, "half the freshness window") {
		t.Fatalf("refusal does not say why: %s", out)
	}
	if got := testkit.Must(os.ReadFile(path)); string(got) != string(v2) {
		t.Fatal("the refused refresh wrote")
	}

	// The residual: B saw version 2 an hour ago, and renews it.
	ageRecord(t, recB, time.Hour)
	sc(recB, 0, "refresh")
	if err := running.Reload(ctx); !errors.Is(err, keyset.ErrRollback) && !errors.Is(err, keyset.ErrFork) {
		t.Fatalf("the running instance on B's renewal: %v, want ErrRollback or ErrFork", err)
	}
	if out := sc(recA, 1, "verify"); !strings.Contains(out, "rolled back") && !strings.Contains(out, "does not descend") {
		t.Fatalf("A's sealctl on B's renewal: %s", out)
	}
}

// ageRecord moves every entry's first sighting in the record at path back
// to age ago.
func ageRecord(t *testing.T, path string, age time.Duration) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r seenRecord
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	for id, v := range r {
		v.Since = time.Now().Add(-age).UTC().Truncate(time.Second)
		r[id] = v
	}
	b = testkit.Must(json.Marshal(r))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
