//go:build unix

package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mrtr"
)

// BenchmarkConcurrency runs b.N two-round flows from 1, 16, 64 and 256
// concurrent clients over loopback, straight to a cheap upstream
// (direct), through a plain httputil.ReverseProxy that reads the body
// first (proxy, as BenchmarkLoopbackPlainProxy) and through the gateway
// with its default transport; the plain proxy gets a transport with the
// same settings (defaultTransport). Clients, proxy and upstream share the
// process, so CPU-µs/flow (getrusage of the process, user+sys, over the
// flows) counts all three in every case: the difference between two
// cases is what the proxy in between costs.
//
// On a shared machine the load moves within seconds, so the gateway's
// ratios to the plain proxy (cpu/proxy, tput/proxy) come from plain-proxy
// flows run in the gateway's own case, in turns with the gateway's (a
// few hundred flows each, same clients, same level); the gateway's
// flows/s and CPU-µs/flow count its own turns only.
//
//	go test -run '^$' -bench Concurrency -benchtime 3000x -count 5 ./gateway
func BenchmarkConcurrency(b *testing.B) {
	for _, kind := range []string{"direct", "proxy", "gateway"} {
		b.Run(kind, func(b *testing.B) {
			base, stop := concurrencyTarget(kind)
			defer stop()
			var anchor string
			if kind == "gateway" {
				var stopProxy func()
				anchor, stopProxy = concurrencyTarget("proxy")
				defer stopProxy()
			}
			for _, c := range []int{1, 16, 64, 256} {
				b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
					runConcurrent(b, base, anchor, "proxy", c)
				})
			}
		})
	}
}

// concurrencyTarget starts the upstream and, for proxy and gateway, the
// server in front of it; it returns the URL the clients post to.
func concurrencyTarget(kind string) (string, func()) {
	up := httptest.NewServer(http.HandlerFunc(sseUpstream))
	u := testkit.Must(url.Parse(up.URL))
	var front http.Handler
	switch kind {
	case "direct":
		return up.URL, up.Close
	case "proxy":
		p := httputil.NewSingleHostReverseProxy(u)
		p.Transport = defaultTransport()
		front = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body := testkit.Must(io.ReadAll(r.Body))
			r.Body = io.NopCloser(bytes.NewReader(body))
			p.ServeHTTP(w, r)
		})
	case "gateway":
		front = concurrencyGateway(u)
	}
	fs := httptest.NewServer(front)
	return fs.URL, func() { fs.Close(); up.Close() }
}

func concurrencyGateway(u *url.URL) *Gateway {
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	st := testkit.Must(newStates(ring, &mrtr.Options{Audience: "https://bench.test", AllowAnonymous: true, Metrics: &mrtr.Counters{}}))
	g := &Gateway{Upstreams: []*url.URL{u}, Principal: Anonymous{}, BindSession: true, MaxRequestBytes: 8 << 20,
		MaxResponseBytes: 16 << 20, MaxEventBytes: 4 << 20, IdleTimeout: time.Minute,
		Logger: slog.New(slog.DiscardHandler)} // Transport nil: the default, as a user gets it
	g.SetStates(st)
	return g
}

// BenchmarkHeaderFlush is what waiting for the first event saves: the
// gateway in turns with the same gateway (one upstream, one transport)
// behind a ResponseWriter that flushes a stream's headers as soon as
// they are written, as the gateway did before (one more write to the
// client a response), from 1, 16, 64 and 256 clients. Both go through
// the same wrapper, and the eager one still arms and stops the timer, so
// it costs a little more than the gateway before. cpu/eager and
// tput/eager are the ratios of the two in the same run, alone/resp the
// share of the gateway's responses whose headers left alone (its timer
// fired before the first event).
//
//	go test -run '^$' -bench HeaderFlush -benchtime 3000x -count 5 ./gateway
func BenchmarkHeaderFlush(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(sseUpstream))
	defer up.Close()
	g := concurrencyGateway(testkit.Must(url.Parse(up.URL)))
	var alone, resps atomic.Int64
	front := func(eager bool) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hw := &headerWriter{ResponseWriter: w, eager: eager}
			g.ServeHTTP(hw, r)
			if !eager {
				resps.Add(1)
				if hw.alone {
					alone.Add(1)
				}
			}
		}))
	}
	waits, eager := front(false), front(true)
	defer waits.Close()
	defer eager.Close()
	for _, c := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			alone.Store(0)
			resps.Store(0)
			runConcurrent(b, waits.URL, eager.URL, "eager", c)
			b.ReportMetric(float64(alone.Load())/float64(resps.Load()), "alone/resp")
		})
	}
}

