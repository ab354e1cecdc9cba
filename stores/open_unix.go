//go:build unix

package stores

import (
	"os"
	"syscall"
)

// openRead opens path for reading without blocking: a FIFO put where the
// keyset belongs would otherwise hold open(2), and the loader, forever.
func openRead(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
