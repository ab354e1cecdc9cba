package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/internal/redact"
)

// SetLogger sends go-redis's own log lines (a dial that failed, a
// Sentinel switching masters, a pool that could not refill) to l, each
// as one Warn record whose message is the line and whose "component" is
// "go-redis", instead of go-redis's plain-text lines on stderr. A nil l
// discards them. go-redis has one logger per process: the last call
// wins, for every client, the stores' and the guards'.
//
// At most one line a second is written; the lines dropped in between are
// counted in the next one's "suppressed": go-redis logs every failed dial,
// several a second while a Redis is down, and requests (a client's
// retries) add to them.
func SetLogger(l *slog.Logger) {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	goredis.SetLogger(&slogLogger{l: l})
}

type slogLogger struct {
	l          *slog.Logger
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (s *slogLogger) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	s.mu.Lock()
	now := time.Now()
	if now.Sub(s.last) < time.Second {
		s.suppressed++
		s.mu.Unlock()
		return
	}
	s.last = now
	dropped := s.suppressed
	s.suppressed = 0
	s.mu.Unlock()
	// go-redis names addresses, not credentials; a URL in a line is
	// redacted all the same.
	fields := strings.Fields(fmt.Sprintf(format, v...))
	for i, f := range fields {
		if strings.Contains(f, "://") {
			fields[i] = redact.URL(strings.Trim(f, `"'`))
		}
	}
	attrs := []any{"component", "go-redis"}
	if dropped > 0 {
		attrs = append(attrs, "suppressed", dropped)
	}
	s.l.Log(ctx, slog.LevelWarn, strings.Join(fields, " "), attrs...)
}
