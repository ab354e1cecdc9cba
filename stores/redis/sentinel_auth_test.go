package redis_test

import (
	"context"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/stores"
)

// TestSentinelPassword: sentinels that require a password are reached
// with sentinel_password=, which no error or name shows.
func TestSentinelPassword(t *testing.T) {
	ctx := context.Background()
	s := testservers.StartRedisSentinel(t)
	for _, a := range s.SentinelAddrs() {
		c := goredis.NewClient(&goredis.Options{Addr: a})
		err := c.Do(ctx, "ACL", "SETUSER", "default", "on", "resetpass", ">sentinel-secret").Err()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	key := newKey()
	without, err := stores.Default.Open(ctx, s.URL("key="+key+"&max_retries=-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer stores.Close(without)
	if _, err := without.Write(ctx, []byte("doc"), ""); err == nil {
		t.Fatal("a write through sentinels without their password")
	}
	with, err := stores.Default.Open(ctx, s.URL("key="+key+"&sentinel_password=sentinel-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer stores.Close(with)
	if _, err := with.Write(ctx, []byte("doc"), ""); err != nil {
		t.Fatalf("a write with sentinel_password: %v", err)
	}
	if name := with.(interface{ String() string }).String(); strings.Contains(name, "sentinel-secret") {
		t.Fatalf("the store's name shows the password: %s", name)
	}
}
