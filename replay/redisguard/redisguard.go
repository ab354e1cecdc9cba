// Package redisguard is a replay.Guard for a fleet: the first use of a
// token, on any instance, is recorded in Redis, exactly once or not at
// all, with an honest answer either way.
//
//	g := redisguard.New(client, nil) // client: a redis.UniversalClient; nil: the default options
//	defer g.Close()
//
// Through redis.UniversalClient it works with a single server, Sentinel
// and Cluster. Every call to Use ends within Options.Timeout (500 ms by
// default), whatever Redis does.
//
// # How a use is recorded
//
// Each call to Use is an attempt with a random value of its own. One Lua
// script, run atomically by Redis, records the attempt under the token's
// id (PREFIX + hex(id)) if no use is recorded yet, and answers what it
// found. The script is safe to repeat: sent again with the same attempt,
// it finds its own record and says so. So when a reply is lost (a
// timeout, a dropped connection, a retry by go-redis), Use sends it again
// until it learns whether the recorded use is its own, and a lost reply
// never turns a first use into "replayed". If it cannot learn that before
// its deadline, Use answers replay.ErrUnavailable, and the script makes
// that answer true:
//
//   - The script carries the attempt's deadline, and does nothing once
//     Redis's clock has passed it: a command that reaches Redis late (held
//     in a socket while Redis was stopped, paused or slow) cannot consume
//     the token.
//   - A recorded use counts as "replayed" for others only once its owner
//     has confirmed it (an acknowledgement Use sends after the record's
//     reply arrived, in the background). Use waits, within its deadline,
//     while another attempt's record is unconfirmed (a concurrent
//     duplicate usually sees the confirmation land a round trip later,
//     and is told "replayed"); past the deadline it is "unavailable; try
//     again": its owner may still be waiting for the reply, or may have
//     given up.
//   - An owner that gave up removes its unconfirmed record, in the
//     background, as soon as Redis answers again. The retry of the state
//     then goes through.
//
// # What Redis forgot
//
// Beside the records, Redis keeps an epoch (PREFIX + "epoch"): the time
// from which it vouches for every use, and the replication id of the
// server that set it. The script checks both atomically with the claim.
// When the epoch is missing (a restart without persistence, a flush, a
// first deployment) or the replication id changed (a restart, a failover
// to a replica that may have missed the last writes), the epoch is set to
// the moment Redis lost records: its start, when a restart is the only
// possible loss, else its present time. A token issued before the epoch
// plus Options.ClockMargin is refused with replay.ErrUnvouched (start the
// flow again; trying the same state again cannot help): it may have been
// used in what Redis forgot. Each Guard also refreshes the
// epoch every second in the background. A Redis whose maxmemory-policy
// may evict keys (anything but noeviction with a maxmemory set) could drop
// records without a trace: the guard then refuses every state, saying
// why.
//
// With Options.MinReplicas (min_replicas= in the URL: SplitURL), a use
// counts only once that many replicas hold its record (WAIT on the
// connection that wrote it), and the epoch survives a failover that
// promotes one of them: this server's master_replid2 is the epoch's
// replication id, every record under the epoch was made that way, and
// the server was running when it received the durable guards' newest
// heartbeat (written into the epoch every second, by the epoch's refresh
// and with the records), which a server that
// restarted from a snapshot, and may lack records, was not.
// States issued before such a failover are not refused; while a primary
// has fewer replicas than MinReplicas, single use is unavailable.
//
// The residual assumption is about clocks: the hosts that seal tokens must
// not run ahead of Redis's clock by more than Options.ClockMargin (250 ms
// by default), or a state sealed just before Redis lost its records could
// be accepted once more. Each instance checks its own clock against
// Redis's on every claim and refuses (replay.ErrUnavailable) when it runs
// ahead by more than the margin. docs/FLEET.md says what Redis
// configuration single use needs and what each choice costs.
package redisguard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/replay"
)

// Defaults for Options.
const (
	DefaultTimeout     = 500 * time.Millisecond
	DefaultClockMargin = 250 * time.Millisecond
)

