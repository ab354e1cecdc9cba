package integration_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/seal"
	"github.com/stateseal/stateseal/stores"
)

// The history tests: issue 22's attacks, by someone who can write the
// store and cannot use the KEK, on top of which the fleet's own honest
// editors write. The claim under test (docs/KEYSET.md, "Trust"): a running
// instance never opens a token under a key it has seen retired, never
// installs a document that does not descend from the one it installed
// (ErrFork, at any version), and an editor that knows the keyset refuses
// to extend a rollback or a fork; a fresh instance loads a copy no longer
// than the freshness window plus the skew after it was superseded, a
// writer's clock running ahead included.

// historyPolicy is the default policy with no propagation delay and a
// rotation due every second: a scheduler rotates at every tick, without
// a clock that runs ahead of the running instance's.
func historyPolicy() keyring.Policy {
	p := keyring.DefaultPolicy()
	p.PropagationDelay, p.RotationInterval = 0, time.Second
	return p
}

// leak is a keyset whose first key leaked and was retired by force, and a
// running instance that installed the retirement.
type leak struct {
	loc     string
	s       stores.Store
	v1, v2  []byte // the documents of versions 1 and 2, as the store held them
	running *keyset.Loader
	ring    *keyring.Ring
	sealer  *seal.Sealer
	b       seal.Binding
	token   string // sealed under the leaked key
	leaked  uint32
}

// leakedAndRetired makes a keyset at version 1 (key A), a running
// instance that seals a token under A, then the leak procedure's first
// steps, as docs/ROTATION.md gives them: rotate --now (version 2) and
// retire --force A (version 3). The running instance installs version 3,
// and A's token no longer opens there.
func (e *env) leakedAndRetired(ctx context.Context, t *testing.T) *leak {
	t.Helper()
	lk := &leak{loc: e.newKeyset(ctx, t, historyPolicy()), b: seal.Binding{Method: "tools/call", Target: "transfer", Principal: "mallory"}}
	lk.s = open(ctx, t, lk.loc)
	lk.v1, _ = testkit.Must2(lk.s.Read(ctx))
	first, err := keyset.Parse(lk.v1)
	if err != nil {
		t.Fatal(err)
	}
	lk.leaked = first.Keys[0].ID
	lk.running = &keyset.Loader{Path: lk.loc, Options: keyset.LoadOptions{KEK: e.kek}, Logger: quiet}
	if lk.ring, err = lk.running.Load(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lk.running.Close() })
	if lk.sealer, err = seal.New(lk.ring, nil); err != nil {
		t.Fatal(err)
	}
	if lk.token, err = lk.sealer.Seal(lk.b, []byte("forged by whoever holds the leaked key"), 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := rotation.Rotate(ctx, lk.loc, &rotation.RotateOptions{Immediate: true}, e.o); err != nil {
		t.Fatal(err)
	}
	lk.v2, _ = testkit.Must2(lk.s.Read(ctx))
	if _, err := rotation.Retire(ctx, lk.loc, lk.leaked, &rotation.RetireOptions{Force: true}, e.o); err != nil {
		t.Fatal(err)
	}
	if err := lk.running.Reload(ctx); err != nil || lk.ring.Current().Version() != 3 {
		t.Fatalf("the running instance did not install the retirement: %v", err)
	}
	lk.refused(t, "after the retirement")
	return lk
}

// refused checks that the leaked key's token does not open on the running
// instance, which still serves version 3.
func (lk *leak) refused(t *testing.T, when string) {
	t.Helper()
	if _, err := lk.sealer.Open(lk.b, lk.token); !errors.Is(err, seal.ErrUnknownKey) {
		t.Fatalf("%s: the leaked key's token on the running instance: %v, want ErrUnknownKey", when, err)
	}
	if v := lk.ring.Current().Version(); v != 3 {
		t.Fatalf("%s: the running instance serves version %d, not 3", when, v)
	}
}

// putBack writes doc into the store, as its writer can.
func (lk *leak) putBack(ctx context.Context, t *testing.T, doc []byte) {
	t.Helper()
	_, rev, err := lk.s.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lk.s.Write(ctx, doc, rev); err != nil {
		t.Fatal(err)
	}
}

