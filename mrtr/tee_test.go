package mrtr_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stateseal/stateseal/mrtr"
)

type timed struct {
	mrtr.Counters
	mu  sync.Mutex
	ops []string
}

func (t *timed) Latency(op string, _ time.Duration) {
	t.mu.Lock()
	t.ops = append(t.ops, op)
	t.mu.Unlock()
}

// TestTeeMetrics: every event reaches every part; the tee times only if a
// part does, and passes latencies to those parts alone; nil parts are
// left out.
func TestTeeMetrics(t *testing.T) {
	var a, b mrtr.Counters
	plain := mrtr.TeeMetrics(&a, nil, &b)
	if _, ok := plain.(mrtr.LatencyMetrics); ok {
		t.Fatal("a tee of counters claims to time")
	}
	plain.Sealed(mrtr.MethodCallTool, "t")
	plain.Opened(mrtr.MethodCallTool, "t")
	plain.Rejected(mrtr.MethodCallTool, "t", "expired")
	for _, c := range []*mrtr.Counters{&a, &b} {
		if v := c.Values(); v.Sealed != 1 || v.Opened != 1 || v.Rejected["expired"] != 1 {
			t.Fatalf("a part saw %+v", v)
		}
	}

	tm := &timed{}
	lt, ok := mrtr.TeeMetrics(&a, tm).(mrtr.LatencyMetrics)
	if !ok {
		t.Fatal("a tee with a LatencyMetrics part does not time")
	}
	lt.Latency("open", time.Millisecond)
	lt.Rejected(mrtr.MethodGetPrompt, "p", "invalid")
	if len(tm.ops) != 1 || tm.ops[0] != "open" || tm.Values().Rejected["invalid"] != 1 || a.Values().Rejected["invalid"] != 1 {
		t.Fatalf("latencies %q, counts %+v %+v", tm.ops, tm.Values(), a.Values())
	}
}
