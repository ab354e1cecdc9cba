package stores_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/stores"
	"github.com/stateseal/stateseal/stores/storetest"
)

// fileHarness gives the suite keyset files; a file store has no client.
type fileHarness struct{ n int }

func (h *fileHarness) Registry() *stores.Registry { return stores.Default }

func (h *fileHarness) NewLocation(_ context.Context, t *testing.T) string {
	h.n++
	return filepath.Join(t.TempDir(), fmt.Sprintf("keyset-%d.json", h.n))
}

// Stop: a file has no server.
func (h *fileHarness) Stop(*testing.T) bool { return false }
func (h *fileHarness) Start(*testing.T)     {}

func TestFileConformance(t *testing.T) { storetest.Run(t, &fileHarness{}) }

// TestFileSizeBound (finding 9): a 16 MiB keyset file is refused by its
// size, before it is read: the read allocates far less than the file.
func TestFileSizeBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keyset.json")
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 16<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	s := stores.NewFile(path)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	_, _, err := s.Read(context.Background())
	runtime.ReadMemStats(&m1)
	if !errors.Is(err, stores.ErrTooLarge) || !strings.Contains(err.Error(), "1048576-byte") {
		t.Fatalf("Read of a 16 MiB file: %v, want ErrTooLarge naming the bound", err)
	}
	t.Logf("16 MiB file refused after allocating %d bytes: %v", m1.TotalAlloc-m0.TotalAlloc, err)
	if n := m1.TotalAlloc - m0.TotalAlloc; n > 64<<10 {
		t.Errorf("refusing a 16 MiB file allocated %d bytes: it was read", n)
	}
	if _, err := s.Write(context.Background(), make([]byte, stores.MaxSize+1), ""); !errors.Is(err, stores.ErrTooLarge) {
		t.Errorf("Write of MaxSize+1 bytes: %v, want ErrTooLarge", err)
	}
}
