package rotation_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends/kektest"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
)

// TestFreezeReportedAtExpiry is the freeze of docs/KEYSET.md: after the
// operator's rotate --now and retire --force, a store writer puts back the
// exact bytes a running instance installed before it polls, and keeps
// them there. The instance cannot tell a freeze from a quiet store until
// the installed keyset's expiry; from then on, at every poll though the
// bytes never change, it reports ErrStale (once), and is not ready, while
// its keys keep serving.
func TestFreezeReportedAtExpiry(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	kekURL := kektest.LocalKEK(t, dir)
	path := filepath.Join(dir, "keyset.json")
	clock := testkit.NewClock(testkit.T0)
	op := &rotation.Options{KEK: kekURL, Now: clock.Now, Logger: slog.New(slog.DiscardHandler)}
	res, err := rotation.Init(ctx, path, kekURL, keyring.AEAD, keyring.DefaultPolicy(), op)
	if err != nil {
		t.Fatal(err)
	}
	leaked := res.Key
	var mu sync.Mutex
	var reported []error
	var logs testkit.Buffer
	l := &keyset.Loader{Path: path, Options: keyset.LoadOptions{KEK: kekURL, Now: clock.Now},
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
		OnError: func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() }}
	ring, err := l.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	installed, err := os.ReadFile(path)
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
	if err := os.WriteFile(path, installed, 0o600); err != nil { // the freeze
		t.Fatal(err)
	}
	go l.Run(ctx, time.Millisecond)
	polled := func(n uint64) func() bool {
		from := l.Health().Polls
		return func() bool { return l.Health().Polls >= from+n }
	}
	testkit.WaitFor(t, "polls", polled(3))
	// Within the window: the residual. Version 1 shows, and nothing else.
	if h := l.Health(); !h.Ready || h.Stale || h.Version != 1 || h.Error != "" {
		t.Fatalf("before expiry: %+v", h)
	}
	clock.Advance(7*24*time.Hour - time.Minute) // the installed keyset's Expires
	testkit.WaitFor(t, "the stale report", func() bool { return l.Health().Stale })
	testkit.WaitFor(t, "more polls", polled(5))
	h := l.Health()
	if h.Ready || !strings.Contains(h.Error, "expired") || h.Version != 1 {
		t.Fatalf("past expiry: %+v", h)
	}
	mu.Lock()
	n := len(reported)
	first := error(nil)
	if n > 0 {
		first = reported[0]
	}
	mu.Unlock()
	if n != 1 || !errors.Is(first, keyset.ErrStale) {
		t.Fatalf("reported %d times (want once, ErrStale): %v", n, first)
	}
	if !strings.Contains(logs.String(), "expired") {
		t.Fatalf("no log:\n%s", logs.String())
	}
	if err := l.Reload(ctx); !errors.Is(err, keyset.ErrStale) {
		t.Fatalf("Reload: %v", err)
	}
	// It keeps serving: a store writer gains no outage by freezing.
	if _, ok := ring.Current().Lookup(leaked); !ok {
		t.Fatal("the installed keys stopped serving")
	}
}
