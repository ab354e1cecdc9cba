package redis_test

import (
	"log/slog"
	"testing"

	"github.com/stateseal/stateseal/replay/redisguard"
	"github.com/stateseal/stateseal/stores/redis"
)

// guardFor is a guard over a Redis URL, closed with the test.
func guardFor(t *testing.T, rawURL string) *redisguard.Guard {
	c, err := redis.NewClient(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	g := redisguard.New(c, &redisguard.Options{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { g.Close(); c.Close() })
	return g
}
