//go:build !unix

package stores

import (
	"context"
	"errors"
)

func lockFile(context.Context, string) (func(), error) {
	return nil, errors.New("stores: writing keysets needs advisory file locks, which this platform lacks")
}
