package keyset

import (
	"fmt"
	"time"
)

// What a Loader says between polls that its error log does not: that a
// failure ended, and that the installed keyset is about to go stale while
// it still loads. Nothing in an instance refreshes the keyset by itself
// unless it runs a rotation.Scheduler: a fleet whose editor stopped goes
// unready all at once, when the window ends, and these lines are the
// operator's notice days before.

// countdownStart is how long before its expiry the installed keyset is
// first warned about: 3 days, or 3/7 of a shorter freshness window. A
// scheduler refreshes the keyset when half of the window is left (3.5 days
// of the default 7), so a fleet whose scheduler or CronJob runs never sees
// the warning.
func countdownStart(freshness time.Duration) time.Duration {
	return min(72*time.Hour, freshness*3/7)
}

// afterReload runs after each poll or reload, with the loader's error
// before it: it logs a failure that ended, and the countdown.
func (l *Loader) afterReload(before error) {
	switch {
	case before == nil && l.lastErr != nil:
		l.failingSince = time.Now()
	case before != nil && l.lastErr == nil:
		args := []any{"store", l.name(), "keyset", l.current.ID, "version", l.current.Version, "was", before.Error()}
		if !l.failingSince.IsZero() {
			args = append(args, "after", time.Since(l.failingSince).Round(time.Millisecond).String())
		}
		l.logger().Info("stateseal keyset load recovered", args...)
		l.failingSince = time.Time{}
	}
	l.countdown()
}

// countdown warns that the installed keyset goes stale soon: once a day
// from countdownStart before its expiry, then once an hour in its last
// day (the first poll in each day or hour left logs; a restart logs
// again at once). A refresh that installs a later expiry ends it.
func (l *Loader) countdown() {
	ks := l.current
	if ks == nil || ks.Policy.Freshness == 0 {
		return
	}
	left := ks.Expires.Sub(l.Options.now())
	if left <= 0 || left > countdownStart(ks.Policy.Freshness) {
		l.countdownMark = ""
		return
	}
	unit := time.Hour
	if left > 24*time.Hour {
		unit = 24 * time.Hour
	}
	mark := fmt.Sprintf("%s %d×%s", ks.Expires.Format(time.RFC3339), (left+unit-1)/unit, unit)
	if mark == l.countdownMark {
		return
	}
	l.countdownMark = mark
	l.logger().Warn("stateseal keyset goes stale soon: nothing has refreshed it; run sealctl refresh (or a rotation.Scheduler) before it expires, or this instance, and every other one loading it, stops being ready",
		"store", l.name(), "keyset", ks.ID, "version", ks.Version,
		"expires", ks.Expires.Format(time.RFC3339), "in", left.Round(time.Second).String())
}
