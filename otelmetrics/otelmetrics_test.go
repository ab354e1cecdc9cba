package otelmetrics_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/otelmetrics"
	"github.com/stateseal/stateseal/replay"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/seal"
)

// TestMetrics drives a real Sealer, single use and a Loader, and reads
// every instrument back through the SDK's manual reader.
func TestMetrics(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	m, err := otelmetrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	testkit.Check(backends.GenerateLocal(filepath.Join(dir, "kek")))
	path := filepath.Join(dir, "keyset.json")
	o := &rotation.Options{KEK: "local:kek", Logger: slog.New(slog.DiscardHandler)}
	if _, err := rotation.Init(ctx, path, "local:kek", keyring.AEAD, keyring.DefaultPolicy(), o); err != nil {
		t.Fatal(err)
	}
	l := &keyset.Loader{Path: path, Options: keyset.LoadOptions{KEK: "local:kek"}, Logger: slog.New(slog.DiscardHandler)}
	ring, err := l.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ObserveLoader(l, ring); err != nil {
		t.Fatal(err)
	}
	s := testkit.Must(seal.New(ring, nil))
	ms, err := mrtr.New(s, &mrtr.Options{Audience: "a", Metrics: m, SingleUse: mrtr.Targets("pay"), Replay: replay.NewMemory(0)})
	if err != nil {
		t.Fatal(err)
	}
	r := mrtr.Request{Method: mrtr.MethodCallTool, Target: "pay", Principal: "p"}
	tok := testkit.Must(ms.Seal(r, "s"))
	ms.Open(ctx, r, tok)       // opened
	ms.Open(ctx, r, tok)       // replayed
	ms.Open(ctx, r, tok+"AAA") // invalid
	// A rotation, then a reload that installs it, then one that fails.
	res, err := rotation.Rotate(ctx, path, &rotation.RotateOptions{Immediate: true}, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	l.Options.KEK = "local:missing"
	l.Reload(ctx)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var durations uint64
	var keyID string
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					key := mt.Name
					if v, ok := p.Attributes.Value("reason"); ok {
						key += "/" + v.AsString()
					}
					if v, ok := p.Attributes.Value("result"); ok {
						key += "/" + v.AsString()
					}
					got[key] += p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					got[mt.Name] = p.Value
					if v, ok := p.Attributes.Value("key_id"); ok {
						keyID = v.AsString()
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					durations += p.Count
				}
			}
		}
	}
	want := map[string]int64{
		"stateseal.states.sealed":            1,
		"stateseal.states.opened":            1,
		"stateseal.states.rejected/replayed": 1,
		"stateseal.states.rejected/invalid":  1,
		"stateseal.replays.blocked":          1,
		"stateseal.keyset.reloads/ok":        1,
		"stateseal.keyset.reloads/error":     1,
		"stateseal.keyset.primary_key_id":    int64(res.Key),
		"stateseal.keyset.version":           2,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
	if durations != 4 { // one seal, three opens
		t.Errorf("%d durations recorded, want 4", durations)
	}
	// The key id in the form logs and sealctl show.
	if keyID != keyring.FormatID(res.Key) {
		t.Errorf("primary_key_id's key_id = %q, want %q", keyID, keyring.FormatID(res.Key))
	}
}

// TestTeeWithLog: OpenTelemetry and the rejection log at once, through
// mrtr.TeeMetrics: every rejection is counted, logged (at the log's own
// rate), and every seal and open timed.
func TestTeeWithLog(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	m, err := otelmetrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	tee := mrtr.TeeMetrics(m, mrtr.SlogMetrics(slog.New(slog.NewTextHandler(&logged, nil))))
	if _, ok := tee.(mrtr.LatencyMetrics); !ok {
		t.Fatal("the tee of a LatencyMetrics does not time")
	}
	ring := testkit.Must(keyring.Generate(keyring.AEAD))
	s := testkit.Must(seal.New(ring, nil))
	ms, err := mrtr.New(s, &mrtr.Options{Audience: "a", Metrics: tee})
	if err != nil {
		t.Fatal(err)
	}
	r := mrtr.Request{Method: mrtr.MethodCallTool, Target: "book", Principal: "p", Label: "book"}
	tok := testkit.Must(ms.Seal(r, "s"))
	if _, err := ms.Open(ctx, r, tok); err != nil {
		t.Fatal(err)
	}
	ms.Open(ctx, r, tok+"AAA") // invalid
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	var rejected int64
	var durations uint64
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				if mt.Name == "stateseal.states.rejected" {
					for _, p := range d.DataPoints {
						rejected += p.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					durations += p.Count
				}
			}
		}
	}
	if rejected != 1 || durations != 3 {
		t.Errorf("OpenTelemetry: %d rejected, %d durations; want 1 and 3", rejected, durations)
	}
	if l := logged.String(); !strings.Contains(l, `msg="stateseal: requestState rejected" method=tools/call target=book reason=invalid`) {
		t.Errorf("log: %q", l)
	}
}

// BenchmarkHotPath is what counting one opened state and its latency
// costs, as mrtr does for every open: the attribute sets are built once,
// not per call.
//
//	go test -run '^$' -bench HotPath -benchmem ./otelmetrics
func BenchmarkHotPath(b *testing.B) {
	m := testkit.Must(otelmetrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))))
	b.ReportAllocs()
	for b.Loop() {
		m.Opened(mrtr.MethodCallTool, "book")
		m.Latency("open", time.Microsecond)
	}
}

// TestHotPathAllocs holds that counting an open allocates nothing once
// its attribute set is built (BenchmarkHotPath's numbers).
func TestHotPathAllocs(t *testing.T) {
	m := testkit.Must(otelmetrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))))
	m.Opened(mrtr.MethodCallTool, "book")
	if n := testing.AllocsPerRun(100, func() {
		m.Opened(mrtr.MethodCallTool, "book")
		m.Sealed(mrtr.MethodCallTool, "book")
		m.Latency("open", time.Microsecond)
		m.Latency("seal", time.Microsecond)
	}); n != 0 {
		t.Errorf("%v allocations a count, want 0", n)
	}
}
