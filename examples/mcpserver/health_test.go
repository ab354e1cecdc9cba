package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/rotation"
)

// get returns the status and body of url+path.
func get(t *testing.T, url, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b := testkit.Must(io.ReadAll(resp.Body))
	return resp.StatusCode, string(b)
}

// TestHealthEndpoints: /readyz answers 200 once a keyset is loaded, and
// 503 with the reason before; /healthz says what is loaded, the key that
// seals and the guard, as sealgate's does; /metrics has otelmetrics'
// instruments (keyset.TestHealth covers what the loader's health says
// through outages and broken documents).
func TestHealthEndpoints(t *testing.T) {
	dir := t.TempDir()
	testkit.Check(backends.GenerateLocal(filepath.Join(dir, "stateseal.kek")))
	path := filepath.Join(dir, "keyset.json")
	res := testkit.Must(rotation.Init(context.Background(), path, "local:stateseal.kek", keyring.AEAD, keyring.DefaultPolicy(), nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func(c config) string {
		a := testkit.Must(newApp(c))
		go a.load(ctx)
		ts := httptest.NewServer(a.routes())
		t.Cleanup(ts.Close)
		return ts.URL
	}
	url := start(config{keyset: path, poll: time.Hour, audience: "a", singleUse: "pay", replay: "memory"})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if code, _ := get(t, url, "/readyz"); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never ready")
		}
	}
	code, body := get(t, url, "/healthz")
	var hz healthReport
	if err := json.Unmarshal([]byte(body), &hz); code != http.StatusOK || err != nil || !hz.Ready || hz.Version != 1 || hz.Keyset != res.Keyset.ID {
		t.Fatalf("/healthz = %d %s (%v)", code, body, err)
	}
	if hz.PrimaryKey != keyring.FormatID(res.Key) || hz.Guard["kind"] != "memory" || hz.Guard["entries"] != 0.0 {
		t.Fatalf("/healthz primary key %q guard %v, want %s and an empty memory guard: %s", hz.PrimaryKey, hz.Guard, keyring.FormatID(res.Key), body)
	}
	if hz.Tag != res.Keyset.TagText() {
		t.Fatalf("/healthz tag %q, want the installed document's %q", hz.Tag, res.Keyset.TagText())
	}
	code, body = get(t, url, "/metrics")
	for _, want := range []string{"stateseal_keyset_version{", "stateseal_keyset_stale_in_seconds{", `stateseal_keyset_primary_key_id{key_id="` + keyring.FormatID(res.Key) + `"`} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("/metrics = %d, no %q:\n%s", code, want, body)
		}
	}

	// A keyset that does not load: the server answers, unready, naming
	// why, and MCP traffic gets 503.
	url = start(config{keyset: filepath.Join(dir, "missing.json"), kek: "local:" + filepath.Join(dir, "stateseal.kek"), poll: time.Hour, audience: "a"})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		code, body = get(t, url, "/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, "no keyset loaded: ") && strings.Contains(body, "missing.json") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz without a keyset = %d %q", code, body)
		}
	}
	if code, body := get(t, url, "/mcp"); code != http.StatusServiceUnavailable || !strings.Contains(body, "missing.json") {
		t.Fatalf("/mcp without a keyset = %d %q", code, body)
	}
	code, body = get(t, url, "/healthz")
	if err := json.Unmarshal([]byte(body), &hz); code != http.StatusOK || err != nil || hz.Ready || !strings.Contains(hz.Error, "missing.json") {
		t.Fatalf("/healthz without a keyset = %d %s (%v)", code, body, err)
	}
}
