// Package redis keeps a keyset in Redis. Importing it registers the
// "redis" and "rediss" (TLS) schemes in stores.Default:
//
//	import _ "github.com/stateseal/stateseal/stores/redis"
//
//	l := &keyset.Loader{Path: "redis://redis.internal:6379/0?key=stateseal:keyset"}
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
// by its context's deadline. A Cluster URL (several addr=, no master=)
// also takes cluster_state_reload_interval (how old go-redis's slot map
// may get: DefaultClusterStateReloadInterval, 1 s, where go-redis's own
// default is 60 s), max_redirects,
// route_by_latency and route_randomly; a Sentinel URL (master=)
// sentinel_username and sentinel_password, for sentinels that require a
// password of their own (the URL's credentials are the Redis servers').
//
// Plain redis:// is refused to a host that is not loopback (localhost,
// 127.0.0.0/8, ::1; names are not resolved), sentinels included: on the
// path, an attacker reads the password, changes the keyset as a store
// writer can, and rewrites a single-use guard's answers. Use rediss://,
// with ca=FILE (PEM) for a private CA; insecure_plaintext=true allows
// plaintext where the network is protected otherwise (a service mesh's
// mutual TLS).
//
// A write is acknowledged only once durable on the primary's replicas
// (Write: WAIT after the script, on the same connection). min_replicas=N
// is the number it needs (1 behind Sentinel, 0 otherwise, by default),
// wait_timeout=D how long it waits (2s); a write that cannot be made
// durable fails with stores.ErrNotDurable. Stores opened from URLs that
// differ only in key=, min_replicas= and wait_timeout= share one client,
// and their watches one subscription.
//
// The keyset lives in one hash, NAME, with its document ("doc") and a
// write counter ("rev"). The store's revision is derived from both: the
// counter and the SHA-1 of the document, "N:SHA1HEX", computed inside
// Redis by a Lua script (redis.sha1hex). A write is one Lua script that
// compares that revision, writes and increments the counter, atomically,
// so a writer that lost a race gets stores.ErrConflict from any host;
// once the write is durable (WAIT, above) it is announced on the channel
// NAME + ":changed". A write the replicas did not take is not announced:
// loaders told of it could install a version a failover then loses, and
// be left on a fork (they find it at their poll if it survives). A
// loader subscribes to the
// channel (a rotation reaches every instance in milliseconds) and keeps
// polling Revision, which transfers about fifty bytes, in case the
// subscription drops. Behind Sentinel the subscription follows the
// primary (Watch); in a Cluster, the slot map's reload every second
// moves it off a dead master. Because the revision hashes the document, a change
// made behind the store's back (an HSET of "doc" that leaves "rev" alone)
// still changes it: a loader cannot be made to skip it, and a writer that
// read the old document gets stores.ErrConflict.
//
// Reads are bounded: the read and revision scripts check the document's
// length (HSTRLEN) inside Redis and refuse one over stores.MaxSize before
// any of it is sent.
package redis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/internal/loopback"
	"github.com/stateseal/stateseal/internal/redact"
	"github.com/stateseal/stateseal/stores"
)

// The URL schemes this package registers: Scheme, and SchemeTLS for
// Redis over TLS.
const (
	Scheme    = "redis"
	SchemeTLS = "rediss"
)

func init() {
	stores.Default.Register(Scheme, Opener(nil))
	stores.Default.Register(SchemeTLS, Opener(nil))
}

// Opener returns an opener for redis URLs. With a nil client (what
// stores.Default has), stores opened from URLs that differ only in key=,
// min_replicas= and wait_timeout= share one client (one pool, and one
// subscription per channel for Watch), made from the first URL and
// closed when the last of them is closed. With a client the caller made, every URL uses
// it (New): only the key comes from the URL, and the stores' Close leaves
// the client open.
func Opener(client goredis.UniversalClient) stores.Opener {
	return func(ctx context.Context, u *url.URL) (stores.Store, error) {
		return open(u, client)
	}
}

// A Store is a keyset in a Redis hash.
type Store struct {
	client      goredis.UniversalClient
	key         string
	name        string
	own         *shared // the client the store shares from its URL, or nil
	closed      sync.Once
	minReplicas int
	waitTimeout time.Duration
}

