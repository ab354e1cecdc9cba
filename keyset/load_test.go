package keyset

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/stores"
)

func TestReloadKeepsLastGood(t *testing.T) {
	path, ks, kek := newKeysetFile(t, 1)
	var logs bytes.Buffer
	var mu sync.Mutex
	var reported []error
	l := &Loader{
		Path:    path,
		Options: LoadOptions{KEK: "local:kek", Now: func() time.Time { return t0.Add(time.Hour) }},
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
		OnError: func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() },
	}
	ring, err := l.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	good := ring.Current()
	orig := testkit.Must(os.ReadFile(path))

	// A second key arrives: Reload installs it.
	next := ks.Clone()
	next.Follow(ks)
	sk := testkit.Must(next.Wrap(ctx, kek, key(t, keyring.MAC, t0, next.ids()...)))
	next.Keys = append(next.Keys, sk)
	if err := writeAuth(t, path, next, kek); err != nil {
		t.Fatal(err)
	}
	if err := l.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if ring.Current() == good || ring.Current().Len() != 2 {
		t.Fatal("Reload did not install version 2")
	}
	good = ring.Current()
	v2 := testkit.Must(os.ReadFile(path))

	bad := map[string][]byte{
		"truncated":       v2[:len(v2)/2],
		"empty":           nil,
		"garbage":         []byte("\x00\x01 not a keyset"),
		"corrupt wrapped": bytes.Replace(v2, []byte(`"wrapped": "A`), []byte(`"wrapped": "B`), 1),
		"older version":   orig, // version 1 could resurrect retired keys
	}
	if bytes.Equal(bad["corrupt wrapped"], v2) {
		bad["corrupt wrapped"] = bytes.Replace(v2, []byte(`"wrapped": "`), []byte(`"wrapped": "AAAA`), 1)
	}
	for name, data := range bad {
		testkit.Check(os.WriteFile(path, data, 0o600)) // as a careless editor would
		reported = nil
		err := l.Reload(ctx)
		if ring.Current() != good {
			t.Fatalf("%s: the ring lost its last good keys", name)
		}
		if err == nil || len(reported) != 1 {
			t.Fatalf("%s: error %v, %d reported", name, err, len(reported))
		}
	}
	if !strings.Contains(logs.String(), "keeping the last good keys") {
		t.Fatalf("no log line for the failed reloads:\n%s", logs.String())
	}
	testkit.Check(os.WriteFile(path, v2, 0o600))
	if err := l.Reload(ctx); err != nil || ring.Current() != good {
		t.Fatalf("after repair: %v", err)
	}
}

// TestReloadNoUsablePrimary: a keyset whose only active key activates in
// the future is refused, and the old keys keep serving.
func TestReloadNoUsablePrimary(t *testing.T) {
	path, ks, kek := newKeysetFile(t, 1)
	l := &Loader{Path: path, Options: LoadOptions{KEK: "local:kek", Now: func() time.Time { return t0 }}, Logger: slog.New(slog.DiscardHandler)}
	ring, err := l.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	good := ring.Current()
	next := ks.Clone()
	next.Follow(ks)
	sk := testkit.Must(next.Wrap(ctx, kek, key(t, keyring.AEAD, t0.Add(time.Hour), next.ids()...)))
	next.Keys = []StoredKey{sk}
	if err := writeAuth(t, path, next, kek); err != nil {
		t.Fatal(err)
	}
	if err := l.Reload(ctx); err == nil || ring.Current() != good {
		t.Fatalf("keyset with no usable primary installed: %v", err)
	}
}

func TestRunPolls(t *testing.T) {
	path, ks, kek := newKeysetFile(t, 1)
	l := &Loader{Path: path, Options: LoadOptions{KEK: "local:kek", Now: func() time.Time { return t0.Add(time.Hour) }}, Logger: slog.New(slog.DiscardHandler)}
	ring, err := l.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- l.Run(c, 5*time.Millisecond) }()
	next := ks.Clone()
	next.Follow(ks)
	next.Policy.Skew = time.Minute
	if err := writeAuth(t, path, next, kek); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, ring, 2)
	cancel()
	<-done
	if p, _ := ring.Current().Policy(); p.Skew != time.Minute {
		t.Fatalf("policy not reloaded: %+v", p)
	}
}

// TestRunReportsBrokenFileOnce: a poll reports a broken keyset once, not at
// every tick, keeps the last good keys, and picks up the repaired file.
func TestRunReportsBrokenFileOnce(t *testing.T) {
	path, ks, kek := newKeysetFile(t, 1)
	var mu sync.Mutex
	reports := 0
	store := &countingStore{Store: stores.NewFile(path)}
	l := &Loader{Path: path, Store: store, Options: LoadOptions{KEK: "local:kek", Now: func() time.Time { return t0.Add(time.Hour) }},
		Logger: slog.New(slog.DiscardHandler), OnError: func(error) { mu.Lock(); reports++; mu.Unlock() }}
	ring, err := l.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	good := ring.Current()
	c, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error)
	go func() { done <- l.Run(c, 2*time.Millisecond) }()
	writeAtomic(t, path, []byte("{broken"))
	testkit.WaitFor(t, "the first report", func() bool { mu.Lock(); defer mu.Unlock(); return reports > 0 })
	// Thirty more polls of the same broken file.
	after := store.reads.Load()
	testkit.WaitFor(t, "thirty more polls", func() bool { return store.reads.Load() >= after+30 })
	mu.Lock()
	n := reports
	mu.Unlock()
	if n != 1 || ring.Current() != good {
		t.Fatalf("%d reports for one broken file (want 1); keys kept: %v", n, ring.Current() == good)
	}
	next := ks.Clone()
	next.Follow(ks)
	next.Authenticate(ctx, kek)
	data := testkit.Must(next.Marshal())
	writeAtomic(t, path, data)
	waitVersion(t, ring, 2)
	cancel()
	<-done
}

