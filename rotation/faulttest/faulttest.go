// Package faulttest drives a store through a fault mid-load, for the
// fault tests of stores/redis and stores/vaultkv: loaders following the
// keyset, a writer rotating it, single-use flows through a guard, and a
// count of what each lost (docs/FLEET.md, "What each fault cost").
package faulttest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/replay"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/stores"
)

// Long makes the fault tests run longer, with more loaders
// (STATESEAL_FAULT_LONG=1, docs/FLEET.md).
var Long = os.Getenv("STATESEAL_FAULT_LONG") != ""

// A Run drives one fault: loaders following the keyset, a writer
// rotating it, and single-use flows through a guard, before, during and
// after the fault, counting what each lost.
type Run struct {
	t       *testing.T
	loc     string
	kek     string
	o       *rotation.Options
	loaders []*keyset.Loader
	poll    time.Duration
	rings   []*keyring.Ring

	mu        sync.Mutex
	installs  []map[uint64]time.Time // per loader: version -> when installed
	loadErrs  []error
	acked     []ackedWrite
	notDur    int // writes refused as not durable
	writeErrs []error
	failedAt  []time.Time // when each refused or failed write ended
	faultAt   time.Time
	// When the fault's replica became the primary, and when the loaders'
	// subscription was seen on it (zero: not measured); moves: whether
	// the subscription must move (its node died) or may stay.
	promotedAt, subscribedAt time.Time
	moves                    bool

	guards []*guardRun
}

// A Guard is a single-use guard the flows go through, named in the
// report. Bounded makes the run fail if the guard still answers
// a flow (all its uses refused) Bound after the promotion.
type Guard struct {
	Name string
	replay.Guard
	Bounded bool
}

// Bound is the longest a loader's subscription, and a bounded guard,
// may stay on a dead node after a replica was promoted: issue 35.
const Bound = 5 * time.Second

// guardRun counts the flows through one guard; guarded by Run.mu.
type guardRun struct {
	Guard
	flows, lostFlows, twice, replaysAccepted int
	executions, unvouched, unavailable       int
	lostAt                                   []time.Time // when each lost flow ended
}

type ackedWrite struct {
	version    uint64
	key        uint32
	start, end time.Time
}

// Start initializes the keyset at loc under kek (a new local KEK if "")
// and starts n loaders polling every poll (30 s for Redis, so that an
// install comes from the notification).
func Start(t *testing.T, loc, kek string, n int, poll time.Duration) *Run {
	ctx := context.Background()
	if kek == "" {
		kekPath := filepath.Join(t.TempDir(), "kek")
		if err := backends.GenerateLocal(kekPath); err != nil {
			t.Fatal(err)
		}
		kek = "local:" + kekPath
	}
	r := &Run{t: t, loc: loc, kek: kek, poll: poll}
	r.o = &rotation.Options{KEK: r.kek, Logger: slog.New(slog.DiscardHandler)}
	if _, err := rotation.Init(ctx, loc, r.kek, keyring.AEAD, keyring.DefaultPolicy(), r.o); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i := range n {
		r.installs = append(r.installs, map[uint64]time.Time{})
		l := &keyset.Loader{Path: loc, Options: keyset.LoadOptions{KEK: r.kek}, Logger: slog.New(slog.DiscardHandler),
			OnReload: func(ks *keyset.Keyset) {
				r.mu.Lock()
				r.installs[i][ks.Version] = time.Now()
				r.mu.Unlock()
			},
			OnError: func(err error) { r.mu.Lock(); r.loadErrs = append(r.loadErrs, err); r.mu.Unlock() }}
		ring, err := l.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r.rings = append(r.rings, ring)
		t.Cleanup(func() { l.Close() })
		r.loaders = append(r.loaders, l)
		wg.Add(1)
		go func() { defer wg.Done(); l.Run(runCtx, poll) }()
	}
	return r
}

// rotate makes one rotation and records it if acknowledged.
func (r *Run) rotate(ctx context.Context) bool {
	start := time.Now()
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	res, err := rotation.Rotate(c, r.loc, nil, r.o)
	cancel()
	if err != nil && ctx.Err() != nil {
		return false // the run ended, not the store: counting it would end the recovery there
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.failedAt = append(r.failedAt, time.Now())
	}
	switch {
	case err == nil:
		r.acked = append(r.acked, ackedWrite{version: res.Keyset.Version, key: res.Key, start: start, end: time.Now()})
		return true
	case errors.Is(err, stores.ErrNotDurable):
		r.notDur++
	default:
		r.writeErrs = append(r.writeErrs, err)
	}
	return false
}