var (
	_ stores.Store      = (*Store)(nil)
	_ stores.Watcher    = (*Store)(nil)
	_ stores.Revisioner = (*Store)(nil)
	_ io.Closer         = (*Store)(nil)
)

// Close closes the client the store made from its URL, and with it its
// connections; a client given to New or Opener is its owner's to close.
// The store is not used after Close.
func (s *Store) Close() error {
	var err error
	if s.own != nil {
		s.closed.Do(func() { err = release(s.own) })
	}
	return err
}

// Options configure a store built by New; nil means the defaults.
type Options struct {
	// MinReplicas is the number of replicas a write must reach: a
	// primary with fewer connected refuses it before making it, and a
	// write fewer acknowledge is refused (stores.ErrNotDurable). 0, the
	// default, requires none but still waits for every replica the
	// primary has connected (Write).
	MinReplicas int
	// WaitTimeout bounds the wait for the replicas' acknowledgement;
	// 0 means DefaultWaitTimeout.
	WaitTimeout time.Duration
}

// New returns the store for the keyset in the hash key, through client,
// which the caller made and owns (a *redis.Client, ClusterClient or a
// Sentinel failover client): the store's Close leaves it open. o may be
// nil.
func New(client goredis.UniversalClient, key string, o *Options) *Store {
	s := &Store{client: client, key: key, name: "redis key " + key, waitTimeout: DefaultWaitTimeout}
	if o != nil {
		s.minReplicas = o.MinReplicas
		if o.WaitTimeout > 0 {
			s.waitTimeout = o.WaitTimeout
		}
	}
	return s
}

func open(u *url.URL, client goredis.UniversalClient) (*Store, error) {
	name := stores.Redact(u.String())
	q := u.Query()
	key := q.Get("key")
	if key == "" {
		return nil, fmt.Errorf("redis: %s names no key (add ?key=NAME)", name)
	}
	so, err := storeOptions(q)
	if err != nil {
		return nil, fmt.Errorf("redis: %s: %w", name, err)
	}
	var own *shared
	if client == nil {
		if own, err = acquire(u); err != nil {
			return nil, fmt.Errorf("redis: %s: %w", name, err)
		}
		client = own.Value()
	}
	s := New(client, key, so)
	s.name, s.own = name, own
	return s, nil
}

// storeOptions reads the store's own write parameters. Behind Sentinel
// (master=) a write needs one replica by default: a primary that lost
// its replicas (one the sentinels are demoting, say) would otherwise
// acknowledge writes its successor never sees.
func storeOptions(q url.Values) (*Options, error) {
	o := &Options{}
	if q.Get("master") != "" {
		o.MinReplicas = 1
	}
	if v := q.Get("min_replicas"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("min_replicas=%q: want a count of replicas, 0 or more", v)
		}
		o.MinReplicas = n
	}
	if v := q.Get("wait_timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("wait_timeout=%q: want a positive duration such as 500ms", v)
		}
		o.WaitTimeout = d
	}
	return o, nil
}

// NewClient returns a client for a redis:// or rediss:// URL read the way
// the store reads it (credentials from the URL or REDIS_USERNAME and
// REDIS_PASSWORD, addr= for Cluster, master= for Sentinel), for other uses
// of the same Redis, such as a single-use guard (replay/redisguard).
func NewClient(rawURL string) (goredis.UniversalClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis: URL %s does not parse", redact.URL(rawURL))
	}
	c, err := newClient(u)
	if err != nil {
		return nil, fmt.Errorf("redis: %s: %w", redact.URL(rawURL), err)
	}
	return c, nil
}