// countingStore counts reads: a test waits on polls, not on time.
type countingStore struct {
	stores.Store
	reads atomic.Int64
}

func (s *countingStore) Read(ctx context.Context) ([]byte, string, error) {
	s.reads.Add(1)
	return s.Store.Read(ctx)
}

// writeAtomic replaces the file at path as every keyset writer does, so a
// poll never reads half of it.
func writeAtomic(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// waitVersion waits up to 5 s for a polling Loader to install version v.
func waitVersion(t *testing.T, ring *keyring.Ring, v uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for ring.Current().Version() != v {
		if time.Now().After(deadline) {
			t.Fatalf("Run did not pick up version %d within 5s", v)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// memStore is a store in memory with a cheap revision, counting calls.
type memStore struct {
	mu              sync.Mutex
	data            []byte
	rev             int
	reads, revCalls atomic.Int64
}

func (m *memStore) Read(context.Context) ([]byte, string, error) {
	m.reads.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.data), strconv.Itoa(m.rev), nil
}

func (m *memStore) Write(_ context.Context, data []byte, rev string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rev != strconv.Itoa(m.rev) {
		return "", stores.ErrConflict
	}
	m.data, m.rev = bytes.Clone(data), m.rev+1
	return strconv.Itoa(m.rev), nil
}

func (m *memStore) Revision(context.Context) (string, error) {
	m.revCalls.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	return strconv.Itoa(m.rev), nil
}

func (m *memStore) String() string { return "mem" }

var _ stores.Revisioner = (*memStore)(nil)

// TestRevisionChecksAfterFailure: once a document failed for good (it does
// not parse), polls ask only for the store's revision, and read again only
// when it changes: a broken 1 MiB document is not read at every tick.
func TestRevisionChecksAfterFailure(t *testing.T) {
	path, _, _ := newKeysetFile(t, 1)
	good := testkit.Must(os.ReadFile(path))
	m := &memStore{}
	m.Write(ctx, good, "0")
	l := &Loader{Path: path, Store: m, Options: LoadOptions{KEK: "local:kek", Now: func() time.Time { return t0.Add(time.Hour) }},
		Logger: slog.New(slog.DiscardHandler)}
	if _, err := l.Load(ctx); err != nil {
		t.Fatal(err)
	}
	m.Write(ctx, []byte("{broken"), "1")
	c, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error)
	go func() { done <- l.Run(c, time.Millisecond) }()
	testkit.WaitFor(t, "the broken document read", func() bool { return m.reads.Load() >= 2 })
	reads, revs := m.reads.Load(), m.revCalls.Load()
	testkit.WaitFor(t, "fifty revision checks", func() bool { return m.revCalls.Load() >= revs+50 })
	if n := m.reads.Load() - reads; n > 1 {
		t.Fatalf("%d reads of an unchanged broken document in 50 polls", n)
	}
	cancel()
	<-done
}

// failingStore fails reads while down is set.
type failingStore struct {
	*memStore
	down atomic.Bool
}

func (f *failingStore) Read(ctx context.Context) ([]byte, string, error) {
	if f.down.Load() {
		return nil, "", errors.New("connection refused")
	}
	return f.memStore.Read(ctx)
}

func (f *failingStore) Revision(ctx context.Context) (string, error) {
	if f.down.Load() {
		return "", errors.New("connection refused")
	}
	return f.memStore.Revision(ctx)
}

// TestHealth: a loader says what it serves, whether its store answers,
// and why the last poll failed; it stays ready through an outage and a
// broken document, since the last good keys keep serving.
func TestHealth(t *testing.T) {
	path, _, _ := newKeysetFile(t, 1)
	good := testkit.Must(os.ReadFile(path))
	f := &failingStore{memStore: &memStore{}}
	f.Write(ctx, good, "0")
	l := &Loader{Path: path, Store: f, Options: LoadOptions{KEK: "local:kek", Now: func() time.Time { return t0.Add(time.Hour) }},
		Logger: slog.New(slog.DiscardHandler)}
	if h := l.Health(); h.Ready {
		t.Fatal("ready before Load")
	}
	before := time.Now()
	if _, err := l.Load(ctx); err != nil {
		t.Fatal(err)
	}
	h := l.Health()
	if !h.Ready || h.Version != 1 || h.Keyset == "" || h.Error != "" || h.LastCheck.Before(before) || h.KMSSeen.Before(before) {
		t.Fatalf("after Load: %+v", h)
	}
	f.down.Store(true)
	l.Reload(ctx)
	if h := l.Health(); !h.Ready || !h.Outage || !strings.Contains(h.Error, "connection refused") {
		t.Fatalf("store down: %+v", h)
	}
	f.down.Store(false)
	f.Write(ctx, []byte("{broken"), "1")
	l.Reload(ctx)
	if h := l.Health(); !h.Ready || h.Outage || h.Error == "" || h.Version != 1 {
		t.Fatalf("broken document: %+v", h)
	}
	f.Write(ctx, good, "2")
	if err := l.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if h := l.Health(); h.Error != "" || !h.StoreSeen.After(before) {
		t.Fatalf("repaired: %+v", h)
	}
}
