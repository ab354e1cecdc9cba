package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
)

// TestHealthEndpoints: /readyz answers 200 once a keyset is loaded and 503
// before; /healthz says what is loaded (keyset.TestHealth covers what it
// says through outages and broken documents).
func TestHealthEndpoints(t *testing.T) {
	dir := t.TempDir()
	if err := backends.GenerateLocal(filepath.Join(dir, "stateseal.kek")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "keyset.json")
	if _, err := rotation.Init(context.Background(), path, "local:stateseal.kek", keyring.AEAD, keyring.DefaultPolicy(), nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ring, health, err := loadRing(ctx, config{keyset: path, poll: 3600e9})
	if err != nil {
		t.Fatal(err)
	}
	h, err := config{audience: "a", replay: "memory"}.handler(ring)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(withHealth(h, health))
	defer ts.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := testkit.Must(io.ReadAll(resp.Body))
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz = %d", code)
	}
	code, body := get("/healthz")
	var hz keyset.Health
	if err := json.Unmarshal([]byte(body), &hz); code != http.StatusOK || err != nil || !hz.Ready || hz.Version != 1 || hz.Keyset == "" {
		t.Fatalf("/healthz = %d %s (%v)", code, body, err)
	}
	// Not ready is a 503, for a probe that keeps an instance out of
	// rotation until its keyset loads.
	notReady := httptest.NewServer(withHealth(h, func() keyset.Health { return keyset.Health{} }))
	defer notReady.Close()
	resp, err := http.Get(notReady.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz without a keyset = %d", resp.StatusCode)
	}
}
