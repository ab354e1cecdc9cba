// Package faulttest drives a store through a fault mid-load, for the
// fault tests of stores/redis and stores/vaultkv: loaders following the
// keyset, a writer rotating it, single-use flows through a guard, and a
// count of what each lost (docs/FLEET.md, "What each fault cost").
package faulttest

import (
	"context"
	"crypto/rand"
	"errors"
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
	lostAt    []time.Time // when each lost flow ended
	faultAt   time.Time

	flows, lostFlows, twice, replaysAccepted int
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

// flowsThrough runs single-use flows until ctx is done: each state is
// used twice at once and once more after, as a client retry and a replay
// would; at most one use may execute.
func (r *Run) flowsThrough(ctx context.Context, g replay.Guard) {
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
				if g.Use(context.Background(), id, issued, until) == nil {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		late := g.Use(context.Background(), id, issued, until) == nil
		r.mu.Lock()
		r.flows++
		switch {
		case ok == 0 && !late:
			r.lostFlows++
			r.lostAt = append(r.lostAt, time.Now())
		case ok == 0 && late:
			// Both first tries were unavailable; the third executes once.
		case ok == 1 && late:
			r.replaysAccepted++
		case ok > 1:
			r.twice++
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
	name                             string
	flows, lostFlows, twice, replays int
	acked, lost, notDurable, failed  int
	recovery                         time.Duration // fault to a write acknowledged and installed everywhere
	guardOutage                      time.Duration // fault to the last flow lost
	before, after                    time.Duration // write to last install: p99 before the fault, max after it
	loaderErrs                       int
	finalVersion, maxAcked           uint64
}

// run drives the load for warm, injects the fault, keeps the load on
// until a write made after the fault is installed everywhere, settles
// (heal, if any, brings the failed node back) and checks.
// Fault runs the load for warm, injects fault, keeps the load on until
// a write made after fault returned is installed everywhere, heals (if
// heal is not nil) and checks. g may be nil: no single-use flows.
func (r *Run) Fault(name string, g replay.Guard, warm time.Duration, fault, heal func()) Report {
	t := r.t
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.writer(ctx) }()
	go func() {
		defer wg.Done()
		if g != nil {
			r.flowsThrough(ctx, g)
		}
	}()
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
	rep := Report{name: name, flows: r.flows, lostFlows: r.lostFlows, twice: r.twice, replays: r.replaysAccepted,
		acked: len(r.acked), notDurable: r.notDur, failed: len(r.writeErrs), loaderErrs: len(r.loadErrs),
		finalVersion: ks.Version}
	faultAt := r.faultAt
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
	for _, at := range r.lostAt {
		if at.After(faultAt) {
			rep.guardOutage = at.Sub(faultAt)
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
	if r.twice > 0 {
		t.Errorf("%s: %d states executed twice", name, r.twice)
	}
	if r.replaysAccepted > 0 {
		t.Errorf("%s: %d replays accepted", name, r.replaysAccepted)
	}
	for _, ring := range r.rings {
		if got := ring.Current().Version(); got < rep.maxAcked {
			t.Errorf("%s: a loader holds version %d after the fault, %d was acknowledged", name, got, rep.maxAcked)
		}
	}
	t.Logf("%s: flows %d (lost %d, executed twice %d, replays accepted %d); rotations acknowledged %d, lost %d, refused not durable %d, failed %d; writes recovered (installed everywhere) %v after the fault, flows %v; write to last install p99 %v before, max %v after; loader errors %d",
		name, rep.flows, rep.lostFlows, rep.twice, rep.replays, rep.acked, rep.lost, rep.notDurable, rep.failed,
		rep.recovery.Round(time.Millisecond), rep.guardOutage.Round(time.Millisecond), rep.before.Round(time.Millisecond), rep.after.Round(time.Millisecond), rep.loaderErrs)
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
