//go:build linux

package main

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stateseal/stateseal/internal/testkit"
)

// TestHeapFloor runs the binary as the image builds it, with the
// runtime's trace of each garbage collection (GODEBUG=gctrace=1), through
// 1,000 first rounds: with the floor (GOGC unset) it collects at most
// once, with GOGC=100 (the floor off) at least three times. The floor's
// own pages are not resident (a gateway that has started is no larger
// with it than without), and the garbage it lets wait costs less than the floor:
// after the same rounds, the two differ by less than 32 MiB.
func TestHeapFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 requests through a built binary, twice")
	}
	up := startPay(t, newLedger(t))
	floor := gcRun(t, up.URL(), nil)
	off := gcRun(t, up.URL(), []string{"GOGC=100"})
	t.Logf("over 1,000 first rounds: %d collections with the floor, %d with GOGC=100; resident at the start %d and %d KiB, at the end %d and %d KiB",
		floor.gcs, off.gcs, floor.startKiB, off.startKiB, floor.endKiB, off.endKiB)
	if floor.gcs > 1 || off.gcs < 3 {
		t.Errorf("collections: %d with the floor (want at most 1), %d without (want 3 or more)", floor.gcs, off.gcs)
	}
	if d := floor.startKiB - off.startKiB; d >= 4096 {
		t.Errorf("resident at the start: %d KiB more with the floor: its pages are touched", d)
	}
	if d := floor.endKiB - off.endKiB; d*1024 >= heapFloor {
		t.Errorf("the floor costs %d KiB resident after the same rounds, not less than the floor (%d KiB)", d, heapFloor/1024)
	}
}

type gcResult struct{ gcs, startKiB, endKiB int }

func gcRun(t *testing.T, upstream string, env []string) gcResult {
	cmd := exec.Command(imageBinary(t), "-listen", "127.0.0.1:0", "-admin-listen", "", "-audience", "https://pay.test",
		"-principal", "anonymous", "-log-format", "text", "-upstream", upstream)
	cmd.Env = append([]string{"GODEBUG=gctrace=1"}, env...)
	stderr := testkit.Must(cmd.StderrPipe())
	testkit.Check(cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	var gcs atomic.Int64
	counting := atomic.Bool{}
	go func() {
		re := regexp.MustCompile(`msg="sealgate: proxying" addr=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
			if strings.HasPrefix(sc.Text(), "gc ") && counting.Load() {
				gcs.Add(1)
			}
		}
	}()
	gw := <-addr
	// The in-memory key is installed just after the proxy listens.
	waitFor(t, "the gateway ready", func() bool {
		resp, err := http.Get(gw + "/mcp")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode != http.StatusServiceUnavailable
	})
	confirmable(t, gw) // the first connections and whatever starting up left
	start := rss(t, cmd.Process.Pid)
	counting.Store(true)
	for range 1000 {
		if a := pay(t, gw, "", 0); a.state == "" {
			t.Fatalf("first round: %v", a)
		}
	}
	counting.Store(false)
	return gcResult{gcs: int(gcs.Load()), startKiB: start, endKiB: rss(t, cmd.Process.Pid)}
}

// rss is the process's resident memory in KiB.
func rss(t *testing.T, pid int) int {
	status := string(testkit.Must(os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")))
	m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindStringSubmatch(status)
	if m == nil {
		t.Fatalf("no VmRSS in %s", status)
	}
	return testkit.Must(strconv.Atoi(m[1]))
}
