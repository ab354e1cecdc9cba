package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyset"
)

// metricValue is the value of the first sample of name in a Prometheus
// text exposition, or false.
func metricValue(body, name string) (float64, bool) {
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// TestStaleCountdown (issue 38): nothing in sealgate refreshes the
// keyset. On an injected clock walked to the keyset's last days, the
// gateway warns in its log (daily from 3 days before, hourly in the last
// day) and in stateseal_keyset_stale_in_seconds, and turns unready when
// the window ends, naming why.
func TestStaleCountdown(t *testing.T) {
	up := httptest.NewServer(http.NotFoundHandler())
	defer up.Close()
	ks := keysetDir(t)
	expires := testkit.Must(keyset.ReadFile(context.Background(), ks)).Expires
	var offset atomic.Int64
	set := func(left time.Duration) { offset.Store(int64(time.Until(expires) - left)) }
	set(71 * time.Hour)
	r := startRunWith(t, func(c *Config) {
		c.now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	}, "-upstream", up.URL, "-principal", "anonymous", "-keyset", ks)
	waitFor(t, "readiness", r.ready)

	const warning = "stateseal keyset goes stale soon"
	staleIn := func() float64 {
		code, body := r.get(t, "/metrics")
		v, ok := metricValue(body, "stateseal_keyset_stale_in_seconds")
		if code != http.StatusOK || !ok {
			t.Fatalf("/metrics = %d without stateseal_keyset_stale_in_seconds:\n%s", code, body)
		}
		return v
	}
	waitFor(t, "the 3-day warning", func() bool { return strings.Count(r.logs.String(), warning) == 1 })
	if v := staleIn(); v > (71*time.Hour).Seconds() || v < (71*time.Hour-time.Minute).Seconds() {
		t.Fatalf("stale_in = %v at 71 hours left", v)
	}
	set(30 * time.Minute)
	waitFor(t, "the last hour's warning", func() bool { return strings.Count(r.logs.String(), warning) == 2 })
	if v := staleIn(); v > 1800 || v < 1740 {
		t.Fatalf("stale_in = %v at 30 minutes left", v)
	}
	if !r.ready() {
		t.Fatal("unready before the expiry")
	}
	set(-time.Second)
	waitFor(t, "unready at the expiry", func() bool { return !r.ready() })
	if code, body := r.get(t, "/readyz"); code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "the keyset is stale: ") {
		t.Fatalf("/readyz past the expiry = %d %q", code, body)
	}
	if v := staleIn(); v > 0 {
		t.Fatalf("stale_in = %v past the expiry", v)
	}
}
