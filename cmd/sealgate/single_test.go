package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testservers"
)

// The cases of issue 23, each against the sealgate binary and pay
// upstreams in processes of their own; every case counts executions per
// state: never 2, and never 0 for a state answered "replayed".

// noDoubles fails if a state ran twice, or if one answered replayed
// never ran.
func noDoubles(t *testing.T, ledger string, replayed ...string) map[string]int {
	t.Helper()
	n := executions(t, ledger)
	for s, k := range n {
		if k > 1 {
			t.Errorf("state %s executed %d times", s, k)
		}
	}
	for _, s := range replayed {
		if n[s] == 0 {
			t.Errorf("state %s answered replayed, executed 0 times", s)
		}
	}
	return n
}

// TestCaseDeadUpstream (case 1): with -upstream a,b and a killed -9, no
// request is lost to it and no state is burned: every flow pays once.
// With both dead, the confirmation is answered "upstream unavailable; try
// again" and its state stays usable: once b is back, the same retry pays,
// once.
func TestCaseDeadUpstream(t *testing.T) {
	ledger := newLedger(t)
	a, b := startPay(t, ledger), startPay(t, ledger)
	gw := startGatewayProc(t, "-upstream", a.URL()+","+b.URL(), "-keyset", keysetDir(t), "-single-use", "pay")
	a.kill()
	const flows = 10
	for i := range flows {
		s := confirmable(t, gw.proxy)
		if got := pay(t, gw.proxy, s, 0); !got.paid {
			t.Fatalf("flow %d with upstream a dead: %v", i, got)
		}
	}
	s := confirmable(t, gw.proxy)
	b.kill()
	got := pay(t, gw.proxy, s, 0)
	if got.code != -32603 || !strings.Contains(got.msg, "try again") {
		t.Fatalf("both upstreams dead: %v, want -32603 upstream unavailable; try again", got)
	}
	b.start()
	if got := pay(t, gw.proxy, s, 0); !got.paid {
		t.Fatalf("the retry once b is back: %v, want paid (the state was not burned)", got)
	}
	if got := pay(t, gw.proxy, s, 0); got.reason != "replayed" {
		t.Fatalf("then: %v, want replayed", got)
	}
	if n := noDoubles(t, ledger); len(n) != flows+1 {
		t.Fatalf("%d states executed, want %d", len(n), flows+1)
	}
	if !strings.Contains(gw.Logs(), "out of turn") {
		t.Error("no log of the upstream taken out of turn")
	}
}

// TestCaseRestart (case 2): with the memory guard, a completed payment
// sent again after a restart of the gateway is refused "unvouched" (start
// again), not executed again; an unused state from before too.
func TestCaseRestart(t *testing.T) {
	ledger := newLedger(t)
	up := startPay(t, ledger)
	args := []string{"-upstream", up.URL(), "-keyset", keysetDir(t), "-single-use", "pay"}
	gw := startGatewayProc(t, args...)
	done, unused := confirmable(t, gw.proxy), confirmable(t, gw.proxy)
	if got := pay(t, gw.proxy, done, 0); !got.paid {
		t.Fatal(got)
	}
	gw.stop()
	gw = startGatewayProc(t, args...)
	for _, s := range []string{done, unused} {
		if got := pay(t, gw.proxy, s, 0); got.reason != "unvouched" || got.code != -32602 {
			t.Fatalf("after a restart: %v, want -32602 unvouched", got)
		}
	}
	if got := pay(t, gw.proxy, confirmable(t, gw.proxy), 0); !got.paid {
		t.Fatalf("a new flow: %v", got)
	}
	if n := noDoubles(t, ledger); len(n) != 2 {
		t.Fatalf("%d states executed, want 2", len(n))
	}
}

// TestCaseFleetMemory (case 3): a keyset in Redis with single use and
// the default memory guard does not start; two gateways that share a
// keyset file with -replay memory refuse each other's states
// "unvouched", never execute one twice.
func TestCaseFleetMemory(t *testing.T) {
	rs := testservers.StartRedis(t)
	out, err := exec.Command(imageBinary(t), "-upstream", "http://127.0.0.1:1", "-audience", "a", "-principal", "anonymous",
		"-keyset", rs.URL()+"?key=k", "-kek", "local://env/K", "-single-use", "pay").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "-replay redis://") {
		t.Fatalf("a shared keyset with the memory guard: %v %s", err, out)
	}
	ledger := newLedger(t)
	up := startPay(t, ledger)
	ks := keysetDir(t)
	args := []string{"-upstream", up.URL(), "-keyset", ks, "-single-use", "pay", "-replay", "memory"}
	g1, g2 := startGatewayProc(t, args...), startGatewayProc(t, args...)
	s := confirmable(t, g1.proxy)
	if got := pay(t, g1.proxy, s, 0); !got.paid {
		t.Fatal(got)
	}
	if got := pay(t, g2.proxy, s, 0); got.reason != "unvouched" {
		t.Fatalf("a replay through the other gateway: %v, want unvouched", got)
	}
	noDoubles(t, ledger)
}

