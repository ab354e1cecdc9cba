package redis_test

import (
	"context"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/stores"
	"github.com/stateseal/stateseal/stores/redis"
	"github.com/stateseal/stateseal/stores/storetest"
)

// harness opens redis URLs with the store's own clients (stores.Default).
type harness struct{ r *testservers.Redis }

func (h *harness) Registry() *stores.Registry { return stores.Default }

func (h *harness) NewLocation(context.Context, *testing.T) string {
	return h.r.URL() + "?key=" + newKey()
}

func (h *harness) Stop(*testing.T) bool { h.r.Stop(); return true }
func (h *harness) Start(*testing.T)     { h.r.Start() }

// clientHarness opens redis URLs through one client the test made
// (redis.Opener(client), which builds each store with redis.New).
type clientHarness struct {
	harness
	reg *stores.Registry
}

func (h *clientHarness) Registry() *stores.Registry { return h.reg }

func TestConformance(t *testing.T) {
	storetest.Run(t, &harness{r: testservers.StartRedis(t)})
}

// TestConformanceClient runs the suite on stores built from a client the
// test made; its CloseLeavesOthers checks that no store closes it.
func TestConformanceClient(t *testing.T) {
	r := testservers.StartRedis(t)
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr()})
	t.Cleanup(func() { c.Close() })
	h := &clientHarness{harness: harness{r: r}, reg: new(stores.Registry)}
	h.reg.Register(redis.Scheme, redis.Opener(c))
	storetest.Run(t, h)
}

// TestNew: a store built by New from a caller's client leaves the client
// open when it is closed.
func TestNew(t *testing.T) {
	r := testservers.StartRedis(t)
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr()})
	defer c.Close()
	s := redis.New(c, newKey(), nil)
	if _, err := s.Write(ctx, []byte("doc"), ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("the caller's client after the store's Close: %v", err)
	}
}
