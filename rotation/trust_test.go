package rotation

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
)

// TestSchedulerRefreshes: a scheduler that ticks keeps the keyset inside
// its freshness window, writing only when less than half of it is left.
func TestSchedulerRefreshes(t *testing.T) {
	path, clk, o := setup(t)
	if _, err := Refresh(ctx, path, o); err == nil {
		t.Fatal("refresh of a keyset without a window")
	}
	o.AllowStale = true
	p := keyring.DefaultPolicy()
	ks := read(t, path)
	ks.Policy = p // an operator turns freshness on (by hand here)
	writeWith(t, path, ks, o)
	l := &keyset.Loader{Path: path, Options: keyset.LoadOptions{KEK: o.KEK, Now: clk.now}, Logger: discard}
	if _, err := l.Load(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := &Scheduler{Path: path, Options: *o}
	s.Options.AllowStale = false
	s.Options.Loader = l
	for day := range 30 {
		clk.advance(24 * time.Hour)
		tr, err := s.Tick(ctx)
		if err != nil {
			t.Fatalf("day %d: %v", day+1, err)
		}
		now := read(t, path)
		if !clk.now().Before(now.Expires) {
			t.Fatalf("day %d: the keyset expired at %s", day+1, now.Expires)
		}
		if tr.Refreshed && now.Expires.Sub(clk.now()) != p.Freshness {
			t.Fatalf("day %d: refreshed to %s", day+1, now.Expires)
		}
		if left := now.Expires.Sub(clk.now()); left < p.Freshness/2-24*time.Hour {
			t.Fatalf("day %d: only %v left", day+1, left)
		}
	}
}

// writeWith authenticates ks at the next version under the test KEK and
// writes it, as an editor would.
func writeWith(t *testing.T, path string, ks *keyset.Keyset, o *Options) {
	t.Helper()
	kek, err := openKEK(ctx, o.KEK, path, o)
	if err != nil {
		t.Fatal(err)
	}
	prev := ks.Version
	ks.Follow(ks.Clone())
	ks.Refresh(o.now())
	if err := ks.Authenticate(ctx, kek); err != nil {
		t.Fatal(err)
	}
	cur := read(t, path)
	if cur.Version != prev {
		t.Fatalf("file at version %d, edit from %d", cur.Version, prev)
	}
	if err := keyset.WriteFile(ctx, path, ks); err != nil {
		t.Fatal(err)
	}
}

// TestSchedulerNeverWritesBackARollback: the store is rolled back to a
// version from before a retirement. A scheduler beside a loader that saw
// the newer version refuses to edit it, so the old copy is never
// authenticated again at a new version that fresh instances would take.
func TestSchedulerNeverWritesBackARollback(t *testing.T) {
	path, clk, o := setup(t)
	v1 := testkit.Must(os.ReadFile(path))
	Rotate(ctx, path, nil, o)
	Rotate(ctx, path, nil, o)
	l := &keyset.Loader{Path: path, Options: keyset.LoadOptions{KEK: o.KEK, Now: clk.now}, Logger: slog.New(slog.DiscardHandler)}
	if _, err := l.Load(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	testkit.Check(os.WriteFile(path, v1, 0o600)) // vault kv rollback, a restored backup
	so := *o
	so.Loader = l
	clk.advance(keyring.DefaultPolicy().RotationInterval)
	s := &Scheduler{Path: path, Options: so}
	if _, err := s.Tick(ctx); !errors.Is(err, keyset.ErrRollback) {
		t.Fatalf("tick on a rolled-back keyset: %v", err)
	}
	if got := testkit.Must(os.ReadFile(path)); string(got) != string(v1) {
		t.Fatal("the scheduler wrote the rolled-back keyset back")
	}
	// An editor with a configured floor refuses it too.
	fo := *o
	fo.MinVersion = 3
	if _, err := Rotate(ctx, path, nil, &fo); !errors.Is(err, keyset.ErrRollback) {
		t.Fatalf("rotate below MinVersion: %v", err)
	}
}

// TestSchedulerStatus: a scheduler says when it last ticked and what it
// did, key ids in hex as everywhere else.
func TestSchedulerStatus(t *testing.T) {
	path, clk, o := setup(t)
	s := &Scheduler{Path: path, Options: *o}
	if st := s.Status(); !st.LastTick.IsZero() {
		t.Fatalf("status before any tick: %+v", st)
	}
	clk.advance(keyring.DefaultPolicy().RotationInterval)
	tr, err := s.Tick(ctx)
	if err != nil || tr.Rotated == 0 {
		t.Fatalf("tick: %+v, %v", tr, err)
	}
	st := s.Status()
	b := testkit.Must(json.Marshal(st))
	if st.LastTick.IsZero() || st.Error != "" || !strings.Contains(string(b), `"rotated":"`+keyring.FormatID(tr.Rotated)+`"`) {
		t.Fatalf("status: %s", b)
	}
	testkit.Check(os.WriteFile(path, []byte("{broken"), 0o600))
	if _, err := s.Tick(ctx); err == nil || s.Status().Error == "" {
		t.Fatalf("a failed tick: %v, %+v", err, s.Status())
	}
}

// TestSchedulerRun: Run, the entry point docs/FLEET.md tells users to
// call, ticks at once and then on its interval, reports failed ticks to
// OnError and carries on, and returns when its context ends.
func TestSchedulerRun(t *testing.T) {
	path, clk, o := setup(t)
	clk.advance(keyring.DefaultPolicy().RotationInterval)
	var failures atomic.Int64
	s := &Scheduler{Path: path, Options: *o, OnError: func(error) { failures.Add(1) }}
	c, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- s.Run(c, time.Millisecond) }()
	testkit.WaitFor(t, "the scheduled rotation", func() bool { return len(read(t, path).Keys) == 2 })
	good := testkit.Must(os.ReadFile(path))
	testkit.Check(os.WriteFile(path+".tmp", []byte("{broken"), 0o600))
	testkit.Check(os.Rename(path+".tmp", path))
	testkit.WaitFor(t, "failed ticks reported", func() bool { return failures.Load() >= 3 })
	testkit.Check(os.WriteFile(path+".tmp", good, 0o600))
	testkit.Check(os.Rename(path+".tmp", path))
	n := s.Status().LastTick
	testkit.WaitFor(t, "a good tick again", func() bool { st := s.Status(); return st.LastTick.After(n) && st.Error == "" })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
	if err := (&Scheduler{Path: path}).Run(ctx, 0); err == nil {
		t.Fatal("interval 0 accepted")
	}
}

// TestUnvouchedEditsKeepExpiry: an editor with no Loader, no record and
// no operator's word cannot tell a copy rolled back inside the window
// from the newest: its edits keep the expiry they read and say so, its
// Refresh fails with ErrUnvouched and writes nothing; with Current, or
// a Vouch that knows the keyset, the expiry is renewed.
func TestUnvouchedEditsKeepExpiry(t *testing.T) {
	dir := t.TempDir()
	if err := backends.GenerateLocal(filepath.Join(dir, "kek")); err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: t0}
	o := &Options{KEK: "local:kek", Now: clk.now, Logger: discard}
	path := filepath.Join(dir, "keyset.json")
	if _, err := Init(ctx, path, "local:kek", keyring.AEAD, keyring.DefaultPolicy(), o); err != nil {
		t.Fatal(err)
	}
	first := read(t, path).Expires
	clk.advance(24 * time.Hour)
	res, err := Rotate(ctx, path, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Keyset.Expires.Equal(first) || !slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, "does not renew it") }) {
		t.Fatalf("a bare rotation: expires %s (was %s), warnings %q", res.Keyset.Expires, first, res.Warnings)
	}
	if _, err := Refresh(ctx, path, o); !errors.Is(err, ErrUnvouched) {
		t.Fatalf("a bare refresh: %v, want ErrUnvouched", err)
	}
	if v := read(t, path).Version; v != 2 {
		t.Fatalf("the refused refresh wrote version %d", v)
	}
	vouched := *o
	vouched.Vouch = func(ks *keyset.Keyset) bool { return ks.Version == 2 }
	if res, err := Refresh(ctx, path, &vouched); err != nil || !res.Keyset.Expires.Equal(clk.now().Add(keyring.DefaultPolicy().Freshness)) {
		t.Fatalf("a refresh by an editor that knows version 2: %v", err)
	}
	clk.advance(time.Hour)
	current := *o
	current.Current = true
	if res, err := Refresh(ctx, path, &current); err != nil || !res.Keyset.Expires.Equal(clk.now().Add(keyring.DefaultPolicy().Freshness)) {
		t.Fatalf("a refresh on the operator's word: %v", err)
	}
}
