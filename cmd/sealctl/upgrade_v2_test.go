package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/backends/kektest"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
)

// TestUpgradeV2NeedsCurrent: a format-2 document carries no expiry, so a
// copy superseded 60 days ago looks like the newest. The store writer
// puts it back; an editor without a record (a CronJob, a new machine)
// upgrades it, as instances advise: refused with ErrUnvouched, nothing
// written, and a fresh instance still refuses the copy. The operator who
// checked it is current says so with --current.
func TestUpgradeV2NeedsCurrent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t.Setenv("STATESEAL_STATE", filepath.Join(dir, "seen.json"))
	kekURL := kektest.LocalKEK(t, dir)
	kek, err := backends.Open(ctx, kekURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "keyset.json")
	t0 := time.Now().UTC().Truncate(time.Second).Add(-60 * 24 * time.Hour)
	clock := t0
	now := func() time.Time { return clock }
	k, err := keyring.NewKey(keyring.AEAD, t0.Add(-time.Hour), t0.Add(-time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	id := keyset.NewID()
	sk, err := (&keyset.Keyset{ID: id}).Wrap(ctx, kek, k)
	if err != nil {
		t.Fatal(err)
	}
	old := v2Doc(t, kek, id, 5, kekURL, []keyset.StoredKey{sk})
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	// 60 days ago: the operator upgraded (vouching), rotated, retired and
	// pruned the first key.
	op := &rotation.Options{KEK: kekURL, Now: now, Current: true}
	if _, err := rotation.Upgrade(ctx, path, op); err != nil {
		t.Fatal(err)
	}
	if _, err := rotation.Rotate(ctx, path, &rotation.RotateOptions{Immediate: true}, op); err != nil {
		t.Fatal(err)
	}
	clock = t0.Add(2 * time.Hour) // past the maximum TTL and skew: a normal retirement
	if _, err := rotation.Retire(ctx, path, k.ID, nil, op); err != nil {
		t.Fatal(err)
	}
	if _, err := rotation.Prune(ctx, path, op); err != nil {
		t.Fatal(err)
	}
	// Now: the format-2 copy put back; a bare upgrade refuses it.
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = rotation.Upgrade(ctx, path, &rotation.Options{KEK: kekURL, KeysetID: id})
	if !errors.Is(err, rotation.ErrUnvouched) {
		t.Fatalf("bare upgrade of a 60-day-old format-2 copy: %v", err)
	}
	if got := testkit.Must(os.ReadFile(path)); string(got) != string(old) {
		t.Fatal("the refused upgrade wrote")
	}
	code, out := sealctlT(t, "--keyset", path, "--kek", kekURL, "upgrade")
	if code == 0 || !strings.Contains(out, "--current") {
		t.Fatalf("sealctl upgrade without a record: exit %d\n%s", code, out)
	}
	if _, _, err := keyset.Load(ctx, path, &keyset.LoadOptions{KEK: kekURL, KeysetID: id}); err == nil {
		t.Fatal("a fresh instance loads the format-2 copy")
	}
	// The operator's word: --current upgrades it (here it is not current,
	// and the operator who says so takes it back: what the flag means).
	code, out = sealctlT(t, "--keyset", path, "--kek", kekURL, "upgrade", "--current")
	if code != 0 || !strings.Contains(out, "format version 4") {
		t.Fatalf("sealctl upgrade --current: exit %d\n%s", code, out)
	}
}
