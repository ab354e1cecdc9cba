package keyset

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/keyring"
)

// TestLoaderKEKPathShapedLikeKey (issue 26): a Loader whose KEK lives in a
// directory named like a bare key (here the temporary directory name that
// made a test fail: a test's name and a 9-digit suffix) loads the keyset.
func TestLoaderKEKPathShapedLikeKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "TestAttackUpgradeRevivesRetiredKey123456780")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	kekURL := "local:" + filepath.Join(dir, "kek")
	if err := backends.GenerateLocal(filepath.Join(dir, "kek")); err != nil {
		t.Fatal(err)
	}
	kek, err := backends.Open(ctx, kekURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ks := &Keyset{ID: NewID(), Version: 1, KEK: kekURL, Policy: testPolicy()}
	sk, err := ks.Wrap(ctx, kek, key(t, keyring.AEAD, time.Now().Add(-time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	ks.Keys = append(ks.Keys, sk)
	path := filepath.Join(t.TempDir(), "keyset.json")
	if err := writeAuth(t, path, ks, kek); err != nil {
		t.Fatal(err)
	}
	l := &Loader{Path: path, Options: LoadOptions{KEK: kekURL}}
	ring, err := l.Load(ctx)
	if err != nil {
		t.Fatalf("Load with KEK %s: %v", kekURL, err)
	}
	if ring.Current().Version() != 1 {
		t.Fatalf("version %d", ring.Current().Version())
	}
}
