package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stateseal/stateseal/internal/testkit"
)

// TestFleetLoad is the load run of docs/BENCHMARKS.md: four instances,
// eight clients running three-round flows with every round on a random
// instance, for the duration in STATESEAL_FLEET_LOAD (say 20s) per
// configuration: sealing off, on, and on with every state single use in
// Redis. It prints throughput and latency per instance, and each
// instance's resident memory at the end. Unset, it is skipped: CI runs
// TestFleet, which checks correctness, not speed.
//
//	STATESEAL_FLEET_LOAD=20s go test -run TestFleetLoad -v ./examples/mcpserver
func TestFleetLoad(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("STATESEAL_FLEET_LOAD"))
	if err != nil {
		t.Skip("set STATESEAL_FLEET_LOAD=20s to run the load test")
	}
	f := newFleet(t, 0, false, fleetPolicy)
	for _, cfg := range []struct {
		name string
		args []string
	}{
		{"sealing off", []string{"-no-seal"}},
		{"sealing on", nil},
		{"sealing on, single use in Redis", []string{"-single-use", "fleet_flow"}},
	} {
		var fleet []*instance
		for i := range 4 {
			args := append([]string{"-keyset", f.keyset, "-kek", fleetKEK, "-audience", "fleet", "-principal-header", "X-User",
				"-replay", f.redis.URL(), "-poll", "1s"}, cfg.args...)
			fleet = append(fleet, startInstance(t, fmt.Sprintf("load-%d", i), f.env, args...))
		}
		lat := make([][]time.Duration, len(fleet))
		var mu sync.Mutex
		stop := time.Now().Add(d)
		var wg sync.WaitGroup
		for w := range 8 {
			cl := connect(t, fmt.Sprintf("user-%d", w), fleet)
			wg.Go(func() {
				for n := 0; time.Now().Before(stop); n++ {
					args := map[string]any{"n": n}
					state := ""
					for round := 0; round < 3; round++ {
						p := &mcp.CallToolParams{Name: "fleet_flow", Arguments: args}
						if state != "" {
							p = retry("fleet_flow", args, state)
						}
						i := rand.IntN(len(fleet))
						start := time.Now()
						res, err := cl.sessions[i].CallTool(context.Background(), p)
						el := time.Since(start)
						if err != nil {
							t.Errorf("%s: %v", cfg.name, err)
							return
						}
						mu.Lock()
						lat[i] = append(lat[i], el)
						mu.Unlock()
						state = res.RequestState
					}
				}
			})
		}
		wg.Wait()
		fmt.Printf("load: %s, %v, 8 clients, 3-round flows, rounds on random instances\n", cfg.name, d)
		total := 0
		for i, l := range lat {
			slices.Sort(l)
			total += len(l)
			fmt.Printf("load:   instance %d: %6.0f calls/s  p50 %6.2f ms  p99 %6.2f ms  RSS %3d MiB\n", i,
				float64(len(l))/d.Seconds(), ms(l[len(l)/2]), ms(l[len(l)*99/100]), rss(fleet[i])>>20)
		}
		fmt.Printf("load:   fleet: %.0f calls/s, %.0f flows/s\n", float64(total)/d.Seconds(), float64(total)/3/d.Seconds())
		for _, in := range fleet {
			in.kill()
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// rss reads the instance's resident memory from /proc.
func rss(in *instance) int {
	in.mu.Lock()
	pid := in.cmd.Process.Pid
	in.mu.Unlock()
	b := testkit.Must(os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)))
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb := testkit.Must(strconv.Atoi(f[1]))
			return kb << 10
		}
	}
	return 0
}
