package clients_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/seal"
)

// TestMain ends the processes the tests started.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, p := range procs {
		p.stop()
	}
	if envDir != "" {
		os.RemoveAll(envDir)
	}
	os.Exit(code)
}

// The audiences of the two kinds of target.
const (
	serverAudience  = "stateseal-example" // examples/mcpserver's default
	gatewayAudience = "https://clients.stateseal.test"
)

// A target is where a client sends its calls, with what a refusal test
// needs there: a state sealed for it that has expired, and a URL where
// the single-use check cannot be made.
type target struct {
	name        string
	url         string // MCP endpoint
	unavailable string // the same, its single-use check's Redis refusing connections
	expired     string // fleet_flow's state for {"n":1}, sealed half an hour ago
	fresh       string // the same, sealed now: the control that only time differs
}

// env is one keyset and every target, shared by the tests of the three
// clients.
type env struct{ direct, gateway target }

var (
	envOnce sync.Once
	theEnv  *env
	envErr  error
)

// targets starts (once per test binary) the example server with its own
// sealing, and the gateway in front of the example server without it,
// each twice: single use of fleet_pay in memory, and against a Redis that
// refuses connections (a port nothing listens on).
func targets(t *testing.T) *env {
	t.Helper()
	envOnce.Do(func() { theEnv, envErr = newEnv() })
	if envErr != nil {
		t.Fatal(envErr)
	}
	return theEnv
}

// A base is what every target is made of: the example server's and
// sealgate's binaries, and a keyset whose key activated an hour ago, in
// a directory that TestMain removes.
type base struct{ dir, keyset string }

var (
	baseOnce sync.Once
	theBase  *base
	baseErr  error
)

// bases builds (once per test binary) the binaries and the keyset.
func bases() (*base, error) {
	baseOnce.Do(func() { theBase, baseErr = newBase() })
	return theBase, baseErr
}

func newBase() (*base, error) {
	dir, err := os.MkdirTemp("", "stateseal-clients-env-")
	if err != nil {
		return nil, err
	}
	envDir = dir
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./examples/mcpserver", "./cmd/sealgate")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the example server and sealgate: %v\n%s", err, out)
	}
	// The key activated an hour ago, so that a state sealed half an hour
	// ago (expired) is sealed with it.
	past := time.Now().Add(-time.Hour)
	ks := filepath.Join(dir, "keyset.json")
	if err := backends.GenerateLocal(filepath.Join(dir, "stateseal.kek")); err != nil {
		return nil, err
	}
	o := &rotation.Options{KEK: "local:stateseal.kek", Now: func() time.Time { return past }, Logger: slog.New(slog.DiscardHandler)}
	if _, err := rotation.Init(context.Background(), ks, "local:stateseal.kek", keyring.AEAD, keyring.DefaultPolicy(), o); err != nil {
		return nil, err
	}
	return &base{dir, ks}, nil
}

// A gatewayProc is a sealgate the tests started: its MCP endpoint, its
// admin listener (/metrics) and its process.
type gatewayProc struct {
	url, admin string
	proc
}

// startGateway starts sealgate in front of upstream (an MCP endpoint),
// with the base's keyset, audience gatewayAudience, every client
// anonymous, and args after those; it returns once /readyz answers 200.
// The caller stops it.
func (b *base) startGateway(name, upstream string, args ...string) (gatewayProc, error) {
	port, err := freePort()
	if err != nil {
		return gatewayProc{}, err
	}
	admin, err := freePort()
	if err != nil {
		return gatewayProc{}, err
	}
	args = append([]string{"-upstream", strings.TrimSuffix(upstream, "/mcp"), "-audience", gatewayAudience, "-principal", "anonymous",
		"-keyset", b.keyset, "-listen", "127.0.0.1:" + strconv.Itoa(port), "-admin-listen", "127.0.0.1:" + strconv.Itoa(admin),
		"-log-format", "text"}, args...)
	g := gatewayProc{url: "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp", admin: "http://127.0.0.1:" + strconv.Itoa(admin)}
	g.proc, err = start(b.dir, name, httpReady(g.admin+"/readyz"), filepath.Join(b.dir, "sealgate"), args...)
	return g, err
}

