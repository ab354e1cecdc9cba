package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/internal/redact"
)

// SetLogger sends go-redis's own log lines (a dial that failed, a
// Sentinel switching masters, a pool that could not refill) to l, each
// as one Warn record whose message is the line and whose "component" is
// "go-redis", instead of go-redis's plain-text lines on stderr. A nil l
// discards them. go-redis has one logger per process: the last call
// wins, for every client, the stores' and the guards'.
func SetLogger(l *slog.Logger) {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	goredis.SetLogger(slogLogger{l})
}

type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	// go-redis names addresses, not credentials; a URL in a line is
	// redacted all the same.
	fields := strings.Fields(fmt.Sprintf(format, v...))
	for i, f := range fields {
		if strings.Contains(f, "://") {
			fields[i] = redact.URL(strings.Trim(f, `"'`))
		}
	}
	s.l.Log(ctx, slog.LevelWarn, strings.Join(fields, " "), "component", "go-redis")
}
