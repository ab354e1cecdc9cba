package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

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
		r := startRun(t, "-upstream", up.URL, "-principal", "anonymous",
			"-keyset", ks, "-kek", kek, "-min-version", strconv.Itoa(tc.min))
		status := func() int { s, _ := r.get(t, "/readyz"); return s }
		if tc.ready {
			waitFor(t, "readiness", func() bool { return status() == http.StatusOK })
		} else {
			waitFor(t, "the refusal", func() bool { return strings.Contains(r.logs.String(), "below the configured minimum 2") })
			if s := status(); s != http.StatusServiceUnavailable {
				t.Fatalf("-min-version 2 on version 1: /readyz %d, want 503\n%s", s, r.logs.String())
			}
		}
		r.stop()
	}
}
