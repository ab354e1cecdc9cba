// Package otelmetrics exports stateseal's metrics through OpenTelemetry,
// in a package of its own so that the rest of stateseal does not depend on
// OpenTelemetry.
//
//	m, err := otelmetrics.New(otel.GetMeterProvider())
//	a, err := mcpsdk.New(sealer, &mcpsdk.Options{Options: mrtr.Options{Audience: aud, Metrics: m}})
//	m.ObserveLoader(loader, ring) // keyset reloads, their failures, the primary key
//
// Instruments (all prefixed "stateseal."). A method is one of the three
// that carry state or "unknown"; a target is a name the server registered
// (mrtr.Request.Label) or "unknown", never a string of a client's choosing,
// so each attribute has a bounded set of values:
//
//	states.sealed     counter    method, target
//	states.opened     counter    method, target
//	states.rejected   counter    method, target, reason (invalid, expired, replayed, unavailable)
//	replays.blocked   counter    method, target: single-use states refused as used
//	operation.duration histogram op (seal, open), seconds: digest and single-use check included;
//	                             buckets DurationBuckets, 1 µs to 1 s
//	keyset.reloads    counter    result (ok, error)
//	keyset.primary_key_id gauge  key_id: the key that seals now
//	keyset.version    gauge      the version loaded
//	keyset.stale_in   gauge      seconds until the installed keyset's freshness window ends
//	                             (keyset.Health.Expires); negative after. Alert well before 0:
//	                             at 0 every instance loading it turns unready at once
//
// A key id is shown as logs, sealctl and keysets show it: eight lower-case
// hex digits (keyring.FormatID), in the primary_key_id gauge's key_id
// attribute. The gauge's value is the same id as a number, for alerting
// on a change; printf "%08x" turns it into the same text.
//
// Setting these metrics as mrtr.Options.Metrics replaces the default
// rejection log (mrtr.SlogMetrics). To keep both, tee them:
//
//	o := mrtr.Options{Audience: aud, Metrics: mrtr.TeeMetrics(m, mrtr.SlogMetrics(nil))}
package otelmetrics

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
)

// DurationBuckets are the upper bounds, in seconds, of the
// operation.duration histogram's buckets: 1, 2.5 and 5 in each decade from
// 1 µs to 1 s. A seal or an open takes a few microseconds, a single-use
// check against Redis tens to hundreds of microseconds, and a guard's
// check is cut at its timeout (500 ms by default); OpenTelemetry's
// default buckets (5 to 10,000) would put every operation in the first.
var DurationBuckets = []float64{
	1e-6, 2.5e-6, 5e-6,
	1e-5, 2.5e-5, 5e-5,
	1e-4, 2.5e-4, 5e-4,
	1e-3, 2.5e-3, 5e-3,
	1e-2, 2.5e-2, 5e-2,
	0.1, 0.25, 0.5,
	1,
}

// A Metrics is an mrtr.Metrics (and mrtr.LatencyMetrics) that records to
// OpenTelemetry instruments.
type Metrics struct {
	meter                          metric.Meter
	sealed, opened, rejected, used metric.Int64Counter
	duration                       metric.Float64Histogram
	reloads                        metric.Int64Counter

	// The attribute sets of the hot path, built once: building one per
	// call (metric.WithAttributes sorts and copies) cost more CPU than the
	// seal or open it counted, in a profile of sealgate under load.
	// Kept as the slices the variadic calls take, which would otherwise
	// allocate one per call.
	seal, open []metric.RecordOption
	mu         sync.RWMutex
	pairs      map[pair][]metric.AddOption
}

// pair is a method and a target, the attributes of the counters.
type pair struct{ method, target string }

// maxPairs bounds the attribute sets kept: method and target have
// bounded values (the package comment), so this is only a backstop
// against a caller that passes a client's strings.
const maxPairs = 4096

// New creates the instruments with a meter from mp.
func New(mp metric.MeterProvider) (*Metrics, error) {
	m := &Metrics{meter: mp.Meter("github.com/stateseal/stateseal"),
		seal:  []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("op", "seal")))},
		open:  []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("op", "open")))},
		pairs: make(map[pair][]metric.AddOption)}
	var err error
	counter := func(name, desc string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = m.meter.Int64Counter(name, metric.WithDescription(desc))
		return c
	}
	m.sealed = counter("stateseal.states.sealed", "request states sealed")
	m.opened = counter("stateseal.states.opened", "request states opened")
	m.rejected = counter("stateseal.states.rejected", "request states refused, by the reason a client is told")
	m.used = counter("stateseal.replays.blocked", "single-use request states refused as used before")
	m.reloads = counter("stateseal.keyset.reloads", "keyset reloads, by result")
	if err != nil {
		return nil, err
	}
	m.duration, err = m.meter.Float64Histogram("stateseal.operation.duration",
		metric.WithDescription("time to seal or open a request state"), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(DurationBuckets...))
	if err != nil {
		return nil, err
	}
	return m, nil
}

