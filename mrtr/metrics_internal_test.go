package mrtr

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestSlogMetricsLimited: rejections, which a client causes at will, are
// logged once a second per method, target and reason; the next line says
// how many were left out.
func TestSlogMetricsLimited(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1785240000, 0)
	m := SlogMetrics(slog.New(slog.NewTextHandler(&buf, nil))).(slogMetrics)
	m.lim.now = func() time.Time { return now }
	for range 1000 {
		m.Rejected(MethodCallTool, Unknown, "invalid")
		m.Rejected(MethodCallTool, "pay", "replayed")
	}
	if n := strings.Count(buf.String(), "\n"); n != 2 {
		t.Fatalf("%d lines for 2,000 rejections in one second, want 2:\n%s", n, buf.String())
	}
	now = now.Add(time.Second)
	buf.Reset()
	m.Rejected(MethodCallTool, Unknown, "invalid")
	if !strings.Contains(buf.String(), "suppressed=999") {
		t.Fatalf("the next second's line: %s", buf.String())
	}
	// A caller other than States may pass anything: lines stay short.
	buf.Reset()
	m.Rejected(strings.Repeat("m", 1<<20), strings.Repeat("t", 1<<20), "invalid")
	if n := buf.Len(); n > 512 {
		t.Fatalf("a line of %d bytes", n)
	}
}
