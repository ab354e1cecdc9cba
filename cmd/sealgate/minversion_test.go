package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/rotation"
)

// TestMinVersion makes the rollback a leaked-key runbook guards against:
// the keyset is rotated (version 2) and an older copy (version 1, its key
// still active) is put back in the file, as a store writer or a restore
// can. A gateway started with -min-version 2 refuses it and is not ready;
// with -min-version 1 it loads it (what -min-version is for).
func TestMinVersion(t *testing.T) {
	ctx := context.Background()
	up := httptest.NewServer(&upstream{Reply: stateReply})
	defer up.Close()
	dir := t.TempDir()
	kek := "local:" + filepath.Join(dir, "kek")
	if err := backends.GenerateLocal(filepath.Join(dir, "kek")); err != nil {
		t.Fatal(err)
	}
	ks := filepath.Join(dir, "keyset.json")
	if _, err := rotation.Init(ctx, ks, kek, keyring.AEAD, keyring.DefaultPolicy(), nil); err != nil {
		t.Fatal(err)
	}
	old := testkit.Must(os.ReadFile(ks))
	if _, err := rotation.Rotate(ctx, ks, nil, &rotation.Options{KEK: kek}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ks, old, 0o600); err != nil { // the rollback
		t.Fatal(err)
	}
	for _, tc := range []struct {
		min   int
		ready bool
	}{{2, false}, {1, true}} {
		c, err := parseConfig([]string{"-upstream", up.URL, "-audience", "https://gw.test", "-principal", "anonymous",
			"-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-keyset", ks, "-kek", kek, "-min-version", strconv.Itoa(tc.min)},
			func(string) string { return "" }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var logs testkit.Buffer
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- run(rctx, c, &logs) }()
		var admin string
		waitFor(t, "the admin listener", func() bool {
			admin = logAddr(logs.String(), "sealgate: admin endpoints")
			return admin != ""
		})
		status := func() int {
			resp, err := http.Get(admin + "/readyz")
			if err != nil {
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if tc.ready {
			waitFor(t, "readiness", func() bool { return status() == http.StatusOK })
		} else {
			waitFor(t, "the refusal", func() bool { return strings.Contains(logs.String(), "below the configured minimum 2") })
			if s := status(); s != http.StatusServiceUnavailable {
				t.Fatalf("-min-version 2 on version 1: /readyz %d, want 503\n%s", s, logs.String())
			}
		}
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("did not shut down")
		}
	}
}
