package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/rotation"
)

// TestKEKPathShapedLikeKey (issue 26): -kek naming a file in a directory
// whose name is shaped like a bare key (the temporary directory name that
// made a test fail) loads, and the gateway becomes ready.
func TestKEKPathShapedLikeKey(t *testing.T) {
	up := httptest.NewServer(&upstream{Reply: stateReply})
	defer up.Close()
	dir := filepath.Join(t.TempDir(), "TestAttackUpgradeRevivesRetiredKey123456780")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	kek := "local:" + filepath.Join(dir, "kek")
	if err := backends.GenerateLocal(filepath.Join(dir, "kek")); err != nil {
		t.Fatal(err)
	}
	ks := filepath.Join(t.TempDir(), "keyset.json")
	if _, err := rotation.Init(context.Background(), ks, kek, keyring.AEAD, keyring.DefaultPolicy(), nil); err != nil {
		t.Fatal(err)
	}
	r := startRun(t, "-upstream", up.URL, "-principal", "anonymous", "-keyset", ks, "-kek", kek)
	waitFor(t, "readiness", func() bool { s, _ := r.get(t, "/readyz"); return s == http.StatusOK })
	r.stop()
	if strings.Contains(r.logs.String(), "key value") {
		t.Fatalf("the KEK path was taken for a key:\n%s", r.logs.String())
	}
}
