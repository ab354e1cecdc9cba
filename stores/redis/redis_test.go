package redis_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testservers"
	_ "github.com/stateseal/stateseal/stores/redis"
	"github.com/stateseal/stateseal/stores/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

type harness struct{ r *testservers.Redis }

func (h *harness) Name() string { return "redis" }

func (h *harness) NewLocation(context.Context, *testing.T) string {
	b := make([]byte, 6)
	rand.Read(b)
	return h.r.URL() + "?key=stateseal:keyset:" + hex.EncodeToString(b)
}

func (h *harness) Stop(*testing.T) bool { h.r.Stop(); return true }
func (h *harness) Start(*testing.T)     { h.r.Start() }

// PollInterval is long, so the measured delay is the publish's.
func (h *harness) PollInterval() time.Duration { return time.Minute }
func (h *harness) MaxDelay() time.Duration     { return time.Second }

func TestConformance(t *testing.T) {
	storetest.Run(t, &harness{r: testservers.StartRedis(t)})
}
