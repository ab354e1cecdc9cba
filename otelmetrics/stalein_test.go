package otelmetrics_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/otelmetrics"
	"github.com/stateseal/stateseal/rotation"
)

// TestStaleIn: keyset.stale_in counts down on the loader's clock (an
// injected one, walked past the expiry: it goes negative), and a refresh
// the loader installs moves it to the new expiry.
func TestStaleIn(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	testkit.Check(backends.GenerateLocal(filepath.Join(dir, "kek")))
	path := filepath.Join(dir, "keyset.json")
	var mu sync.Mutex
	now := time.Now().UTC().Truncate(time.Second)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	o := &rotation.Options{KEK: "local:kek", Logger: slog.New(slog.DiscardHandler), Now: clock}
	testkit.Must(rotation.Init(ctx, path, "local:kek", keyring.AEAD, keyring.DefaultPolicy(), o))
	l := &keyset.Loader{Path: path, Options: keyset.LoadOptions{KEK: "local:kek", Now: clock}, Logger: slog.New(slog.DiscardHandler)}
	defer l.Close()
	ring := testkit.Must(l.Load(ctx))
	reader := sdkmetric.NewManualReader()
	m := testkit.Must(otelmetrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	testkit.Check(m.ObserveLoader(l, ring))
	staleIn := func() float64 {
		t.Helper()
		var rm metricdata.ResourceMetrics
		testkit.Check(reader.Collect(ctx, &rm))
		for _, sm := range rm.ScopeMetrics {
			for _, mt := range sm.Metrics {
				if g, ok := mt.Data.(metricdata.Gauge[float64]); ok && mt.Name == "stateseal.keyset.stale_in" && mt.Unit == "s" {
					return g.DataPoints[0].Value
				}
			}
		}
		t.Fatal("no stateseal.keyset.stale_in gauge")
		return 0
	}
	week := (7 * 24 * time.Hour).Seconds()
	if got := staleIn(); got != week {
		t.Fatalf("stale_in at the write = %v, want %v", got, week)
	}
	start := now
	mu.Lock()
	now = start.Add(6*24*time.Hour + 23*time.Hour)
	mu.Unlock()
	if got := staleIn(); got != 3600 {
		t.Fatalf("stale_in an hour before = %v, want 3600", got)
	}
	mu.Lock()
	now = start.Add(8 * 24 * time.Hour)
	mu.Unlock()
	if got := staleIn(); got != -24*3600 {
		t.Fatalf("stale_in a day after = %v, want -86400", got)
	}
	o.AllowStale = true
	testkit.Must(rotation.Refresh(ctx, path, o))
	testkit.Check(l.Reload(ctx))
	if got := staleIn(); got != week {
		t.Fatalf("stale_in after a refresh = %v, want %v", got, week)
	}
}
