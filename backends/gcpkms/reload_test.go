package gcpkms_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
)

// TestReloadsKeepGoroutinesFlat: a loader opens its Cloud KMS client once,
// however many reloads (200 reloads used to leave 1,600 goroutines), and
// edits close the clients they open. 1,000 reloads, one in ten of a new
// version that needs the KMS, then Close: the goroutine count comes back.
func TestReloadsKeepGoroutinesFlat(t *testing.T) {
	g := testservers.StartGCPKMS(t)
	ctx := context.Background()
	url := keyURL(g.Addr, g.NewKey("ring", id()))
	path := filepath.Join(t.TempDir(), "keyset.json")
	o := &rotation.Options{KEK: url, Logger: slog.New(slog.DiscardHandler), Current: true} // refreshes below: the operator vouches
	if _, err := rotation.Init(ctx, path, url, keyring.AEAD, keyring.DefaultPolicy(), o); err != nil {
		t.Fatal(err)
	}
	l := &keyset.Loader{Path: path, Options: keyset.LoadOptions{KEK: url}, Logger: slog.New(slog.DiscardHandler)}
	if _, err := l.Load(ctx); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	calls := g.Calls.Load()
	for i := range 1000 {
		if i%10 == 0 {
			if _, err := rotation.Refresh(ctx, path, o); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Reload(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if g.Calls.Load()-calls < 200 {
		t.Fatalf("only %d KMS calls: the reloads did not reach the KMS", g.Calls.Load()-calls)
	}
	waitGoroutines(t, before, "after 1,000 reloads and 100 edits")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	waitGoroutines(t, before, "after Close")
}

// waitGoroutines waits until at most max goroutines (plus a few the
// runtime and the test's server start on their own) are left.
func waitGoroutines(t *testing.T, max int, when string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > max+5 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d goroutines, had %d", when, runtime.NumGoroutine(), max)
		}
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond)
	}
}
