package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/rotation"
)

// TestKEKPathShapedLikeKey (issue 26): -kek naming a file in a directory
// whose name is shaped like a bare key (a SHA-256 in base64url) loads.
func TestKEKPathShapedLikeKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	kek := "local:" + filepath.Join(dir, "kek")
	if err := backends.GenerateLocal(filepath.Join(dir, "kek")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "keyset.json")
	if _, err := rotation.Init(context.Background(), path, kek, keyring.AEAD, keyring.DefaultPolicy(), nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, ring, err := loadOnce(ctx, config{keyset: path, kek: kek, poll: 3600e9})
	if err != nil {
		t.Fatalf("-kek %s: %v", kek, err)
	}
	defer l.Close()
	if h := l.Health(); !h.Ready || ring.Current().Version() != 1 {
		t.Fatalf("health %+v", h)
	}
}
