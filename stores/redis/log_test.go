package redis_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/stores"
	"github.com/stateseal/stateseal/stores/redis"
)

// TestSetLogger: go-redis's own lines (here: a dial to a Redis that is
// down) arrive as JSON records through the logger given, none as plain
// text.
func TestSetLogger(t *testing.T) {
	var buf testkit.Buffer
	redis.SetLogger(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(func() { redis.SetLogger(nil) })
	r := testservers.StartRedis(t)
	s, err := stores.Default.Open(context.Background(), r.URL()+"?key="+newKey()+"&dialer_retries=1")
	if err != nil {
		t.Fatal(err)
	}
	defer stores.Close(s)
	r.Stop()
	s.Read(context.Background())
	testkit.WaitFor(t, "a go-redis record", func() bool { return strings.Contains(buf.String(), `"component":"go-redis"`) })
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a line that is not JSON: %q", line)
		}
		if rec["level"] != "WARN" || rec["component"] != "go-redis" {
			t.Fatalf("record %v", rec)
		}
	}
}

// TestLoggerBounded (a new user's trial): go-redis logs every failed
// dial, and a client's retries add to them; through SetLogger at most a
// line a second is written, the rest counted.
func TestLoggerBounded(t *testing.T) {
	var buf testkit.Buffer
	redis.SetLogger(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(func() { redis.SetLogger(nil) })
	r := testservers.StartRedis(t)
	s, err := stores.Default.Open(context.Background(), r.URL()+"?key="+newKey()+"&dialer_retries=1&max_retries=0")
	if err != nil {
		t.Fatal(err)
	}
	defer stores.Close(s)
	r.Stop()
	for range 20 {
		s.Read(context.Background())
	}
	if n := strings.Count(strings.TrimSpace(buf.String()), "\n") + 1; n > 3 {
		t.Fatalf("20 failed reads wrote %d lines:\n%s", n, buf.String())
	}
}
