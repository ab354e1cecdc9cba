// Package metricstest records what the middleware reports through both of
// stateseal's metrics sinks at once, mrtr.SlogMetrics and otelmetrics, so
// that the adapters' tests can check what a client can make them say.
package metricstest

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/otelmetrics"
)

// Sinks is an mrtr.Metrics that reports to a SlogMetrics writing into a
// buffer, to otelmetrics over a manual reader, and to Counters.
type Sinks struct {
	Counters mrtr.Counters
	slog     mrtr.Metrics
	otel     *otelmetrics.Metrics
	reader   *sdkmetric.ManualReader
	mu       sync.Mutex
	log      bytes.Buffer
}

// New returns empty Sinks.
func New(t testing.TB) *Sinks {
	s := &Sinks{reader: sdkmetric.NewManualReader()}
	var err error
	s.otel, err = otelmetrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader)))
	if err != nil {
		t.Fatal(err)
	}
	s.slog = mrtr.SlogMetrics(slog.New(slog.NewTextHandler(writer{s}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	return s
}

type writer struct{ s *Sinks }

func (w writer) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.log.Write(p)
}

func (s *Sinks) Sealed(method, target string) {
	s.Counters.Sealed(method, target)
	s.slog.Sealed(method, target)
	s.otel.Sealed(method, target)
}

func (s *Sinks) Opened(method, target string) {
	s.Counters.Opened(method, target)
	s.slog.Opened(method, target)
	s.otel.Opened(method, target)
}

func (s *Sinks) Rejected(method, target, reason string) {
	s.Counters.Rejected(method, target, reason)
	s.slog.Rejected(method, target, reason)
	s.otel.Rejected(method, target, reason)
}

func (s *Sinks) Latency(op string, d time.Duration) { s.otel.Latency(op, d) }

// Lines returns the lines SlogMetrics wrote.
func (s *Sinks) Lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimSuffix(s.log.String(), "\n"), "\n")
}

// Attributes returns, for each attribute key of the states and replays
// instruments, the set of values recorded.
func (s *Sinks) Attributes(t testing.TB) map[string]map[string]bool {
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok || !strings.HasPrefix(m.Name, "stateseal.states.") && !strings.HasPrefix(m.Name, "stateseal.replays.") {
				continue
			}
			for _, p := range sum.DataPoints {
				for _, kv := range p.Attributes.ToSlice() {
					k := string(kv.Key)
					if out[k] == nil {
						out[k] = map[string]bool{}
					}
					out[k][kv.Value.AsString()] = true
				}
			}
		}
	}
	return out
}

// Check fails t if the sinks carry a value that is not one of targets
// (as a target) or of the three methods and mrtr.Unknown (as a method),
// if a log line is longer than 512 bytes or contains marker, or if more
// rejection lines were logged than the limiter lets through in elapsed
// for keys distinct method, target and reason combinations.
func (s *Sinks) Check(t testing.TB, marker string, targets []string, keys int, elapsed time.Duration) {
	t.Helper()
	allowed := map[string]bool{}
	for _, x := range targets {
		allowed[x] = true
	}
	methods := map[string]bool{mrtr.MethodCallTool: true, mrtr.MethodGetPrompt: true, mrtr.MethodReadResource: true, mrtr.Unknown: true}
	attrs := s.Attributes(t)
	for v := range attrs["target"] {
		if !allowed[v] {
			t.Errorf("otelmetrics target attribute %.80q: not a registered target", v)
		}
	}
	for v := range attrs["method"] {
		if !methods[v] {
			t.Errorf("otelmetrics method attribute %.80q", v)
		}
	}
	if n := len(attrs["target"]); n > len(targets) {
		t.Errorf("%d distinct target attributes, want at most %d", n, len(targets))
	}
	rejected := 0
	for _, l := range s.Lines() {
		if len(l) > 512 {
			t.Errorf("a log line of %d bytes: %.120s...", len(l), l)
		}
		if strings.Contains(l, marker) {
			t.Errorf("a log line carries what the client wrote: %.120s...", l)
		}
		if strings.Contains(l, "requestState rejected") {
			rejected++
		}
	}
	// One line per key and second, and one more for a second begun.
	if limit := keys * (int(elapsed/time.Second) + 2); rejected > limit {
		t.Errorf("%d rejection lines in %v for %d keys, over %d", rejected, elapsed, keys, limit)
	}
	t.Logf("%d target attribute values, %d rejection lines in %v", len(attrs["target"]), rejected, elapsed.Round(time.Millisecond))
}
