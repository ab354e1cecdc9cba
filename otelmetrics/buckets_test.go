package otelmetrics_test

import (
	"context"
	"slices"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/otelmetrics"
)

// TestDurationBuckets: the histogram's buckets are DurationBuckets, and
// a seal of 3 µs, a Redis check of 300 µs and a guard cut at 500 ms land
// in three different buckets, not all in the first as with
// OpenTelemetry's default bounds (5 s and up).
func TestDurationBuckets(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m := testkit.Must(otelmetrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	for _, d := range []time.Duration{3 * time.Microsecond, 300 * time.Microsecond, 500 * time.Millisecond} {
		m.Latency("open", d)
	}
	var rm metricdata.ResourceMetrics
	testkit.Check(reader.Collect(context.Background(), &rm))
	var p *metricdata.HistogramDataPoint[float64]
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if h, ok := mt.Data.(metricdata.Histogram[float64]); ok && mt.Name == "stateseal.operation.duration" {
				p = &h.DataPoints[0]
			}
		}
	}
	if p == nil {
		t.Fatal("no stateseal.operation.duration histogram")
	}
	if !slices.Equal(p.Bounds, otelmetrics.DurationBuckets) || p.Bounds[0] != 1e-6 || p.Bounds[len(p.Bounds)-1] != 1 {
		t.Fatalf("bounds %v, want DurationBuckets, 1 µs to 1 s", p.Bounds)
	}
	var used []int
	for i, n := range p.BucketCounts {
		if n > 0 {
			used = append(used, i)
		}
	}
	// (2.5 µs, 5 µs], (250 µs, 500 µs], (250 ms, 500 ms].
	if want := []int{2, 8, 17}; !slices.Equal(used, want) {
		t.Fatalf("buckets used %v (counts %v), want %v", used, p.BucketCounts, want)
	}
}
