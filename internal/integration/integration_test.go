package integration_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/seal"
	"github.com/stateseal/stateseal/stores"
	_ "github.com/stateseal/stateseal/stores/redis"
	_ "github.com/stateseal/stateseal/stores/vaultkv"
)

// A target is a kind of store with its server: where new keysets go, how
// to stop and restart the server, and how fast a loader should see a
// change.
type target struct {
	name string
	// newLocation returns the location of a new, empty store, which
	// stores.Default opens in this process and in helper processes (they
	// inherit the environment).
	newLocation func(t *testing.T) string
	// stop makes the server unreachable and start brings it back with its
	// data; stop is nil for a store with no server.
	stop, start func()
	// poll is how often a loader polls in the test that measures how fast
	// a change reaches it: a store that announces changes gets a long
	// one, so that the delay measured is the announcement's.
	poll time.Duration
	// maxDelay bounds the delay from a rotation to a loader seeing it.
	maxDelay time.Duration
}

func randomName() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func TestFile(t *testing.T) {
	run(t, &target{name: "file", poll: 100 * time.Millisecond, maxDelay: time.Second,
		newLocation: func(t *testing.T) string { return filepath.Join(t.TempDir(), "keyset.json") }})
}

func TestVaultKV(t *testing.T) {
	v := testservers.StartVaultServer(t)
	v.Env(t)
	c, err := api.NewClient(&api.Config{Address: v.URL()})
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(v.Token)
	if err := c.Sys().Mount("secret", &api.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		t.Fatal(err)
	}
	// KV v2 upgrades its storage in the background after a mount.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := c.Logical().Read("secret/config"); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
	run(t, &target{name: "vault-kv", poll: 100 * time.Millisecond, maxDelay: time.Second,
		newLocation: func(*testing.T) string { return "vault-kv://secret/stateseal/keyset-" + randomName() },
		stop:        v.Stop, start: v.Resume})
}

func TestRedis(t *testing.T) {
	r := testservers.StartRedis(t)
	run(t, &target{name: "redis", poll: time.Minute, maxDelay: time.Second,
		newLocation: func(*testing.T) string { return r.URL() + "?key=stateseal:keyset:" + randomName() },
		stop:        r.Stop, start: r.Start})
}

var quiet = slog.New(slog.DiscardHandler)

// env is what one run shares: a KEK by absolute path (a keyset in a store
// cannot have a relative one), and a clock at t0.
type env struct {
	tg  *target
	kek string
	o   *rotation.Options
}

var t0 = testkit.T0

// run runs every test against tg.
func run(t *testing.T, tg *target) {
	ctx := context.Background()
	kek := filepath.Join(t.TempDir(), "kek")
	if err := backends.GenerateLocal(kek); err != nil {
		t.Fatal(err)
	}
	e := &env{tg: tg, kek: "local:" + kek, o: &rotation.Options{KEK: "local:" + kek, Logger: quiet}}
	t.Run("TwoProcesses", func(t *testing.T) { e.testTwoProcesses(ctx, t) })
	t.Run("ChangeReachesLoader", func(t *testing.T) { e.testChange(ctx, t) })
	t.Run("StoreDownAndBack", func(t *testing.T) { e.testDown(ctx, t) })
	t.Run("EditedWithoutKEK", func(t *testing.T) { e.testTamper(ctx, t) })
	t.Run("Rollback", func(t *testing.T) { e.testRollback(ctx, t) })
	t.Run("FourSchedulers", func(t *testing.T) { e.testSchedulers(ctx, t) })
	t.Run("LaunderByFreshScheduler", func(t *testing.T) { e.testLaunderByFreshScheduler(ctx, t) })
	t.Run("LaunderByBareEditor", func(t *testing.T) { e.testLaunderByBareEditor(ctx, t) })
	t.Run("ForkAtSameVersion", func(t *testing.T) { e.testForkAtSameVersion(ctx, t) })
	t.Run("ClockAhead", func(t *testing.T) { e.testClockAhead(ctx, t) })
}

// newKeyset creates a keyset in a new store, with its first key active.
func (e *env) newKeyset(ctx context.Context, t *testing.T, p keyring.Policy) string {
	loc := e.tg.newLocation(t)
	if _, err := rotation.Init(ctx, loc, e.kek, keyring.AEAD, p, e.o); err != nil {
		t.Fatal(err)
	}
	return loc
}

func open(ctx context.Context, t *testing.T, loc string) stores.Store {
	s, err := stores.Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stores.Close(s) })
	return s
}

