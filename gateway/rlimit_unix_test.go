//go:build unix

package gateway

import "syscall"

// raiseFiles raises the open files limit to n if it is lower and the
// process may; it returns the limit and whether it is at least n.
func raiseFiles(n int) (int, bool) {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
		return 0, false
	}
	if l.Cur >= uint64(n) {
		return int(l.Cur), true
	}
	want := syscall.Rlimit{Cur: uint64(n), Max: max(l.Max, uint64(n))}
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) != nil {
		want = syscall.Rlimit{Cur: l.Max, Max: l.Max}
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want)
		return int(l.Max), l.Max >= uint64(n)
	}
	return n, true
}
