package mrtr

import (
	"context"

	"github.com/stateseal/stateseal/replay"
)

// Release takes back the use of the single-use state this Call opened,
// for a caller that provably did not act on it: the gateway calls it when
// no upstream accepted a connection, so the request never left it, and
// the client's retry of the same state then runs once. It reports whether
// the state is usable again: false when the Call recorded no use, when
// Options.Replay is not a replay.Releaser, or when the guard could not
// take the use back (the state is then burned, never run twice).
//
// Release must not be called once anything may have acted on the state:
// a request written to an upstream, even in part, may have run.
func (c *Call) Release(ctx context.Context) bool {
	r, ok := c.m.o.Replay.(replay.Releaser)
	if !ok || c.used == nil {
		return false
	}
	err := r.Release(ctx, c.used)
	if err != nil {
		method, target := c.labels(true)
		c.m.logger().Warn("stateseal: could not take back the use of a single-use state that did not run; it is burned", "method", method, "target", target, "err", err)
		return false
	}
	c.used = nil
	return true
}

// Used reports whether Open recorded the use of a single-use state that
// Release could still take back. The gateway sends such a request on a
// connection of its own: on a kept-alive one the upstream may have closed
// just before, a failure would not prove the request unsent, and the state
// would burn.
func (c *Call) Used() bool { return c.used != nil }
