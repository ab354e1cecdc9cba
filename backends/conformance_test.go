package backends_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/backends/kektest"
)

// localHarness runs the KEK conformance suite against the local backend.
type localHarness struct {
	dir string
	n   int
}

func (h *localHarness) Registry() *backends.Registry { return backends.Default }

func (h *localHarness) NewKey(ctx context.Context, t *testing.T) string {
	h.n++
	path := filepath.Join(h.dir, fmt.Sprintf("kek-%d", h.n))
	if err := backends.GenerateLocal(path); err != nil {
		t.Fatal(err)
	}
	return "local:" + path
}

func (h *localHarness) RotatableKey(context.Context, *testing.T) (string, func(), bool) {
	return "", nil, false // a local key has no versions: rewrap to a new file instead
}

// Stop: the local KEK has no server.
func (h *localHarness) Stop(*testing.T) bool { return false }
func (h *localHarness) Start(*testing.T)     {}

func TestLocalConformance(t *testing.T) {
	kektest.Run(t, &localHarness{dir: t.TempDir()})
}
