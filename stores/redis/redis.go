// Package redis keeps a keyset in Redis. Importing it registers the
// "redis" and "rediss" (TLS) schemes in stores.Default:
//
//	import _ "github.com/stateseal/stateseal/stores/redis"
//
//	l := &keyring.Loader{Path: "redis://redis.internal:6379/0?key=stateseal:keyset"}
//
// The URL is redis://[USER:PASSWORD@]HOST:PORT/DB?key=NAME (rediss:// for
// TLS). Without credentials in the URL, REDIS_USERNAME and REDIS_PASSWORD
// from the environment are used. Extra addr=HOST:PORT parameters make a
// Cluster client, and master=NAME a Sentinel client whose addresses are
// the sentinels': the store speaks through redis.UniversalClient.
//
// The client's timeouts and pool come from the URL too: go-redis's own
// parameters (dial_timeout, read_timeout, write_timeout, pool_size,
// pool_timeout, max_retries, min_retry_backoff, max_retry_backoff,
// min_idle_conns, max_idle_conns, max_active_conns, conn_max_idle_time,
// conn_max_lifetime, client_name, protocol, skip_verify and the others
// redis.ParseURL reads), and dialer_retries and dialer_retry_timeout (how
// many times, and how far apart, one connection is dialed). An unknown
// parameter is refused. Durations are Go durations (300ms) or whole
// seconds; max_retries=-1 turns retries off. Every command is also bounded
// by its context's deadline.
//
// The keyset lives in one hash, NAME, with its document and a revision
// counter. A write is one Lua script that compares the revision, writes,
// increments and publishes on the channel NAME + ":changed", atomically,
// so a writer that lost a race gets stores.ErrConflict from any host. A
// loader subscribes to the channel (a rotation reaches every instance in
// milliseconds) and keeps polling the revision, which is cheap, in case
// the subscription drops.
package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/stores"
)

func init() {
	stores.Default.Register("redis", Opener(nil))
	stores.Default.Register("rediss", Opener(nil))
}

// Opener returns an opener for redis URLs. If client is set, every URL
// uses it, and only the key comes from the URL.
func Opener(client goredis.UniversalClient) stores.Opener {
	return func(ctx context.Context, u *url.URL) (stores.Store, error) {
		return open(u, client)
	}
}

// A Store is a keyset in a Redis hash.
type Store struct {
	client goredis.UniversalClient
	key    string
	name   string
}

// New returns the store for the keyset under key, through client.
func New(client goredis.UniversalClient, key string) *Store {
	return &Store{client: client, key: key, name: "redis key " + key}
}

func open(u *url.URL, client goredis.UniversalClient) (*Store, error) {
	name := backends.Redact(u.String())
	q := u.Query()
	key := q.Get("key")
	if key == "" {
		return nil, fmt.Errorf("redis: %s names no key (add ?key=NAME)", name)
	}
	if client == nil {
		o, err := options(u)
		if err != nil {
			return nil, fmt.Errorf("redis: %s: %w", name, err)
		}
		client = goredis.NewUniversalClient(o)
	}
	return &Store{client: client, key: key, name: name}, nil
}

// NewClient returns a client for a redis:// or rediss:// URL read the way
// the store reads it (credentials from the URL or REDIS_USERNAME and
// REDIS_PASSWORD, addr= for Cluster, master= for Sentinel), for other uses
// of the same Redis, such as a single-use guard (replay/redisguard).
func NewClient(rawURL string) (goredis.UniversalClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis: URL %s does not parse", backends.Redact(rawURL))
	}
	o, err := options(u)
	if err != nil {
		return nil, fmt.Errorf("redis: %s: %w", backends.Redact(rawURL), err)
	}
	return goredis.NewUniversalClient(o), nil
}

// ours are the parameters the store reads itself; every other one goes to
// go-redis's ParseURL, which refuses those it does not know.
var ours = map[string]bool{"key": true, "addr": true, "master": true, "dialer_retries": true, "dialer_retry_timeout": true}

