package rotation_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"

	_ "github.com/stateseal/stateseal/backends/vault"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/seal"
	_ "github.com/stateseal/stateseal/stores/vaultkv"
)

// TestLeakedKeyProcedureVault runs docs/ROTATION.md's "A leaked key"
// against a real Vault: the keyset in Vault KV v2, its KEK a transit key.
// First the attack: after a forced retirement alone, `vault kv rollback`
// to the first version revives the leaked key on a fresh instance, and its
// token opens. Then the procedure (prune, rewrap to a new transit version,
// min_decryption_version): the same rollback loads nowhere, and the
// leaked key's token opens on no instance, fresh or running. In between,
// an honest editor without memory that rotates the rolled-back copy
// makes a fork the running instance refuses; after the procedure no
// honest editor can extend any earlier copy.
func TestLeakedKeyProcedureVault(t *testing.T) {
	v := testservers.StartVault(t)
	v.Env(t)
	vc, err := api.NewClient(&api.Config{Address: v.URL()})
	if err != nil {
		t.Fatal(err)
	}
	vc.SetToken(v.Token)
	if err := vc.Sys().Mount("transit", &api.MountInput{Type: "transit"}); err != nil {
		t.Fatal(err)
	}
	if _, err := vc.Logical().Write("transit/keys/leak", nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const loc, kek = "vault-kv://secret/stateseal/leak", "vault://transit/keys/leak"
	o := &rotation.Options{KEK: kek, Logger: slog.New(slog.DiscardHandler)}
	init, err := rotation.Init(ctx, loc, kek, keyring.AEAD, keyring.DefaultPolicy(), o)
	if err != nil {
		t.Fatal(err)
	}
	leaked := init.Key
	lo := &keyset.LoadOptions{KEK: kek}
	sealerAt := func() (*seal.Sealer, error) {
		snap, _, err := keyset.Load(ctx, loc, lo)
		if err != nil {
			return nil, err
		}
		ring, err := keyring.NewRing(snap)
		if err != nil {
			return nil, err
		}
		return seal.New(ring, nil)
	}
	first, err := sealerAt()
	if err != nil {
		t.Fatal(err)
	}
	b := seal.Binding{Method: "tools/call", Target: "transfer", Principal: "mallory"}
	token, err := first.Seal(b, []byte("forged by whoever holds the leaked key"), 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	running := &keyset.Loader{Path: loc, Options: *lo, Logger: slog.New(slog.DiscardHandler)}
	ring, err := running.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer running.Close()
	runningSealer := testkit.Must(seal.New(ring, nil))

	// The leak: a new primary, the leaked key retired by force and pruned.
	if _, err := rotation.Rotate(ctx, loc, &rotation.RotateOptions{Immediate: true}, o); err != nil {
		t.Fatal(err)
	}
	res, err := rotation.Retire(ctx, loc, leaked, &rotation.RetireOptions{Force: true}, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) < 2 {
		t.Fatalf("retire --force did not point at the procedure: %v", res.Warnings)
	}
	if _, err := rotation.Prune(ctx, loc, o); err != nil {
		t.Fatal(err)
	}
	if err := running.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := runningSealer.Open(b, token); !errors.Is(err, seal.ErrUnknownKey) {
		t.Fatalf("running instance after the retirement: %v", err)
	}

	// The attack, with retirement alone: a store writer rolls Vault KV back
	// to the first version (as `vault kv rollback -version=1` does).
	kv := vc.KVv2("secret")
	if _, err := kv.Rollback(ctx, "stateseal/leak", 1); err != nil {
		t.Fatal(err)
	}
	fresh, err := sealerAt()
	if err != nil {
		t.Fatalf("the rolled-back copy did not load (the attack this test shows): %v", err)
	}
	if _, err := fresh.Open(b, token); err != nil {
		t.Fatalf("the leaked key's token on a fresh instance after the rollback: %v; the attack should work here", err)
	}
	if err := running.Reload(ctx); !errors.Is(err, keyset.ErrRollback) {
		t.Fatalf("running instance, rolled-back store: %v", err)
	}
	// An honest editor with no memory of the keyset (a CronJob) rotates
	// the rolled-back copy: version 2 of a fork, below the running
	// instance's version 4, which it refuses; the leaked key stays retired
	// there.
	if _, err := rotation.Rotate(ctx, loc, nil, o); err != nil {
		t.Fatal(err)
	}
	if err := running.Reload(ctx); !errors.Is(err, keyset.ErrRollback) {
		t.Fatalf("running instance, the rolled-back copy rotated: %v, want ErrRollback", err)
	}
	if _, err := runningSealer.Open(b, token); !errors.Is(err, seal.ErrUnknownKey) {
		t.Fatalf("running instance after the fork: %v", err)
	}
	if _, err := kv.Rollback(ctx, "stateseal/leak", 4); err != nil { // the operator restores the pruned version
		t.Fatal(err)
	}

	// The procedure: a new transit version, every key rewrapped under it,
	// and the old version made unusable.
	if _, err := vc.Logical().Write("transit/keys/leak/rotate", nil); err != nil {
		t.Fatal(err)
	}
	rw, err := rotation.Rewrap(ctx, loc, kek, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vc.Logical().Write("transit/keys/leak/config", map[string]any{"min_decryption_version": 2}); err != nil {
		t.Fatal(err)
	}
	if err := running.Reload(ctx); err != nil || ring.Current().Version() != rw.Keyset.Version {
		t.Fatalf("running instance after the rewrap: %v", err)
	}
	if _, err := sealerAt(); err != nil {
		t.Fatalf("the rewrapped keyset: %v", err)
	}

	// Every copy from before the procedure, put back, loads nowhere, and
	// no honest editor extends it: the bare one cannot authenticate it,
	// the running instance's scheduler refuses it.
	sch := &rotation.Scheduler{Path: loc, Options: rotation.Options{KEK: kek, Logger: o.Logger, Loader: running}}
	for _, version := range []int{1, 2, 3, 4, 5, 6} {
		if _, err := kv.Rollback(ctx, "stateseal/leak", version); err != nil {
			t.Fatal(err)
		}
		if _, err := sealerAt(); err == nil {
			t.Fatalf("a fresh instance loaded the copy of KV version %d after the procedure", version)
		}
		if err := running.Reload(ctx); err == nil {
			t.Fatalf("the running instance installed KV version %d", version)
		}
		if _, err := runningSealer.Open(b, token); err == nil {
			t.Fatalf("the leaked key's token opened after rolling back to KV version %d", version)
		}
		if _, err := rotation.Rotate(ctx, loc, nil, o); err == nil {
			t.Fatalf("a bare editor rotated the copy of KV version %d", version)
		}
		if _, err := sch.Tick(ctx); err == nil {
			t.Fatalf("the running instance's scheduler edited the copy of KV version %d", version)
		}
	}
}
