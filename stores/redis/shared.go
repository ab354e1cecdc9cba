package redis

import (
	"net/url"
	"os"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// A shared client serves every store opened from the same Redis URL in a
// process: a fleet's loaders, a scheduler and a guard's store on one
// Redis need one pool, not one each.
type shared struct {
	id     string
	client goredis.UniversalClient
	refs   int // guarded by clients.mu
}

var clients = struct {
	sync.Mutex
	m map[string]*shared
}{m: map[string]*shared{}}

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
	id := clientID(u)
	clients.Lock()
	defer clients.Unlock()
	if s := clients.m[id]; s != nil {
		s.refs++
		return s, nil
	}
	c, err := newClient(u)
	if err != nil {
		return nil, err
	}
	s := &shared{id: id, client: c, refs: 1}
	clients.m[id] = s
	return s, nil
}

// release drops one store's use; the last closes the client.
func (s *shared) release() error {
	clients.Lock()
	s.refs--
	last := s.refs == 0
	if last && clients.m[s.id] == s {
		// Only this client's entry: a release too many must not drop
		// the client another store has made since.
		delete(clients.m, s.id)
	}
	clients.Unlock()
	if last {
		return s.client.Close()
	}
	return nil
}
