// Package testkit holds what this module's tests share: a fixed instant,
// a clock a test moves by hand, and a wait on a condition (tests wait on
// conditions, never on fixed sleeps), and Must and Check for setup calls
// whose errors a test must not ignore (TestTestsCheckErrors holds every
// test of the module to it), and Build, which builds a command of the
// module once for tests that run it as a process.
package testkit

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// T0 is the instant fixed-clock tests start from: MCP 2026-07-28, noon UTC.
var T0 = time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)

// A Clock is a clock a test sets and moves. Its methods are safe for
// concurrent use; the zero value reads T0.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time, for options that take a func() time.Time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t.IsZero() {
		return T0
	}
	return c.t
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t.IsZero() {
		c.t = T0
	}
	c.t = c.t.Add(d)
}

// WaitFor polls ok every millisecond until it holds, and fails the test
// if it does not within 10 seconds, naming what it waited for.
func WaitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A Buffer is a log sink safe for concurrent writers (a loader's and a
// server's goroutines).
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
