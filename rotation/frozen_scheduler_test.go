package rotation_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends/kektest"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
)

// TestFrozenSchedulerResidual measures the residual docs/KEYSET.md states
// for a freeze on an instance that runs a scheduler with its loader: the
// operator rotates --now and retires the leaked key by force (version 3),
// and the store writer puts version 1 back before instance 1 polls.
// Instance 1 cannot tell that from a store nobody edited, and its
// scheduler renews version 1 at days 4, 8 and 12 (versions 2', 3', 4').
// What holds: instance 2, which installed version 3, refuses every one of
// them at once (ErrRollback, then ErrFork) and never opens the leaked
// key. What does not, until the leaked-key procedure's KEK change: a
// fresh instance loads version 4' with the leaked key usable.
func TestFrozenSchedulerResidual(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	kekURL := kektest.LocalKEK(t, dir)
	path := filepath.Join(dir, "keyset.json")
	clock := testkit.NewClock(testkit.T0)
	quiet := slog.New(slog.DiscardHandler)
	op := &rotation.Options{KEK: kekURL, Now: clock.Now, Current: true, Logger: quiet}
	res, err := rotation.Init(ctx, path, kekURL, keyring.AEAD, keyring.DefaultPolicy(), op)
	if err != nil {
		t.Fatal(err)
	}
	leaked := res.Key
	lo := keyset.LoadOptions{KEK: kekURL, Now: clock.Now}
	l1 := &keyset.Loader{Path: path, Options: lo, Logger: quiet}
	if _, err := l1.Load(ctx); err != nil {
		t.Fatal(err)
	}
	v1, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if _, err := rotation.Rotate(ctx, path, &rotation.RotateOptions{Immediate: true}, op); err != nil {
		t.Fatal(err)
	}
	if _, err := rotation.Retire(ctx, path, leaked, &rotation.RetireOptions{Force: true}, op); err != nil {
		t.Fatal(err)
	}
	l2 := &keyset.Loader{Path: path, Options: lo, Logger: quiet}
	ring2, err := l2.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, v1, 0o600); err != nil { // the freeze, before instance 1 polls
		t.Fatal(err)
	}
	if err := l1.Reload(ctx); err != nil {
		t.Fatalf("instance 1 on its own bytes: %v", err)
	}
	sch := &rotation.Scheduler{Path: path, Options: rotation.Options{KEK: kekURL, Loader: l1, Now: clock.Now, Logger: quiet}}
	for day := 4; day <= 12; day += 4 {
		clock.Advance(4 * 24 * time.Hour)
		tr, err := sch.Tick(ctx)
		if err != nil || !tr.Refreshed {
			t.Fatalf("day %d: instance 1's scheduler: %+v, %v", day, tr, err)
		}
		if err := l1.Reload(ctx); err != nil {
			t.Fatalf("day %d: instance 1: %v", day, err)
		}
		err = l2.Reload(ctx)
		if !errors.Is(err, keyset.ErrRollback) && !errors.Is(err, keyset.ErrFork) {
			t.Fatalf("day %d: instance 2 took the renewed copy: %v", day, err)
		}
		if _, ok := ring2.Current().Lookup(leaked); ok {
			t.Fatalf("day %d: the leaked key opens on instance 2", day)
		}
	}
	snap, cur, err := keyset.Load(ctx, path, &lo)
	if err != nil {
		t.Fatalf("fresh instance: %v", err)
	}
	if _, ok := snap.Lookup(leaked); !ok || cur.Version != 4 {
		t.Fatalf("the residual changed (update docs/KEYSET.md): a fresh instance loads version %d, leaked key usable %v", cur.Version, ok)
	}
}
