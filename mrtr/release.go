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

// Doubt records that the single-use state this Call opened was given to
// a call whose outcome the caller never saw (it was cut before it
// answered): a retry of the same state is then refused with
// replay.ErrUndetermined, reason "undetermined" ("it may or may not have
// run; check before you repeat it"), not "replayed". It reports whether
// the guard recorded it: false when the Call recorded no use, when
// Options.Replay is not a replay.Doubter, or when the guard could not be
// reached (the retry is then told "replayed").
func (c *Call) Doubt(ctx context.Context) bool {
	d, ok := c.m.o.Replay.(replay.Doubter)
	if !ok || c.used == nil {
		return false
	}
	if err := d.Doubt(ctx, c.used); err != nil {
		method, target := c.labels(true)
		c.m.logger().Warn("stateseal: could not record that a cut single-use call may not have run; its retry will be told replayed", "method", method, "target", target, "err", err)
		return false
	}
	return true
}

// run calls next, the handler of a request whose single-use state this
// Call opened. A handler that panics, or returns an error once ctx has
// ended (the client went away, the server shuts down), was cut: it may
// or may not have acted, and the state's use is put in doubt.
func (c *Call) run(ctx context.Context, next func() (*string, error)) (out *string, err error) {
	if c.used == nil {
		return next()
	}
	defer func() {
		if p := recover(); p != nil {
			c.Doubt(context.WithoutCancel(ctx))
			panic(p)
		}
	}()
	out, err = next()
	if err != nil && ctx.Err() != nil {
		c.Doubt(context.WithoutCancel(ctx))
	}
	return out, err
}
