//go:build unix

package keyset_test

import (
	"context"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
)

// TestAttackFIFOWedgesLoader: whoever can write a keyset file's directory
// (every file-store writer can: writes are renames) replaces keyset.json
// with a named pipe. Opening a FIFO for reading blocks in the kernel until
// a writer opens it, which no context cancels. A running loader must keep
// polling and report the broken store (docs/KEYSET.md: "a running Loader
// keeps its last good keys and reports it"), and a scheduler beside it
// (Loader.Check) must not hang: a loader that stops reloading without a
// word silently splits the fleet at the next rotation.
func TestAttackFIFOWedgesLoader(t *testing.T) {
	f := newFixture(t, keyring.DefaultPolicy())
	var reported atomic.Int64
	l := quietLoader(f, keyset.LoadOptions{})
	l.OnError = func(error) { reported.Add(1) }
	if _, err := l.Load(ctx); err != nil {
		t.Fatal(err)
	}
	ks, err := keyset.ReadFile(ctx, f.path)
	if err != nil {
		t.Fatal(err)
	}
	// The attack: the document becomes a FIFO nobody writes.
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(f.path, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	release := func() {
		// A writer that opens and closes the pipe lets a blocked reader go
		// (it reads EOF). Nonblocking: if nobody reads, this fails at once.
		if w, err := os.OpenFile(f.path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	}
	defer func() {
		for range 50 {
			release()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	c, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { l.Run(c, 50*time.Millisecond); close(done) }()
	defer func() {
		cancel()
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
				release()
			}
		}
	}()

	deadline := time.Now().Add(3 * time.Second)
	for reported.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if reported.Load() == 0 {
		t.Errorf("FINDING: keyset.json replaced by a FIFO: the running loader reported nothing in 3 s (its poll is blocked in open(2), holding the loader's lock)")
	}
	checked := make(chan error, 1)
	go func() { checked <- l.Check(ks) }()
	select {
	case <-checked:
	case <-time.After(2 * time.Second):
		t.Errorf("FINDING: Loader.Check (what a rotation.Scheduler calls before every edit) blocked for 2 s behind the wedged poll")
	}
	rc, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer rcancel()
	reloaded := make(chan error, 1)
	go func() { reloaded <- l.Reload(rc) }()
	select {
	case err := <-reloaded:
		if err == nil {
			t.Errorf("Reload of a FIFO succeeded")
		}
	case <-time.After(2 * time.Second):
		t.Errorf("FINDING: Reload with a 500 ms context did not return in 2 s")
	}
}
