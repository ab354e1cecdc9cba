// Package storetest is the conformance suite every keyset store passes,
// the way gocloud.dev's drivertest is for its providers: one suite, run
// against each store by a small harness in that store's tests. It tests
// the stores.Store contract only: read, write, compare-and-swap,
// revisions (and stores.Revisioner), stores.Watcher, the size bound,
// errors while the server is down, and Close. What loaders, rotation and
// schedulers do with stores is tested in their packages and in
// internal/integration.
//
// A store's tests call [Run] with a [Harness]: once opening locations
// with the store's own clients (stores.Default), and, for a store with a
// client, once more through a client the test made (a registry with the
// store's Opener(client), which builds each store with the store's New),
// which checks that no store closes a client it was given. kektest's
// Harness has the same shape for KEK backends.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stateseal/stateseal/stores"
)

// A Harness gives the suite empty stores of one kind and the registry
// that opens them. Every method is required.
type Harness interface {
	// Registry opens the locations the harness returns: stores.Default,
	// or a registry whose opener uses a client the test made.
	Registry() *stores.Registry
	// NewLocation returns the location (a path or a URL) of a new, empty
	// store.
	NewLocation(ctx context.Context, t *testing.T) string
	// Stop makes the store's server unreachable, and Start brings it back
	// on the same address with its data; Stop returns false for a store
	// with no server (a file), and then Start is not called.
	Stop(t *testing.T) (ok bool)
	Start(t *testing.T)
}

// Run runs the suite against h.
func Run(t *testing.T, h Harness) {
	ctx := context.Background()
	t.Run("ReadWrite", func(t *testing.T) { testReadWrite(ctx, t, h) })
	t.Run("Conflict", func(t *testing.T) { testConflict(ctx, t, h) })
	t.Run("Revisions", func(t *testing.T) { testRevisions(ctx, t, h) })
	t.Run("ConcurrentWriters", func(t *testing.T) { testConcurrent(ctx, t, h) })
	t.Run("Watch", func(t *testing.T) { testWatch(ctx, t, h) })
	t.Run("SizeBound", func(t *testing.T) { testSize(ctx, t, h) })
	t.Run("Outage", func(t *testing.T) { testOutage(ctx, t, h) })
	t.Run("CloseLeavesOthers", func(t *testing.T) { testClose(ctx, t, h) })
}

// open opens loc with the harness's registry, closed when the test ends.
func open(ctx context.Context, t *testing.T, h Harness, loc string) stores.Store {
	t.Helper()
	s, err := h.Registry().Open(ctx, loc)
	if err != nil {
		t.Fatalf("Open(%s): %v", stores.Redact(loc), err)
	}
	t.Cleanup(func() { stores.Close(s) })
	return s
}

// revision returns s's Revision if it is a Revisioner, and want if not.
func revision(ctx context.Context, t *testing.T, s stores.Store, want string) string {
	t.Helper()
	r, ok := s.(stores.Revisioner)
	if !ok {
		return want
	}
	rev, err := r.Revision(ctx)
	if err != nil {
		t.Fatalf("Revision: %v", err)
	}
	return rev
}

func testReadWrite(ctx context.Context, t *testing.T, h Harness) {
	s := open(ctx, t, h, h.NewLocation(ctx, t))
	if s.String() == "" {
		t.Error("String is empty")
	}
	if _, _, err := s.Read(ctx); !errors.Is(err, stores.ErrNotFound) {
		t.Fatalf("Read of an empty store: %v, want ErrNotFound", err)
	}
	if rev := revision(ctx, t, s, ""); rev != "" {
		t.Fatalf("Revision of an empty store = %q, want \"\"", rev)
	}
	r1, err := s.Write(ctx, []byte(`{"v":1}`), "")
	if err != nil {
		t.Fatal(err)
	}
	data, rev, err := s.Read(ctx)
	if err != nil || string(data) != `{"v":1}` || rev != r1 {
		t.Fatalf("Read = %s, %q, %v; want {\"v\":1}, %q", data, rev, err, r1)
	}
	r2, err := s.Write(ctx, []byte(`{"v":2}`), r1)
	if err != nil || r2 == r1 {
		t.Fatalf("second Write = %q, %v", r2, err)
	}
	if data, rev, _ := s.Read(ctx); string(data) != `{"v":2}` || rev != r2 {
		t.Fatalf("after the second write: %s, %q", data, rev)
	}
	if rev := revision(ctx, t, s, r2); rev != r2 {
		t.Fatalf("Revision = %q; want %q", rev, r2)
	}
}