// newClient makes the client a URL names: a Cluster client (with the
// URL's cluster parameters) for several addresses and no master=, else
// what redis.NewUniversalClient makes.
func newClient(u *url.URL) (goredis.UniversalClient, error) {
	o, err := options(u)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	cluster := len(o.Addrs) > 1 && o.MasterName == ""
	var reload time.Duration
	for _, k := range clusterParams {
		if q.Has(k) && !cluster {
			return nil, fmt.Errorf("%s is for a Cluster (several addr= and no master=)", k)
		}
	}
	if v := q.Get("cluster_state_reload_interval"); v != "" {
		if reload, err = time.ParseDuration(v); err != nil || reload <= 0 {
			return nil, fmt.Errorf("cluster_state_reload_interval=%q: want a positive duration such as 1s", v)
		}
	}
	if v := q.Get("max_redirects"); v != "" {
		if o.MaxRedirects, err = strconv.Atoi(v); err != nil || o.MaxRedirects < -1 {
			return nil, fmt.Errorf("max_redirects=%q: want a count (-1: none)", v)
		}
	}
	for k, p := range map[string]*bool{"route_by_latency": &o.RouteByLatency, "route_randomly": &o.RouteRandomly} {
		if v := q.Get(k); v != "" {
			if *p, err = strconv.ParseBool(v); err != nil {
				return nil, fmt.Errorf("%s=%q: want true or false", k, v)
			}
		}
	}
	for _, k := range []string{"sentinel_username", "sentinel_password"} {
		if q.Has(k) && o.MasterName == "" {
			return nil, fmt.Errorf("%s is for Sentinel (master=)", k)
		}
	}
	o.SentinelUsername, o.SentinelPassword = q.Get("sentinel_username"), q.Get("sentinel_password")
	if !cluster {
		return goredis.NewUniversalClient(o), nil
	}
	co := o.Cluster()
	if reload == 0 {
		reload = DefaultClusterStateReloadInterval
	}
	co.ClusterStateReloadInterval = reload
	return goredis.NewClusterClient(co), nil
}

// DefaultClusterStateReloadInterval is how old a Cluster client's slot
// map may get (cluster_state_reload_interval=) when the URL does not say:
// go-redis's own default, 60 s, kept loaders, their subscription and a
// guard on a dead master for about a minute after its replica took over.
// A reload is one CLUSTER SHARDS (or SLOTS) to one node, made only when
// the client is used and the map is older than this.
const DefaultClusterStateReloadInterval = time.Second

// clusterParams are the Cluster client's parameters the URL may set.
var clusterParams = []string{"cluster_state_reload_interval", "max_redirects", "route_by_latency", "route_randomly"}

// ours are the parameters the store reads itself; every other one goes to
// go-redis's ParseURL, which refuses those it does not know.
var ours = map[string]bool{"key": true, "addr": true, "master": true, "dialer_retries": true, "dialer_retry_timeout": true,
	"min_replicas": true, "wait_timeout": true, "cluster_state_reload_interval": true, "max_redirects": true,
	"route_by_latency": true, "route_randomly": true, "sentinel_username": true, "sentinel_password": true,
	"ca": true, "insecure_plaintext": true}

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
			return nil, fmt.Errorf("%w (this store reads key, addr, master, dialer_retries, dialer_retry_timeout, min_replicas, wait_timeout, ca, insecure_plaintext, for a Cluster cluster_state_reload_interval, max_redirects, route_by_latency, route_randomly, for Sentinel sentinel_username, sentinel_password; go-redis the others: see docs/FLEET.md)", err)
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
	if err := transport(u, q, uo); err != nil {
		return nil, err
	}
	return uo, nil
}

// transport applies ca= and refuses plaintext to a host that is not
// loopback, unless insecure_plaintext=true: on the path, an attacker
// reads the password, rewrites a single-use guard's answer (a state then
// runs as often as they like) and has a store writer's powers over the
// keyset. Every address counts, the sentinels' included.
func transport(u *url.URL, q url.Values, uo *goredis.UniversalOptions) error {
	if q.Has("ca") {
		f := q.Get("ca")
		if f == "" {
			return errors.New("ca= is empty: want the path of a PEM file")
		}
		if uo.TLSConfig == nil {
			return errors.New("ca= is for rediss:// (TLS)")
		}
		pem, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("ca=%s: %w", f, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("ca=%s: no PEM certificate in it", f)
		}
		uo.TLSConfig.RootCAs = pool
	}
	plaintext := false
	if v := q.Get("insecure_plaintext"); v != "" {
		var err error
		if plaintext, err = strconv.ParseBool(v); err != nil {
			return fmt.Errorf("insecure_plaintext=%q: want true or false", v)
		}
	}
	if uo.TLSConfig != nil || plaintext {
		return nil
	}
	for _, a := range uo.Addrs {
		if !loopback.Addr(a) {
			return fmt.Errorf("plain redis:// to %s, which is not loopback, sends the password, the keyset and a guard's answers in the clear, for whoever is on the path to read and change (a single-use state then runs as often as they like): use rediss:// (ca=FILE for a private CA), or add insecure_plaintext=true where the network is protected otherwise (a service mesh's mutual TLS)", a)
		}
	}
	return nil
}

