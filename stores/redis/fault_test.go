package redis_test

import (
	"log/slog"
	"testing"

	"github.com/stateseal/stateseal/replay/redisguard"
	"github.com/stateseal/stateseal/stores/redis"
)

// guardFor is a guard over a Redis URL (its own parameters, such as
// min_replicas, read as a server reads them), closed with the test.
func guardFor(t *testing.T, rawURL, prefix string) *redisguard.Guard {
	where, o, err := redisguard.SplitURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := redis.NewClient(where)
	if err != nil {
		t.Fatal(err)
	}
	o.Prefix, o.Logger = prefix, slog.New(slog.DiscardHandler)
	g := redisguard.New(c, &o)
	t.Cleanup(func() { g.Close(); c.Close() })
	return g
}