// testConflict: a write from a revision the store no longer holds, or
// onto a document that exists, or from a revision onto an empty store,
// fails with ErrConflict and writes nothing.
func testConflict(ctx context.Context, t *testing.T, h Harness) {
	s := open(ctx, t, h, h.NewLocation(ctx, t))
	r1, err := s.Write(ctx, []byte("one"), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, []byte("again"), ""); !errors.Is(err, stores.ErrConflict) {
		t.Errorf("a second creation: %v, want ErrConflict", err)
	}
	r2, err := s.Write(ctx, []byte("two"), r1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, []byte("stale"), r1); !errors.Is(err, stores.ErrConflict) {
		t.Errorf("a write from a stale revision: %v, want ErrConflict", err)
	}
	if data, rev, _ := s.Read(ctx); string(data) != "two" || rev != r2 {
		t.Errorf("a lost write changed the store: %s %q", data, rev)
	}
	// A revision of another store, onto an empty one.
	empty := open(ctx, t, h, h.NewLocation(ctx, t))
	if _, err := empty.Write(ctx, []byte("stray"), r1); !errors.Is(err, stores.ErrConflict) {
		t.Errorf("a write from a revision onto an empty store: %v, want ErrConflict", err)
	}
	if _, _, err := empty.Read(ctx); !errors.Is(err, stores.ErrNotFound) {
		t.Errorf("after a lost write onto an empty store: %v, want ErrNotFound", err)
	}
}

// testRevisions: every write of new content gives a new revision, and a
// revision means the same thing to every store opened on the location (to
// every instance of a fleet): what one writes, another reads at the
// revision the write returned, and can write from.
func testRevisions(ctx context.Context, t *testing.T, h Harness) {
	loc := h.NewLocation(ctx, t)
	a, b := open(ctx, t, h, loc), open(ctx, t, h, loc)
	seen := map[string]int{}
	rev := ""
	for i := range 4 {
		w := a
		if i%2 == 1 {
			w = b
		}
		next, err := w.Write(ctx, fmt.Appendf(nil, `{"v":%d}`, i), rev)
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if j, dup := seen[next]; dup {
			t.Fatalf("writes %d and %d gave one revision %q", j, i, next)
		}
		seen[next], rev = i, next
		other := b
		if w == b {
			other = a
		}
		for _, r := range []stores.Store{w, other} {
			data, got, err := r.Read(ctx)
			if err != nil || got != next || string(data) != fmt.Sprintf(`{"v":%d}`, i) {
				t.Fatalf("write %d, read by the writer (%v) or the other store: %s, %q, %v; want revision %q", i, r == w, data, got, err, next)
			}
			if got := revision(ctx, t, r, next); got != next {
				t.Fatalf("write %d, Revision from the writer (%v) or the other store = %q, want %q", i, r == w, got, next)
			}
		}
	}
}

// testConcurrent: writers, each with a store of its own on one location,
// increment a counter by read and compare-and-swap at once. No increment
// is lost: the final count is the number of writes that succeeded, and
// every write that did not got ErrConflict.
func testConcurrent(ctx context.Context, t *testing.T, h Harness) {
	loc := h.NewLocation(ctx, t)
	if _, err := open(ctx, t, h, loc).Write(ctx, []byte("0"), ""); err != nil {
		t.Fatal(err)
	}
	const writers, each = 4, 10
	var mu sync.Mutex
	conflicts := 0
	var wg sync.WaitGroup
	for range writers {
		s := open(ctx, t, h, loc)
		wg.Go(func() {
			for done := 0; done < each; {
				data, rev, err := s.Read(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				n, err := strconv.Atoi(string(data))
				if err != nil {
					t.Errorf("the counter reads %q", data)
					return
				}
				_, err = s.Write(ctx, []byte(strconv.Itoa(n+1)), rev)
				switch {
				case errors.Is(err, stores.ErrConflict):
					mu.Lock()
					conflicts++
					mu.Unlock()
				case err != nil:
					t.Error(err)
					return
				default:
					done++
				}
			}
		})
	}
	wg.Wait()
	data, _, err := open(ctx, t, h, loc).Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != strconv.Itoa(writers*each) {
		t.Errorf("%d writers x %d increments: the counter is %s, want %d", writers, each, data, writers*each)
	}
	t.Logf("%d writers x %d increments: %d conflicts, counter %s", writers, each, conflicts, data)
}

// testWatch: a Watcher signals a write made, through another store, after
// Watch returned, and closes its channel when its context ends.
func testWatch(ctx context.Context, t *testing.T, h Harness) {
	loc := h.NewLocation(ctx, t)
	s := open(ctx, t, h, loc)
	w, ok := s.(stores.Watcher)
	if !ok {
		t.Skip("the store is not a Watcher")
	}
	c, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := w.Watch(c)
	rev, err := open(ctx, t, h, loc).Write(ctx, []byte("watched"), "")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatal("the watch channel closed before its context ended")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no signal within 5 s of a write")
	}
	if data, got, err := s.Read(ctx); err != nil || got != rev || string(data) != "watched" {
		t.Fatalf("Read after the signal: %s, %q, %v", data, got, err)
	}
	cancel()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("the watch channel stayed open 5 s after its context ended")
		}
	}
}