func newEnv() (*env, error) {
	b, err := bases()
	if err != nil {
		return nil, err
	}
	dir, ks := b.dir, b.keyset
	dead, err := freePort()
	if err != nil {
		return nil, err
	}
	deadRedis := "redis://127.0.0.1:" + strconv.Itoa(dead) + "/0?max_retries=-1&dialer_retries=1"
	server := func(name string, args ...string) (string, error) {
		port, err := freePort()
		if err != nil {
			return "", err
		}
		base := "http://127.0.0.1:" + strconv.Itoa(port)
		args = append([]string{"-keyset", ks, "-addr", "127.0.0.1:" + strconv.Itoa(port)}, args...)
		return base + "/mcp", startProc(dir, name, base+"/readyz", filepath.Join(dir, "mcpserver"), args...)
	}
	gateway := func(name, upstream string, args ...string) (string, error) {
		g, err := b.startGateway(name, upstream, args...)
		if err == nil {
			procs = append(procs, g.proc)
		}
		return g.url, err
	}
	e := &env{direct: target{name: "server"}, gateway: target{name: "gateway"}}
	var plain string
	for _, step := range []func() error{
		func() (err error) { e.direct.url, err = server("server", "-single-use", "fleet_pay"); return },
		func() (err error) {
			e.direct.unavailable, err = server("server-unavailable", "-single-use", "fleet_pay", "-replay", deadRedis)
			return
		},
		func() (err error) { plain, err = server("upstream", "-no-seal"); return },
		func() (err error) { e.gateway.url, err = gateway("gateway", plain, "-single-use", "fleet_pay"); return },
		func() (err error) {
			e.gateway.unavailable, err = gateway("gateway-unavailable", plain, "-single-use", "fleet_pay", "-replay", deadRedis)
			return
		},
		func() (err error) { e.direct.expired, err = sealFlow(ks, serverAudience, -30*time.Minute); return },
		func() (err error) { e.gateway.expired, err = sealFlow(ks, gatewayAudience, -30*time.Minute); return },
		func() (err error) { e.direct.fresh, err = sealFlow(ks, serverAudience, 0); return },
		func() (err error) { e.gateway.fresh, err = sealFlow(ks, gatewayAudience, 0); return },
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// freePort returns a loopback port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// sealFlow seals fleet_flow's state after its first round, for {"n":1}
// and no principal, under audience, at now plus offset: what the target
// seals then (half an hour ago: expired twenty minutes ago).
func sealFlow(ks, audience string, offset time.Duration) (string, error) {
	l := &keyset.Loader{Path: ks, Options: keyset.LoadOptions{KEK: "local:stateseal.kek"}, Logger: slog.New(slog.DiscardHandler)}
	ring, err := l.Load(context.Background())
	if err != nil {
		return "", err
	}
	defer l.Close()
	s, err := seal.New(ring, &seal.Options{Now: func() time.Time { return time.Now().Add(offset) }})
	if err != nil {
		return "", err
	}
	st, err := mrtr.New(s, &mrtr.Options{Audience: audience, AllowAnonymous: true})
	if err != nil {
		return "", err
	}
	return st.Seal(mrtr.Request{Method: mrtr.MethodCallTool, Target: "fleet_flow", Arguments: []byte(`{"n":1}`)}, "1")
}

// procs are the processes newEnv started, which TestMain ends, and envDir
// holds their binaries, keyset and logs.
var (
	procs  []proc
	envDir string
)

type proc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once Wait returned
}

// stop kills the process and waits until it has exited.
func (p proc) stop() {
	p.cmd.Process.Kill()
	<-p.exited
}

// startProc starts a process with its log in dir, waits until ready
// answers 200, and leaves it to TestMain to stop.
func startProc(dir, name, ready, path string, args ...string) error {
	p, err := start(dir, name, httpReady(ready), path, args...)
	if err == nil {
		procs = append(procs, p)
	}
	return err
}

// httpReady is a readiness check: url answers 200.
func httpReady(url string) func(log []byte) bool {
	return func([]byte) bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

// start starts a process with its log (stdout and stderr) in
// dir/name.log and waits, a minute at most, until ready, handed the log
// so far, says it is; the caller stops it. A process that exits or is
// not ready in time is an error that holds its log.
func start(dir, name string, ready func(log []byte) bool, path string, args ...string) (proc, error) {
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return proc{}, err
	}
	defer logf.Close()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return proc{}, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	p := proc{cmd, exited}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if ready(testkit.Must(os.ReadFile(logf.Name()))) {
			return p, nil
		}
		select {
		case <-exited:
			out := testkit.Must(os.ReadFile(logf.Name()))
			return proc{}, fmt.Errorf("%s exited:\n%s", name, out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			out := testkit.Must(os.ReadFile(logf.Name()))
			return proc{}, fmt.Errorf("%s did not become ready:\n%s", name, out)
		}
	}
}

// rewriter is an http.RoundTripper that hands every requestState a client
// sends to a function, which may change it, as a client or a network in
// the middle would; with no function it changes nothing.
type rewriter struct {
	mu sync.Mutex
	f  func(string) string
}

func (w *rewriter) set(f func(string) string) { w.mu.Lock(); w.f = f; w.mu.Unlock() }

func (w *rewriter) RoundTrip(r *http.Request) (*http.Response, error) {
	w.mu.Lock()
	f := w.f
	w.mu.Unlock()
	if f == nil || r.Body == nil {
		return http.DefaultTransport.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var msg map[string]any
	if d.Decode(&msg) == nil {
		if p, ok := msg["params"].(map[string]any); ok {
			if s, ok := p["requestState"].(string); ok {
				p["requestState"] = f(s)
				body = testkit.Must(json.Marshal(msg))
			}
		}
	}
	r = r.Clone(r.Context())
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return http.DefaultTransport.RoundTrip(r)
}

// A caller is one client library's high-level call of a tool with
// arguments {"n": n}, at url, its HTTP through rw; it returns the result's
// text or the error the library gives its caller.
type caller func(ctx context.Context, url, tool string, n int) (string, error)

// A refusal is one case a client is checked for: the message its caller
// must see (at least), and the reason the error's data carries.
type refusal struct{ name, message, reason string }

var (
	invalidCase     = refusal{"invalid", "invalid requestState: invalid", "invalid"}
	expiredCase     = refusal{"expired", "invalid requestState: expired", "expired"}
	replayedCase    = refusal{"replayed", "invalid requestState: replayed", "replayed"}
	unavailableCase = refusal{"unavailable", "requestState not checked, try again: unavailable", "unavailable"}
)

// flows runs, at each target, two complete flows (fleet_flow's three
// rounds, fleet_pay's two) and the four refusals, each through call, and
// hands each refusal's error to check. In the table it logs, what the
// caller of the library sees.
func flows(t *testing.T, client string, rw *rewriter, call caller, check func(t *testing.T, c refusal, err error)) {
	e := targets(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tg := range []target{e.direct, e.gateway} {
		t.Run(tg.name, func(t *testing.T) {
			rw.set(nil)
			if got, err := call(ctx, tg.url, "fleet_flow", 1); err != nil || got != "flow 1 done after 3 rounds" {
				t.Fatalf("fleet_flow: %q, %v", got, err)
			}
			// The control for "expired": the same state sealed now passes.
			once := func(tok string) func(string) string {
				done := false
				return func(s string) string {
					if done {
						return s
					}
					done = true
					return tok
				}
			}
			rw.set(once(tg.fresh))
			if got, err := call(ctx, tg.url, "fleet_flow", 1); err != nil || got != "flow 1 done after 3 rounds" {
				t.Fatalf("fleet_flow with a state the test sealed now: %q, %v", got, err)
			}
			var used string
			rw.set(func(s string) string { used = s; return s })
			if got, err := call(ctx, tg.url, "fleet_pay", 7); err != nil || got != "paid 7" || used == "" {
				t.Fatalf("fleet_pay: %q, %v (state %q)", got, err, used)
			}
			refused := func(c refusal, url, tool string, n int, f func(string) string) {
				rw.set(f)
				got, err := call(ctx, url, tool, n)
				rw.set(nil)
				if err == nil {
					t.Errorf("%s: completed: %q", c.name, got)
					return
				}
				if !strings.Contains(err.Error(), c.message) {
					t.Errorf("%s: the caller sees %q, want it to say %q", c.name, err, c.message)
				}
				check(t, c, err)
				t.Logf("| %s | %s | %s | `%s` |", client, tg.name, c.name, err)
			}
			refused(invalidCase, tg.url, "fleet_flow", 1, func(s string) string { return s[:10] + flip(s[10]) + s[11:] })
			refused(expiredCase, tg.url, "fleet_flow", 1, func(string) string { return tg.expired })
			refused(replayedCase, tg.url, "fleet_pay", 7, func(string) string { return used })
			refused(unavailableCase, tg.unavailable, "fleet_pay", 8, nil)
		})
	}
}

// flip changes a base64url character to another.
func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}