// A headerWriter is the client's ResponseWriter under the gateway: eager,
// it flushes the headers when they are written; otherwise it notes
// whether they were flushed before the first write.
type headerWriter struct {
	http.ResponseWriter
	eager, wrote, alone bool
	mu                  sync.Mutex // the gateway's timer flushes from its own goroutine
}

func (h *headerWriter) WriteHeader(code int) {
	h.ResponseWriter.WriteHeader(code)
	if h.eager {
		h.ResponseWriter.(http.Flusher).Flush()
	}
}

func (h *headerWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	h.wrote = true
	h.mu.Unlock()
	return h.ResponseWriter.Write(p)
}

func (h *headerWriter) Flush() {
	h.mu.Lock()
	if !h.wrote {
		h.alone = true
	}
	h.mu.Unlock()
	h.ResponseWriter.(http.Flusher).Flush()
}

// runConcurrent runs b.N flows against base from c goroutines and
// reports flows/s and CPU-µs/flow; with an anchor, in turns with as many
// flows against the anchor, and the ratios of the two (cpu/name,
// tput/name).
func runConcurrent(b *testing.B, base, anchor, name string, c int) {
	// The clients keep a connection each: the default of 2 idle per host
	// would have them dial again, and that would be measured.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 0, 2*c
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	turns := 1
	if anchor != "" {
		turns = max(1, min(8, b.N/(4*c))) // at least 4 flows a client a turn
		runFlows(b, hc, anchor, c, c)     // one flow each opens the connections
	}
	runFlows(b, hc, base, c, c)
	var cpu, wall, anchorCPU, anchorWall time.Duration
	b.ResetTimer()
	for i := range turns {
		n := b.N / turns
		if i < b.N%turns {
			n++ // b.N in all
		}
		dc, dw := runFlows(b, hc, base, c, n)
		cpu, wall = cpu+dc, wall+dw
		if anchor != "" {
			b.StopTimer()
			dc, dw = runFlows(b, hc, anchor, c, n)
			anchorCPU, anchorWall = anchorCPU+dc, anchorWall+dw
			b.StartTimer()
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/wall.Seconds(), "flows/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "CPU-µs/flow")
	if anchor != "" {
		b.ReportMetric(float64(cpu)/float64(anchorCPU), "cpu/"+name)
		b.ReportMetric(float64(anchorWall)/float64(wall), "tput/"+name)
	}
}

// runFlows runs n flows against base from c goroutines and returns the
// process's CPU time and the wall time they took.
func runFlows(b *testing.B, hc *http.Client, base string, c, n int) (cpu, wall time.Duration) {
	var wg sync.WaitGroup
	var left atomic.Int64
	var failed atomic.Pointer[error]
	left.Store(int64(n))
	cpu0, t0 := processCPU(), time.Now()
	wg.Add(c)
	for range c {
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 && failed.Load() == nil {
				if err := concurrentFlow(hc, base); err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	wg.Wait()
	if e := failed.Load(); e != nil {
		b.Fatal(*e)
	}
	return processCPU() - cpu0, time.Since(t0)
}

// processCPU is the user and system time of the whole process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var concurrentFirst = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book","arguments":{"seats":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)

// concurrentFlow is benchLoopback's flow, returning its error.
func concurrentFlow(hc *http.Client, base string) error {
	post := func(body []byte) ([]byte, error) {
		req := testkit.Must(http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(headerVersion, version2026)
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("status %d: %s", resp.StatusCode, out)
		}
		return out, err
	}
	first := concurrentFirst
	out, err := post(first)
	if err != nil {
		return err
	}
	_, tok, _ := bytes.Cut(out, []byte(`"requestState":"`))
	tok, _, _ = bytes.Cut(tok, []byte(`"`))
	second := append(append(append([]byte(nil), first[:len(first)-2]...), `,"requestState":"`...), tok...)
	second = append(second, `"}}`...)
	second = bytes.Replace(second, []byte(`"id":1`), []byte(`"id":2`), 1)
	if out, err = post(second); err != nil {
		return err
	}
	if !bytes.Contains(out, []byte("state-ok")) {
		return errors.New("second round: " + string(out))
	}
	return nil
}

func (h *headerWriter) Unwrap() http.ResponseWriter { return h.ResponseWriter }
