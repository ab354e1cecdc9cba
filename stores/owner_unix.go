//go:build unix

package stores

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// keepOwnership gives the temporary file f the mode, owner and group of
// the file at path it will replace, or mode 0600 if there is none yet.
func keepOwnership(f *os.File, path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := f.Chmod(0o600); err != nil {
			return fmt.Errorf("stores: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("stores: %w", err)
	}
	if err := f.Chmod(fi.Mode().Perm()); err != nil {
		return fmt.Errorf("stores: %w", err)
	}
	want, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil // no owners on this system
	}
	tmp, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stores: %w", err)
	}
	have := tmp.Sys().(*syscall.Stat_t)
	if have.Uid == want.Uid && have.Gid == want.Gid {
		return nil
	}
	if err := f.Chown(int(want.Uid), int(want.Gid)); err != nil {
		return fmt.Errorf("stores: %s belongs to uid %d, gid %d, and this process cannot give the new version the same (%w); "+
			"nothing was written: run as that user or a member of that group, or change the file's owner first", path, want.Uid, want.Gid, err)
	}
	return nil
}
