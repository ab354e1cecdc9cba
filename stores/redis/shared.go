package redis

import (
	"net/url"
	"os"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/internal/share"
)

// A shared client serves every store opened from the same Redis URL in a
// process: a fleet's loaders, a scheduler and a guard's store on one
// Redis need one pool, not one each. Its key is clientID's.
type shared = share.Share[string, goredis.UniversalClient]

var clients share.Map[string, goredis.UniversalClient]

// clientID is what makes two URLs need two clients: everything but the
// store's own per-store parameters, and the credentials from the
// environment the client would take (kept in memory only).
func clientID(u *url.URL) string {
	q := u.Query()
	for _, k := range []string{"key", "min_replicas", "wait_timeout"} {
		q.Del(k)
	}
	c := *u
	c.RawQuery = q.Encode()
	return c.String() + "\x00" + os.Getenv("REDIS_USERNAME") + "\x00" + os.Getenv("REDIS_PASSWORD")
}

// acquire returns the client for u, making it if no open store has it.
func acquire(u *url.URL) (*shared, error) {
	return clients.Acquire(clientID(u), func() (goredis.UniversalClient, error) { return newClient(u) },
		func(c goredis.UniversalClient) { c.Close() })
}

// release drops one store's use of s; the last closes the client.
func release(s *shared) error {
	if s.Release() {
		return s.Value().Close()
	}
	return nil
}
