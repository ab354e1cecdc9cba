//go:build !unix

package stores

import "os"

func openRead(path string) (*os.File, error) { return os.Open(path) }