// current returns the keyset the store holds.
func (lk *leak) current(ctx context.Context, t *testing.T) (*keyset.Keyset, []byte) {
	t.Helper()
	data, _, err := lk.s.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := keyset.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return ks, data
}

// testLaunderByFreshScheduler (issue 22, attack 1): the writer puts
// version 1 back; a fresh instance loads it and its scheduler (given its
// Loader), in a process of its own, writes versions 2, 3 and 4 on top.
// The running instance refuses each as a fork and keeps serving version
// 3; the leaked key's token never opens on it; and the running
// instance's own scheduler refuses to edit the fork.
func (e *env) testLaunderByFreshScheduler(ctx context.Context, t *testing.T) {
	lk := e.leakedAndRetired(ctx, t)
	lk.putBack(ctx, t, lk.v1)
	if err := lk.running.Reload(ctx); !errors.Is(err, keyset.ErrRollback) {
		t.Fatalf("the running instance, version 1 put back: %v, want ErrRollback", err)
	}
	out := helpers(t, 1, helperSpec{Op: "fresh-scheduler", Location: lk.loc, KEK: e.kek, N: 3, Step: 1500 * time.Millisecond})[0]
	if !slices.Equal(out, []string{"tick 2", "tick 3", "tick 4"}) {
		t.Fatalf("the fresh instance's scheduler: %q, want versions 2, 3 and 4 written", out)
	}
	ks, _ := lk.current(ctx, t)
	if k, _ := ks.Key(lk.leaked); ks.Version != 4 || k == nil || k.State != keyring.Active {
		t.Fatalf("the store holds version %d, not the fork at version 4 with the leaked key active", ks.Version)
	}
	err := lk.running.Reload(ctx)
	if !errors.Is(err, keyset.ErrFork) || !strings.Contains(err.Error(), "does not descend from version 3") {
		t.Fatalf("the running instance, the fork at version 4: %v, want ErrFork", err)
	}
	lk.refused(t, "after the fresh instance's scheduler wrote version 4")
	e.ownSchedulerRefuses(ctx, t, lk)
}

// ownSchedulerRefuses: the running instance's scheduler, given its
// Loader, refuses to edit what the store holds, and writes nothing.
func (e *env) ownSchedulerRefuses(ctx context.Context, t *testing.T, lk *leak) {
	t.Helper()
	_, before := lk.current(ctx, t)
	sch := &rotation.Scheduler{Path: lk.loc, Options: rotation.Options{KEK: e.kek, Logger: quiet, Loader: lk.running}}
	if _, err := sch.Tick(ctx); !errors.Is(err, keyset.ErrFork) {
		t.Fatalf("the running instance's scheduler on the fork: %v, want ErrFork", err)
	}
	if _, after := lk.current(ctx, t); string(after) != string(before) {
		t.Fatal("the running instance's scheduler wrote over the fork")
	}
}

// testLaunderByBareEditor (issue 22, attack 2): the writer puts version
// 1 back; three rotation.Rotate calls with the KEK and nothing else (a
// CronJob), in a process of their own, write versions 2, 3 and 4. The
// running instance refuses version 4 as a fork; the bare editor, which
// cannot vouch for what it read, never renewed the expiry, so the fork
// stops loading on fresh instances when version 1 would have.
func (e *env) testLaunderByBareEditor(ctx context.Context, t *testing.T) {
	lk := e.leakedAndRetired(ctx, t)
	lk.putBack(ctx, t, lk.v1)
	out := helpers(t, 1, helperSpec{Op: "rotate", Location: lk.loc, KEK: e.kek, N: 3})[0]
	if len(out) != 3 || !strings.HasPrefix(out[2], "ok 4 ") {
		t.Fatalf("the bare editor: %q, want versions 2, 3 and 4 written", out)
	}
	if err := lk.running.Reload(ctx); !errors.Is(err, keyset.ErrFork) {
		t.Fatalf("the running instance, the bare editor's version 4: %v, want ErrFork", err)
	}
	lk.refused(t, "after the bare editor wrote version 4")
	v1 := testkit.Must(keyset.Parse(lk.v1))
	ks, _ := lk.current(ctx, t)
	if !ks.Expires.Equal(v1.Expires) {
		t.Fatalf("the bare editor renewed the expiry of a copy it cannot vouch for: %s, version 1's %s", ks.Expires, v1.Expires)
	}
	if _, _, err := keyset.Load(ctx, lk.loc, &keyset.LoadOptions{KEK: e.kek, Now: func() time.Time { return v1.Expires }}); !errors.Is(err, keyset.ErrStale) {
		t.Fatalf("a fresh instance at version 1's expiry loads the bare editor's fork: %v", err)
	}
	e.ownSchedulerRefuses(ctx, t, lk)
}

