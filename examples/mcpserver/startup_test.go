package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/rotation"
)

// startUnready starts an example server process and returns once it
// answers, ready or not.
func startUnready(t *testing.T, name string, args ...string) (*instance, string) {
	in := &instance{t: t, name: name, port: testservers.FreePort(t), log: filepath.Join(t.TempDir(), name+".log"), unready: true}
	in.args = append([]string{"-addr", "127.0.0.1:" + strconv.Itoa(in.port)}, args...)
	in.start(nil)
	t.Cleanup(in.kill)
	return in, "http://127.0.0.1:" + strconv.Itoa(in.port)
}

// waitUntil polls cond every 50 ms until it holds, for at most d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

// TestStartsWhileRedisDown (issue 38): the example server started with
// its keyset store down does not exit (a crash loop under Kubernetes),
// as docs/FLEET.md says: it answers 503 with the reason on /readyz and
// /mcp, keeps retrying, and is ready once the store answers, saying the
// load recovered.
func TestStartsWhileRedisDown(t *testing.T) {
	ctx := context.Background()
	r := testservers.StartRedis(t)
	kek := "local:" + filepath.Join(t.TempDir(), "kek")
	testkit.Check(backends.GenerateLocal(strings.TrimPrefix(kek, "local:")))
	store := r.URL() + "?key=stateseal:startup"
	res := testkit.Must(rotation.Init(ctx, store, kek, keyring.AEAD, keyring.DefaultPolicy(), &rotation.Options{KEK: kek, Logger: slog.New(slog.DiscardHandler)}))
	r.Stop()

	in, url := startUnready(t, "redis-down", "-keyset", store, "-kek", kek, "-poll", "500ms")
	// Two failed attempts (1 s apart) and the process still answers.
	waitUntil(t, 20*time.Second, "two failed loads", func() bool { return in.logCount("cannot load the keyset") >= 2 })
	code, body := get(t, url, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "no keyset loaded: ") || !strings.Contains(body, r.Addr()) {
		t.Fatalf("/readyz with Redis down = %d %q, want 503 naming the store", code, body)
	}
	resp, err := http.Post(url+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/mcp with Redis down = %d, want 503", resp.StatusCode)
	}

	r.Start()
	waitUntil(t, 60*time.Second, "ready once Redis answers", func() bool {
		code, _ := get(t, url, "/readyz")
		return code == http.StatusOK
	})
	if in.logCount("keyset load recovered after") != 1 || in.logCount("MCP server at") != 1 {
		t.Fatalf("no recovery line, or no ready line:\n%s", testkit.Must(readLog(in)))
	}
	for line := range strings.SplitSeq(testkit.Must(readLog(in)), "\n") {
		if strings.Contains(line, "keyset load recovered after") {
			t.Log(line)
		}
	}
	_, body = get(t, url, "/healthz")
	var hz healthReport
	testkit.Check(json.Unmarshal([]byte(body), &hz))
	if !hz.Ready || hz.Keyset != res.Keyset.ID || hz.PrimaryKey != keyring.FormatID(res.Key) || hz.Error != "" {
		t.Fatalf("/healthz once loaded: %s", body)
	}
}

// TestCountdownToStale (issue 38): nothing refreshes a keyset nobody
// edits; an instance whose clock is set (-clock-offset) a few seconds
// before the keyset's expiry warns in its log and in
// stateseal_keyset_stale_in_seconds, then turns unready when the window
// ends, without waiting the 7 days.
func TestCountdownToStale(t *testing.T) {
	dir := t.TempDir()
	testkit.Check(backends.GenerateLocal(filepath.Join(dir, "stateseal.kek")))
	path := filepath.Join(dir, "keyset.json")
	res := testkit.Must(rotation.Init(context.Background(), path, "local:stateseal.kek", keyring.AEAD, keyring.DefaultPolicy(), &rotation.Options{Logger: slog.New(slog.DiscardHandler)}))
	const left = 8 * time.Second
	offset := time.Until(res.Keyset.Expires) - left
	in, url := startUnready(t, "countdown", "-keyset", path, "-poll", "200ms", "-clock-offset", offset.String())
	waitUntil(t, 5*time.Second, "the countdown line", func() bool { return in.logCount("stateseal keyset goes stale soon") == 1 })
	code, body := get(t, url, "/metrics")
	i := strings.Index(body, "\nstateseal_keyset_stale_in_seconds{")
	if code != http.StatusOK || i < 0 {
		t.Fatalf("/metrics = %d, no stale_in:\n%s", code, body)
	}
	line := body[i+1:]
	line = line[:strings.IndexByte(line, '\n')]
	v := testkit.Must(strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64))
	if v <= 0 || v > left.Seconds() {
		t.Fatalf("stale_in = %v, want in (0, %v]", v, left.Seconds())
	}
	if code, _ := get(t, url, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before the expiry = %d", code)
	}
	waitUntil(t, left+10*time.Second, "unready at the expiry", func() bool {
		code, body := get(t, url, "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "the keyset is stale: ")
	})
}

func readLog(in *instance) (string, error) {
	b, err := os.ReadFile(in.log)
	return string(b), err
}

// TestReadyVouches (issue 43): on a Redis guard that has just started,
// the example server is not ready before a single-use state it seals
// would be vouched for: at its first /readyz 200, /healthz's
// seals_vouched_from has passed (a probe that started flows then had 37
// of 50 refused "unvouched").
func TestReadyVouches(t *testing.T) {
	r := testservers.StartRedisVolatile(t)
	_, url := startUnready(t, "vouches", "-replay", r.URL(), "-single-use", "fleet_pay")
	waitUntil(t, 30*time.Second, "ready", func() bool {
		code, _ := get(t, url, "/readyz")
		return code == http.StatusOK
	})
	at := time.Now()
	_, body := get(t, url, "/healthz")
	var hz struct {
		Guard struct {
			VouchesFrom      time.Time `json:"vouches_from"`
			SealsVouchedFrom time.Time `json:"seals_vouched_from"`
		}
	}
	testkit.Check(json.Unmarshal([]byte(body), &hz))
	if hz.Guard.SealsVouchedFrom.IsZero() || hz.Guard.SealsVouchedFrom.After(at) ||
		hz.Guard.SealsVouchedFrom.Before(hz.Guard.VouchesFrom) {
		t.Fatalf("ready at %v with %s", at, body)
	}
}
