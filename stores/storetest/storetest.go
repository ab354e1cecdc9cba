// Package storetest is the conformance suite every keyset store passes,
// the way gocloud.dev's drivertest is for its providers: one suite, run
// against each store by a small harness in that store's tests.
//
// A store's tests call [Run] with a [Harness], and their TestMain calls
// [Main], since the suite runs rotations and schedulers in separate
// processes: the test binary, started again.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/stores"
)

// A Harness gives the suite empty stores of one kind.
type Harness interface {
	// Name names the kind of store in the suite's measurements.
	Name() string
	// NewLocation returns the location (a path or a URL that
	// stores.Default opens, in this process and in the helper processes,
	// which inherit the environment) of a new, empty store.
	NewLocation(ctx context.Context, t *testing.T) string
	// Stop makes the store's server unreachable and Start brings it back
	// with its data; ok is false for a store with no server (a file).
	Stop(t *testing.T) (ok bool)
	Start(t *testing.T)
	// PollInterval is how often a loader polls in the test that measures
	// how fast a change reaches it. A store that announces changes gives a
	// long one, so that the delay measured is the announcement's.
	PollInterval() time.Duration
	// MaxDelay bounds the delay from a rotation to a loader seeing it.
	MaxDelay() time.Duration
}

var quiet = slog.New(slog.DiscardHandler)

// env is what one run of the suite shares: a KEK by absolute path (a
// keyset in a store cannot have a relative one), and a clock at t0.
type env struct {
	h   Harness
	kek string
	o   *rotation.Options
}

var t0 = time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)

func newEnv(t *testing.T, h Harness) *env {
	dir := t.TempDir()
	kek := filepath.Join(dir, "kek")
	if err := backends.GenerateLocal(kek); err != nil {
		t.Fatal(err)
	}
	return &env{h: h, kek: "local:" + kek, o: &rotation.Options{KEK: "local:" + kek, Logger: quiet}}
}

// newKeyset creates a keyset in a new store, with its first key active.
func (e *env) newKeyset(ctx context.Context, t *testing.T, p keyring.Policy) string {
	loc := e.h.NewLocation(ctx, t)
	if _, err := rotation.Init(ctx, loc, e.kek, keyring.AEAD, p, e.o); err != nil {
		t.Fatal(err)
	}
	return loc
}

// Run runs the suite against h.
func Run(t *testing.T, h Harness) {
	ctx := context.Background()
	e := newEnv(t, h)
	t.Run("ReadWrite", func(t *testing.T) { testReadWrite(ctx, t, h) })
	t.Run("Conflict", func(t *testing.T) { testConflict(ctx, t, h) })
	t.Run("SizeBound", func(t *testing.T) { testSize(ctx, t, h) })
	t.Run("TwoProcesses", func(t *testing.T) { e.testTwoProcesses(ctx, t) })
	t.Run("ChangeReachesLoader", func(t *testing.T) { e.testChange(ctx, t) })
	t.Run("StoreDownAndBack", func(t *testing.T) { e.testDown(ctx, t) })
	t.Run("EditedWithoutKEK", func(t *testing.T) { e.testTamper(ctx, t) })
	t.Run("Rollback", func(t *testing.T) { e.testRollback(ctx, t) })
	t.Run("FourSchedulers", func(t *testing.T) { e.testSchedulers(ctx, t) })
}

func open(ctx context.Context, t *testing.T, loc string) stores.Store {
	s, err := stores.Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testReadWrite(ctx context.Context, t *testing.T, h Harness) {
	s := open(ctx, t, h.NewLocation(ctx, t))
	if _, _, err := s.Read(ctx); !errors.Is(err, stores.ErrNotFound) {
		t.Fatalf("Read of an empty store: %v, want ErrNotFound", err)
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
	if r, ok := s.(stores.Revisioner); ok {
		if rev, err := r.Revision(ctx); err != nil || rev != r2 {
			t.Fatalf("Revision = %q, %v; want %q", rev, err, r2)
		}
	}
}

func testConflict(ctx context.Context, t *testing.T, h Harness) {
	s := open(ctx, t, h.NewLocation(ctx, t))
	r1, err := s.Write(ctx, []byte("one"), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, []byte("again"), ""); !errors.Is(err, stores.ErrConflict) {
		t.Errorf("a second creation: %v, want ErrConflict", err)
	}
	r2, _ := s.Write(ctx, []byte("two"), r1)
	if _, err := s.Write(ctx, []byte("stale"), r1); !errors.Is(err, stores.ErrConflict) {
		t.Errorf("a write from a stale revision: %v, want ErrConflict", err)
	}
	if data, rev, _ := s.Read(ctx); string(data) != "two" || rev != r2 {
		t.Errorf("a lost write changed the store: %s %q", data, rev)
	}
}

// testSize: a document of stores.MaxSize bytes is written and read back;
// one byte more is refused with ErrTooLarge, naming the bound.
func testSize(ctx context.Context, t *testing.T, h Harness) {
	s := open(ctx, t, h.NewLocation(ctx, t))
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

// helperSpec tells a helper process what to do.
type helperSpec struct {
	Op       string    `json:"op"` // "rotate" or "tick"
	Location string    `json:"location"`
	N        int       `json:"n"`
	Now      time.Time `json:"now"`
	KEK      string    `json:"kek"`
	Start    time.Time `json:"start"` // all helpers begin at once
}

// Main runs m, or, in a helper process the suite started, the helper.
func Main(m *testing.M) {
	if spec := os.Getenv("STATESEAL_STORETEST_HELPER"); spec != "" {
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
	}
	return 0
}