// Options configure a Guard. The zero value is usable.
type Options struct {
	// Prefix starts every key; "" means "stateseal:used:".
	Prefix string
	// Timeout bounds every call to Use, whatever the caller's context
	// allows and whatever the client's own timeouts: 0 means
	// DefaultTimeout. A hung Redis costs a request this long, a Redis
	// that refuses connections much less.
	Timeout time.Duration
	// ClockMargin is how far the clocks of the hosts that seal tokens may
	// run ahead of Redis's: 0 means DefaultClockMargin. States issued
	// before Redis lost its records, plus this margin, are refused; a
	// host whose clock runs further ahead of Redis's is refused single
	// use altogether.
	ClockMargin time.Duration
	// FailOpen accepts tokens, unchecked, while Redis does not answer,
	// and logs it. Off (the default), they are refused with
	// replay.ErrUnavailable: a single-use tool is then unavailable, never
	// run twice.
	FailOpen bool
	// Logger receives warnings (fail open, lost records, an evicting
	// Redis, background work dropped); nil means slog.Default().
	Logger *slog.Logger
	// MinReplicas, above 0, makes the records durable: a use counts (Use
	// returns nil) only once that many replicas of its primary hold its
	// record (WAIT, within Timeout), and a primary with fewer replicas
	// connected records nothing (replay.ErrUnavailable). A failover that
	// promotes one of those replicas then loses no record, and keeps the
	// epoch: states issued before it are not refused. Set it to the
	// number of replicas each primary has: a replica that missed a
	// record (one that was not among the MinReplicas that acknowledged
	// it) must never be promoted. 0, the default, waits for no replica,
	// and every failover moves the epoch (docs/FLEET.md, "Single use in
	// Redis", says what each costs). Every guard on one Redis and prefix
	// must agree: an epoch made, or recorded under, by a guard without
	// MinReplicas is an ordinary one, which the next failover moves; a
	// guard with MinReplicas logs a warning, once per epoch, when it
	// finds one.
	MinReplicas int
}

// SplitURL takes the guard's own parameters out of a Redis URL:
// guard_timeout (a Go duration: Options.Timeout) and min_replicas (a
// count: Options.MinReplicas, durable records). It returns the URL left
// for the client (stores/redis.NewClient reads it) and the options they
// set. A URL without them comes back unchanged, with the zero Options.
func SplitURL(raw string) (client string, o Options, err error) {
	u, perr := url.Parse(raw)
	if perr != nil {
		return raw, o, nil // NewClient says what is wrong with the URL
	}
	q := u.Query()
	if !q.Has("guard_timeout") && !q.Has("min_replicas") {
		return raw, o, nil
	}
	if q.Has("guard_timeout") {
		if o.Timeout, err = time.ParseDuration(q.Get("guard_timeout")); err != nil || o.Timeout <= 0 {
			return "", Options{}, fmt.Errorf("guard_timeout=%q: want a positive duration such as 300ms", q.Get("guard_timeout"))
		}
	}
	if q.Has("min_replicas") {
		if o.MinReplicas, err = strconv.Atoi(q.Get("min_replicas")); err != nil || o.MinReplicas < 0 {
			return "", Options{}, fmt.Errorf("min_replicas=%q: want a count of replicas, 0 or more", q.Get("min_replicas"))
		}
	}
	q.Del("guard_timeout")
	q.Del("min_replicas")
	u.RawQuery = q.Encode()
	return u.String(), o, nil
}

// Intervals of the background work; variables for tests.
var (
	epochEvery  = time.Second      // refresh the epoch
	policyEvery = 10 * time.Second // read maxmemory and its policy
)

// maxPending bounds the acknowledgements and removals waiting for Redis.
const maxPending = 1 << 14

// clusterBuckets spread a Cluster's records over as many hash slots, each
// with its epoch in the same slot (a script touches one slot only).
const clusterBuckets = 64

// A Guard records uses in Redis. Close it to stop its background work.
type Guard struct {
	client  goredis.UniversalClient
	o       Options
	buckets int

	jobs chan job
	quit chan struct{}
	done chan struct{}
	once sync.Once

	now func() time.Time // this host's clock, as sent to Redis

	// For tests: tries that found their own record after a lost reply,
	// and unsettled records taken back.
	verified, released atomic.Int64

	drops, dropLogged atomic.Int64 // background work dropped; when that was last logged (Unix ns)

	mu        sync.Mutex
	policyErr error     // the last verdict on eviction
	policyAt  time.Time // when it was made
	epochs    map[string]int64
	undurable map[string]int64 // epochs a durable guard warned about: made or used by a guard without MinReplicas
}

// New returns a guard over client and starts its background work.
func New(client goredis.UniversalClient, opts *Options) *Guard {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" {
		o.Prefix = "stateseal:used:"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ClockMargin <= 0 {
		o.ClockMargin = DefaultClockMargin
	}
	g := &Guard{client: client, o: o, buckets: 1, jobs: make(chan job, 8192),
		quit: make(chan struct{}), done: make(chan struct{}), epochs: map[string]int64{}, undurable: map[string]int64{}, now: time.Now}
	if _, ok := client.(*goredis.ClusterClient); ok {
		g.buckets = clusterBuckets
	}
	go g.work()
	return g
}

