package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mrtr"
)

// The bridge's three targets (docs/BENCHMARKS.md, "The bridge"):
//
//	go test ./gateway -run '^$' -bench 'Bridge' -benchtime 1x
//
// with -benchtime raised for BenchmarkBridgeOff2026 and
// BenchmarkBridgeRound as that section says.

// BenchmarkBridgePending: the memory of 10,000 bridged calls waiting
// for their clients' answers on one gateway, each on its own client
// connection, held by another process (this test binary again,
// TestBridgeHolder): the heap and stacks in use after, less before, per
// call, the server's side of each connection included; the upstream is
// in process too, its pooled connections counted.
func BenchmarkBridgePending(b *testing.B) {
	pending := 10000
	if os.Getenv("BRIDGE_HEAP_PROFILE") != "" {
		runtime.MemProfileRate = 4096
	}
	if lim, ok := raiseFiles(pending + 1000); !ok {
		pending = lim - 1000
		b.Logf("open files limited to %d: %d pending calls", lim, pending)
	}
	up := &bridgeUpstream{quiet: true}
	us := httptest.NewServer(up)
	defer us.Close()
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	st := testkit.Must(newStates(ring, &mrtr.Options{Audience: "https://gw.test", AllowAnonymous: true, Metrics: &mrtr.Counters{}}))
	g := &Gateway{Upstreams: []*url.URL{testkit.Must(url.Parse(us.URL))}, Principal: Anonymous{}, MaxRequestBytes: 1 << 20, MaxResponseBytes: 1 << 20,
		MaxEventBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler),
		Bridge: &Bridge{Audience: "https://gw.test", MaxPending: pending, MaxPendingPerPrincipal: pending}}
	g.SetStates(st)
	gs := httptest.NewServer(g)
	defer gs.Close()
	addr := strings.TrimPrefix(gs.URL, "http://")
	sid := bridgeSession(b, gs.URL+"/mcp")
	for b.Loop() {
		before, bs := inUse(), stacks()
		cmd := exec.Command(os.Args[0], "-test.run=^TestBridgeHolder$", "-test.bench=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("STATESEAL_BRIDGE_HOLD=%s %s %d", addr, sid, pending))
		cmd.Stderr = os.Stderr
		stdin := testkit.Must(cmd.StdinPipe())
		stdout := testkit.Must(cmd.StdoutPipe())
		testkit.Check(cmd.Start())
		if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "held\n" {
			cmd.Process.Kill()
			b.Fatalf("the holder: %q, %v", line, err)
		}
		after, as := inUse(), stacks()
		if f := os.Getenv("BRIDGE_HEAP_PROFILE"); f != "" {
			out := testkit.Must(os.Create(f))
			testkit.Check(pprof.WriteHeapProfile(out))
			out.Close()
		}
		if n := g.Bridge.Pending(); n != pending {
			b.Fatalf("%d pending, want %d", n, pending)
		}
		b.ReportMetric(float64(after-before)/float64(pending), "B/pending")
		b.ReportMetric(float64(pending), "pending")
		b.ReportMetric(float64(as-bs)/float64(pending), "stack-B/pending")
		stdin.Close() // the holder closes its connections and exits
		testkit.Check(cmd.Wait())
		for deadline := time.Now().Add(time.Minute); g.Bridge.Pending() > 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestBridgeHolder is BenchmarkBridgePending's other process: it starts
// the calls, says "held" once each waits, and holds them until its
// stdin closes. It does nothing when run as a test.
func TestBridgeHolder(t *testing.T) {
	spec := os.Getenv("STATESEAL_BRIDGE_HOLD")
	if spec == "" {
		t.Skip("BenchmarkBridgePending's holder process")
	}
	var addr, sid string
	var n int
	if _, err := fmt.Sscanf(spec, "%s %s %d", &addr, &sid, &n); err != nil {
		t.Fatal(err)
	}
	if _, ok := raiseFiles(n + 100); !ok {
		t.Fatalf("cannot open %d files", n+100)
	}
	conns := make([]net.Conn, 0, n)
	for i := range n {
		conns = append(conns, holdCall(t, addr, sid, i))
	}
	fmt.Println("held")
	io.Copy(io.Discard, os.Stdin)
	for _, cn := range conns {
		cn.Close()
	}
}

// inUse is the heap and goroutine stacks in use, after four
// collections: a collection halves the stack of a goroutine that uses a
// quarter of it, and a call waits minutes, through many.
func inUse() uint64 {
	for range 4 {
		runtime.GC()
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

func stacks() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.StackInuse
}

// bridgeSession initializes a 2025-11-25 session and returns its id.
func bridgeSession(b *testing.B, u string) string {
	req := testkit.Must(http.NewRequest("POST", u, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"b","version":"1"}}}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp := testkit.Must(http.DefaultClient.Do(req))
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Header.Get(headerSession) == "" {
		b.Fatalf("initialize: %d", resp.StatusCode)
	}
	return resp.Header.Get(headerSession)
}

// holdCall starts a call that needs input on a raw connection and
// returns once its input request arrived: the call waits.
func holdCall(b testing.TB, addr, sid string, id int) net.Conn {
	cn, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"pay","arguments":{}}}`, id)
	fmt.Fprintf(cn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-11-25\r\nContent-Length: %d\r\n\r\n%s", addr, sid, len(body), body)
	br := bufio.NewReaderSize(cn, 512)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			b.Fatalf("call %d: %v", id, err)
		}
		if strings.Contains(line, "elicitation/create") {
			return cn
		}
	}
}

// BenchmarkBridgeRound: a two-round flow over loopback HTTP, native
// 2026-07-28 (call, input_required with a sealed state, retry) and
// bridged 2025-11-25 (call, the input request on its stream, the answer
// POSTed, the result), alternated in one run against the same gateway
// and upstream: the p50 of each and the bridged flow's added p50.
func BenchmarkBridgeRound(b *testing.B) {
	_, u, _ := bridgeFixture(b, &Bridge{}, nil)
	c := &legacyClient{t: b, url: u, who: "alice"}
	c.init()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	var native, bridged []time.Duration
	for b.Loop() {
		t0 := time.Now()
		nativeFlow(b, hc, u)
		t1 := time.Now()
		bridgedFlow(b, hc, u, c.sid)
		native, bridged = append(native, t1.Sub(t0)), append(bridged, time.Since(t1))
	}
	pn, pb := p50(native), p50(bridged)
	b.ReportMetric(float64(pn.Microseconds()), "native-p50-µs")
	b.ReportMetric(float64(pb.Microseconds()), "bridged-p50-µs")
	b.ReportMetric(float64((pb - pn).Microseconds()), "added-p50-µs")
}

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func post(b *testing.B, hc *http.Client, u string, hdr map[string]string, body string) *http.Response {
	req := testkit.Must(http.NewRequest("POST", u, strings.NewReader(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-User", "alice")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	return resp
}

func nativeFlow(b *testing.B, hc *http.Client, u string) {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	h := map[string]string{headerVersion: version2026, headerMethod: "tools/call", headerName: "flow"}
	resp := post(b, hc, u, h, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"flow","arguments":{},`+meta+`}}`)
	var m struct{ Result struct{ RequestState string } }
	testkit.Check(json.NewDecoder(resp.Body).Decode(&m))
	resp.Body.Close()
	resp = post(b, hc, u, h, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"flow","arguments":{},`+meta+
		`,"requestState":"`+m.Result.RequestState+`","inputResponses":{"ok":{"action":"accept","content":{}}}}}`)
	out := testkit.Must(io.ReadAll(resp.Body))
	resp.Body.Close()
	if !bytes.Contains(out, []byte("done")) {
		b.Fatalf("native: %s", out)
	}
}

func bridgedFlow(b *testing.B, hc *http.Client, u, sid string) {
	h := map[string]string{headerVersion: "2025-11-25", headerSession: sid}
	call := post(b, hc, u, h, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"flow","arguments":{}}}`)
	defer call.Body.Close()
	br := bufio.NewReader(call.Body)
	event := func() []byte {
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				b.Fatalf("%v: %d %s", err, call.StatusCode, line)
			}
			if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				return d
			}
		}
	}
	var q struct{ ID string }
	testkit.Check(json.Unmarshal(event(), &q))
	ans := post(b, hc, u, h, `{"jsonrpc":"2.0","id":"`+q.ID+`","result":{"action":"accept","content":{}}}`)
	io.Copy(io.Discard, ans.Body)
	ans.Body.Close()
	if final := event(); !bytes.Contains(final, []byte("done")) {
		b.Fatalf("bridged: %s", final)
	}
}

