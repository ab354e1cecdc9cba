package mrtr

import (
	"log/slog"
	"sync"
	"time"
)

// Metrics receives one call per state sealed, opened or rejected. Method
// is one of the three methods that carry state, or Unknown; target is the
// request's Label (see Request.Label), so both come from a bounded set
// the server registered, whatever clients send. Implementations must be
// safe for concurrent use and quick: they run on the request path.
type Metrics interface {
	Sealed(method, target string)
	Opened(method, target string)
	// Rejected counts a state refused, by the reason a client is told:
	// "invalid", "expired", "replayed", "unvouched" or "unavailable".
	Rejected(method, target, reason string)
}

// LatencyMetrics is a Metrics that also times each seal and open ("seal"
// or "open"), the argument digest and single-use check included.
type LatencyMetrics interface {
	Metrics
	Latency(op string, d time.Duration)
}

// SlogMetrics logs sealed and opened states at debug level and rejections
// at warning level. It never logs a token or a state. A nil logger means
// slog.Default().
//
// Rejections are what a client can cause at will, so they are logged at
// most once a second for each method, target and reason: a flood of bad
// states writes one line a second, and the next line for the same
// method, target and reason says in "suppressed" how many it left out.
// Counters and otelmetrics count every one.
func SlogMetrics(l *slog.Logger) Metrics {
	return slogMetrics{l, &limiter{now: time.Now, every: time.Second}}
}

type slogMetrics struct {
	l   *slog.Logger
	lim *limiter
}

func (s slogMetrics) log() *slog.Logger {
	if s.l == nil {
		return slog.Default()
	}
	return s.l
}

func (s slogMetrics) Sealed(method, target string) {
	s.log().Debug("stateseal: requestState sealed", "method", method, "target", target)
}

func (s slogMetrics) Opened(method, target string) {
	s.log().Debug("stateseal: requestState opened", "method", method, "target", target)
}

func (s slogMetrics) Rejected(method, target, reason string) {
	// The labels are bounded by States; clip them again for callers
	// other than States, and for the limiter's map.
	method, target, reason = clip(method, maxLabelLen), clip(target, maxLabelLen), clip(reason, maxLabelLen)
	ok, suppressed := s.lim.allow(rejection{method, target, reason})
	if !ok {
		return
	}
	if suppressed > 0 {
		s.log().Warn("stateseal: requestState rejected", "method", method, "target", target, "reason", reason, "suppressed", suppressed)
		return
	}
	s.log().Warn("stateseal: requestState rejected", "method", method, "target", target, "reason", reason)
}

type rejection struct{ method, target, reason string }

// A limiter lets one line through per key and period, and counts the
// others.
type limiter struct {
	now   func() time.Time
	every time.Duration
	mu    sync.Mutex
	keys  map[rejection]*window
}

type window struct {
	next       time.Time // when the next line may go
	suppressed int
}

// maxLimiterKeys bounds the limiter's memory for a caller whose labels are
// not bounded; those of States are.
const maxLimiterKeys = 1024

func (l *limiter) allow(k rejection) (ok bool, suppressed int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.keys[k]
	if w == nil {
		if l.keys == nil || len(l.keys) >= maxLimiterKeys {
			l.keys = map[rejection]*window{}
		}
		w = &window{}
		l.keys[k] = w
	}
	if now.Before(w.next) {
		w.suppressed++
		return false, 0
	}
	suppressed, w.suppressed, w.next = w.suppressed, 0, now.Add(l.every)
	return true, suppressed
}

// Counters is a Metrics that counts in memory: states sealed and opened,
// and states rejected by reason, whatever their method and target. Use it
// in tests, or read Values to export the counts to a metrics system. The
// zero value is ready to use; a Counters must not be copied after first
// use. It is safe for concurrent use.
type Counters struct {
	mu             sync.Mutex
	sealed, opened int
	rejected       map[string]int
}

// CounterValues is a copy of the counts of a Counters.
type CounterValues struct {
	Sealed, Opened int
	Rejected       map[string]int // by reason
}

// Sealed counts a state sealed.
func (c *Counters) Sealed(method, target string) {
	c.mu.Lock()
	c.sealed++
	c.mu.Unlock()
}

// Opened counts a state opened.
func (c *Counters) Opened(method, target string) {
	c.mu.Lock()
	c.opened++
	c.mu.Unlock()
}

// Rejected counts a state rejected, under its reason.
func (c *Counters) Rejected(method, target, reason string) {
	c.mu.Lock()
	if c.rejected == nil {
		c.rejected = map[string]int{}
	}
	c.rejected[reason]++
	c.mu.Unlock()
}

// Values returns the counts so far.
func (c *Counters) Values() CounterValues {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := CounterValues{Sealed: c.sealed, Opened: c.opened, Rejected: map[string]int{}}
	for k, n := range c.rejected {
		v.Rejected[k] = n
	}
	return v
}

// TeeMetrics returns a Metrics that passes every event to each of ms in
// turn: to OpenTelemetry and to the log at once, say, since setting
// Options.Metrics replaces the default log:
//
//	m, err := otelmetrics.New(otel.GetMeterProvider())
//	o := mrtr.Options{Audience: aud, Metrics: mrtr.TeeMetrics(m, mrtr.SlogMetrics(nil))}
//
// The result is a LatencyMetrics when any of ms is one, and passes each
// latency to those that are. Nil entries are left out.
func TeeMetrics(ms ...Metrics) Metrics {
	var t tee
	for _, m := range ms {
		if m == nil {
			continue
		}
		t.all = append(t.all, m)
		if l, ok := m.(LatencyMetrics); ok {
			t.lat = append(t.lat, l)
		}
	}
	if len(t.lat) > 0 {
		return latencyTee{t}
	}
	return t
}

type tee struct {
	all []Metrics
	lat []LatencyMetrics
}

func (t tee) Sealed(method, target string) {
	for _, m := range t.all {
		m.Sealed(method, target)
	}
}

func (t tee) Opened(method, target string) {
	for _, m := range t.all {
		m.Opened(method, target)
	}
}

func (t tee) Rejected(method, target, reason string) {
	for _, m := range t.all {
		m.Rejected(method, target, reason)
	}
}

type latencyTee struct{ tee }

func (t latencyTee) Latency(op string, d time.Duration) {
	for _, l := range t.lat {
		l.Latency(op, d)
	}
}
