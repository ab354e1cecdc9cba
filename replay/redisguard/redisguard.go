// Package redisguard is a replay.Guard for a fleet: the first use of a
// token, on any instance, is recorded in Redis with SET NX and the
// token's remaining lifetime, in one round trip.
//
//	g := redisguard.New(redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"redis:6379"}}), redisguard.Options{})
//
// Through redis.UniversalClient it works with a single server, Sentinel
// and Cluster. When Redis does not answer, Use fails closed
// (replay.ErrUnavailable) unless Options.FailOpen is set.
package redisguard

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/replay"
)

// Options configure a Guard. The zero value is usable.
type Options struct {
	// Prefix starts every key; "" means "stateseal:used:".
	Prefix string
	// FailOpen accepts tokens, unchecked, while Redis does not answer,
	// and logs it. Off (the default), they are refused with
	// replay.ErrUnavailable: a single-use tool is then unavailable, never
	// run twice.
	FailOpen bool
	// Logger receives fail-open events; nil means slog.Default().
	Logger *slog.Logger
}

// A Guard records uses in Redis.
type Guard struct {
	client goredis.UniversalClient
	o      Options
}

// New returns a guard over client.
func New(client goredis.UniversalClient, o Options) *Guard {
	if o.Prefix == "" {
		o.Prefix = "stateseal:used:"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Guard{client: client, o: o}
}

// Use sets PREFIX+hex(id) if absent, expiring with the token. It does not
// look at issuedAt yet.
func (g *Guard) Use(ctx context.Context, id []byte, _, keepUntil time.Time) error {
	ttl := time.Until(keepUntil)
	if ttl < time.Second {
		ttl = time.Second // Redis needs a positive expiry; Open refused expired tokens already
	}
	set, err := g.client.SetNX(ctx, g.o.Prefix+hex.EncodeToString(id), 1, ttl).Result()
	if err != nil {
		if g.o.FailOpen {
			g.o.Logger.Warn("stateseal single-use check skipped: Redis does not answer (FailOpen)", "err", err)
			return nil
		}
		return fmt.Errorf("%w: redis: %w", replay.ErrUnavailable, err)
	}
	if !set {
		return replay.ErrReplayed
	}
	return nil
}
