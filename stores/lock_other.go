//go:build !unix

package stores

import "errors"

func lockFile(string) (func(), error) {
	return nil, errors.New("stores: writing keysets needs advisory file locks, which this platform lacks")
}