// Close stops the background work, after one last try (within Timeout)
// to send what is pending. It does not close the client.
func (g *Guard) Close() error {
	g.once.Do(func() { close(g.quit) })
	<-g.done
	return nil
}

// keys returns the record's key and its epoch's: the same hash slot in a
// Cluster.
func (g *Guard) keys(id []byte) (use, epoch string) {
	if g.buckets == 1 {
		return g.o.Prefix + hex.EncodeToString(id), g.o.Prefix + "epoch"
	}
	b := 0
	if len(id) > 0 {
		b = int(id[0]) % g.buckets
	}
	tag := fmt.Sprintf("%s{%02x}", g.o.Prefix, b)
	return tag + hex.EncodeToString(id), tag + "epoch"
}

// epochLua reads or sets the epoch of KEYS[2] into et, at Redis's time
// now. When the epoch is missing or its replication id is not Redis's
// any more, Redis lost or may have lost records: the epoch becomes the
// moment of that loss. Unless nothing can have been lost: this server
// was promoted from a replica of the epoch's primary (its master_replid2
// is the epoch's id), every record under the epoch was held by the
// guard's MinReplicas replicas before it counted ('d' is 1: set by a
// durable guard when it made the epoch, cleared by the first record a
// guard without MinReplicas makes under it), this server was running
// when it received the newest heartbeat it holds ('h', which durable
// guards write every second: a server that restarted from a snapshot,
// the old primary itself or a replica not yet resynced, holds only
// heartbeats older than its start, and may lack records; its
// master_replid2 is the snapshot's id too), and this guard is durable
// (durable, the script's MinReplicas, is above 0): the epoch is kept,
// under the new id. That is Redis's start if the loss can only be the
// restart: this server was not promoted from a replica (master_replid2 is
// zero) and nothing was flushed since it started (no FLUSHALL or FLUSHDB
// in INFO commandstats). Otherwise the moment is unknown, and the epoch is
// now. Redis knows its start to the second (its cached time in seconds
// minus its uptime): the epoch is the end of that second, so that it is
// never before the start.
const epochLua = `
local repl = redis.call('INFO', 'replication')
local rid = string.match(repl, 'master_replid:(%x+)') or ''
local rid2 = string.match(repl, 'master_replid2:(%x+)') or ''
local ep = redis.call('HMGET', KEYS[2], 't', 'r', 'd', 'h')
local et = tonumber(ep[1])
local fresh = 0
local kept = false
if et and ep[2] ~= rid and durable > 0 and ep[3] == '1' and ep[2] == rid2 and tonumber(ep[4]) then
  local srv = redis.call('INFO', 'server')
  local up = tonumber(string.match(srv, 'uptime_in_seconds:(%d+)'))
  local us = tonumber(string.match(srv, 'server_time_usec:(%d+)'))
  if up and us and (math.floor(us / 1000000) - up + 2) * 1000 < tonumber(ep[4]) then
    redis.call('HSET', KEYS[2], 'r', rid)
    kept = true
  end
end
if not kept and (not et or ep[2] ~= rid) then
  et = now
  fresh = 1
  local srv = redis.call('INFO', 'server')
  local up = tonumber(string.match(srv, 'uptime_in_seconds:(%d+)'))
  local us = tonumber(string.match(srv, 'server_time_usec:(%d+)'))
  if rid2 ~= '' and not string.find(rid2, '[^0]') and up and us and
     not string.find(redis.call('INFO', 'commandstats'), 'cmdstat_flush') then
    et = math.min(now, (math.floor(us / 1000000) - up + 1) * 1000)
  end
  local d = '0'
  if durable > 0 then d = '1' end
  redis.call('HSET', KEYS[2], 't', string.format('%.0f', et), 'r', rid, 'd', d, 'h', now)
end
`