// testForkAtSameVersion (issue 22, attack 3): the writer puts version 2
// back and a bare editor writes another version 3 on it. The running
// instance reports ErrFork, and its scheduler, whose Check is the
// loader's, refuses to write version 4 on the fork.
func (e *env) testForkAtSameVersion(ctx context.Context, t *testing.T) {
	lk := e.leakedAndRetired(ctx, t)
	lk.putBack(ctx, t, lk.v2)
	if out := helpers(t, 1, helperSpec{Op: "rotate", Location: lk.loc, KEK: e.kek, N: 1})[0]; len(out) != 1 || !strings.HasPrefix(out[0], "ok 3 ") {
		t.Fatalf("the bare editor: %q, want version 3 written", out)
	}
	if err := lk.running.Reload(ctx); !errors.Is(err, keyset.ErrFork) {
		t.Fatalf("the running instance, another version 3: %v, want ErrFork", err)
	}
	lk.refused(t, "after the fork at version 3")
	e.ownSchedulerRefuses(ctx, t, lk)
}

// testClockAhead (issue 22, attack 4): an operator whose clock runs 48
// hours ahead refreshes the keyset (version 2, written "48 hours from
// now"). An honest editor refuses to edit it until its own clock is
// within the skew of that write; the first edit it can make supersedes
// it; and the writer puts version 2 back. A fresh instance loads the copy
// for exactly the freshness window plus the skew after it was superseded,
// and not a second longer: the clock's error does not stretch the bound.
func (e *env) testClockAhead(ctx context.Context, t *testing.T) {
	p := keyring.DefaultPolicy()
	loc := e.newKeyset(ctx, t, p)
	s := open(ctx, t, loc)
	ahead := time.Now().UTC().Truncate(time.Second).Add(48 * time.Hour)
	if out := helpers(t, 1, helperSpec{Op: "refresh-current", Location: loc, KEK: e.kek, Now: ahead})[0]; !slices.Equal(out, []string{"refreshed 2"}) {
		t.Fatalf("the refresh with the clock ahead: %q", out)
	}
	vA, _ := testkit.Must2(s.Read(ctx))
	at := func(now time.Time) *rotation.Options {
		return &rotation.Options{KEK: e.kek, Logger: quiet, Now: func() time.Time { return now }}
	}
	superseded := ahead.Add(-p.Skew)
	if _, err := rotation.Rotate(ctx, loc, nil, at(superseded.Add(-time.Second))); !errors.Is(err, keyset.ErrStale) {
		t.Fatalf("an honest editor a second before the skew reaches the write: %v, want ErrStale", err)
	}
	if _, err := rotation.Rotate(ctx, loc, nil, at(superseded)); err != nil {
		t.Fatalf("an honest editor once its clock is within the skew: %v", err)
	}
	_, rev := testkit.Must2(s.Read(ctx))
	if _, err := s.Write(ctx, vA, rev); err != nil {
		t.Fatal(err)
	}
	fresh := func(now time.Time) error {
		_, _, err := keyset.Load(ctx, loc, &keyset.LoadOptions{KEK: e.kek, Now: func() time.Time { return now }})
		return err
	}
	bound := p.Freshness + p.Skew
	if err := fresh(superseded.Add(bound - time.Second)); err != nil {
		t.Fatalf("a fresh instance a second inside the bound: %v", err)
	}
	if err := fresh(superseded.Add(bound)); !errors.Is(err, keyset.ErrStale) {
		t.Fatalf("a fresh instance %v after the copy was superseded loads it: %v", bound, err)
	}
	t.Logf("a copy written %v ahead loads on fresh instances for %v after it was superseded (freshness %v + skew %v)", 48*time.Hour, bound, p.Freshness, p.Skew)
}
