package rotation

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
)

// TestRefusalsChangeNothing tries every operation in a way it must refuse
// and checks that each one errs and leaves the keyset file byte for byte
// as it was.
func TestRefusalsChangeNothing(t *testing.T) {
	path, clk, o := setup(t)
	old := read(t, path).Keys[0].ID
	res, err := Rotate(ctx, path, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	pending := res.Key
	clk.advance(2 * time.Hour) // pending is now primary; old is safe to retire
	if _, err := Retire(ctx, path, old, nil, o); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WRONG_KEK", backends.NewLocalKey())
	wrong := *o
	wrong.KEK = "local://env/WRONG_KEK"
	dir := filepath.Dir(path)

	for name, op := range map[string]func() error{
		"retire the last usable key, forced": func() error { _, err := Retire(ctx, path, pending, &RetireOptions{Force: true}, o); return err },
		"retire a retired key":               func() error { _, err := Retire(ctx, path, old, &RetireOptions{Force: true}, o); return err },
		"retire an unknown key":              func() error { _, err := Retire(ctx, path, 7, &RetireOptions{Force: true}, o); return err },
		"demote the primary":                 func() error { _, err := Demote(ctx, path, pending, o); return err },
		"promote a retired key":              func() error { _, err := Promote(ctx, path, old, o); return err },
		"promote an unknown key":             func() error { _, err := Promote(ctx, path, 7, o); return err },
		"rotate under the wrong KEK":         func() error { _, err := Rotate(ctx, path, nil, &wrong); return err },
		"rewrap from the wrong KEK":          func() error { _, err := Rewrap(ctx, path, "local:kek", &wrong); return err },
		"rewrap to a missing KEK":            func() error { _, err := Rewrap(ctx, path, "local:missing", o); return err },
		"rewrap to an unknown scheme":        func() error { _, err := Rewrap(ctx, path, "nokms://x", o); return err },
		"init over the keyset": func() error {
			_, err := Init(ctx, path, "local:kek", keyring.AEAD, keyring.DefaultPolicy(), o)
			return err
		},
	} {
		before := testkit.Must(os.ReadFile(path))
		if err := op(); err == nil {
			t.Errorf("%s: no error", name)
		}
		if after := testkit.Must(os.ReadFile(path)); !bytes.Equal(before, after) {
			t.Errorf("%s: the keyset changed", name)
		}
	}
	if _, err := Prune(ctx, path, o); err != nil { // the one retired key
		t.Fatal(err)
	}
	before := testkit.Must(os.ReadFile(path))
	if res, err := Prune(ctx, path, o); err != nil || len(res.Warnings) == 0 {
		t.Errorf("prune with nothing retired: %v, %v; want a warning and no error", res.Warnings, err)
	}
	if after := testkit.Must(os.ReadFile(path)); !bytes.Equal(before, after) {
		t.Error("prune with nothing retired changed the keyset")
	}

	// Init that fails leaves no keyset behind.
	bad := keyring.DefaultPolicy()
	bad.Skew = -time.Second
	for name, try := range map[string]func(p string) error{
		"missing KEK": func(p string) error {
			_, err := Init(ctx, p, "local:missing", keyring.MAC, keyring.DefaultPolicy(), o)
			return err
		},
		"invalid policy": func(p string) error { _, err := Init(ctx, p, "local:kek", keyring.MAC, bad, o); return err },
		"bad algorithm": func(p string) error {
			_, err := Init(ctx, p, "local:kek", keyring.Algorithm(9), keyring.DefaultPolicy(), o)
			return err
		},
	} {
		p := filepath.Join(dir, "new.json")
		if err := try(p); err == nil {
			t.Errorf("init with %s: no error", name)
		}
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("init with %s left %s behind", name, p)
		}
	}
}