const nowLua = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// claim records attempt ARGV[1] under KEYS[1] if nothing is recorded.
// ARGV: attempt, deadline (Unix ms), issued-at (Unix ms), time to live
// (ms), the sender's clock (Unix ms), the clock margin (ms). A record is
// "ATTEMPT:DEADLINE:0" until its owner acknowledges it, then ":1"; ":2"
// once its owner doubts it (Doubt).
var claim = goredis.NewScript(nowLua + `
-- ARGV[7] is the guard's MinReplicas. A durable guard (above 0) finds
-- too few replicas connected before it records ('replicas'), and writes
-- its own record again when it finds it, so that the WAIT that follows
-- on the same connection covers it.
local durable = tonumber(ARGV[7]) or 0
if durable > 0 then
  local own = redis.call('GET', KEYS[1])
  if own and string.sub(own, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then
    redis.call('SET', KEYS[1], own, 'KEEPTTL')
  end
end
local cur = redis.call('GET', KEYS[1])
if cur then
  local a, acked = string.match(cur, '^(%x+):%d+:([012])$')
  if a == ARGV[1] then return {'mine', now} end
  if acked == '0' then return {'busy', now} end
  if acked == '2' then return {'doubt', now} end
  return {'used', now}
end
if now >= tonumber(ARGV[2]) then return {'late', now} end
if tonumber(ARGV[5]) - now > tonumber(ARGV[6]) then return {'clock', now} end
` + epochLua + `
if tonumber(ARGV[3]) < et + tonumber(ARGV[6]) then return {'stale', now, et} end
if durable > 0 then
  local n = tonumber(string.match(repl, 'connected_slaves:(%d+)')) or 0
  if n < durable then return {'replicas', now, n} end
  -- The heartbeat travels with the record (at most one write a second):
  -- a replica that holds the record held it while running.
  if fresh == 0 and ep[3] == '1' and now - (tonumber(ep[4]) or 0) > 1000 then
    redis.call('HSET', KEYS[2], 'h', now)
  end
elseif ep[3] == '1' then
  redis.call('HSET', KEYS[2], 'd', '0')
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2] .. ':0', 'PX', ARGV[4])
return {'ok', now}
`)

// touch reads or sets the epoch of KEYS[2] (KEYS[1] is unused, to keep
// the epoch code's numbering); ARGV[1] is the guard's MinReplicas.
var touch = goredis.NewScript(nowLua + `
local durable = tonumber(ARGV[1]) or 0
` + epochLua + `
local d = ep[3]
if fresh == 1 then
  d = redis.call('HGET', KEYS[2], 'd')
end
if durable > 0 and fresh == 0 and d == '1' then
  redis.call('HSET', KEYS[2], 'h', now)
end
return {et, fresh, d or '0'}
`)

// ack confirms ARGV[1]'s record: ARGV[2] is the confirmed value.
var ack = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
end
return 1
`)

// doubt marks KEYS[1]'s record, confirmed or not, as in doubt; its
// acknowledgement, if still on its way, then finds another value and
// does nothing.
var doubt = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then
  local a = string.match(cur, '^(%x+:%d+):[012]$')
  if a then
    redis.call('SET', KEYS[1], a .. ':2', 'KEEPTTL')
    return 1
  end
end
return 0
`)

// release removes attempt ARGV[1]'s unconfirmed record. It answers
// "wait" while the attempt, not recorded, could still land (Redis's clock
// before its deadline ARGV[2]).
var release = goredis.NewScript(nowLua + `
local cur = redis.call('GET', KEYS[1])
if cur then
  local a, acked = string.match(cur, '^(%x+):%d+:([01])$')
  if a == ARGV[1] and acked == '0' then
    redis.call('DEL', KEYS[1])
    return 'released'
  end
  return 'other'
end
if now < tonumber(ARGV[2]) then return 'wait' end
return 'none'
`)

// Use records the first use of id, for a token issued at issuedAt, until
// keepUntil. It returns nil only when this call recorded the use.
func (g *Guard) Use(ctx context.Context, id []byte, issuedAt, keepUntil time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, g.o.Timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	if err := g.checkPolicy(ctx); err != nil {
		return err
	}
	var a [16]byte
	rand.Read(a[:])
	attempt := hex.EncodeToString(a[:])
	key, epoch := g.keys(id)
	ttl := time.Until(keepUntil)
	if ttl < time.Second {
		ttl = time.Second // Redis needs a positive expiry; Open refused expired tokens already
	}
	j := job{key: key, attempt: attempt, deadline: deadline.UnixMilli(), until: keepUntil}
	// unknown: a try may have reached Redis, and Use does not know what it did.
	unknown := false
	last := ctx.Err()
	for backoff := 5 * time.Millisecond; last == nil; backoff = min(2*backoff, 100*time.Millisecond) {
		args := []any{attempt, j.deadline, issuedAt.UnixMilli(), ttl.Milliseconds(), g.now().UnixMilli(), g.o.ClockMargin.Milliseconds(), g.o.MinReplicas}
		r, err := bounded(ctx, func(ctx context.Context) ([]any, error) {
			if g.o.MinReplicas > 0 {
				return g.claimDurable(ctx, key, epoch, args)
			}
			return claim.Run(ctx, g.client, []string{key, epoch}, args...).Slice()
		})
		if err == nil {
			// Another use's record, not confirmed yet: its confirmation
			// usually follows within a round trip, so wait for it (a
			// concurrent duplicate is then told replayed, not
			// unavailable), or for its removal, until the deadline.
			if status, _ := r[0].(string); status == "busy" && sleep(ctx, backoff) {
				continue
			}
			return g.settle(r, j, unknown, issuedAt, deadline)
		}
		last = err
		unknown = unknown || maybeSent(err)
		if !unknown && !(g.o.MinReplicas > 0 && redirected(err)) {
			break // nothing reached Redis: no need to find out
		}
		if redirected(err) {
			// A durable claim, pinned to a node that no longer serves
			// the key (a failover): it did not run. Try again on the
			// primary the client learns of.
			if cc, ok := g.client.(*goredis.ClusterClient); ok {
				cc.ReloadState(ctx)
			}
		}
		select {
		case <-time.After(backoff):
			last = nil // try again: the same attempt, so a second run finds the first one's record
		case <-ctx.Done():
		}
	}
	if g.o.FailOpen {
		if unknown {
			g.enqueue(j) // the record, if it landed, is this use's
		}
		g.o.Logger.Warn("stateseal single-use check skipped: Redis does not answer (FailOpen)", "err", last)
		return nil
	}
	if unknown {
		j.release = true
		g.enqueue(j)
	}
	return fmt.Errorf("%w: redis did not answer within %v: %w", replay.ErrUnavailable, g.o.Timeout, last)
}