// helperSpec tells a helper process what to do.
type helperSpec struct {
	Op       string    `json:"op"` // "rotate" or "tick"
	Location string    `json:"location"`
	N        int       `json:"n"`
	Now      time.Time `json:"now"`
	KEK      string    `json:"kek"`
	Start    time.Time `json:"start"` // all helpers begin at once
	// Step spaces the ticks of "fresh-scheduler": tick i (from 1) runs at
	// Now (or the time it starts) plus i times Step.
	Step time.Duration `json:"step"`
}

// TestMain runs the tests, or, in a helper process a test started (the
// test binary, started again), the helper.
func TestMain(m *testing.M) {
	if spec := os.Getenv("STATESEAL_INTEGRATION_HELPER"); spec != "" {
		os.Exit(helper(spec))
	}
	os.Exit(m.Run())
}

func helper(spec string) int {
	var s helperSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Println("error", err)
		return 1
	}
	time.Sleep(time.Until(s.Start))
	ctx := context.Background()
	o := &rotation.Options{KEK: s.KEK, Logger: quiet}
	if !s.Now.IsZero() {
		o.Now = func() time.Time { return s.Now }
	}
	switch s.Op {
	case "rotate":
		for range s.N {
			res, err := rotation.Rotate(ctx, s.Location, nil, o)
			switch {
			case errors.Is(err, keyset.ErrConflict):
				fmt.Println("conflict")
			case err != nil:
				fmt.Println("error", strings.ReplaceAll(err.Error(), "\n", " "))
				return 1
			default:
				fmt.Printf("ok %d %08x\n", res.Keyset.Version, res.Key)
			}
		}
	case "tick":
		sch := &rotation.Scheduler{Path: s.Location, Options: *o}
		tr, err := sch.Tick(ctx)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Printf("rotated %08x\n", tr.Rotated)
	case "fresh-scheduler", "refresh-current":
		return historyHelper(ctx, s, o)
	}
	return 0
}

// helpers runs n helper processes with spec at once and returns each
// one's output lines.
func helpers(t *testing.T, n int, spec helperSpec) [][]string {
	spec.Start = time.Now().Add(500 * time.Millisecond)
	b := testkit.Must(json.Marshal(spec))
	outs := make([][]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "STATESEAL_INTEGRATION_HELPER="+string(b))
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
	t.Logf("%s: 2 processes x %d rotations: %d committed, %d conflicts, final version %d", e.tg.name, n, len(committed), conflicts, ks.Version)
}

// fastPoll is the poll interval of loaders outside the change test.
const fastPoll = 50 * time.Millisecond

// A loaded is a running Loader, its ring, and counters of what it did: the
// failures it reported and the reads of its store (polls).
type loaded struct {
	l       *keyset.Loader
	ring    *keyring.Ring
	reports atomic.Int32
	reads   atomic.Int64
}

// loader starts a Loader following loc, polling every poll, through a
// store that counts its reads.
func (e *env) loader(ctx context.Context, t *testing.T, loc string, now time.Time, poll time.Duration) *loaded {
	ld := new(loaded)
	ld.l = &keyset.Loader{Path: loc, Store: counted(open(ctx, t, loc), &ld.reads), Logger: quiet,
		OnError: func(error) { ld.reports.Add(1) },
		Options: keyset.LoadOptions{KEK: e.kek, Now: func() time.Time { return now }}}
	var err error
	if ld.ring, err = ld.l.Load(ctx); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { ld.l.Run(c, poll); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return ld
}

// waitReads waits until the loader has read its store n more times (a
// read or a revision check: a poll), so that a test can say what it did
// over that many polls.
func (ld *loaded) waitReads(t *testing.T, n int64) {
	t.Helper()
	want := ld.reads.Load() + n
	deadline := time.Now().Add(60 * time.Second)
	for ld.reads.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("the loader made %d of %d reads within 60 s", n-(want-ld.reads.Load()), n)
		}
		time.Sleep(fastPoll / 5) // poll interval
	}
}

// waitReports waits until the loader has reported a failure.
func (ld *loaded) waitReports(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for ld.reports.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the loader reported nothing within %v", within)
		}
		time.Sleep(fastPoll / 5) // poll interval
	}
}

// counted wraps s so that every Read and Revision adds to n, keeping what
// s is (a Revisioner, a Watcher) for the loader.
func counted(s stores.Store, n *atomic.Int64) stores.Store {
	c := &countingStore{Store: s, n: n}
	r, isRev := s.(stores.Revisioner)
	w, isWatch := s.(stores.Watcher)
	switch {
	case isRev && isWatch:
		return struct {
			*countingStore
			countingRevisioner
			stores.Watcher
		}{c, countingRevisioner{r, n}, w}
	case isRev:
		return struct {
			*countingStore
			countingRevisioner
		}{c, countingRevisioner{r, n}}
	case isWatch:
		return struct {
			*countingStore
			stores.Watcher
		}{c, w}
	}
	return c
}

type countingStore struct {
	stores.Store
	n *atomic.Int64
}