// String names the store, credentials redacted.
func (s *Store) String() string { return s.name }

// Channel is where every write is announced.
func (s *Store) Channel() string { return s.key + ":changed" }

// The scripts share one Lua prelude: revision(doc) is the store's revision
// of the hash's document doc, and the length check answers a document
// over the bound (ARGV[1]) with an error before any of it is read.
const prelude = `
local function revision(doc)
  -- rev is a counter this store writes; whatever else a store writer put
  -- there (32 MiB, say) is not copied into every poll's answer.
  local rev = redis.call('HGET', KEYS[1], 'rev') or ''
  if #rev > 20 then
    rev = 'x' .. redis.sha1hex(rev)
  end
  return rev .. ':' .. redis.sha1hex(doc)
end
local n = redis.call('HSTRLEN', KEYS[1], 'doc')
if n > tonumber(ARGV[1]) then
  return redis.error_reply('STATESEAL_TOO_LARGE ' .. n)
end
`

// read returns the document and its revision, or nil if there is none.
var read = goredis.NewScript(prelude + `
local doc = redis.call('HGET', KEYS[1], 'doc')
if not doc then return false end
return {doc, revision(doc)}
`)

// revision returns the revision alone ("" if there is no document).
var revision = goredis.NewScript(prelude + `
local doc = redis.call('HGET', KEYS[1], 'doc')
if not doc then return '' end
return revision(doc)
`)

// cas compares the revision, writes and counts, in one step; Write
// announces the write once it is durable.
// Its bound check keeps it from hashing a huge planted document.
var cas = goredis.NewScript(prelude + `
local doc = redis.call('HGET', KEYS[1], 'doc')
local cur = ''
if doc then cur = revision(doc) end
if cur ~= ARGV[3] then
  return redis.error_reply('STATESEAL_CONFLICT the revision changed')
end
local next = tostring((tonumber(redis.call('HGET', KEYS[1], 'rev')) or 0) + 1)
redis.call('HSET', KEYS[1], 'doc', ARGV[2], 'rev', next)
return next .. ':' .. redis.sha1hex(ARGV[2])
`)

// failed turns a script's error into the store's.
func (s *Store) failed(op string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "ERR ")
	if n, ok := strings.CutPrefix(msg, "STATESEAL_TOO_LARGE "); ok {
		size, _ := strconv.ParseInt(n, 10, 64)
		return stores.TooLarge(s.name, size)
	}
	if strings.HasPrefix(msg, "STATESEAL_CONFLICT") {
		return fmt.Errorf("%s: %w", s.name, stores.ErrConflict)
	}
	return fmt.Errorf("%s: %s: %w", s.name, op, err)
}

var maxSize = strconv.Itoa(stores.MaxSize)

// Read returns the document and its revision. A document over
// stores.MaxSize is refused inside Redis, before it is sent.
func (s *Store) Read(ctx context.Context) ([]byte, string, error) {
	a, err := coalesced(ctx, flightKey{s.client, s.key, "read"}, func(ctx context.Context) (any, error) {
		return read.Run(ctx, s.client, []string{s.key}, maxSize).Slice()
	})
	v, _ := a.([]any)
	if errors.Is(err, goredis.Nil) {
		return nil, "", fmt.Errorf("%s: %w", s.name, stores.ErrNotFound)
	}
	if err != nil {
		return nil, "", s.failed("read", err)
	}
	if len(v) != 2 {
		return nil, "", fmt.Errorf("%s: read: an answer of %d values, want 2", s.name, len(v))
	}
	doc, _ := v[0].(string)
	rev, _ := v[1].(string)
	return []byte(doc), rev, nil
}

// Revision returns the revision alone, computed inside Redis: the answer
// is the counter and a SHA-1, about fifty bytes, whatever the document's
// size. It changes whenever the document does, even if whoever changed it
// left the counter alone.
func (s *Store) Revision(ctx context.Context) (string, error) {
	a, err := coalesced(ctx, flightKey{s.client, s.key, "revision"}, func(ctx context.Context) (any, error) {
		return revision.Run(ctx, s.client, []string{s.key}, maxSize).Text()
	})
	if err != nil {
		return "", s.failed("revision", err)
	}
	return a.(string), nil
}