// settle turns the script's answer into Use's.
func (g *Guard) settle(r []any, j job, unknown bool, issuedAt, deadline time.Time) error {
	status, _ := r[0].(string)
	now, _ := r[1].(int64)
	switch status {
	case "ok", "mine":
		if status == "mine" {
			g.verified.Add(1)
		}
		g.enqueue(j)
		return nil
	case "late":
		// Nothing is recorded, and no earlier try can land any more.
		if time.Now().Before(deadline) {
			return fmt.Errorf("%w: Redis's clock (%s) is past this call's deadline (%s): it runs ahead of this host's",
				replay.ErrUnavailable, time.UnixMilli(now).UTC().Format(time.RFC3339Nano), deadline.UTC().Format(time.RFC3339Nano))
		}
		return fmt.Errorf("%w: redis answered after this call's deadline", replay.ErrUnavailable)
	}
	if unknown {
		// An earlier try may still be on its way: take it back if it lands.
		j.release = true
		g.enqueue(j)
	}
	switch status {
	case "unreplicated":
		if !unknown { // else enqueued above
			j.release = true
			g.enqueue(j)
		}
		n, _ := r[2].(int64)
		return fmt.Errorf("%w: the use was recorded on the primary, but %d of the %d replicas it needs (min_replicas) acknowledged it in time; it is taken back", replay.ErrUnavailable, n, g.o.MinReplicas)
	case "replicas":
		n, _ := r[2].(int64)
		return fmt.Errorf("%w: the primary has %d replicas connected and the guard requires %d (min_replicas); nothing was recorded", replay.ErrUnavailable, n, g.o.MinReplicas)
	case "used":
		return replay.ErrReplayed
	case "doubt":
		return replay.ErrUndetermined
	case "busy":
		return fmt.Errorf("%w: another use of this state is not settled yet", replay.ErrUnavailable)
	case "clock":
		return fmt.Errorf("%w: this host's clock runs %v ahead of Redis's, over the clock margin %v",
			replay.ErrUnavailable, time.Until(time.UnixMilli(now)).Abs().Round(time.Millisecond), g.o.ClockMargin)
	case "stale":
		et, _ := r[2].(int64)
		return fmt.Errorf("%w: the state was issued at %s, before Redis's single-use records begin (%s: a restart, failover or flush)",
			replay.ErrUnvouched, issuedAt.UTC().Format(time.RFC3339), time.UnixMilli(et).UTC().Format(time.RFC3339Nano))
	}
	return fmt.Errorf("%w: unexpected answer from Redis %v", replay.ErrUnavailable, r)
}

// claimDurable runs the claim on a connection pinned to the key's
// primary and, when it recorded the use (or found its own record, which
// the script wrote again), waits there for MinReplicas replicas to hold
// it: WAIT counts the writes of its own connection. A record fewer
// replicas acknowledged in time answers "unreplicated", and is taken
// back.
func (g *Guard) claimDurable(ctx context.Context, key, epoch string, args []any) ([]any, error) {
	cn, err := g.pin(ctx, key)
	if err != nil {
		return nil, err
	}
	defer cn.Close()
	r, err := claim.Run(ctx, cn, []string{key, epoch}, args...).Slice()
	if err != nil {
		return nil, err
	}
	if status, _ := r[0].(string); status != "ok" && status != "mine" {
		return r, nil
	}
	// WAIT's own timeout ends before the call's deadline, so that its
	// answer comes back in time: Redis notices a blocked client's timeout
	// in its event loop, up to 100 ms late at the default hz 10. 0 would
	// mean no timeout.
	deadline, _ := ctx.Deadline()
	wait := max(time.Until(deadline)-150*time.Millisecond, 10*time.Millisecond)
	n, err := cn.Wait(ctx, g.o.MinReplicas, wait).Result()
	if err != nil {
		return nil, err
	}
	if int(n) < g.o.MinReplicas {
		return []any{"unreplicated", r[1], n}, nil
	}
	return r, nil
}

