package stores_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stateseal/stateseal/stores/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

type fileHarness struct{ n int }

func (h *fileHarness) Name() string { return "file" }

func (h *fileHarness) NewLocation(_ context.Context, t *testing.T) string {
	h.n++
	return filepath.Join(t.TempDir(), fmt.Sprintf("keyset-%d.json", h.n))
}

func (h *fileHarness) Stop(*testing.T) bool        { return false }
func (h *fileHarness) Start(*testing.T)            {}
func (h *fileHarness) PollInterval() time.Duration { return 100 * time.Millisecond }
func (h *fileHarness) MaxDelay() time.Duration     { return time.Second }

func TestFileConformance(t *testing.T) { storetest.Run(t, &fileHarness{}) }
