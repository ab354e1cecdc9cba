package storetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/redact"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/seal"
)

// helpers runs n helper processes with spec at once and returns each
// one's output lines.
func helpers(t *testing.T, n int, spec helperSpec) [][]string {
	spec.Start = time.Now().Add(500 * time.Millisecond)
	b, _ := json.Marshal(spec)
	outs := make([][]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "STATESEAL_STORETEST_HELPER="+string(b))
			out, err := cmd.Output()
			if err != nil {
				t.Errorf("helper %d: %v\n%s", i, err, out)
			}
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				outs[i] = append(outs[i], sc.Text())
			}
		})
	}
	wg.Wait()
	return outs
}

// testTwoProcesses: two processes rotate one keyset 50 times each, at
// once. Every committed key is in the final keyset, each process's
// versions strictly increase, no version is committed twice, and every
// attempt that did not commit got ErrConflict.
func (e *env) testTwoProcesses(ctx context.Context, t *testing.T) {
	loc := e.newKeyset(ctx, t, keyring.DefaultPolicy())
	const n = 50
	outs := helpers(t, 2, helperSpec{KEK: e.kek, Op: "rotate", Location: loc, N: n})
	committed := map[uint64]string{}
	conflicts := 0
	for i, lines := range outs {
		if len(lines) != n {
			t.Fatalf("process %d reported %d attempts, want %d", i, len(lines), n)
		}
		var last uint64
		for _, l := range lines {
			var v uint64
			var id string
			if l == "conflict" {
				conflicts++
				continue
			}
			if _, err := fmt.Sscanf(l, "ok %d %s", &v, &id); err != nil {
				t.Fatalf("process %d: %q", i, l)
			}
			if v <= last {
				t.Errorf("process %d: version %d after %d", i, v, last)
			}
			if other, dup := committed[v]; dup {
				t.Errorf("version %d committed twice: %s and %s", v, other, id)
			}
			committed[v], last = id, v
		}
	}
	ks, _, err := keyset.Read(ctx, open(ctx, t, loc))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, k := range ks.Keys {
		have[keyring.FormatID(k.ID)] = true
	}
	for v, id := range committed {
		if !have[id] {
			t.Errorf("key %s, committed at version %d, is missing", id, v)
		}
	}
	if ks.Version != uint64(len(committed))+1 || len(ks.Keys) != len(committed)+1 {
		t.Errorf("final version %d with %d keys; %d rotations committed", ks.Version, len(ks.Keys), len(committed))
	}
	t.Logf("%s: 2 processes x %d rotations: %d committed, %d conflicts, final version %d", e.h.Name(), n, len(committed), conflicts, ks.Version)
}

// fastPoll is the poll interval of loaders outside the change test.
const fastPoll = 50 * time.Millisecond

// loader starts a Loader following loc, polling every poll, reporting
// errors to a counter.
func (e *env) loader(ctx context.Context, t *testing.T, loc string, now time.Time, poll time.Duration) (*keyset.Loader, *keyring.Ring, *atomic.Int32) {
	var reports atomic.Int32
	l := &keyset.Loader{Path: loc, Logger: quiet, OnError: func(error) { reports.Add(1) },
		Options: keyset.LoadOptions{KEK: e.kek, Now: func() time.Time { return now }}}
	ring, err := l.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { l.Run(c, poll); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return l, ring, &reports
}

func waitVersion(t *testing.T, ring *keyring.Ring, v uint64, within time.Duration) time.Duration {
	start := time.Now()
	for ring.Current().Version() < v {
		if time.Since(start) > within {
			t.Fatalf("the loader did not reach version %d within %v (at %d)", v, within, ring.Current().Version())
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start)
}

// testChange: a rotation reaches a running loader, within the store's
// bound. The delay is measured from the end of the write.
func (e *env) testChange(ctx context.Context, t *testing.T) {
	loc := e.newKeyset(ctx, t, keyring.DefaultPolicy())
	_, ring, _ := e.loader(ctx, t, loc, time.Now(), e.h.PollInterval())
	var worst time.Duration
	for i := range 5 {
		if _, err := rotation.Rotate(ctx, loc, nil, e.o); err != nil {
			t.Fatal(err)
		}
		d := waitVersion(t, ring, uint64(i+2), 10*time.Second)
		worst = max(worst, d)
	}
	if worst > e.h.MaxDelay() {
		t.Errorf("a rotation took %v to reach the loader, over %v", worst, e.h.MaxDelay())
	}
	fmt.Printf("storetest: %s: a rotation reached a loader polling every %v within %v (worst of 5)\n", e.h.Name(), e.h.PollInterval(), worst.Round(time.Millisecond))
}

// testDown: the store stops under a running loader. The loader keeps its
// keys, reports once, and picks up a rotation made after the store is
// back.
func (e *env) testDown(ctx context.Context, t *testing.T) {
	loc := e.newKeyset(ctx, t, keyring.DefaultPolicy())
	now := time.Now()
	_, ring, reports := e.loader(ctx, t, loc, now, fastPoll)
	good := ring.Current()
	if !e.h.Stop(t) {
		t.Skip("the store has no server to stop")
	}
	// A poll against a store that is down takes as long as its client's
	// retries; wait for the report, then for a dozen more polls.
	deadline := time.Now().Add(30 * time.Second)
	for reports.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(fastPoll)
	}
	time.Sleep(3 * time.Second)
	if ring.Current() != good {
		t.Fatal("the ring changed while the store was down")
	}
	if n := reports.Load(); n != 1 {
		t.Errorf("%d reports while the store was down, want 1", n)
	}
	s, _ := seal.New(ring)
	b := seal.Binding{Method: "tools/call", Target: "t", Principal: "p", Audience: "a"}
	if tok, err := s.Seal(b, []byte("x"), time.Minute); err != nil {
		t.Fatalf("sealing while the store is down: %v", err)
	} else if _, err := s.Open(b, tok); err != nil {
		t.Fatalf("opening while the store is down: %v", err)
	}
	// A loader starting while the store is down gets a clear error that
	// names the store.
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, _, err := keyset.Load(c, loc, &keyset.LoadOptions{KEK: e.kek})
	if err == nil || !strings.Contains(err.Error(), redact.URL(loc)) {
		t.Errorf("a load with the store down: %v, want an error naming %s", err, redact.URL(loc))
	}
	e.h.Start(t)
	if _, err := rotation.Rotate(ctx, loc, nil, e.o); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, ring, 2, 10*time.Second)
}