// TestCaseRedisRestart (case 5): after Redis restarts without
// persistence, states issued before get "unvouched" (start again), not
// "unavailable" for ever; new flows pay once. Concurrent duplicates of one
// state execute once: the others get replayed, or unavailable (its use is
// unconfirmed), never pay.
func TestCaseRedisRestart(t *testing.T) {
	r := testservers.StartRedisVolatile(t)
	ledger := newLedger(t)
	up := startPay(t, ledger)
	gw := startGatewayProc(t, "-upstream", up.URL(), "-keyset", keysetDir(t), "-single-use", "pay", "-replay", r.URL())
	var replayed []string
	flow := func() {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; {
			s := confirmable(t, gw.proxy)
			got := pay(t, gw.proxy, s, 0)
			if got.paid {
				return
			}
			if got.reason != "unavailable" && got.reason != "unvouched" || time.Now().After(deadline) {
				t.Fatalf("a new flow: %v", got)
			}
		}
	}
	flow()
	done, unused := confirmable(t, gw.proxy), confirmable(t, gw.proxy)
	if got := pay(t, gw.proxy, done, 0); !got.paid {
		t.Fatalf("before the restart: %v", got)
	}
	r.Stop()
	r.Start()
	for _, s := range []string{done, unused} {
		waitFor(t, "an answer from Redis", func() bool {
			got := pay(t, gw.proxy, s, 0)
			if got.reason == "unavailable" {
				return false // still reconnecting
			}
			if got.reason != "unvouched" {
				t.Fatalf("after a restart without persistence: %v, want unvouched", got)
			}
			return true
		})
	}
	flow()
	// Concurrent duplicates.
	answers := map[string]int{}
	for range 10 {
		s := confirmable(t, gw.proxy)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := pay(t, gw.proxy, s, 0)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case got.paid:
					answers["paid"]++
				case got.reason == "replayed":
					answers["replayed"]++
					replayed = append(replayed, s)
				default:
					answers[fmt.Sprint(got.reason)]++
				}
			}()
		}
		wg.Wait()
	}
	t.Logf("40 concurrent duplicates of 10 states: %v", answers)
	if answers["paid"] > 10 {
		t.Fatalf("answers %v", answers)
	}
	noDoubles(t, ledger)
}

// TestCaseShutdown (case 4): SIGTERM while a single-use call runs: the
// gateway drains it within -shutdown-timeout, the client gets its
// result, and the state executed once.
func TestCaseShutdown(t *testing.T) {
	ledger := newLedger(t)
	up := startPay(t, ledger)
	gw := startGatewayProc(t, "-upstream", up.URL(), "-keyset", keysetDir(t), "-single-use", "pay")
	a := pay(t, gw.proxy, "", 1500)
	s := a.state
	if s == "" {
		t.Fatal(a)
	}
	got := make(chan answer, 1)
	go func() { got <- pay(t, gw.proxy, s, 1500) }()
	waitFor(t, "the call in flight", func() bool { _, err := os.Stat(ledger + ".running"); return err == nil })
	gw.stop()
	if a := <-got; !a.paid {
		t.Fatalf("a call in flight at SIGTERM: %v, want paid", a)
	}
	noDoubles(t, ledger)
}

// TestCaseRedisFrozen (SIGSTOP): with the guard's Redis hung, a
// confirmation is answered unavailable (retry) and does not pay; once
// Redis runs again, the same confirmation pays, once.
func TestCaseRedisFrozen(t *testing.T) {
	r := testservers.StartRedisVolatile(t)
	ledger := newLedger(t)
	up := startPay(t, ledger)
	gw := startGatewayProc(t, "-upstream", up.URL(), "-keyset", keysetDir(t), "-single-use", "pay",
		"-replay", r.URL()+"?max_retries=-1&dialer_retries=1&dial_timeout=200ms")
	var s string
	waitFor(t, "a state Redis vouches for", func() bool {
		s = confirmable(t, gw.proxy)
		got := pay(t, gw.proxy, s, 0)
		if got.paid {
			s = confirmable(t, gw.proxy)
			return true
		}
		return false
	})
	r.Freeze()
	got := pay(t, gw.proxy, s, 0)
	r.Thaw()
	if got.code != -32603 || got.reason != "unavailable" {
		t.Fatalf("Redis frozen: %v, want -32603 unavailable", got)
	}
	waitFor(t, "the retry to pay", func() bool {
		got := pay(t, gw.proxy, s, 0)
		if got.reason != "" && got.reason != "unavailable" {
			t.Fatalf("the retry after SIGCONT: %v", got)
		}
		return got.paid
	})
	if n := noDoubles(t, ledger); n[""] != 0 || len(n) != 2 {
		t.Fatalf("executions %v, want 2 states once each", n)
	}
}

// TestReadyVouches: two gateways on a Redis that has just started, as a
// probe that starts flows at the first /readyz 200 sees them: not one
// single-use state sealed after readiness is refused "unvouched" (Redis
// vouches from the end of its start second, plus the clock margin, and a
// token's issued-at is in whole seconds: readiness waits for that), and
// each pays once. Half the flows are confirmed through the other
// gateway.
func TestReadyVouches(t *testing.T) {
	r := testservers.StartRedisVolatile(t)
	ledger := newLedger(t)
	up := startPay(t, ledger)
	args := []string{"-upstream", up.URL(), "-keyset", keysetDir(t), "-single-use", "pay", "-replay", r.URL()}
	a := startGatewayProc(t, args...) // returns at its first /readyz 200
	const flows = 25
	var refused []answer
	for range flows {
		if got := pay(t, a.proxy, confirmable(t, a.proxy), 0); !got.paid {
			refused = append(refused, got)
		}
	}
	b := startGatewayProc(t, args...)
	for range flows {
		if got := pay(t, b.proxy, confirmable(t, a.proxy), 0); !got.paid {
			refused = append(refused, got)
		}
	}
	if len(refused) > 0 {
		t.Fatalf("%d of %d flows started after readiness were refused, first: %v", len(refused), 2*flows, refused[0])
	}
	if n := noDoubles(t, ledger); len(n) != 2*flows {
		t.Fatalf("%d states executed, want %d", len(n), 2*flows)
	}
}
