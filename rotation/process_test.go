package rotation

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
)

// The tests below run rotations in separate processes: this test binary,
// started again with STATESEAL_ROTATE_HELPER set.
func TestMain(m *testing.M) {
	if spec := os.Getenv("STATESEAL_ROTATE_HELPER"); spec != "" {
		os.Exit(helper(spec))
	}
	os.Exit(m.Run())
}

// helper rotates the keyset at path n times (n < 0: until killed) and
// prints one line per attempt: "ok VERSION KEYID" or "conflict".
func helper(spec string) int {
	var path string
	var n int
	_ = testkit.Must(fmt.Sscanf(spec, "%d %s", &n, &path))
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for i := 0; n < 0 || i < n; i++ {
		res, err := Rotate(ctx, path, nil, &Options{KEK: "local:kek", Logger: discard})
		switch {
		case errors.Is(err, keyset.ErrConflict):
			fmt.Fprintln(out, "conflict")
		case err != nil:
			fmt.Fprintln(out, "error", err)
			return 1
		default:
			fmt.Fprintf(out, "ok %d %08x\n", res.Keyset.Version, res.Key)
		}
		if n < 0 {
			out.Flush()
		}
	}
	return 0
}

func helperCmd(path string, n int) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("STATESEAL_ROTATE_HELPER=%d %s", n, path))
	return cmd
}

// TestKillDuringRotation kills a process that rotates in a loop with
// SIGKILL at random moments, 50 times. After every kill the keyset parses
// and holds every key that was in it before.
func TestKillDuringRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path, _, _ := setup(t)
	seen := map[uint32]bool{}
	for _, k := range read(t, path).Keys {
		seen[k.ID] = true
	}
	var lastVersion uint64 = 1
	for i := range 50 {
		cmd := helperCmd(path, -1)
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill the process once it has made a random number of attempts:
		// it is then rotating in a loop, so the kill lands somewhere in
		// an edit, however slow the machine, never before the first.
		var out strings.Builder
		lines := bufio.NewScanner(pipe)
		for n := 1 + rand.IntN(3); n > 0 && lines.Scan(); n-- {
			fmt.Fprintln(&out, lines.Text())
		}
		cmd.Process.Signal(syscall.SIGKILL)
		for lines.Scan() { // what it wrote before it died
			fmt.Fprintln(&out, lines.Text())
		}
		cmd.Wait()
		if strings.Contains(out.String(), "error") {
			t.Fatalf("kill %d: the rotating process failed: %s", i, out.String())
		}
		ks, err := keyset.ReadFile(context.Background(), path)
		if err != nil {
			t.Fatalf("kill %d: keyset does not parse: %v", i, err)
		}
		if ks.Version < lastVersion {
			t.Fatalf("kill %d: version went back from %d to %d", i, lastVersion, ks.Version)
		}
		have := map[uint32]bool{}
		for _, k := range ks.Keys {
			have[k.ID] = true
		}
		for id := range seen {
			if !have[id] {
				t.Fatalf("kill %d: key %08x, committed before, is gone", i, id)
			}
		}
		// Every rotation the process reported committed is on disk too.
		for _, line := range strings.Split(out.String(), "\n") {
			var v uint64
			var id uint32
			if _, err := fmt.Sscanf(line, "ok %d %x", &v, &id); err == nil && !have[id] {
				t.Fatalf("kill %d: reported key %08x is not on disk", i, id)
			}
		}
		seen, lastVersion = have, ks.Version
	}
	t.Logf("after 50 kills: version %d, %d keys", lastVersion, len(seen))
	// Killed writers leave temporary files; the next write clears them.
	if _, err := Rotate(ctx, path, nil, &Options{KEK: "local:kek", Logger: discard}); err != nil {
		t.Fatal(err)
	}
	if tmp := testkit.Must(filepath.Glob(filepath.Join(filepath.Dir(path), ".*.tmp"))); len(tmp) != 0 {
		t.Fatalf("temporary files left after a clean write: %v", tmp)
	}
}

// Two processes rotating at once, and four schedulers ticking at once, are
// tested against every store, this file included, in internal/integration.

// TestSchedulerRetires: once the old key's tokens have all expired, a
// tick retires it; before, it does not.
func TestSchedulerRetires(t *testing.T) {
	path, clk, o := setup(t)
	old := read(t, path).Keys[0].ID
	s := &Scheduler{Path: path, Options: *o}
	clk.advance(keyring.DefaultPolicy().RotationInterval)
	tr, err := s.Tick(ctx)
	if err != nil || tr.Rotated == 0 || len(tr.Retired) != 0 {
		t.Fatalf("first tick: %+v, %v", tr, err)
	}
	clk.advance(10*time.Minute + time.Hour) // activation + max TTL, skew not yet
	if tr := testkit.Must(s.Tick(ctx)); tr.Rotated != 0 || len(tr.Retired) != 0 {
		t.Fatalf("tick before it is safe: %+v", tr)
	}
	clk.advance(30 * time.Second)
	if tr := testkit.Must(s.Tick(ctx)); len(tr.Retired) != 1 || tr.Retired[0] != old {
		t.Fatalf("tick once safe: %+v", tr)
	}
}