// writer rotates every 100 ms until ctx is done.
func (r *Run) writer(ctx context.Context) {
	for ctx.Err() == nil {
		r.rotate(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Promoted records when the fault's replica became the primary: the
// windows are measured from it. moves says whether the loaders'
// subscription must move to it (its node died: Subscribed must follow
// within Bound), or may stay where it is (a Cluster node that turned
// replica still delivers every PUBLISH, which the Cluster broadcasts).
func (r *Run) Promoted(at time.Time, moves bool) {
	r.mu.Lock()
	r.promotedAt, r.moves = at, moves
	r.mu.Unlock()
}

// Subscribed records when the loaders' subscription was seen on the new
// primary (PUBSUB NUMSUB there).
func (r *Run) Subscribed(at time.Time) { r.mu.Lock(); r.subscribedAt = at; r.mu.Unlock() }

// flowsThrough runs single-use flows until ctx is done: each state is
// used twice at once and once more after, as a client retry and a replay
// would; at most one use may execute.
func (r *Run) flowsThrough(ctx context.Context, gr *guardRun) {
	g := gr.Guard.Guard
	count := func(err error) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		switch {
		case err == nil:
			gr.executions++
		case errors.Is(err, replay.ErrUnvouched):
			gr.unvouched++
		case errors.Is(err, replay.ErrUnavailable):
			gr.unavailable++
		}
		return err == nil
	}
	for ctx.Err() == nil {
		id := make([]byte, 16)
		rand.Read(id)
		issued := time.Now().Truncate(time.Second)
		until := time.Now().Add(time.Minute)
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok := 0
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if count(g.Use(context.Background(), id, issued, until)) {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		late := count(g.Use(context.Background(), id, issued, until))
		r.mu.Lock()
		gr.flows++
		switch {
		case ok == 0 && !late:
			gr.lostFlows++
			gr.lostAt = append(gr.lostAt, time.Now())
		case ok == 0 && late:
			// Both first tries were unavailable; the third executes once.
		case ok == 1 && late:
			gr.replaysAccepted++
		case ok > 1:
			gr.twice++
		}
		r.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
}

// installedAll is when the last loader installed v (zero if one has not).
func (r *Run) installedAll(v uint64) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var last time.Time
	for _, m := range r.installs {
		at, ok := m[v]
		if !ok {
			return time.Time{}
		}
		if at.After(last) {
			last = at
		}
	}
	return last
}

// A Report is what one fault cost.
type Report struct {
	name                            string
	acked, lost, notDurable, failed int
	recovery                        time.Duration // fault to a write acknowledged and installed everywhere
	before, after                   time.Duration // write to last install: p99 before the fault, max after it
	loaderErrs                      int
	finalVersion, maxAcked          uint64
	promoted                        time.Duration // fault to the promotion
	subscription                    time.Duration // promotion to the subscription on the new primary
	windowInstall                   time.Duration // the latest install, after the subscription moved, of a write acknowledged before it did
	guards                          []GuardReport
}

// A GuardReport is what one fault cost the flows through one guard.
type GuardReport struct {
	Name                               string
	Flows, LostFlows, Twice, Replays   int
	Executions, Unvouched, Unavailable int
	Outage                             time.Duration // fault to the last flow lost
	Window                             time.Duration // promotion to the last "unavailable" answer
}

// Guards is what the fault cost each guard.
func (rep Report) Guards() []GuardReport { return rep.guards }

// run drives the load for warm, injects the fault, keeps the load on
// until a write made after the fault is installed everywhere, settles
// (heal, if any, brings the failed node back) and checks.
// Fault runs the load for warm, injects fault, keeps the load on until
// a write made after fault returned is installed everywhere, heals (if
// heal is not nil) and checks. g may be nil: no single-use flows.
func (r *Run) Fault(name string, g replay.Guard, warm time.Duration, fault, heal func()) Report {
	var gs []Guard
	if g != nil {
		gs = []Guard{{Name: "guard", Guard: g}}
	}
	return r.FaultGuards(name, gs, warm, fault, heal)
}

// FaultGuards is Fault with single-use flows through each of gs at once.
func (r *Run) FaultGuards(name string, gs []Guard, warm time.Duration, fault, heal func()) Report {
	t := r.t
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.writer(ctx) }()
	r.guards = nil
	for _, g := range gs {
		gr := &guardRun{Guard: g}
		r.guards = append(r.guards, gr)
		wg.Add(1)
		go func() { defer wg.Done(); r.flowsThrough(ctx, gr) }()
	}
	time.Sleep(warm) // the load runs meanwhile: this is its duration, not a wait for a condition
	r.mu.Lock()
	r.faultAt = time.Now()
	r.mu.Unlock()
	fault()
	faulted := time.Now()
	// Over: a write that started once fault returned is acknowledged and
	// every loader has installed it.
	over := false
	deadline := time.Now().Add(90 * time.Second)
	for !over && time.Now().Before(deadline) {
		r.mu.Lock()
		var vs []uint64
		for _, a := range r.acked {
			if a.start.After(faulted) {
				vs = append(vs, a.version)
			}
		}
		r.mu.Unlock()
		for _, v := range vs {
			if !r.installedAll(v).IsZero() {
				over = true
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if Long {
		time.Sleep(10 * time.Second) // more load after recovery
	} else {
		time.Sleep(time.Second)
	}
	cancel()
	wg.Wait()
	if heal != nil {
		heal()
	}
	if !over {
		t.Errorf("%s: no write made after the fault was installed everywhere within 90 s", name)
	}
	return r.check(name)
}

// check counts what was lost: an acknowledged rotation whose key the
// store no longer holds, a state executed twice.
func (r *Run) check(name string) Report {
	t := r.t
	ctx := context.Background()
	_, ks, err := rotation.Export(ctx, r.loc, r.o)
	if err != nil {
		t.Fatalf("%s: reading the keyset after the fault: %v", name, err)
	}
	have := map[uint32]bool{}
	for _, k := range ks.Keys {
		have[k.ID] = true
	}
	// The last acknowledged write may be on its way to the loaders: give
	// them a third of a poll (notified, they take milliseconds).
	r.mu.Lock()
	var last uint64
	for _, a := range r.acked {
		last = max(last, a.version)
	}
	r.mu.Unlock()
	deadline := time.Now().Add(min(10*time.Second, r.poll/3+time.Second))
	for _, ring := range r.rings {
		for ring.Current().Version() < last && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := Report{name: name, acked: len(r.acked), notDurable: r.notDur, failed: len(r.writeErrs), loaderErrs: len(r.loadErrs),
		finalVersion: ks.Version}
	faultAt := r.faultAt
	promoted := r.promotedAt
	if !promoted.IsZero() {
		rep.promoted = promoted.Sub(faultAt)
		if !r.subscribedAt.IsZero() {
			rep.subscription = r.subscribedAt.Sub(promoted)
			if rep.subscription > Bound {
				t.Errorf("%s: the loaders' subscription reached the new primary %v after the promotion (bound %v)", name, rep.subscription, Bound)
			}
		} else if r.moves {
			t.Errorf("%s: the loaders' subscription was never seen on the new primary", name)
		}
	}
	for _, gr := range r.guards {
		gp := GuardReport{Name: gr.Name, Flows: gr.flows, LostFlows: gr.lostFlows, Twice: gr.twice, Replays: gr.replaysAccepted,
			Executions: gr.executions, Unvouched: gr.unvouched, Unavailable: gr.unavailable}
		for _, at := range gr.lostAt {
			if at.After(faultAt) {
				gp.Outage = at.Sub(faultAt)
			}
		}
		if !promoted.IsZero() {
			for _, at := range gr.lostAt {
				if at.After(promoted) {
					gp.Window = at.Sub(promoted)
				}
			}
			if gr.Bounded && gp.Window > Bound {
				t.Errorf("%s: %s lost a flow %v after the promotion (bound %v)", name, gr.Name, gp.Window, Bound)
			}
		}
		if gr.twice > 0 {
			t.Errorf("%s: %s: %d states executed twice", name, gr.Name, gr.twice)
		}
		if gr.replaysAccepted > 0 {
			t.Errorf("%s: %s: %d replays accepted", name, gr.Name, gr.replaysAccepted)
		}
		rep.guards = append(rep.guards, gp)
	}
	// Recovered: the first acknowledged write after the last failed one
	// since the fault, once every loader installed it (a version the
	// next overtook before a loader read it does not count).
	lastFail := faultAt
	for _, at := range r.failedAt {
		if at.After(lastFail) {
			lastFail = at
		}
	}
recovered:
	for _, a := range r.acked {
		if a.start.After(lastFail) || a.start.After(faultAt) && len(r.failedAt) == 0 {
			var last time.Time
			for _, m := range r.installs {
				at, ok := m[a.version]
				if !ok {
					continue recovered
				}
				if at.After(last) {
					last = at
				}
			}
			rep.recovery = last.Sub(faultAt)
			break
		}
	}
	var before, after []time.Duration
	for _, a := range r.acked {
		rep.maxAcked = max(rep.maxAcked, a.version)
		if !have[a.key] {
			rep.lost++
			t.Errorf("%s: rotation to version %d (key %d) was acknowledged and is gone from the store (now version %d)", name, a.version, a.key, ks.Version)
		}
		var last time.Time
		all := true
		for _, m := range r.installs {
			at, ok := m[a.version]
			if !ok {
				all = false
				break
			}
			if at.After(last) {
				last = at
			}
		}
		if !all {
			continue // overtaken by the next version before a loader read it
		}
		d := last.Sub(a.start)
		closed := r.promotedAt
		if r.moves {
			closed = r.subscribedAt
		}
		if !closed.IsZero() && a.start.After(faultAt) && a.end.Before(closed) {
			// Written while the subscription was on the dead node (or
			// before the promotion): it must be installed once the
			// window closed, not at the next poll.
			w := max(last.Sub(closed), 0)
			rep.windowInstall = max(rep.windowInstall, w)
			if w > Bound {
				t.Errorf("%s: version %d, written during the window, was installed everywhere %v after it closed", name, a.version, w)
			}
		}
		if a.start.Before(faultAt) {
			before = append(before, d)
		} else {
			after = append(after, d)
		}
	}
	rep.before, rep.after = Pct(before, 99), Pct(after, 100)
	if r.poll >= 30*time.Second && rep.after > 10*time.Second {
		t.Errorf("%s: a write after the fault took %v to reach every loader: their poll (%v), not the notification, brought it", name, rep.after, r.poll)
	}
	for _, ring := range r.rings {
		if got := ring.Current().Version(); got < rep.maxAcked {
			t.Errorf("%s: a loader holds version %d after the fault, %d was acknowledged", name, got, rep.maxAcked)
		}
	}
	t.Logf("%s: rotations acknowledged %d, lost %d, refused not durable %d, failed %d; writes recovered (installed everywhere) %v after the fault; write to last install p99 %v before, max %v after; loader errors %d",
		name, rep.acked, rep.lost, rep.notDurable, rep.failed,
		rep.recovery.Round(time.Millisecond), rep.before.Round(time.Millisecond), rep.after.Round(time.Millisecond), rep.loaderErrs)
	if !promoted.IsZero() {
		sub := "stayed on its node (alive)"
		if r.moves {
			sub = fmt.Sprintf("on the new primary %v after the promotion", rep.subscription.Round(time.Millisecond))
		}
		t.Logf("%s: promoted %v after the fault; subscription %s; a write made during the window installed everywhere %v after it closed",
			name, rep.promoted.Round(time.Millisecond), sub, rep.windowInstall.Round(time.Millisecond))
	}
	for _, g := range rep.guards {
		t.Logf("%s: %s: flows %d (lost %d, executed twice %d, replays accepted %d), executions %d, answers unvouched %d, unavailable %d; last lost flow %v after the fault, %v after the promotion",
			name, g.Name, g.Flows, g.LostFlows, g.Twice, g.Replays, g.Executions, g.Unvouched, g.Unavailable,
			g.Outage.Round(time.Millisecond), g.Window.Round(time.Millisecond))
	}
	for i, err := range r.writeErrs {
		if i < 3 {
			t.Logf("%s: write error: %v", name, err)
		}
	}
	seen := map[string]bool{}
	for _, err := range r.loadErrs {
		if msg := err.Error(); !seen[msg] && len(seen) < 3 {
			seen[msg] = true
			t.Logf("%s: loader error: %v", name, err)
		}
	}
	return rep
}

// Pct is the p-th percentile of ds (100: the largest).
func Pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := (len(ds)*p + 99) / 100
	return ds[min(max(i-1, 0), len(ds)-1)]
}

// Loaders is the number of loaders a fault test runs: 3, 20 when Long.
func Loaders() int {
	if Long {
		return 20
	}
	return 3
}

// Warm is how long the load runs before a fault.
func Warm() time.Duration {
	if Long {
		return 20 * time.Second
	}
	return 2 * time.Second
}
