//go:build !unix

package stores

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// keepOwnership gives the temporary file f the mode of the file at path it
// will replace, or mode 0600 if there is none yet. This platform has no
// Unix owners to keep.
func keepOwnership(f *os.File, path string) error {
	mode := fs.FileMode(0o600)
	fi, err := os.Stat(path)
	switch {
	case err == nil:
		mode = fi.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("stores: %w", err)
	}
	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("stores: %w", err)
	}
	return nil
}
