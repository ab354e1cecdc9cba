//go:build unix

package rotation_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends/kektest"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/stores"
)

// TestTickGivesUpOnAHeldLock: whoever can write the keyset's directory can
// hold its lock for ever. A scheduler's tick with a deadline returns at
// the deadline with stores.ErrLocked instead of hanging (flock ignores
// contexts), and once the lock is free the next tick rotates.
func TestTickGivesUpOnAHeldLock(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	kekURL := kektest.LocalKEK(t, dir)
	path := filepath.Join(dir, "keyset.json")
	clock := testkit.NewClock(testkit.T0)
	pol := keyring.DefaultPolicy()
	pol.RotationInterval = 24 * time.Hour
	o := rotation.Options{KEK: kekURL, Now: clock.Now, Logger: slog.New(slog.DiscardHandler)}
	if _, err := rotation.Init(ctx, path, kekURL, keyring.AEAD, pol, &o); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * 24 * time.Hour) // a rotation is due
	sch := &rotation.Scheduler{Path: path, Options: o}
	c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := sch.Tick(c); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, stores.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("tick on a held lock: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a tick with a 200 ms deadline still blocks on the lock after 10 s")
	}
	if st := sch.Status(); st.Error == "" {
		t.Fatalf("status: %+v", st)
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	tr, err := sch.Tick(ctx)
	if err != nil || tr.Rotated == 0 {
		t.Fatalf("tick once the lock is free: %+v, %v", tr, err)
	}
}
