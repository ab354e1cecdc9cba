package keyset_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
)

// syncBuffer is a log a test reads while a loader writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

// TestCountdown: on an injected clock walked through a keyset's last
// days with nothing refreshing it, the loader warns once a day from 3
// days before the expiry and once an hour in the last day, then reports
// it stale and turns unready; a refresh then logs that the load
// recovered, and the countdown starts over from the new expiry.
func TestCountdown(t *testing.T) {
	f := newFixture(t, keyring.DefaultPolicy()) // 7 days, expiring at t0 + 7 days
	expires := t0.Add(7 * 24 * time.Hour)
	var mu sync.Mutex
	now := t0.Add(time.Hour)
	set := func(left time.Duration) { mu.Lock(); now = expires.Add(-left); mu.Unlock() }
	var logs syncBuffer
	l := &keyset.Loader{Path: f.path, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Options: keyset.LoadOptions{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}}
	defer l.Close()
	testkit.Must(l.Load(ctx))

	const warning = "stateseal keyset goes stale soon"
	for _, step := range []struct {
		left  time.Duration
		lines int // warnings logged so far
	}{
		{100 * time.Hour, 0}, // the scheduler's own refresh is due at 84 hours left: quiet
		{73 * time.Hour, 0},
		{71 * time.Hour, 1}, // day 3
		{50 * time.Hour, 1},
		{47 * time.Hour, 2}, // day 2
		{25 * time.Hour, 2},
		{23*time.Hour + 30*time.Minute, 3}, // hour 24
		{23*time.Hour + 10*time.Minute, 3},
		{22*time.Hour + 50*time.Minute, 4}, // hour 23
		{30 * time.Minute, 5},              // hour 1
		{time.Minute, 5},
	} {
		set(step.left)
		testkit.Check(l.Reload(ctx))
		if n := logs.count(warning); n != step.lines {
			t.Fatalf("%v left: %d warnings, want %d\n%s", step.left, n, step.lines, logs.b.String())
		}
		if h := l.Health(); !h.Ready {
			t.Fatalf("%v left: not ready: %+v", step.left, h)
		}
	}
	if !strings.Contains(logs.b.String(), `in=22h50m0s`) || !strings.Contains(logs.b.String(), "expires=2026-08-04T12:00:00Z") {
		t.Fatalf("the warning does not say when:\n%s", logs.b.String())
	}

	set(0) // the expiry: stale, unready, no more countdown
	if err := l.Reload(ctx); !errors.Is(err, keyset.ErrStale) {
		t.Fatalf("at the expiry: %v", err)
	}
	if h := l.Health(); h.Ready || !h.Stale {
		t.Fatalf("at the expiry: %+v", h)
	}
	if n := logs.count(warning); n != 5 {
		t.Fatalf("%d warnings after the expiry", n)
	}

	// A refresh, as sealctl refresh writes it: the next version, expiring
	// a window from now.
	set(-time.Hour)
	mu.Lock()
	at := now
	mu.Unlock()
	f.ks.Follow(f.ks.Clone())
	f.ks.Refresh(at)
	testkit.Check(f.ks.Authenticate(ctx, f.kek))
	f.write(t, testkit.Must(f.ks.Marshal()))
	testkit.Check(l.Reload(ctx))
	if h := l.Health(); !h.Ready || h.Version != 2 {
		t.Fatalf("after the refresh: %+v", h)
	}
	if logs.count("stateseal keyset load recovered") != 1 || !strings.Contains(logs.b.String(), "was=\"keyset: the keyset has expired") {
		t.Fatalf("no recovery line:\n%s", logs.b.String())
	}
	expires = at.Truncate(time.Second).Add(7 * 24 * time.Hour)
	set(70 * time.Hour)
	testkit.Check(l.Reload(ctx))
	if n := logs.count(warning); n != 6 {
		t.Fatalf("the new expiry's countdown: %d warnings, want 6", n)
	}
}
