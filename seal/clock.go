package seal

import (
	"sync/atomic"
	"time"
)

// wallClock is the default clock. time.Now reads two clocks (wall and
// monotonic), which on a virtual machine costs as much as the rest of the
// header work together. Token times have one-second resolution, so the wall
// time is derived from one monotonic reading and a wall time taken at most
// a second before; a step of the system clock takes effect within a second.
type wallClock struct {
	base atomic.Pointer[time.Time]
}

func (c *wallClock) now() time.Time {
	if b := c.base.Load(); b != nil {
		if d := time.Since(*b); d >= 0 && d < time.Second {
			return b.Add(d)
		}
	}
	t := time.Now()
	c.base.Store(&t)
	return t
}
