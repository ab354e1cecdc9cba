package redisguard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/replay"
	"github.com/stateseal/stateseal/replay/redisguard"
)

func TestGuard(t *testing.T) {
	ctx := context.Background()
	r := testservers.StartRedis(t)
	client := goredis.NewUniversalClient(&goredis.UniversalOptions{Addrs: []string{r.Addr()}, MaxRetries: 1})
	t.Cleanup(func() { client.Close() })
	g := redisguard.New(client, redisguard.Options{})
	exp := time.Now().Add(time.Minute)
	if err := g.Use(ctx, []byte("tag-1"), time.Now(), exp); err != nil {
		t.Fatal(err)
	}
	if err := g.Use(ctx, []byte("tag-1"), time.Now(), exp); !errors.Is(err, replay.ErrReplayed) {
		t.Fatalf("second use: %v, want ErrReplayed", err)
	}
	// The entry expires with the token.
	ttl, err := client.PTTL(ctx, "stateseal:used:7461672d31").Result()
	if err != nil || ttl <= 50*time.Second || ttl > time.Minute {
		t.Fatalf("TTL %v, %v; want about a minute", ttl, err)
	}
	// A second guard (another instance) sees the first use.
	other := redisguard.New(goredis.NewUniversalClient(&goredis.UniversalOptions{Addrs: []string{r.Addr()}}), redisguard.Options{})
	if err := other.Use(ctx, []byte("tag-1"), time.Now(), exp); !errors.Is(err, replay.ErrReplayed) {
		t.Fatalf("another instance: %v, want ErrReplayed", err)
	}

	// Redis down: fail closed by default, open only when configured.
	r.Stop()
	if err := g.Use(ctx, []byte("tag-2"), time.Now(), exp); !errors.Is(err, replay.ErrUnavailable) {
		t.Fatalf("Redis down: %v, want ErrUnavailable", err)
	}
	open := redisguard.New(client, redisguard.Options{FailOpen: true})
	if err := open.Use(ctx, []byte("tag-3"), time.Now(), exp); err != nil {
		t.Fatalf("Redis down, FailOpen: %v", err)
	}
	// Back: uses recorded before the outage still hold (append-only file).
	r.Start()
	if err := g.Use(ctx, []byte("tag-1"), time.Now(), exp); !errors.Is(err, replay.ErrReplayed) {
		t.Fatalf("after a restart: %v, want ErrReplayed", err)
	}
	if err := g.Use(ctx, []byte("tag-2"), time.Now(), exp); err != nil {
		t.Fatalf("after a restart, a new token: %v", err)
	}
}
