//go:build linux

package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mrtr"
)

// TestLoad measures, in one run, the same load (two-round flows of an
// input_required tool, one request at a time) sent straight to the
// upstream (examples/mcpserver -no-seal), through a plain
// httputil.ReverseProxy, and through the gateway; and, for the CPU the
// sealing costs, the same server with stateseal's go-sdk middleware. The
// targets take turns in batches, so that drift on a shared machine falls
// on all of them alike. It runs only with SEALGATE_LOAD=N (flows per
// target), and writes the table docs/BENCHMARKS.md quotes:
//
//	SEALGATE_LOAD=10000 go test -run '^TestLoad$' -v -count=1 -timeout 20m ./gateway
func TestLoad(t *testing.T) {
	if os.Getenv("SEALGATE_LOAD") == "" {
		t.Skip("set SEALGATE_LOAD=N to measure")
	}
	n, err := strconv.Atoi(os.Getenv("SEALGATE_LOAD"))
	if err != nil || n <= 0 {
		t.Fatalf("SEALGATE_LOAD=%q: want a number of flows above 0", os.Getenv("SEALGATE_LOAD"))
	}
	plainBase, plainPID := startExampleProc(t, "-no-seal")
	sealedBase, sealedPID := startExampleProc(t)
	pu := testkit.Must(url.Parse(plainBase))

	// The plain proxy reads the request body before it forwards it, as
	// the gateway does (and nginx by default): a ReverseProxy streaming
	// the body from the client fails about one request in a hundred
	// against the go-sdk server ("use of closed network connection").
	plain := httputil.NewSingleHostReverseProxy(pu)
	plain.Transport = tunedTransport()
	ps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		plain.ServeHTTP(w, r)
	}))
	defer ps.Close()

	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	st, err := newStates(ring, &mrtr.Options{Audience: "https://load.test", AllowAnonymous: true, Metrics: &mrtr.Counters{}})
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{Upstreams: []*url.URL{pu}, Principal: Anonymous{}, BindSession: true, MaxRequestBytes: 8 << 20,
		MaxResponseBytes: 16 << 20, MaxEventBytes: 4 << 20, IdleTimeout: idleForLoad(), Transport: tunedTransport(),
		Logger: slog.New(slog.DiscardHandler)}
	g.SetStates(st)
	gs := httptest.NewServer(g)
	defer gs.Close()

	type target struct {
		name, url string
		pid       int // the upstream process whose CPU to count
		lat       []time.Duration
		selfCPU   time.Duration // this process: client, and proxy if any
		upCPU     time.Duration
		dials     int64 // connections opened, client to proxy and proxy to upstream
	}
	targets := []*target{
		{name: "direct", url: plainBase + "/mcp", pid: plainPID},
		{name: "plain httputil.ReverseProxy", url: ps.URL + "/mcp", pid: plainPID},
		{name: "sealgate", url: gs.URL + "/mcp", pid: plainPID},
		{name: "direct, go-sdk middleware sealing", url: sealedBase + "/mcp", pid: sealedPID},
	}
	hc := &http.Client{Transport: tunedTransport()}
	const tool = "test_input_required_result_request_state"
	flow := func(tg *target) {
		start := time.Now()
		m, err := fleetRound(hc, tg.url, tool, "", nil, "", 1)
		tg.lat = append(tg.lat, time.Since(start))
		if err != nil {
			t.Fatal(err)
		}
		state, _ := m["result"].(map[string]any)["requestState"].(string)
		start = time.Now()
		m, err = fleetRound(hc, tg.url, tool, "", nil, state, 2)
		tg.lat = append(tg.lat, time.Since(start))
		if err != nil || !strings.Contains(fmt.Sprint(m["result"]), "state-ok") {
			t.Fatalf("%s: %v %v", tg.name, err, m)
		}
	}
	for _, tg := range targets { // warm up
		for range 200 {
			flow(tg)
		}
		tg.lat = tg.lat[:0]
	}
	const batch = 20
	for done := 0; done < n; done += batch {
		for _, tg := range targets {
			self0, up0, d0 := selfCPU(), procCPU(t, tg.pid), dials.Load()
			for range batch {
				flow(tg)
			}
			tg.dials += dials.Load() - d0
			tg.selfCPU += selfCPU() - self0
			tg.upCPU += procCPU(t, tg.pid) - up0
		}
	}
	p := func(d []time.Duration, q float64) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[int(q*float64(len(s)-1))]
	}
	direct, proxy, gate, mw := targets[0], targets[1], targets[2], targets[3]
	var out strings.Builder
	fmt.Fprintf(&out, "%d two-round flows per target, one request at a time, GOMAXPROCS=%d\n\n", n, runtimeProcs())
	fmt.Fprintf(&out, "| target | p50 | p90 | p99 | added p50 | CPU per flow: this process | CPU per flow: upstream |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, tg := range targets {
		added := "-"
		if tg != direct && tg != mw {
			added = fmt.Sprint((p(tg.lat, .5) - p(direct.lat, .5)).Round(time.Microsecond))
		}
		fmt.Fprintf(&out, "| %s | %v | %v | %v | %s | %v | %v |\n", tg.name, p(tg.lat, .5).Round(time.Microsecond), p(tg.lat, .9).Round(time.Microsecond),
			p(tg.lat, .99).Round(time.Microsecond), added, (tg.selfCPU / time.Duration(n)).Round(100*time.Nanosecond), (tg.upCPU / time.Duration(n)).Round(100*time.Nanosecond))
	}
	addedProxy := p(proxy.lat, .5) - p(direct.lat, .5)
	addedGate := p(gate.lat, .5) - p(direct.lat, .5)
	gateCPU := (gate.selfCPU - proxy.selfCPU) / time.Duration(n)
	mwCPU := (mw.upCPU - direct.upCPU) / time.Duration(n)
	for _, tg := range targets {
		fmt.Fprintf(&out, "connections opened during %s: %d\n", tg.name, tg.dials)
	}
	fmt.Fprintf(&out, "\nadded p50: sealgate %v / plain proxy %v = %.2f\n", addedGate.Round(time.Microsecond), addedProxy.Round(time.Microsecond), float64(addedGate)/float64(addedProxy))
	fmt.Fprintf(&out, "CPU per flow for sealing (one seal, one open): sealgate minus plain proxy %v; middleware minus plain server %v\n", gateCPU.Round(100*time.Nanosecond), mwCPU.Round(100*time.Nanosecond))
	t.Log("\n" + out.String())
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// dials counts the connections the load test's transports open.
var dials atomic.Int64

func tunedTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}
	return tr
}

// selfCPU is this process's user and system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is another process's user and system CPU time so far, from
// /proc (clock ticks of 10 ms).
func procCPU(t *testing.T, pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut := testkit.Must(strconv.ParseInt(f[11], 10, 64))
	st := testkit.Must(strconv.ParseInt(f[12], 10, 64))
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// startExampleProc starts examples/mcpserver with args and returns its
// base URL and process id.
func startExampleProc(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(testkit.Build(t, exampleServer), append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	stderr := testkit.Must(cmd.StderrPipe())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	re := regexp.MustCompile(`MCP server at (http://\S+)/mcp`)
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, stderr)
			return m[1], cmd.Process.Pid
		}
	}
	t.Fatal("the example server did not start")
	return "", 0
}

func idleForLoad() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("SEALGATE_LOAD_IDLE")); err == nil {
		return d
	}
	return time.Minute
}
