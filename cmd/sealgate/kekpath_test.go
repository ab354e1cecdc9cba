package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
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
	c, err := parseConfig([]string{"-upstream", up.URL, "-audience", "https://gw.test", "-principal", "anonymous",
		"-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-keyset", ks, "-kek", kek}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, c, &logs) }()
	var admin string
	waitFor(t, "the admin listener", func() bool {
		admin = logAddr(logs.String(), "sealgate: admin endpoints")
		return admin != ""
	})
	waitFor(t, "readiness", func() bool {
		resp, err := http.Get(admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("did not shut down")
	}
	if strings.Contains(logs.String(), "key value") {
		t.Fatalf("the KEK path was taken for a key:\n%s", logs.String())
	}
}
