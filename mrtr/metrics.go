package mrtr

import (
	"log/slog"
	"sync"
	"time"
)

// Metrics receives one call per state sealed, opened or rejected. Reason is
// "invalid" or "expired". Implementations must be safe for concurrent use
// and quick: they run on the request path.
type Metrics interface {
	Sealed(method, target string)
	Opened(method, target string)
	// Rejected counts a state refused, by the reason a client is told:
	// "invalid", "expired", "replayed" or "unavailable".
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
func SlogMetrics(l *slog.Logger) Metrics { return slogMetrics{l} }

type slogMetrics struct{ l *slog.Logger }

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
	s.log().Warn("stateseal: requestState rejected", "method", method, "target", target, "reason", reason)
}

// Counters counts in memory, for tests and for export to a metrics system.
type Counters struct {
	mu             sync.Mutex
	sealed, opened int
	rejected       map[string]int
}

// CounterValues is a copy of the counts.
type CounterValues struct {
	Sealed, Opened int
	Rejected       map[string]int // by reason
}

func (c *Counters) Sealed(method, target string) {
	c.mu.Lock()
	c.sealed++
	c.mu.Unlock()
}

func (c *Counters) Opened(method, target string) {
	c.mu.Lock()
	c.opened++
	c.mu.Unlock()
}

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