// pin returns a connection to the primary that serves key.
func (g *Guard) pin(ctx context.Context, key string) (*goredis.Conn, error) {
	switch c := g.client.(type) {
	case *goredis.ClusterClient:
		m, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		return m.Conn(), nil
	case *goredis.Client: // a single Redis, or a Sentinel failover client
		return c.Conn(), nil
	}
	return nil, fmt.Errorf("%w: MinReplicas needs a *redis.Client, a failover client or a *redis.ClusterClient (WAIT runs on the connection that wrote), not a %T", replay.ErrUnavailable, g.client)
}

// redirected reports a reply that says the node does not serve the key
// as a primary (a failover, a stale slot map): the command did not run.
func redirected(err error) bool {
	var rerr goredis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	for _, p := range []string{"MOVED ", "ASK ", "CLUSTERDOWN", "READONLY", "TRYAGAIN", "LOADING", "MASTERDOWN"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// Release removes the record of id (replay.Releaser), within
// Options.Timeout: the caller's Use of id returned nil and nothing acted
// on the token. A confirmation still on its way finds no record and does
// nothing.
func (g *Guard) Release(ctx context.Context, id []byte) error {
	ctx, cancel := context.WithTimeout(ctx, g.o.Timeout)
	defer cancel()
	key, _ := g.keys(id)
	_, err := bounded(ctx, func(ctx context.Context) (int64, error) { return g.client.Del(ctx, key).Result() })
	if err != nil {
		return fmt.Errorf("%w: redis: releasing a use: %w", replay.ErrUnavailable, err)
	}
	return nil
}

// Doubt marks the use of id as in doubt (replay.Doubter), within
// Options.Timeout: the caller's Use of id returned nil, and the call it
// gave the token to was cut before it answered. A later use is refused
// with replay.ErrUndetermined.
func (g *Guard) Doubt(ctx context.Context, id []byte) error {
	ctx, cancel := context.WithTimeout(ctx, g.o.Timeout)
	defer cancel()
	key, _ := g.keys(id)
	_, err := bounded(ctx, func(ctx context.Context) (any, error) { return doubt.Run(ctx, g.client, []string{key}).Result() })
	if err != nil {
		return fmt.Errorf("%w: redis: marking a use in doubt: %w", replay.ErrUnavailable, err)
	}
	return nil
}

// sleep waits for d, and reports false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// bounded runs f and returns by ctx's deadline even if f does not (a
// client whose context timeouts are off keeps reading until its own read
// timeout).
func bounded[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f(ctx)
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// maybeSent reports whether a command that failed with err may have
// reached Redis: anything but a failure to connect, a full pool or an
// error reply from Redis itself.
func maybeSent(err error) bool {
	var op *net.OpError
	var rerr goredis.Error
	switch {
	case errors.As(err, &op) && op.Op == "dial":
		return false
	case errors.Is(err, goredis.ErrPoolTimeout), errors.Is(err, goredis.ErrPoolExhausted), errors.Is(err, goredis.ErrClosed):
		return false
	case errors.As(err, &rerr):
		return false
	}
	return true
}

// Epoch returns the time from which Redis vouches for single use:
// states issued before it, plus Options.ClockMargin, are refused. It
// creates the epoch if missing, and moves it if Redis's replication id
// changed (a restart or failover); in a Cluster it returns the latest of
// the buckets' epochs. Use it in a readiness check, or to wait before
// sealing single-use states after a deployment.
func (g *Guard) Epoch(ctx context.Context) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, g.o.Timeout)
	defer cancel()
	return bounded(ctx, g.touchAll)
}

// SealFrom returns the first moment from which a state sealed on this
// host is vouched for. A token's issued-at is in whole seconds (the
// moment of sealing, rounded down), and Use refuses one issued before
// Epoch plus Options.ClockMargin, so a state sealed before that sum,
// rounded up to the next whole second, is refused as unvouched however
// soon it comes back. After Redis starts (or loses its records) that is
// up to two seconds away. A readiness check should not report ready
// before it, on this host's clock: a balancer would send flows whose
// single-use states are doomed.
func (g *Guard) SealFrom(ctx context.Context) (time.Time, error) {
	e, err := g.Epoch(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return sealFrom(e, g.o.ClockMargin), nil
}

// sealFrom is the first whole second s with s >= epoch + margin: a token
// issued in s is not refused as stale.
func sealFrom(epoch time.Time, margin time.Duration) time.Time {
	t := epoch.Add(margin)
	if s := t.Truncate(time.Second); !s.Equal(t) {
		return s.Add(time.Second)
	}
	return t
}

func (g *Guard) touchAll(ctx context.Context) (time.Time, error) {
	var latest int64
	for b := range g.buckets {
		_, epoch := g.keys([]byte{byte(b)})
		r, err := touch.Run(ctx, g.client, []string{epoch, epoch}, g.o.MinReplicas).Slice()
		if err != nil {
			return time.Time{}, fmt.Errorf("redis: epoch: %w", err)
		}
		et, _ := r[0].(int64)
		d, _ := r[2].(string)
		latest = max(latest, et)
		g.mu.Lock()
		prev, seen := g.epochs[epoch]
		g.epochs[epoch] = et
		warn := g.o.MinReplicas > 0 && d != "1" && g.undurable[epoch] != et
		if warn {
			g.undurable[epoch] = et
		}
		g.mu.Unlock()
		if seen && prev != et {
			g.o.Logger.Warn("stateseal single-use: Redis lost or may have lost its records (a restart, failover or flush); states issued before the new epoch are refused",
				"epoch", time.UnixMilli(et).UTC(), "previous", time.UnixMilli(prev).UTC())
		}
		// A guard without MinReplicas made this epoch or recorded under
		// it: its records were never waited for, so the next failover
		// moves the epoch whatever this guard waits for. Said once per
		// epoch: the fleet mixes min_replicas settings.
		if warn {
			g.o.Logger.Warn("stateseal single-use: a guard without min_replicas shares this Redis (it made the epoch or recorded under it): a failover will refuse the states issued before it, as without min_replicas",
				"epoch", time.UnixMilli(et).UTC(), "min_replicas", g.o.MinReplicas)
		}
	}
	return time.UnixMilli(latest), nil
}

// checkPolicy refuses while Redis may evict records. The background work
// reads the policy every policyEvery; until it first could, Use reads it.
func (g *Guard) checkPolicy(ctx context.Context) error {
	g.mu.Lock()
	known, verdict := !g.policyAt.IsZero(), g.policyErr
	g.mu.Unlock()
	if known {
		return verdict
	}
	return g.refreshPolicy(ctx)
}

func (g *Guard) refreshPolicy(ctx context.Context) error {
	verdict, err := bounded(ctx, g.readPolicy)
	if err != nil {
		// Redis does not answer: the claim will say so.
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.policyErr
	}
	g.mu.Lock()
	changed := (verdict == nil) != (g.policyErr == nil)
	g.policyErr, g.policyAt = verdict, time.Now()
	g.mu.Unlock()
	if verdict != nil && changed {
		g.o.Logger.Warn("stateseal single-use refused", "err", verdict)
	}
	return verdict
}

// Policy reads Redis's eviction policy now and reports an error (wrapping
// replay.ErrUnavailable) if Redis may evict single-use records: a
// maxmemory with any maxmemory-policy but noeviction, on which every Use
// is refused. It returns nil when the policy is safe, and also when Redis
// does not answer within the guard's timeout (Use says so then). It also
// reports Redis refusing the credentials (WRONGPASS, NOAUTH, NOPERM),
// which no retry mends. Both are configuration errors, not outages, so
// that a caller may refuse to start on them or show them in its health.
func (g *Guard) Policy(ctx context.Context) error {
	verdict, err := bounded(ctx, g.readPolicy)
	if err != nil {
		if msg := err.Error(); strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, "NOAUTH") || strings.HasPrefix(msg, "NOPERM") {
			return fmt.Errorf("%w: Redis refused the guard's credentials: %s", replay.ErrUnavailable, msg)
		}
		return nil
	}
	return verdict
}

// readPolicy returns an error if a server may evict keys.
func (g *Guard) readPolicy(ctx context.Context) (error, error) {
	var verdict error
	var mu sync.Mutex
	check := func(ctx context.Context, c goredis.UniversalClient) error {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return err
		}
		policy, maxmemory := infoField(info, "maxmemory_policy"), infoField(info, "maxmemory")
		if maxmemory != "0" && policy != "noeviction" {
			mu.Lock()
			verdict = fmt.Errorf("%w: Redis may evict single-use records (maxmemory %s, maxmemory-policy %s): set maxmemory-policy noeviction",
				replay.ErrUnavailable, maxmemory, policy)
			mu.Unlock()
		}
		return nil
	}
	var err error
	if cc, ok := g.client.(*goredis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return check(ctx, c) })
	} else {
		err = check(ctx, g.client)
	}
	return verdict, err
}

