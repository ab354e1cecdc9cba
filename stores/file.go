package stores

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// A File is a keyset in a file on this host. Its revision is the SHA-256
// of the file's bytes. Writers on one host serialize on an advisory lock
// (the file's name + ".lock"), which a write waits for until its context
// is done (ErrLocked); a write is atomic (temporary file in the
// same directory, fsync, rename, fsync of the directory), so a crash
// leaves the old document or the new one, whole.
//
// A path reached through symbolic links (as Kubernetes mounts secrets and
// config maps) is written where the links finally point: the lock and the
// temporary file go beside that file, and the links stay. A write keeps
// the file's mode, owner and group (a new file is mode 0600); if it cannot
// keep them, it writes nothing.
type File struct {
	path string
}

// ErrLocked reports a write that gave up on the keyset's lock: another
// writer held it until the write's context was done. Whoever can write the
// store can hold the lock; an editor must not hang on it for ever.
var ErrLocked = errors.New("stores: the keyset's lock is held by another writer")

var _ Store = (*File)(nil)

// NewFile returns the file store at path. It holds no connection: there
// is nothing to close.
func NewFile(path string) *File { return &File{path: path} }

// String is the file's path.
func (f *File) String() string { return f.path }

// Dir is the directory that relative paths in the keyset (a local KEK
// file) resolve against: that of the file the path finally names, through
// every symbolic link (keyset.json -> ..data/keyset.json, ..data ->
// ..2026_11_30, as Kubernetes mounts). For a file not written yet, it is
// the directory Write will create it in.
func (f *File) Dir() string {
	if real, err := filepath.EvalSymlinks(f.path); err == nil {
		return filepath.Dir(real)
	}
	path, err := resolve(f.path)
	if err != nil {
		path = f.path
	}
	dir := filepath.Dir(path)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		return real
	}
	return dir
}

func revision(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Read returns the file's bytes and their SHA-256.
func (f *File) Read(context.Context) ([]byte, string, error) {
	data, err := readFile(f.path)
	if err != nil {
		return nil, "", err
	}
	return data, revision(data), nil
}

// readFile reads at most MaxSize bytes: a larger file is refused by its
// size before it is read, and one that grows while it is read (or a pipe)
// once MaxSize+1 bytes have been read.
func readFile(path string) ([]byte, error) {
	f, err := openRead(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		// A FIFO, a device or a socket is no keyset, and reading one may
		// block or never end.
		return nil, fmt.Errorf("stores: %s is not a regular file (%v)", path, fi.Mode().Type())
	}
	if fi.Size() > MaxSize {
		return nil, TooLarge("stores: "+path, fi.Size())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSize {
		return nil, TooLarge("stores: "+path, -1)
	}
	return data, nil
}

// Write replaces the file if its bytes still hash to rev ("": if it does
// not exist).
func (f *File) Write(ctx context.Context, data []byte, rev string) (string, error) {
	if len(data) > MaxSize {
		return "", TooLarge("stores: "+f.path, int64(len(data)))
	}
	path, err := resolve(f.path)
	if err != nil {
		return "", err
	}
	unlock, err := lockFile(ctx, path+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	cur, err := readFile(path)
	switch {
	case errors.Is(err, ErrNotFound):
		if rev != "" {
			return "", fmt.Errorf("%w: %s no longer exists", ErrConflict, path)
		}
	case err != nil:
		return "", err
	case rev == "":
		return "", fmt.Errorf("%w: %s already exists", ErrConflict, path)
	case revision(cur) != rev:
		return "", fmt.Errorf("%w: %s was written since it was read", ErrConflict, path)
	}
	removeStaleTemps(path)
	if err := writeAtomic(path, data); err != nil {
		return "", err
	}
	return revision(data), nil
}

// resolve follows symbolic links to the file path finally names, which
// need not exist yet (its directory must).
func resolve(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err == nil {
		return real, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("stores: %w", err)
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
	return "", fmt.Errorf("stores: %s: too many levels of symbolic links", path)
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
		return fmt.Errorf("stores: %w", err)
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
		return fmt.Errorf("stores: writing %s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("stores: syncing %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("stores: %w", err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("stores: %w", err)
	}
	// The rename is durable only once the directory entry is.
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("stores: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("stores: syncing %s: %w", dir, err)
	}
	return nil
}
