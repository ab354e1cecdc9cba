package main

import (
	"context"
	"fmt"
	"log/slog"

	goredis "github.com/redis/go-redis/v9"
)

// redisLogger sends go-redis's own lines (a failed dial, a pool
// message) through the gateway's logger, so that a JSON log stays JSON;
// go-redis prints them as plain text to stderr otherwise.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "sealgate: go-redis: "+fmt.Sprintf(format, v...))
}

// logRedis installs l for go-redis, process-wide.
func logRedis(l *slog.Logger) { goredis.SetLogger(redisLogger{l}) }
