package bench

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the process has used, its garbage
// collector's included. On a machine shared with other work, it measures
// what a benchmark costs, where wall time measures also how long it
// waited for a core.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