func options(u *url.URL) (*goredis.UniversalOptions, error) {
	q := u.Query()
	rest := url.Values{}
	for k, v := range q {
		if !ours[k] {
			rest[k] = v
		}
	}
	base := *u
	base.RawQuery = rest.Encode()
	o, err := goredis.ParseURL(base.String())
	if err != nil {
		if strings.Contains(err.Error(), "unexpected option") {
			return nil, fmt.Errorf("%w (this store reads key, addr, master, dialer_retries, dialer_retry_timeout; go-redis the others: see docs/FLEET.md)", err)
		}
		return nil, err
	}
	uo := &goredis.UniversalOptions{
		Addrs: append([]string{o.Addr}, q["addr"]...), MasterName: q.Get("master"),
		Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: o.TLSConfig,
		ClientName: o.ClientName, Protocol: o.Protocol,
		MaxRetries: o.MaxRetries, MinRetryBackoff: o.MinRetryBackoff, MaxRetryBackoff: o.MaxRetryBackoff,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		PoolFIFO: o.PoolFIFO, PoolSize: o.PoolSize, PoolTimeout: o.PoolTimeout,
		MinIdleConns: o.MinIdleConns, MaxIdleConns: o.MaxIdleConns, MaxActiveConns: o.MaxActiveConns,
		MaxConcurrentDials: o.MaxConcurrentDials,
		PipelinePoolSize:   o.PipelinePoolSize, PipelineReadBufferSize: o.PipelineReadBufferSize, PipelineWriteBufferSize: o.PipelineWriteBufferSize,
		ConnMaxIdleTime: o.ConnMaxIdleTime, ConnMaxLifetime: o.ConnMaxLifetime, ConnMaxLifetimeJitter: o.ConnMaxLifetimeJitter,
		// A context's deadline bounds every command, not only the client's
		// read and write timeouts.
		ContextTimeoutEnabled: true,
	}
	if v := q.Get("dialer_retries"); v != "" {
		if uo.DialerRetries, err = strconv.Atoi(v); err != nil || uo.DialerRetries < 1 {
			return nil, fmt.Errorf("dialer_retries=%q: want a count of at least 1", v)
		}
	}
	if v := q.Get("dialer_retry_timeout"); v != "" {
		if uo.DialerRetryTimeout, err = time.ParseDuration(v); err != nil || uo.DialerRetryTimeout <= 0 {
			return nil, fmt.Errorf("dialer_retry_timeout=%q: want a positive duration such as 50ms", v)
		}
	}
	if uo.Username == "" && uo.Password == "" {
		uo.Username, uo.Password = os.Getenv("REDIS_USERNAME"), os.Getenv("REDIS_PASSWORD")
	}
	if u.Scheme == "rediss" && uo.TLSConfig == nil {
		uo.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return uo, nil
}

// String names the store, credentials redacted.
func (s *Store) String() string { return s.name }

// Channel is where every write is announced.
func (s *Store) Channel() string { return s.key + ":changed" }

// Read returns the document and its revision.
func (s *Store) Read(ctx context.Context) ([]byte, string, error) {
	v, err := s.client.HMGet(ctx, s.key, "doc", "rev").Result()
	if err != nil {
		return nil, "", fmt.Errorf("%s: read: %w", s.name, err)
	}
	doc, ok := v[0].(string)
	if !ok {
		return nil, "", fmt.Errorf("%s: %w", s.name, stores.ErrNotFound)
	}
	rev, _ := v[1].(string)
	return []byte(doc), rev, nil
}

// Revision returns the revision alone.
func (s *Store) Revision(ctx context.Context) (string, error) {
	rev, err := s.client.HGet(ctx, s.key, "rev").Result()
	if errors.Is(err, goredis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("%s: revision: %w", s.name, err)
	}
	return rev, nil
}

// cas compares the revision, writes, counts and announces, in one step.
var cas = goredis.NewScript(`
local cur = redis.call('HGET', KEYS[1], 'rev') or ''
if cur ~= ARGV[2] then
  return redis.error_reply('STATESEAL_CONFLICT ' .. cur)
end
local next = tostring((tonumber(cur) or 0) + 1)
redis.call('HSET', KEYS[1], 'doc', ARGV[1], 'rev', next)
redis.call('PUBLISH', ARGV[3], next)
return next
`)

// Write replaces the document if the revision is still rev ("": no
// document yet).
func (s *Store) Write(ctx context.Context, data []byte, rev string) (string, error) {
	if len(data) > stores.MaxSize {
		return "", fmt.Errorf("%s: a %d-byte keyset is over the %d-byte limit", s.name, len(data), stores.MaxSize)
	}
	next, err := cas.Run(ctx, s.client, []string{s.key}, string(data), rev, s.Channel()).Text()
	if err != nil && strings.HasPrefix(err.Error(), "STATESEAL_CONFLICT") {
		return "", fmt.Errorf("%s: %w", s.name, stores.ErrConflict)
	}
	if err != nil {
		return "", fmt.Errorf("%s: write: %w", s.name, err)
	}
	return next, nil
}

// Watch signals every write announced on the channel. The subscription
// reconnects by itself after a drop; writes made meanwhile are not
// announced, which is why loaders poll too.
func (s *Store) Watch(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	sub := s.client.Subscribe(ctx, s.Channel())
	go func() {
		defer close(out)
		defer sub.Close()
		msgs := sub.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-msgs:
				if !ok {
					return
				}
				select {
				case out <- struct{}{}:
				default: // a signal is pending already
				}
			}
		}
	}()
	return out
}
