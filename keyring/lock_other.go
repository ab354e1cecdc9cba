//go:build !unix

package keyring

import "errors"

func lockFile(string) (func(), error) {
	return nil, errors.New("keyring: writing keysets needs advisory file locks, which this platform lacks")
}