func attrs(method, target string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("method", method), attribute.String("target", target)))
}

// attrs returns the attribute set of method and target, built once.
func (m *Metrics) attrs(method, target string) []metric.AddOption {
	k := pair{method, target}
	m.mu.RLock()
	o, ok := m.pairs[k]
	m.mu.RUnlock()
	if ok {
		return o
	}
	o = []metric.AddOption{attrs(method, target)}
	m.mu.Lock()
	if len(m.pairs) < maxPairs {
		m.pairs[k] = o
	}
	m.mu.Unlock()
	return o
}

// Sealed counts a sealed state.
func (m *Metrics) Sealed(method, target string) {
	m.sealed.Add(context.Background(), 1, m.attrs(method, target)...)
}

// Opened counts an opened state.
func (m *Metrics) Opened(method, target string) {
	m.opened.Add(context.Background(), 1, m.attrs(method, target)...)
}

// Rejected counts a refused state by reason, and a replay also as blocked.
func (m *Metrics) Rejected(method, target, reason string) {
	ctx := context.Background()
	m.rejected.Add(ctx, 1, metric.WithAttributes(attribute.String("method", method),
		attribute.String("target", target), attribute.String("reason", reason)))
	if reason == "replayed" {
		m.used.Add(ctx, 1, m.attrs(method, target)...)
	}
}

// Latency records one seal or open.
func (m *Metrics) Latency(op string, d time.Duration) {
	o := m.open
	switch op {
	case "seal":
		o = m.seal
	case "open":
	default:
		o = []metric.RecordOption{metric.WithAttributes(attribute.String("op", op))}
	}
	m.duration.Record(context.Background(), d.Seconds(), o...)
}

// ObserveLoader counts l's reloads and failures (chaining any OnReload and
// OnError already set), and reports the primary key id and the version of
// ring, the Loader's ring, when metrics are collected. Call it before
// l.Run.
func (m *Metrics) ObserveLoader(l *keyset.Loader, ring *keyring.Ring) error {
	onReload, onError := l.OnReload, l.OnError
	ok := metric.WithAttributes(attribute.String("result", "ok"))
	failed := metric.WithAttributes(attribute.String("result", "error"))
	// The expiry as installed, kept here: reading the loader's Health
	// at collection would wait on a poll that hangs on its store.
	var expires atomic.Int64 // UnixNano; 0: no freshness window
	if e := l.Health().Expires; !e.IsZero() {
		expires.Store(e.UnixNano())
	}
	now := l.Options.Now
	if now == nil {
		now = time.Now
	}
	l.OnReload = func(ks *keyset.Keyset) {
		if ks.Expires.IsZero() {
			expires.Store(0)
		} else {
			expires.Store(ks.Expires.UnixNano())
		}
		m.reloads.Add(context.Background(), 1, ok)
		if onReload != nil {
			onReload(ks)
		}
	}
	l.OnError = func(err error) {
		m.reloads.Add(context.Background(), 1, failed)
		if onError != nil {
			onError(err)
		}
	}
	primary, err := m.meter.Int64ObservableGauge("stateseal.keyset.primary_key_id",
		metric.WithDescription("the id of the key that seals now; attribute key_id: the same id as 8 lower-case hex digits, as logs and sealctl show it"))
	if err != nil {
		return err
	}
	version, err := m.meter.Int64ObservableGauge("stateseal.keyset.version",
		metric.WithDescription("the version of the keyset loaded"))
	if err != nil {
		return err
	}
	staleIn, err := m.meter.Float64ObservableGauge("stateseal.keyset.stale_in", metric.WithUnit("s"),
		metric.WithDescription("seconds until the installed keyset's freshness window ends (negative after): then every instance loading it turns unready at once, unless sealctl refresh or a scheduler rewrote it"))
	if err != nil {
		return err
	}
	_, err = m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if e := expires.Load(); e != 0 {
			o.ObserveFloat64(staleIn, time.Unix(0, e).Sub(now()).Seconds())
		}
		snap := ring.Current()
		o.ObserveInt64(version, int64(snap.Version()))
		if k, err := snap.Primary(time.Now()); err == nil {
			o.ObserveInt64(primary, int64(k.ID), metric.WithAttributes(attribute.String("key_id", keyring.FormatID(k.ID))))
		}
		return nil
	}, primary, version, staleIn)
	return err
}