func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// A job is background work for one attempt: its acknowledgement, or the
// removal of its record after Use gave up on it.
type job struct {
	release  bool
	key      string
	attempt  string
	deadline int64     // the attempt's, Unix ms
	until    time.Time // when the record expires: nothing to do after
	next     time.Time // when to try again
	backoff  time.Duration
}

func (j job) value(acked bool) string {
	v := j.attempt + ":" + strconv.FormatInt(j.deadline, 10) + ":"
	if acked {
		return v + "1"
	}
	return v + "0"
}

func (g *Guard) enqueue(j job) {
	select {
	case g.jobs <- j:
	default:
		g.dropped(j)
	}
}

func (g *Guard) dropped(j job) {
	n := g.drops.Add(1)
	last := g.dropLogged.Load()
	if now := time.Now().UnixNano(); now-last < int64(time.Second) || !g.dropLogged.CompareAndSwap(last, now) {
		return // at most one line a second
	}
	what := "acknowledgement: a replay of the state will be refused as unavailable rather than replayed"
	if j.release {
		what = "removal of an unsettled use: the state will be refused as unavailable until it expires"
	}
	g.o.Logger.Warn("stateseal single-use: too much background work pending, dropped a "+what, "key", j.key, "dropped so far", n)
}

// work sends acknowledgements and removals, in pipelines, trying again
// with backoff while Redis does not answer, and refreshes the epoch.
func (g *Guard) work() {
	defer close(g.done)
	var pending []job
	epochTick := time.NewTicker(epochEvery)
	defer epochTick.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var policyAt time.Time
	touchNow := true
	for {
		if touchNow {
			touchNow = false
			ctx, cancel := context.WithTimeout(context.Background(), g.o.Timeout)
			bounded(ctx, g.touchAll)
			if time.Since(policyAt) >= policyEvery {
				policyAt = time.Now()
				g.refreshPolicy(ctx)
			}
			cancel()
		}
		var wake <-chan time.Time
		if len(pending) > 0 {
			first := pending[0].next
			for _, j := range pending {
				if j.next.Before(first) {
					first = j.next
				}
			}
			timer.Reset(time.Until(first))
			wake = timer.C
		}
		select {
		case j := <-g.jobs:
			pending = g.add(pending, j)
		case <-wake:
		case <-epochTick.C:
			touchNow = true
			continue
		case <-g.quit:
			for {
				select {
				case j := <-g.jobs:
					pending = g.add(pending, j)
					continue
				default:
				}
				break
			}
			g.flush(pending, true)
			return
		}
		for len(pending) < maxPending {
			select {
			case j := <-g.jobs:
				pending = g.add(pending, j)
				continue
			default:
			}
			break
		}
		pending = g.flush(pending, false)
	}
}