// BenchmarkBridgeOff2026: the same 2026-07-28 two-round flow (in memory,
// as BenchmarkGatewayFlow) through a gateway without a bridge and one
// with, alternated flow by flow in one run, the median flow of each: a
// 2026-07-28 request pays only the bridge's routing check.
func BenchmarkBridgeOff2026(b *testing.B) {
	mk := func(br *Bridge) *Gateway {
		ring := testkit.Must(keyring.Generate(keyring.AEAD))
		st := testkit.Must(newStates(ring, &mrtr.Options{Audience: "https://bench.test", AllowAnonymous: true, Metrics: &mrtr.Counters{}}))
		g := &Gateway{Upstreams: []*url.URL{benchUpstream}, Principal: Anonymous{}, MaxRequestBytes: 8 << 20,
			MaxResponseBytes: 16 << 20, MaxEventBytes: 4 << 20, Transport: cannedUpstream{}, Logger: slog.New(slog.DiscardHandler), Bridge: br}
		g.SetStates(st)
		return g
	}
	off, on := mk(nil), mk(&Bridge{Audience: "https://bench.test"})
	first := testkit.Must(json.Marshal(rpcCall(1, mrtr.MethodCallTool, "book", map[string]any{"seats": 2}, "")))
	flow := func(h http.Handler) time.Duration {
		t0 := time.Now()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "http://localhost/mcp", bytes.NewReader(first))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(headerVersion, version2026)
		h.ServeHTTP(rec, req)
		var m map[string]any
		testkit.Check(json.Unmarshal([]byte(sseData(rec.Body.Bytes())[0]), &m))
		state := m["result"].(map[string]any)["requestState"].(string)
		second := testkit.Must(json.Marshal(rpcCall(2, mrtr.MethodCallTool, "book", map[string]any{"seats": 2}, state)))
		rec = httptest.NewRecorder()
		req = httptest.NewRequest(http.MethodPost, "http://localhost/mcp", bytes.NewReader(second))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(headerVersion, version2026)
		h.ServeHTTP(rec, req)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), "got plain:book") {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
		return time.Since(t0)
	}
	// Medians: a collection's pause lands on either side at random, and
	// one pause outweighs the difference measured.
	var tOff, tOn []time.Duration
	n := 0
	for b.Loop() {
		if n%2 == 0 {
			tOff = append(tOff, flow(off))
			tOn = append(tOn, flow(on))
		} else {
			tOn = append(tOn, flow(on))
			tOff = append(tOff, flow(off))
		}
		n++
	}
	b.ReportMetric(float64(p50(tOff).Nanoseconds()), "ns/flow-off")
	b.ReportMetric(float64(p50(tOn).Nanoseconds()), "ns/flow-on")
	b.ReportMetric(float64(p50(tOn))/float64(p50(tOff)), "on/off")
}
