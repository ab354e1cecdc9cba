package keyset

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/stateseal/stateseal/stores"
)

// ErrConflict reports a compare-and-swap write that lost: the store no
// longer holds the keyset the edit started from. Nothing was written;
// read the keyset again and redo the edit. It is stores.ErrConflict,
// named here too because the docs and callers of keyset's editors test
// for it without importing stores.
var ErrConflict = stores.ErrConflict

// Read reads and validates the keyset in s, with the store's
// revision for a later Write. It does not unwrap any key, nor check
// the keyset's authentication (see Verify).
func Read(ctx context.Context, s stores.Store) (*Keyset, string, error) {
	data, rev, err := s.Read(ctx)
	if err != nil {
		return nil, "", storeError(s.String(), err)
	}
	ks, err := Parse(data)
	if err != nil {
		return nil, "", fmt.Errorf("%w (in %s)", err, s)
	}
	return ks, rev, nil
}

// Write writes ks to s if s still holds revision rev, the one ks was
// edited from ("" for a new keyset, whose version must be 1), and returns
// the new revision. Otherwise it returns ErrConflict and writes nothing.
// Call Authenticate first.
func Write(ctx context.Context, s stores.Store, ks *Keyset, rev string) (string, error) {
	data, err := ks.Marshal()
	if err != nil {
		return "", err
	}
	if (rev == "") != (ks.Version == 1) {
		return "", fmt.Errorf("keyset: keyset %s version %d cannot be written as a new keyset, nor version 1 over an old one", ks.ID, ks.Version)
	}
	rev, err = s.Write(ctx, data, rev)
	if err != nil {
		return "", storeError(s.String(), err)
	}
	return rev, nil
}

// ReadFile reads and validates the keyset at path. It does not
// unwrap any key.
func ReadFile(ctx context.Context, path string) (*Keyset, error) {
	ks, _, err := Read(ctx, stores.NewFile(path))
	return ks, err
}

// WriteFile writes ks to the file at path if the keyset there is
// still the one ks was edited from, that is, if its version is
// ks.Version-1 and its id the same; with ks.Version 1 the file must not
// exist yet. Otherwise it returns ErrConflict and writes nothing. The file
// store (stores.File) says how: a lock, an atomic rename, symbolic links
// followed, mode and owner kept.
func WriteFile(ctx context.Context, path string, ks *Keyset) error {
	f := stores.NewFile(path)
	cur, rev, err := Read(ctx, f)
	switch {
	case errors.Is(err, stores.ErrNotFound):
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
	_, err = Write(ctx, f, ks, rev)
	return err
}

// keysetDir returns the directory that relative paths in the keyset at path
// (a local KEK file) are resolved against: the directory of the file the
// path finally names, through any symbolic links, as a Kubernetes secret
// mount presents it.
func keysetDir(path string) string { return stores.NewFile(path).Dir() }

// storeError names the store in err, unless err names it already (the
// stores name themselves, redacted): one name per error, not two.
func storeError(name string, err error) error {
	if strings.Contains(err.Error(), name) {
		return fmt.Errorf("keyset: %w", err)
	}
	return fmt.Errorf("keyset: %s: %w", name, err)
}