func (g *Guard) add(pending []job, j job) []job {
	if len(pending) >= maxPending {
		g.dropped(j)
		return pending
	}
	return append(pending, j)
}

// flush sends the jobs that are due (all if final) in one pipeline, and
// returns those to try again.
func (g *Guard) flush(pending []job, final bool) []job {
	now := time.Now()
	var due, rest []job
	for _, j := range pending {
		switch {
		case now.After(j.until):
			// The record has expired; nothing is left to do.
		case final || !j.next.After(now):
			due = append(due, j)
		default:
			rest = append(rest, j)
		}
	}
	if len(due) == 0 {
		return rest
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.o.Timeout)
	defer cancel()
	cmds, _ := bounded(ctx, func(ctx context.Context) ([]goredis.Cmder, error) {
		pipe := g.client.Pipeline()
		for _, j := range due {
			if j.release {
				release.Eval(ctx, pipe, []string{j.key}, j.attempt, j.deadline)
			} else {
				ack.Eval(ctx, pipe, []string{j.key}, j.value(false), j.value(true))
			}
		}
		return pipe.Exec(ctx)
	})
	for i, j := range due {
		if cmds != nil && i < len(cmds) {
			if v, err := cmds[i].(*goredis.Cmd).Result(); err == nil && v != "wait" {
				if v == "released" {
					g.released.Add(1)
				}
				continue // done
			}
		}
		j.backoff = min(max(2*j.backoff, 20*time.Millisecond), time.Second)
		j.next = now.Add(j.backoff)
		rest = append(rest, j)
	}
	if final && len(rest) > 0 {
		g.o.Logger.Warn("stateseal single-use: closed with background work not done", "jobs", len(rest))
	}
	return rest
}
