package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyset"
)

func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sealgate.json")
	testkit.Check(os.WriteFile(file, []byte(`{"upstream":"http://file:1","audience":"file-aud","principal":"header","trusted-proxies":["10.0.0.0/8","127.0.0.1"],
		"single-use":["pay","book"],"ttl":{"pay":"1m","book":"2m"},"max-event-bytes":1024,"strip-authorization":true}`), 0o600))
	env := map[string]string{"SEALGATE_CONFIG": file, "SEALGATE_AUDIENCE": "env-aud", "SEALGATE_UPSTREAM": "http://env:1"}
	c, err := parseConfig([]string{"-upstream", "http://flag:1"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Upstream != "http://flag:1" || c.Audience != "env-aud" || c.Principal != "header" || c.TrustedProxies != "10.0.0.0/8,127.0.0.1" ||
		c.SingleUse != "pay,book" || c.MaxEventBytes != 1024 || !c.StripAuthorization || c.MaxRequestBytes != 8<<20 {
		t.Fatalf("got %+v", c)
	}
	ttl, err := c.ttls()
	if err != nil || ttl["pay"] != time.Minute || ttl["book"] != 2*time.Minute {
		t.Fatalf("ttl %v %v", ttl, err)
	}
	for _, args := range [][]string{
		{},
		{"-upstream", "http://u", "-principal", "anonymous"},             // no audience
		{"-upstream", "http://u", "-audience", "a"},                      // no principal
		{"-upstream", "http://u", "-audience", "a", "-principal", "jwt"}, // no issuer
		{"-upstream", "http://u", "-audience", "a", "-principal", "header"},
		{"-upstream", "http://u", "-audience", "a", "-principal", "mtls"},
		{"-upstream", "http://u", "-audience", "a", "-principal", "anyone"},
	} {
		if _, err := parseConfig(args, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("%q: accepted", args)
		}
	}
	testkit.Check(os.WriteFile(file, []byte(`{"upstreams":"typo"}`), 0o600))
	if _, err := parseConfig([]string{"-config", file}, func(string) string { return "" }, io.Discard); err == nil {
		t.Error("an unknown setting in the file was accepted")
	}
}

// waitFor polls cond until it holds, failing the test after 30 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logAddr finds the address a log line with msg reports.
func logAddr(log, msg string) string {
	for _, line := range strings.Split(log, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			s, _ := m["addr"].(string)
			return s
		}
	}
	return ""
}

// TestRun runs the binary's main loop: /readyz says 503 until the keyset
// loads (here: until the keyset file appears), /metrics shows the sealing
// counters, and the gateway shuts down when its context ends.
func TestRun(t *testing.T) {
	up := httptest.NewServer(&upstream{Reply: stateReply})
	defer up.Close()
	dir := t.TempDir()
	ks := filepath.Join(dir, "keyset.json")
	c, err := parseConfig([]string{"-upstream", up.URL, "-audience", "https://gw.test", "-principal", "anonymous",
		"-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-keyset", ks, "-poll", "100ms"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, c, &logs) }()
	var admin, proxy string
	waitFor(t, "the listeners", func() bool {
		admin, proxy = logAddr(logs.String(), "sealgate: admin endpoints"), logAddr(logs.String(), "sealgate: proxying")
		return admin != "" && proxy != ""
	})
	get := func(path string) (int, string) {
		resp, err := http.Get(admin + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := testkit.Must(io.ReadAll(resp.Body))
		return resp.StatusCode, string(b)
	}
	if s, _ := get("/healthz"); s != 200 {
		t.Fatalf("healthz %d", s)
	}
	if s, _ := get("/readyz"); s != http.StatusServiceUnavailable {
		t.Fatalf("readyz %d before the keyset exists", s)
	}
	sealctl(t, dir, "init")
	waitFor(t, "readiness", func() bool { s, _ := get("/readyz"); return s == 200 })
	if _, body := get("/healthz"); !strings.Contains(body, `"ready":true`) || !strings.Contains(body, `"loaded":true`) {
		t.Fatalf("/healthz once ready: %s", body)
	}
	// The installed document's tag, as sealctl verify shows it, for the
	// leaked-key procedure's check (docs/ROTATION.md).
	if _, body := get("/healthz"); !strings.Contains(body, `"tag":"`+testkit.Must(keyset.ReadFile(ctx, ks)).TagText()+`"`) {
		t.Fatalf("/healthz does not show the installed document's tag: %s", body)
	}
	f := &fixture{t: t, url: proxy + "/mcp"}
	_, m := f.post(rpcCall(1, "tools/call", "book", nil, ""), v2026)
	tok := resultOf(t, m)["requestState"].(string)
	_, m = f.post(rpcCall(2, "tools/call", "book", nil, tok+"x"), v2026)
	if m["error"] == nil {
		t.Fatalf("tampered: %v", m)
	}
	_, metrics := get("/metrics")
	for _, want := range []string{`stateseal_states_sealed_total{method="tools/call"`, `stateseal_states_rejected_total{method="tools/call",`, "sealgate_requests_refused_total", "sealgate_principal_failures_total", "stateseal_keyset_version"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("did not shut down")
	}
	if !strings.Contains(logs.String(), "sealgate: stopped") {
		t.Fatal("no shutdown log")
	}
}

// sealctl runs the sealctl command in dir.
func sealctl(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(testkit.Build(t, "github.com/stateseal/stateseal/cmd/sealctl"), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sealctl %s: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestUpstreamWithQueryRefused: an -upstream with a query or fragment
// is refused at start: a client's query is appended to it, and a server
// reading a parameter's last value would read the client's.
func TestUpstreamWithQueryRefused(t *testing.T) {
	for _, up := range []string{"http://127.0.0.1:3000/mcp?tenant=a", "http://127.0.0.1:3000/?", "http://127.0.0.1:3000/#x"} {
		c, err := parseConfig([]string{"-upstream", up, "-audience", "https://gw.test", "-principal", "anonymous"}, func(string) string { return "" }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := newGateway(c, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "without a query or fragment") {
			t.Errorf("-upstream %s: %v", up, err)
		}
	}
	c := testkit.Must(parseConfig([]string{"-upstream", "http://127.0.0.1:3000/base/", "-audience", "https://gw.test", "-principal", "anonymous"}, func(string) string { return "" }, io.Discard))
	if _, err := newGateway(c, slog.New(slog.DiscardHandler)); err != nil {
		t.Errorf("a base path: %v", err)
	}
}
