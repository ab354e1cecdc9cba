package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/stores"
)

// DefaultWaitTimeout is how long a write waits, by default, for the
// primary's replicas to acknowledge it (wait_timeout=).
const DefaultWaitTimeout = 2 * time.Second

// Write replaces the document if the revision is still rev ("": no
// document yet), and reports success only once it is on every replica
// the primary had connected when the write began, and on at least
// MinReplicas (min_replicas=): the script runs on a connection pinned to
// the key's primary, followed there by WAIT. A single Redis, with no
// replica, needs no WAIT.
//
// A primary with fewer than MinReplicas replicas connected refuses the
// write before making it (stores.ErrNotDurable, "nothing was written").
// In a Cluster, a write pinned by a stale slot map (MOVED, ASK,
// CLUSTERDOWN, or a master that has become a replica in a failover) did
// not run: the map is reloaded until it names another master (up to 2 s)
// and the write tried again, three tries in all.
//
// A write the replicas did not acknowledge within WaitTimeout is also
// refused with stores.ErrNotDurable, but it was made on the primary: it
// may survive or be lost in a failover, so read the store again before
// the next edit (a compare-and-swap edit does so anyway).
//
// WAIT confirms the replicas hold the write in memory; their disk is
// their appendfsync's business (docs/FLEET.md, "Running the stores at
// scale").
func (s *Store) Write(ctx context.Context, data []byte, rev string) (string, error) {
	if len(data) > stores.MaxSize {
		return "", stores.TooLarge(s.name, int64(len(data)))
	}
	next, node, err := s.write(ctx, data, rev)
	cc, ok := s.client.(*goredis.ClusterClient)
	for try := 1; ok && err != nil && try < staleMapTries && errors.As(err, new(notRun)); try++ {
		// The slot map was stale (a master died, slots moved, or the
		// master became a replica in a failover): the script did not
		// run. Reload it and try again.
		waitNewMaster(ctx, cc, s.key, node)
		next, node, err = s.write(ctx, data, rev)
	}
	return next, err
}

// staleMapTries bounds the tries of a write that a stale slot map sent
// to a node that is no longer the key's master.
const staleMapTries = 3

// waitNewMaster reloads the slot map until it names a master for key
// other than node, for up to two seconds. go-redis reloads it in the
// background, from one node, which may not have learned of the failover
// yet (gossip): so it is asked again until the map changes.
func waitNewMaster(ctx context.Context, cc *goredis.ClusterClient, key, node string) {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		cc.ReloadState(ctx) // one reload at a time, 200 ms apart at most
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
		if m, err := cc.MasterForKey(ctx, key); err == nil && m.Options().Addr != node {
			return
		}
	}
}

// moved reports a reply of Redis's own that sends the command elsewhere:
// the command did not run. Only the reply itself, never a message that
// quotes one (WAIT's, after the script ran).
func moved(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ") || strings.HasPrefix(msg, "CLUSTERDOWN")
}

// notRun marks a write that provably did not run: refused by the node
// before the script (a replica: errNotPrimary), or its script redirected
// (moved). Only such a write is tried again: one whose script ran (a WAIT
// that failed after it) never is, or its compare-and-swap would then fail
// on its own write and the caller would edit twice.
type notRun struct{ error }

func (e notRun) Unwrap() error { return e.error }

// write makes the write on a connection pinned to the key's primary,
// and says which node that was (in a Cluster).
func (s *Store) write(ctx context.Context, data []byte, rev string) (string, string, error) {
	cn, node, err := s.pinned(ctx)
	if err != nil {
		err = fmt.Errorf("%s: write: %w", s.name, err)
		if strings.Contains(err.Error(), "CLUSTERDOWN") || moved(errors.Unwrap(err)) {
			err = notRun{err} // no connection: nothing was sent
		}
		return "", "", err
	}
	next, err := s.durable(ctx, cn, data, rev)
	return next, node, err
}

func (s *Store) durable(ctx context.Context, cn *goredis.Conn, data []byte, rev string) (string, error) {
	defer cn.Close()
	replicas, err := connectedReplicas(ctx, cn)
	if err != nil {
		err = fmt.Errorf("%s: write: %w; nothing was written", s.name, err)
		if errors.Is(err, errNotPrimary) {
			err = notRun{err}
		}
		return "", err
	}
	if replicas < s.minReplicas {
		return "", fmt.Errorf("%s: %w: the primary has %d replicas connected and the store requires %d (min_replicas); nothing was written", s.name, stores.ErrNotDurable, replicas, s.minReplicas)
	}
	next, err := cas.Run(ctx, cn, []string{s.key}, maxSize, string(data), rev, s.Channel()).Text()
	if err != nil {
		if moved(err) {
			return "", notRun{s.failed("write", err)}
		}
		return "", s.failed("write", err)
	}
	if replicas > 0 {
		acked, err := cn.Wait(ctx, replicas, s.waitTimeout).Result()
		if err != nil {
			return "", fmt.Errorf("%s: %w: the write was made on the primary but WAIT failed (%v): it may be lost in a failover; read the keyset again", s.name, stores.ErrNotDurable, err)
		}
		if int(acked) < replicas {
			return "", fmt.Errorf("%s: %w: the write was made on the primary but %d of its %d replicas acknowledged it within %v (wait_timeout): it may be lost in a failover; read the keyset again", s.name, stores.ErrNotDurable, acked, replicas, s.waitTimeout)
		}
	}
	// Announced only now: loaders told of a write the replicas did not
	// take could install a version a failover then loses (a fork).
	// Should the announcement fail, loaders find the write at their poll.
	counter, _, _ := strings.Cut(next, ":")
	cn.Publish(ctx, s.Channel(), counter)
	return next, nil
}

// pinned returns one connection to the key's primary: WAIT counts the
// replicas that acknowledged the writes of its own connection.
func (s *Store) pinned(ctx context.Context) (*goredis.Conn, string, error) {
	switch c := s.client.(type) {
	case *goredis.ClusterClient:
		m, err := c.MasterForKey(ctx, s.key)
		if err != nil {
			return nil, "", err
		}
		return m.Conn(), m.Options().Addr, nil
	case *goredis.Client: // a single Redis, or a Sentinel failover client
		return c.Conn(), "", nil
	}
	return nil, "", fmt.Errorf("a %T cannot pin a connection to the primary, which WAIT needs: pass a *redis.Client, a failover client or a *redis.ClusterClient", s.client)
}

// errNotPrimary: the connection a write was pinned to reached a replica.
var errNotPrimary = errors.New("the node is not a primary (a failover under way?)")

// connectedReplicas is the number of replicas ROLE lists on a primary.
func connectedReplicas(ctx context.Context, cn *goredis.Conn) (int, error) {
	role, err := cn.Do(ctx, "ROLE").Slice()
	if err != nil {
		return 0, fmt.Errorf("ROLE: %w", err)
	}
	if len(role) < 3 || role[0] != "master" {
		return 0, errNotPrimary
	}
	list, _ := role[2].([]any)
	return len(list), nil
}
