package rotation

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
)

var (
	ctx = context.Background()
	t0  = testkit.T0
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// setup makes a keyset with one AEAD key under a new local KEK, at t0.
func setup(t *testing.T) (string, *clock, *Options) {
	t.Helper()
	dir := t.TempDir()
	if err := backends.GenerateLocal(filepath.Join(dir, "kek")); err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: t0}
	o := &Options{KEK: "local:kek", Now: clk.now, Logger: discard}
	path := filepath.Join(dir, "keyset.json")
	if _, err := Init(ctx, path, "local:kek", keyring.AEAD, testPolicy(), o); err != nil {
		t.Fatal(err)
	}
	return path, clk, o
}

func read(t *testing.T, path string) *keyset.Keyset {
	t.Helper()
	ks, err := keyset.ReadFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func TestInit(t *testing.T) {
	path, _, o := setup(t)
	ks := read(t, path)
	if ks.Version != 1 || len(ks.Keys) != 1 || ks.Keys[0].State != keyring.Active || !ks.Keys[0].Activation.Equal(t0) {
		t.Fatalf("new keyset: %+v", ks)
	}
	if _, err := Init(ctx, path, "local:kek", keyring.AEAD, keyring.DefaultPolicy(), o); err == nil {
		t.Fatal("Init over an existing keyset succeeded")
	}
	if _, err := Init(ctx, filepath.Join(filepath.Dir(path), "b.json"), "local:missing", keyring.MAC, keyring.DefaultPolicy(), o); err == nil {
		t.Fatal("Init with a missing KEK succeeded")
	}
}

func TestRotate(t *testing.T) {
	path, clk, o := setup(t)
	first := read(t, path).Keys[0].ID
	clk.advance(time.Hour)
	res, err := Rotate(ctx, path, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	ks := read(t, path)
	k, _ := ks.Key(res.Key)
	if ks.Version != 2 || k.Algorithm != keyring.AEAD || !k.Activation.Equal(clk.t.Add(10*time.Minute)) || len(res.Warnings) != 0 {
		t.Fatalf("after rotate: version %d, key %+v, warnings %v", ks.Version, k, res.Warnings)
	}
	if p, _ := ks.Primary(clk.t); p.ID != first {
		t.Fatal("the new key seals before its activation")
	}
	if p, _ := ks.Primary(k.Activation); p.ID != res.Key {
		t.Fatal("the new key does not seal at its activation")
	}
	// A second rotation inside the propagation delay is made, with a warning.
	clk.advance(time.Minute)
	res2, err := Rotate(ctx, path, &RotateOptions{Algorithm: keyring.MAC}, o)
	if err != nil || len(res2.Warnings) != 1 || !strings.Contains(res2.Warnings[0], "inside the propagation delay") {
		t.Fatalf("second rotation: %v, warnings %v", err, res2.Warnings)
	}
	// Immediate: primary at once, with a warning.
	res3, err := Rotate(ctx, path, &RotateOptions{Immediate: true}, o)
	if err != nil || len(res3.Warnings) == 0 {
		t.Fatal(err)
	}
	if p, _ := read(t, path).Primary(clk.t); p.ID != res3.Key {
		t.Fatal("immediate rotation is not primary")
	}
}

func TestRetireSafety(t *testing.T) {
	path, clk, o := setup(t)
	old := read(t, path).Keys[0].ID
	if _, err := Retire(ctx, path, old, nil, o); err == nil || !strings.Contains(err.Error(), "no successor") {
		t.Fatalf("retiring the only key: %v", err)
	}
	if _, err := Retire(ctx, path, old, &RetireOptions{Force: true}, o); err == nil || !strings.Contains(err.Error(), "no key able to seal") {
		t.Fatalf("force-retiring the only key: %v", err)
	}
	res := testkit.Must(Rotate(ctx, path, nil, o))
	succ, _ := read(t, path).Key(res.Key)
	safe := succ.Activation.Add(time.Hour + 30*time.Second) // + max TTL + skew
	if at, ok := SafeToRetire(read(t, path), old); !ok || !at.Equal(safe) {
		t.Fatalf("SafeToRetire = %v, %v; want %v", at, ok, safe)
	}
	for _, at := range []time.Time{succ.Activation, safe.Add(-time.Second)} {
		clk.t = at
		_, err := Retire(ctx, path, old, nil, o)
		if err == nil || !strings.Contains(err.Error(), safe.Format(time.RFC3339)) {
			t.Fatalf("retire at %v: %v", at, err)
		}
	}
	clk.t = safe
	if _, err := Retire(ctx, path, old, nil, o); err != nil {
		t.Fatalf("retire at the safe moment: %v", err)
	}
	if k, _ := read(t, path).Key(old); k.State != keyring.Retired {
		t.Fatal("not retired")
	}
	// The successor is now the last key able to seal.
	if _, err := Retire(ctx, path, res.Key, &RetireOptions{Force: true}, o); err == nil {
		t.Fatal("force-retired the last usable key")
	}
}

func TestForcedRetire(t *testing.T) {
	path, _, o := setup(t)
	old := read(t, path).Keys[0].ID
	Rotate(ctx, path, &RotateOptions{Immediate: true}, o)
	res, err := Retire(ctx, path, old, &RetireOptions{Force: true}, o)
	if err != nil || len(res.Warnings) != 2 || !strings.Contains(res.Warnings[0], "forced") || !strings.Contains(res.Warnings[1], "A leaked key") {
		t.Fatalf("forced retire after a leak: %v, %v", err, res.Warnings)
	}
}

func TestDemotePromote(t *testing.T) {
	path, clk, o := setup(t)
	old := read(t, path).Keys[0].ID
	if _, err := Demote(ctx, path, old, o); err == nil || !strings.Contains(err.Error(), "primary") {
		t.Fatalf("demoting the primary: %v", err)
	}
	res := testkit.Must(Rotate(ctx, path, nil, o))
	clk.advance(10 * time.Minute)
	if _, err := Demote(ctx, path, old, o); err != nil {
		t.Fatalf("demoting a superseded key: %v", err)
	}
	if k, _ := read(t, path).Key(old); k.State != keyring.DecryptOnly {
		t.Fatal("not decrypt-only")
	}
	if _, err := Demote(ctx, path, old, o); err == nil {
		t.Fatal("demoted twice")
	}
	clk.advance(time.Second)
	if _, err := Promote(ctx, path, old, o); err != nil {
		t.Fatal(err)
	}
	ks := read(t, path)
	if p, _ := ks.Primary(clk.t); p.ID != old {
		t.Fatalf("promoted key %s is not primary", keyring.FormatID(old))
	}
	_ = res
	if _, err := Promote(ctx, path, 12345, o); err == nil {
		t.Fatal("promoted a key that does not exist")
	}
}

func TestPrune(t *testing.T) {
	path, clk, o := setup(t)
	old := read(t, path).Keys[0].ID
	before := testkit.Must(os.ReadFile(path))
	if res, err := Prune(ctx, path, o); err != nil || len(res.Warnings) != 1 {
		t.Fatalf("prune with nothing to prune: %v %v", res.Warnings, err)
	}
	if after := testkit.Must(os.ReadFile(path)); !bytes.Equal(before, after) {
		t.Fatal("prune with nothing to prune wrote the keyset")
	}
	Rotate(ctx, path, nil, o)
	clk.advance(2 * time.Hour)
	if _, err := Retire(ctx, path, old, nil, o); err != nil {
		t.Fatal(err)
	}
	if _, err := Prune(ctx, path, o); err != nil {
		t.Fatal(err)
	}
	if _, ok := read(t, path).Key(old); ok || len(read(t, path).Keys) != 1 {
		t.Fatal("retired key still there")
	}
}

func TestStaleEditConflicts(t *testing.T) {
	path, _, o := setup(t)
	// An edit that read version 1 cannot land after another edit made 2.
	ks := read(t, path)
	if _, err := Rotate(ctx, path, nil, o); err != nil {
		t.Fatal(err)
	}
	stale := ks.Clone()
	stale.Follow(ks)
	if err := keyset.WriteFile(ctx, path, stale); !errors.Is(err, keyset.ErrConflict) {
		t.Fatalf("stale edit: %v, want ErrConflict", err)
	}
	if len(read(t, path).Keys) != 2 {
		t.Fatal("stale edit removed the rotated key")
	}
}

// testPolicy is the default policy without a freshness window: most tests
// jump their clock by weeks, past any window, with no scheduler ticking.
func testPolicy() keyring.Policy {
	p := keyring.DefaultPolicy()
	p.Freshness = 0
	return p
}