func (c *countingStore) Read(ctx context.Context) ([]byte, string, error) {
	c.n.Add(1)
	return c.Store.Read(ctx)
}

type countingRevisioner struct {
	r stores.Revisioner
	n *atomic.Int64
}

func (c countingRevisioner) Revision(ctx context.Context) (string, error) {
	c.n.Add(1)
	return c.r.Revision(ctx)
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
	ring := e.loader(ctx, t, loc, time.Now(), e.tg.poll).ring
	var worst time.Duration
	for i := range 5 {
		if _, err := rotation.Rotate(ctx, loc, nil, e.o); err != nil {
			t.Fatal(err)
		}
		d := waitVersion(t, ring, uint64(i+2), 10*time.Second)
		worst = max(worst, d)
	}
	if worst > e.tg.maxDelay {
		t.Errorf("a rotation took %v to reach the loader, over %v", worst, e.tg.maxDelay)
	}
	fmt.Printf("integration: %s: a rotation reached a loader polling every %v within %v (worst of 5)\n", e.tg.name, e.tg.poll, worst.Round(time.Millisecond))
}

// testDown: the store stops under a running loader. The loader keeps its
// keys, reports once, and picks up a rotation made after the store is
// back.
func (e *env) testDown(ctx context.Context, t *testing.T) {
	loc := e.newKeyset(ctx, t, keyring.DefaultPolicy())
	now := time.Now()
	ld := e.loader(ctx, t, loc, now, fastPoll)
	ring := ld.ring
	good := ring.Current()
	if e.tg.stop == nil {
		t.Skip("the store has no server to stop")
	}
	e.tg.stop()
	// A poll against a store that is down takes as long as its client's
	// retries (Vault's: seconds); wait for the report, then for three more
	// polls, which must not report again.
	ld.waitReports(t, 30*time.Second)
	ld.waitReads(t, 3)
	if ring.Current() != good {
		t.Fatal("the ring changed while the store was down")
	}
	if n := ld.reports.Load(); n != 1 {
		t.Errorf("%d reports while the store was down, want 1", n)
	}
	s := testkit.Must(seal.New(ring, nil))
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
	if err == nil || !strings.Contains(err.Error(), stores.Redact(loc)) {
		t.Errorf("a load with the store down: %v, want an error naming %s", err, stores.Redact(loc))
	}
	e.tg.start()
	// The first command after the store is back may still fail: a client
	// shared with the loader (stores on one URL share one) holds the
	// last dial error until its pool dials again. An editor retries, as a
	// scheduler does at its next tick.
	testkit.WaitFor(t, "a rotation once the store is back", func() bool {
		_, err := rotation.Rotate(ctx, loc, nil, e.o)
		return err == nil
	})
	waitVersion(t, ring, 2, 10*time.Second)
}

// testTamper: a keyset edited in the store by someone without the KEK is
// refused by a running loader and by the next rotation.
func (e *env) testTamper(ctx context.Context, t *testing.T) {
	loc := e.newKeyset(ctx, t, keyring.DefaultPolicy())
	ld := e.loader(ctx, t, loc, time.Now(), fastPoll)
	good := ld.ring.Current()
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
	ld.waitReports(t, 10*time.Second) // the edited keyset did not load
	if ld.ring.Current() != good {
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
	v1, _ := testkit.Must2(s.Read(ctx))
	if _, err := rotation.Rotate(ctx, loc, nil, e.o); err != nil {
		t.Fatal(err)
	}
	ld := e.loader(ctx, t, loc, time.Now(), fastPoll)
	if ld.ring.Current().Version() != 2 {
		t.Fatal("not at version 2")
	}
	_, rev := testkit.Must2(s.Read(ctx))
	if _, err := s.Write(ctx, v1, rev); err != nil {
		t.Fatal(err)
	}
	ld.waitReports(t, 10*time.Second) // the rollback is reported
	if v := ld.ring.Current().Version(); v != 2 {
		t.Fatalf("the loader went back to version %d", v)
	}
}

// testSchedulers: four schedulers in four processes tick at once on a
// keyset whose rotation is due. Exactly one rotates; the others see the
// conflict or the new key and step back.
func (e *env) testSchedulers(ctx context.Context, t *testing.T) {
	p := keyring.DefaultPolicy()
	p.Freshness = 0 // the clock jumps a rotation interval with no scheduler ticking in between
	o := &rotation.Options{KEK: e.kek, Logger: quiet, Now: func() time.Time { return t0 }}
	loc := e.tg.newLocation(t)
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
	fmt.Printf("integration: %s: 4 schedulers in 4 processes, rotation due: %d rotated, keyset at version %d with %d keys\n", e.tg.name, rotated, ks.Version, len(ks.Keys))
}