// testSize: a document of stores.MaxSize bytes is written and read back;
// one byte more is refused with ErrTooLarge, naming the bound.
func testSize(ctx context.Context, t *testing.T, h Harness) {
	s := open(ctx, t, h, h.NewLocation(ctx, t))
	_, err := s.Write(ctx, []byte(strings.Repeat("x", stores.MaxSize+1)), "")
	if !errors.Is(err, stores.ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprint(stores.MaxSize)) {
		t.Fatalf("a write of MaxSize+1 bytes: %v, want ErrTooLarge naming the bound", err)
	}
	// Nothing JSON escapes: Vault refuses a string over 1 MiB as sent.
	doc := []byte(strings.Repeat("x", stores.MaxSize))
	rev, err := s.Write(ctx, doc, "")
	if err != nil {
		t.Fatalf("a write of MaxSize bytes: %v", err)
	}
	if data, r, err := s.Read(ctx); err != nil || r != rev || len(data) != stores.MaxSize {
		t.Fatalf("Read of MaxSize bytes: %d bytes, %q, %v", len(data), r, err)
	}
}

// testOutage stops the server under an open store. Reads, revisions and
// writes fail within seconds naming the store, never as ErrNotFound or
// ErrConflict (an outage is neither a missing keyset nor a lost race), and
// a store opened meanwhile fails the same way. Once the server is back,
// the same store reads the document it held, and a write from its
// revision succeeds: nothing was written while it was down.
func testOutage(ctx context.Context, t *testing.T, h Harness) {
	loc := h.NewLocation(ctx, t)
	s := open(ctx, t, h, loc)
	rev, err := s.Write(ctx, []byte("before"), "")
	if err != nil {
		t.Fatal(err)
	}
	if !h.Stop(t) {
		t.Skip("the store has no server")
	}
	up := false
	defer func() {
		if !up {
			h.Start(t)
		}
	}()
	check := func(what, name string, err error, start time.Time) {
		t.Helper()
		switch {
		case err == nil:
			t.Errorf("%s with the server stopped succeeded", what)
		case errors.Is(err, stores.ErrNotFound), errors.Is(err, stores.ErrConflict):
			t.Errorf("%s with the server stopped: %v, which is not an outage", what, err)
		case !strings.Contains(err.Error(), name):
			t.Errorf("%s: the error does not name the store %s: %v", what, name, err)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("%s with the server stopped took %v to fail", what, d)
		}
	}
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	_, _, err = s.Read(c)
	check("Read", s.String(), err, start)
	if r, ok := s.(stores.Revisioner); ok {
		start = time.Now()
		_, err = r.Revision(c)
		check("Revision", s.String(), err, start)
	}
	start = time.Now()
	_, err = s.Write(c, []byte("during"), rev)
	check("Write", s.String(), err, start)
	start = time.Now()
	if s2, err := h.Registry().Open(c, loc); err != nil {
		check("Open", stores.Redact(loc), err, start)
	} else {
		_, _, err = s2.Read(c)
		check("Read from a store opened while the server was stopped", s2.String(), err, start)
		stores.Close(s2)
	}

	h.Start(t)
	up = true
	// Clients reconnect with backoff: wait for the condition, not a time.
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, got, err := s.Read(ctx)
		if err == nil {
			if got != rev || string(data) != "before" {
				t.Fatalf("after the outage: %s at %q, want \"before\" at %q", data, got, rev)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store did not read within 30 s of the server's return: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	if _, err := s.Write(ctx, []byte("after"), rev); err != nil {
		t.Fatalf("a write from the revision read before the outage: %v", err)
	}
}

// testClose: two stores on one location, from one registry, share
// whatever the store shares (a Vault session, a caller's client): closing
// one leaves the other, and the next one opened, working.
func testClose(ctx context.Context, t *testing.T, h Harness) {
	loc := h.NewLocation(ctx, t)
	a, err := h.Registry().Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	b := open(ctx, t, h, loc)
	rev, err := a.Write(ctx, []byte("one"), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := stores.Close(a); err != nil {
		t.Fatalf("Close: %v", err)
	}
	data, got, err := b.Read(ctx)
	if err != nil || got != rev || !bytes.Equal(data, []byte("one")) {
		t.Fatalf("another store on the location, after the first was closed: %s, %q, %v", data, got, err)
	}
	if _, err := open(ctx, t, h, loc).Write(ctx, []byte("two"), rev); err != nil {
		t.Fatalf("a store opened after another was closed: %v", err)
	}
}
