package integration_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
)

// historyHelper runs, in a process of its own, the honest editors the
// history tests set on a store an attacker wrote:
//
//   - "fresh-scheduler": a fresh instance, its Loader and a Scheduler
//     given that Loader, as every instance of a fleet may run; it loads
//     what the store holds, then ticks N times, Step apart from Step after it starts, and prints
//     "tick VERSION" for each write ("tick -" when it wrote nothing), or
//     "error ..." and stops;
//   - "refresh-current": an operator's sealctl refresh --current, on a
//     machine whose clock reads Now.
func historyHelper(ctx context.Context, s helperSpec, o *rotation.Options) int {
	fail := func(err error) int {
		fmt.Println("error", strings.ReplaceAll(err.Error(), "\n", " "))
		return 1
	}
	switch s.Op {
	case "refresh-current":
		o.Current = true
		res, err := rotation.Refresh(ctx, s.Location, o)
		if err != nil {
			return fail(err)
		}
		fmt.Printf("refreshed %d\n", res.Keyset.Version)
	case "fresh-scheduler":
		base := s.Now
		if base.IsZero() {
			base = time.Now()
		}
		var now time.Time
		clock := func() time.Time { return now }
		now = base
		l := &keyset.Loader{Path: s.Location, Logger: quiet, Options: keyset.LoadOptions{KEK: s.KEK, Now: clock}}
		if _, err := l.Load(ctx); err != nil {
			return fail(err)
		}
		defer l.Close()
		so := *o
		so.Now, so.Loader = clock, l
		sch := &rotation.Scheduler{Path: s.Location, Options: so}
		for i := range s.N {
			now = base.Add(time.Duration(i+1) * s.Step)
			tr, err := sch.Tick(ctx)
			if err != nil {
				return fail(err)
			}
			if tr.Rotated == 0 && tr.Retired == nil && !tr.Refreshed {
				fmt.Println("tick -")
				continue
			}
			if err := l.Reload(ctx); err != nil { // the instance follows its own write
				return fail(err)
			}
			fmt.Println("tick", l.Health().Version)
		}
	}
	return 0
}
