package rotation

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/seal"
)

// TestAttackSchedulerLaundersRollback: the scheduler of docs/ROTATION.md
// ("Routine rotation": &rotation.Scheduler{Path: ...}, no Loader). A key
// leaks and is retired by force; the store writer puts back the version
// from before. The scheduler must not re-authenticate that copy: each
// refresh would give it a new expiry and a higher version, until it
// passes the version the running instances hold and they install it,
// leaked key and all. docs/KEYSET.md: a store writer cannot "roll a
// running instance back" nor "make a retired key open again once its
// version is older than the window".
func TestAttackSchedulerLaundersRollback(t *testing.T) {
	dir := t.TempDir()
	if err := backends.GenerateLocal(filepath.Join(dir, "kek")); err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: t0}
	o := &Options{KEK: "local:kek", Now: clk.now, Logger: discard}
	path := filepath.Join(dir, "keyset.json")
	init, err := Init(ctx, path, "local:kek", keyring.AEAD, keyring.DefaultPolicy(), o)
	if err != nil {
		t.Fatal(err)
	}
	leaked := init.Key
	v1 := testkit.Must(os.ReadFile(path))
	lo := keyset.LoadOptions{KEK: "local:kek", Now: clk.now}
	// The leak: whoever has the key seals their own tokens.
	snap, _, err := keyset.Load(ctx, path, &lo)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := snap.Lookup(leaked)
	evilSnap := testkit.Must(keyring.NewSnapshot([]keyring.Key{*k}))
	evilRing := testkit.Must(keyring.NewRing(evilSnap))
	attacker := testkit.Must(seal.New(evilRing, &seal.Options{Now: clk.now}))
	b := seal.Binding{Method: "tools/call", Target: "transfer", Principal: "mallory"}

	running := &keyset.Loader{Path: path, Options: lo, Logger: slog.New(slog.DiscardHandler)}
	ring, err := running.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer running.Close()
	victim := testkit.Must(seal.New(ring, &seal.Options{Now: clk.now}))

	clk.advance(time.Hour)
	if _, err := Rotate(ctx, path, &RotateOptions{Immediate: true}, o); err != nil {
		t.Fatal(err)
	}
	if _, err := Retire(ctx, path, leaked, &RetireOptions{Force: true}, o); err != nil {
		t.Fatal(err)
	}
	if err := running.Reload(ctx); err != nil || ring.Current().Version() != 3 {
		t.Fatalf("reload: %v", err)
	}

	// The attack: version 1 back in the store.
	testkit.Check(os.WriteFile(path, v1, 0o600))
	s := &Scheduler{Path: path, Options: Options{KEK: "local:kek", Now: clk.now, Logger: discard}}
	wrote := false
	for day := 1; day <= 16; day++ {
		clk.advance(24 * time.Hour)
		tr, err := s.Tick(ctx)
		if cur := testkit.Must(os.ReadFile(path)); string(cur) != string(v1) && !wrote {
			wrote = true
			t.Errorf("FINDING: day %d: the scheduler (no Loader, as docs/ROTATION.md shows it) re-authenticated the rolled-back version 1 as version %d (tick %+v, %v)",
				day, read(t, path).Version, tr, err)
		}
		running.Reload(ctx) // ErrRollback, then ErrFork, then ...
	}
	tok, err := attacker.Seal(b, []byte("forged with the leaked key"), 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := victim.Open(b, tok); err == nil {
		t.Errorf("FINDING: 16 days after the forced retirement, the running instance (at keyset version %d) opens a token of the retired key %s",
			ring.Current().Version(), keyring.FormatID(leaked))
	}
	if snap, ks, err := keyset.Load(ctx, path, &lo); err == nil {
		if _, ok := snap.Lookup(leaked); ok {
			t.Errorf("FINDING: a fresh instance loads version %d (expires %s) with the retired key %s active, 16 days after the copy it descends from was superseded (window 7 days)",
				ks.Version, ks.Expires.Format(time.RFC3339), keyring.FormatID(leaked))
		}
	}
}