// testTamper: a keyset edited in the store by someone without the KEK is
// refused by a running loader and by the next rotation.
func (e *env) testTamper(ctx context.Context, t *testing.T) {
	loc := e.newKeyset(ctx, t, keyring.DefaultPolicy())
	_, ring, _ := e.loader(ctx, t, loc, time.Now(), fastPoll)
	good := ring.Current()
	s := open(ctx, t, loc)
	data, rev, err := s.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(data), `"algorithm": "aead"`, `"algorithm": "mac"`, 1)
	if bad == string(data) {
		t.Fatal("the edit did nothing")
	}
	if _, err := s.Write(ctx, []byte(bad), rev); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * fastPoll)
	if ring.Current() != good {
		t.Fatal("the loader installed a keyset edited without the KEK")
	}
	if _, err := rotation.Rotate(ctx, loc, nil, e.o); !errors.Is(err, keyset.ErrUnauthenticated) {
		t.Fatalf("rotating an edited keyset: %v, want ErrUnauthenticated", err)
	}
}

// testRollback: an older, authentic version written back into the store
// is refused by a running loader: it may hold keys retired since.
func (e *env) testRollback(ctx context.Context, t *testing.T) {
	loc := e.newKeyset(ctx, t, keyring.DefaultPolicy())
	s := open(ctx, t, loc)
	v1, _, _ := s.Read(ctx)
	if _, err := rotation.Rotate(ctx, loc, nil, e.o); err != nil {
		t.Fatal(err)
	}
	_, ring, reports := e.loader(ctx, t, loc, time.Now(), fastPoll)
	if ring.Current().Version() != 2 {
		t.Fatal("not at version 2")
	}
	_, rev, _ := s.Read(ctx)
	if _, err := s.Write(ctx, v1, rev); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * fastPoll)
	if v := ring.Current().Version(); v != 2 {
		t.Fatalf("the loader went back to version %d", v)
	}
	if reports.Load() == 0 {
		t.Error("the rollback was not reported")
	}
}

// testSchedulers: four schedulers in four processes tick at once on a
// keyset whose rotation is due. Exactly one rotates; the others see the
// conflict or the new key and step back.
func (e *env) testSchedulers(ctx context.Context, t *testing.T) {
	p := keyring.DefaultPolicy()
	p.Freshness = 0 // the clock jumps a rotation interval with no scheduler ticking in between
	o := &rotation.Options{KEK: e.kek, Logger: quiet, Now: func() time.Time { return t0 }}
	loc := e.h.NewLocation(ctx, t)
	if _, err := rotation.Init(ctx, loc, e.kek, keyring.AEAD, p, o); err != nil {
		t.Fatal(err)
	}
	due := t0.Add(p.RotationInterval + time.Minute)
	outs := helpers(t, 4, helperSpec{KEK: e.kek, Op: "tick", Location: loc, Now: due})
	rotated := 0
	for i, lines := range outs {
		if len(lines) != 1 {
			t.Fatalf("scheduler %d: %q", i, lines)
		}
		if lines[0] != "rotated 00000000" {
			rotated++
		}
	}
	ks, _, err := keyset.Read(ctx, open(ctx, t, loc))
	if err != nil {
		t.Fatal(err)
	}
	if rotated != 1 || len(ks.Keys) != 2 || ks.Version != 2 {
		t.Fatalf("4 schedulers: %d rotated; the keyset has %d keys at version %d; want exactly one rotation", rotated, len(ks.Keys), ks.Version)
	}
	fmt.Printf("storetest: %s: 4 schedulers in 4 processes, rotation due: %d rotated, keyset at version %d with %d keys\n", e.h.Name(), rotated, ks.Version, len(ks.Keys))
}
