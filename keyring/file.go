package keyring

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrConflict reports a compare-and-swap write that lost: the keyset on
// disk is no longer the version the edit started from. Nothing was
// written; read the keyset again and redo the edit.
var ErrConflict = errors.New("keyring: keyset changed since it was read")

// ReadKeysetFile reads and validates the keyset at path. It does not
// unwrap any key.
func ReadKeysetFile(path string) (*Keyset, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	ks, err := ParseKeyset(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return ks, nil
}

// WriteKeysetFile writes ks to path if the keyset there is still the one
// ks was edited from, that is, if its version is ks.Version-1; with
// ks.Version 1 the file must not exist yet. Otherwise it returns
// ErrConflict and writes nothing.
//
// Writers on one host serialize on an advisory lock (path + ".lock"). The
// write is atomic: a temporary file in the same directory, fsync, rename
// over path, fsync of the directory. A crash at any moment leaves either
// the old keyset or the new one, whole.
//
// If path is a symbolic link (as Kubernetes mounts secrets and config
// maps), the file it finally names is edited, with the lock and the
// temporary file beside it, and the link stays. The new file keeps the old
// one's mode, owner and group, so servers running as another user keep
// reading it; a new file is mode 0600. If the owner or group cannot be
// kept, nothing is written.
func WriteKeysetFile(path string, ks *Keyset) error {
	data, err := ks.Marshal()
	if err != nil {
		return err
	}
	path, err = resolve(path)
	if err != nil {
		return err
	}
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return err
	}
	defer unlock()

	cur, err := ReadKeysetFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if ks.Version != 1 {
			return fmt.Errorf("%w: %s does not exist, but the edit started from version %d", ErrConflict, path, ks.Version-1)
		}
	case err != nil:
		return err
	case ks.Version == 1:
		return fmt.Errorf("%w: %s already exists (version %d)", ErrConflict, path, cur.Version)
	case cur.Version != ks.Version-1:
		return fmt.Errorf("%w: %s is at version %d, the edit started from version %d", ErrConflict, path, cur.Version, ks.Version-1)
	case cur.ID != ks.ID:
		return fmt.Errorf("%w: %s holds keyset %s, not %s", ErrConflict, path, cur.ID, ks.ID)
	}
	removeStaleTemps(path)
	return writeAtomic(path, data)
}

// resolve follows symbolic links to the file path finally names, which
// need not exist yet (its directory must).
func resolve(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err == nil {
		return real, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("keyring: %w", err)
	}
	// A dangling link names a file to create; follow it by hand.
	for range 40 {
		target, lerr := os.Readlink(path)
		if lerr != nil {
			return path, nil // not a link: a new file
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
	return "", fmt.Errorf("keyring: %s: too many levels of symbolic links", path)
}

// removeStaleTemps deletes temporary files that writers killed mid-write
// left behind. It runs under the lock, so no live writer owns one.
func removeStaleTemps(path string) {
	stale, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp"))
	for _, f := range stale {
		os.Remove(f)
	}
}

func writeAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("keyring: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = keepOwnership(f, path); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("keyring: writing %s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("keyring: syncing %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("keyring: %w", err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("keyring: %w", err)
	}
	// The rename is durable only once the directory entry is.
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("keyring: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("keyring: syncing %s: %w", dir, err)
	}
	return nil
}

// KeysetDir returns the directory that relative paths in the keyset at path
// (a local KEK file) are resolved against: the directory of the file the
// path finally names, through any symbolic links, as a Kubernetes secret
// mount presents it.
func KeysetDir(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return filepath.Dir(real)
	}
	return filepath.Dir(path)
}
