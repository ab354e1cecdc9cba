package rotation_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends/kektest"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
)

// TestBareSchedulerWarns: a scheduler without a Loader cannot tell a
// rolled-back copy from the newest, so its first tick on one edits it,
// keeping the copy's expiry. It says so: in its log, in the tick's
// result and in Status, where it used to say nothing but "key retired".
func TestBareSchedulerWarns(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	kekURL := kektest.LocalKEK(t, dir)
	path := filepath.Join(dir, "keyset.json")
	clock := testkit.NewClock(testkit.T0)
	op := &rotation.Options{KEK: kekURL, Now: clock.Now, Current: true, Logger: slog.New(slog.DiscardHandler)}
	res, err := rotation.Init(ctx, path, kekURL, keyring.AEAD, keyring.DefaultPolicy(), op)
	if err != nil {
		t.Fatal(err)
	}
	leaked := res.Key
	if _, err := rotation.Rotate(ctx, path, &rotation.RotateOptions{Immediate: true}, op); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(path) // version 2: the leaked key active
	if err != nil {
		t.Fatal(err)
	}
	oldKS, err := keyset.Parse(old)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if _, err := rotation.Retire(ctx, path, leaked, &rotation.RetireOptions{Force: true}, op); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Hour)
	if err := os.WriteFile(path, old, 0o600); err != nil { // the rollback
		t.Fatal(err)
	}
	var logs testkit.Buffer
	sch := &rotation.Scheduler{Path: path, Options: rotation.Options{KEK: kekURL, Now: clock.Now,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}}
	tr, err := sch.Tick(ctx)
	if err != nil || len(tr.Retired) == 0 {
		t.Fatalf("tick: %+v, %v", tr, err)
	}
	cur, err := keyset.ReadFile(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if !cur.Expires.Equal(oldKS.Expires) {
		t.Fatalf("the bare scheduler renewed the copy: expires %s, was %s", cur.Expires, oldKS.Expires)
	}
	says := func(ws []string) bool {
		return len(ws) > 0 && strings.Contains(strings.Join(ws, "\n"), "cannot tell a copy rolled back")
	}
	if !says(tr.Warnings) {
		t.Fatalf("tick result: %+v", tr)
	}
	if st := sch.Status(); !says(st.Result.Warnings) {
		t.Fatalf("status: %+v", st)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "cannot tell a copy rolled back") {
		t.Fatalf("logs:\n%s", logs.String())
	}
}
