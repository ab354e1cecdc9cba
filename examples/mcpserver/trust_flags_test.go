package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
)

// TestTrustFlags: -min-version, -keyset-id and -previous-kek reach the
// loader, as the leaked-key procedure needs: a floor above the keyset's
// version and another pinned id refuse it, and a keyset under the
// previous KEK loads only with -previous-kek.
func TestTrustFlags(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	oldKEK, newKEK := "local:"+filepath.Join(dir, "old.kek"), "local:"+filepath.Join(dir, "new.kek")
	for _, k := range []string{oldKEK, newKEK} {
		if err := backends.GenerateLocal(strings.TrimPrefix(k, "local:")); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "keyset.json")
	res, err := rotation.Init(ctx, path, oldKEK, keyring.AEAD, keyring.DefaultPolicy(), &rotation.Options{KEK: oldKEK})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Keyset.ID
	c := config{keyset: path, kek: oldKEK, poll: 3600e9}
	for _, tc := range []struct {
		name string
		c    config
		want error
	}{
		{"min-version", config{keyset: path, kek: oldKEK, minVersion: 2, poll: 3600e9}, keyset.ErrRollback},
		{"keyset-id", config{keyset: path, kek: oldKEK, keysetID: keyset.NewID(), poll: 3600e9}, keyset.ErrOtherKeyset},
		{"kek", config{keyset: path, kek: newKEK, poll: 3600e9}, keyset.ErrUntrustedKEK},
	} {
		if _, _, err := loadOnce(ctx, tc.c); !errors.Is(err, tc.want) {
			t.Errorf("-%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	c.keysetID, c.minVersion = id, 1
	l, _, err := loadOnce(ctx, c)
	if err != nil {
		t.Fatalf("matching flags: %v", err)
	}
	l.Close()
	c.kek, c.previousKEK = newKEK, oldKEK
	l, _, err = loadOnce(ctx, c)
	if err != nil {
		t.Fatalf("-previous-kek: %v", err)
	}
	l.Close()
}
