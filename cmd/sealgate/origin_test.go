package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/internal/testkit"
)

// TestAllowedHostsFlags: -allowed-hosts and -allowed-origins, from flags,
// the environment or the file, reach the gateway, and an entry it could
// never match stops the start.
func TestAllowedHostsFlags(t *testing.T) {
	base := []string{"-upstream", "http://u", "-audience", "a", "-principal", "anonymous"}
	none := func(string) string { return "" }
	for _, bad := range [][]string{
		{"-allowed-hosts", "mcp.example.com:443"},
		{"-allowed-hosts", "https://mcp.example.com"},
		{"-allowed-hosts", "*.example.com"},
		{"-allowed-origins", "null"},
		{"-allowed-origins", "mcp.example.com"},
		{"-allowed-origins", "https://app.example.com/"},
	} {
		_, err := parseConfig(append(base, bad...), none, io.Discard)
		if err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%q: got %v", bad, err)
		}
	}
	file := filepath.Join(t.TempDir(), "sealgate.json")
	testkit.Check(os.WriteFile(file, []byte(`{"allowed-hosts":["mcp.example.com","[::1]"]}`), 0o600))
	env := map[string]string{"SEALGATE_ALLOWED_ORIGINS": "https://app.example.com,http://localhost:6274"}
	c, err := parseConfig(append(base, "-config", file), func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.AllowedHosts != "mcp.example.com,[::1]" || c.AllowedOrigins != "https://app.example.com,http://localhost:6274" {
		t.Fatalf("got %q, %q", c.AllowedHosts, c.AllowedOrigins)
	}
}

// TestRebindingRefused: sealgate on its default loopback listener refuses
// a request naming a rebound host or coming from a foreign page, before
// the upstream; with -allowed-hosts and -allowed-origins it serves those
// names and pages only.
func TestRebindingRefused(t *testing.T) {
	up, upURL := startUpstream(t)
	try := func(r *running, host, origin string) int {
		t.Helper()
		calls := up.Calls.Load()
		req := testkit.Must(http.NewRequest(http.MethodPost, r.proxy+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		req.Host = host
		resp := testkit.Must(http.DefaultClient.Do(req))
		body := testkit.Must(io.ReadAll(resp.Body))
		resp.Body.Close()
		reached := up.Calls.Load() != calls
		if resp.StatusCode == http.StatusForbidden && (reached || !strings.Contains(string(body), `"code":-32600`)) {
			t.Fatalf("Host %q, Origin %q: 403 %s, upstream reached: %v", host, origin, body, reached)
		}
		if resp.StatusCode != http.StatusForbidden && !reached {
			t.Fatalf("Host %q, Origin %q: %d %s without reaching the upstream", host, origin, resp.StatusCode, body)
		}
		return resp.StatusCode
	}
	def := startRun(t, "-upstream", upURL, "-principal", "anonymous")
	waitFor(t, "readiness", def.ready)
	port := def.proxy[strings.LastIndexByte(def.proxy, ':')+1:]
	for _, c := range []struct {
		host, origin string
		want         int
	}{
		{"evil.example:" + port, "http://evil.example:" + port, 403},
		{"evil.example:" + port, "", 403},
		{"127.0.0.1:" + port, "http://evil.example", 403},
		{"127.0.0.1:" + port, "", 200},
		{"LOCALHOST:" + port, "http://localhost:6274", 200},
		{"[::1]:" + port, "http://127.0.0.1:" + port, 200},
	} {
		if got := try(def, c.host, c.origin); got != c.want {
			t.Errorf("default: Host %q, Origin %q: got %d, want %d", c.host, c.origin, got, c.want)
		}
	}

	// The admin endpoints: a rebound page reads neither the health
	// report nor the metrics.
	for host, want := range map[string]int{"evil.example": 403, "evil.example:1": 403, "127.0.0.1": 200, "LOCALHOST.:9": 200, "[::1]": 200, "[::1]:9": 200} {
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			req := testkit.Must(http.NewRequest(http.MethodGet, def.admin+path, nil))
			req.Host = host
			resp := testkit.Must(http.DefaultClient.Do(req))
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("admin %s, Host %q: got %d, want %d", path, host, resp.StatusCode, want)
			}
		}
	}

	listed := startRun(t, "-upstream", upURL, "-principal", "anonymous", "-allowed-hosts", "mcp.example.com", "-allowed-origins", "https://app.example.com")
	waitFor(t, "readiness", listed.ready)
	for _, c := range []struct {
		host, origin string
		want         int
	}{
		{"mcp.example.com", "https://app.example.com", 200},
		{"mcp.example.com:8443", "", 200},
		{"localhost", "", 403},
		{"mcp.example.com", "http://localhost:6274", 403},
		{"evil.example", "https://app.example.com", 403},
	} {
		if got := try(listed, c.host, c.origin); got != c.want {
			t.Errorf("listed: Host %q, Origin %q: got %d, want %d", c.host, c.origin, got, c.want)
		}
	}
}
