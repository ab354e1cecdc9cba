//go:build linux

package gateway

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/mrtr"
)

// TestLocalDialErrorKeepsUpstreams: the gateway's process runs out of
// file descriptors (its limit lowered for real, in a child process) while
// a client's kept-alive connection sends a request. Every dial upstream
// fails with EMFILE: the client is told to try again, and no upstream is
// taken out of turn, since none refused anything; the log says why, once
// a second. Once
// descriptors are free, the next request goes through.
func TestLocalDialErrorKeepsUpstreams(t *testing.T) {
	if os.Getenv("SEALGATE_FD_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLocalDialErrorKeepsUpstreams$", "-test.v", "-test.timeout=60s")
		cmd.Env = append(os.Environ(), "SEALGATE_FD_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestLocalDialErrorKeepsUpstreams") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	var logs testkit.Buffer
	f := newFixture(t, stateReply, func(g *Gateway, _ *mrtr.Options) {
		second := httptest.NewServer(&upstream{Reply: stateReply})
		t.Cleanup(second.Close)
		g.Upstreams = append(g.Upstreams, testkit.Must(url.Parse(second.URL)))
		// A dial per request, so that the request under the limit dials.
		tr := defaultTransport()
		tr.DisableKeepAlives = true
		g.Transport = tr
		g.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	f.hc = &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
	// The client's connection to the gateway, kept alive, opened by a
	// request the gateway refuses itself: no connection upstream is left
	// to close (and free a descriptor below the limit) later.
	req := testkit.Must(http.NewRequest(http.MethodPost, f.url, strings.NewReader("{}")))
	req.Header.Set("Content-Type", "text/plain")
	resp := testkit.Must(f.hc.Do(req))
	testkit.Must(io.Copy(io.Discard, resp.Body)) // read whole, so the connection is kept
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("the refused request: HTTP %d", resp.StatusCode)
	}

	// No descriptor free from here: the limit is the lowest free number,
	// and any freed below it meanwhile is held.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low, err := syscall.Dup(0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Close(low)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: uint64(low), Max: lim.Max}); err != nil {
		t.Fatal(err)
	}
	var held []int
	for {
		fd, err := syscall.Dup(0)
		if err != nil {
			break // EMFILE: none free below the limit
		}
		held = append(held, fd)
	}
	status, m := f.post(rpcCall(2, "tools/call", "look", nil, ""), v2026)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	for _, fd := range held {
		syscall.Close(fd)
	}
	e, _ := m["error"].(map[string]any)
	if msg, _ := e["message"].(string); status != http.StatusBadGateway || !strings.Contains(msg, "try again") {
		t.Fatalf("under the limit: HTTP %d %v; log:\n%s", status, m, logs.String())
	}
	for k := range f.gw.ups {
		if f.gw.ups[k].backoff.Load() != 0 {
			t.Fatalf("upstream %d taken out of turn for a local error; log:\n%s", k, logs.String())
		}
	}
	// Both upstreams' dials failed within the second: one line.
	if log := logs.String(); strings.Count(log, "a limit of this machine") != 1 || !strings.Contains(log, "too many open files") {
		t.Fatalf("the log does not say, once a second, that the limit is local:\n%s", log)
	}
	if _, m := f.post(rpcCall(3, "tools/call", "look", nil, ""), v2026); resultOf(t, m) == nil {
		t.Fatalf("after the limit: %v", m)
	}
}
