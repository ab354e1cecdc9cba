package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"testing"
)

var builds struct {
	mu   sync.Mutex
	bins map[string]*built
}

type built struct {
	once sync.Once
	path string
	err  error
}

// Build builds the main package pkg (an import path) once per test
// binary and returns the path of the program, for tests that run a
// command of this module as a process: the real binary, killed and
// restarted as an operator would.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	builds.mu.Lock()
	if builds.bins == nil {
		builds.bins = map[string]*built{}
	}
	b := builds.bins[pkg]
	if b == nil {
		b = &built{}
		builds.bins[pkg] = b
	}
	builds.mu.Unlock()
	b.once.Do(func() {
		// Not t.TempDir: the binary outlives the test that built it.
		d, err := os.MkdirTemp("", "stateseal-bin")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(d, path.Base(pkg))
		if out, err := exec.Command("go", "build", "-o", b.path, pkg).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}
