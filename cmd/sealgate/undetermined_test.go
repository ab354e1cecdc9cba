package main

import (
	"os"
	"testing"

	"github.com/stateseal/stateseal/internal/testservers"
)

// TestCaseShutdownCut: SIGTERM while a single-use call runs longer than
// -shutdown-timeout, against an upstream that stops, unpaid, when its
// client goes. The gateway cannot know whether the upstream acted, so
// the retry, through another gateway on the same Redis guard, is told
// "undetermined" (check before you repeat it), neither "replayed" (it
// did not run) nor run again; nothing was paid.
func TestCaseShutdownCut(t *testing.T) {
	r := testservers.StartRedisVolatile(t)
	ledger := newLedger(t)
	up := startPay(t, ledger)
	ks := keysetDir(t)
	a := startGatewayProc(t, "-upstream", up.URL(), "-keyset", ks, "-single-use", "pay", "-replay", r.URL(), "-shutdown-timeout", "1s")
	b := startGatewayProc(t, "-upstream", up.URL(), "-keyset", ks, "-single-use", "pay", "-replay", r.URL())
	long := map[string]any{"ms": 60000, "cut": true}
	waitFor(t, "a state Redis vouches for", func() bool {
		// A state sealed in Redis's first second may be unvouched.
		return pay(t, a.proxy, confirmable(t, a.proxy), 0).paid
	})
	s := payArgs(t, a.proxy, "", long).state
	cut := make(chan answer, 1)
	go func() { cut <- payArgs(t, a.proxy, s, long) }()
	waitFor(t, "the call in flight", func() bool { _, err := os.Stat(ledger + ".running"); return err == nil })
	a.stop()
	if got := <-cut; got.paid {
		t.Fatalf("the cut call: %v", got)
	}
	got := payArgs(t, b.proxy, s, long)
	if got.code != -32602 || got.reason != "undetermined" {
		t.Fatalf("the retry through another gateway: %v, want -32602 undetermined", got)
	}
	if n := total(executions(t, ledger)); n != 1 {
		t.Fatalf("%d executions, want 1: the first, paid, state's alone", n)
	}
}

// TestCaseUpstreamDiesMidCall: the upstream is killed (kill -9) while a
// single-use call runs: the connection resets after the request was
// written, so the retry is "undetermined"; a state the upstream never
// received (the next call, refused at the dial) is given back and runs
// once the upstream is back.
func TestCaseUpstreamDiesMidCall(t *testing.T) {
	ledger := newLedger(t)
	up := startPay(t, ledger)
	gw := startGatewayProc(t, "-upstream", up.URL(), "-keyset", keysetDir(t), "-single-use", "pay", "-replay", "memory")
	long := map[string]any{"ms": 60000, "cut": true}
	s, next := payArgs(t, gw.proxy, "", long).state, confirmable(t, gw.proxy)
	cut := make(chan answer, 1)
	go func() { cut <- payArgs(t, gw.proxy, s, long) }()
	waitFor(t, "the call in flight", func() bool { _, err := os.Stat(ledger + ".running"); return err == nil })
	up.kill()
	if got := <-cut; got.paid || got.code != -32603 {
		t.Fatalf("the cut call: %v", got)
	}
	if got := payArgs(t, gw.proxy, s, long); got.code != -32602 || got.reason != "undetermined" {
		t.Fatalf("its retry: %v, want -32602 undetermined", got)
	}
	if got := pay(t, gw.proxy, next, 0); got.paid || got.reason != "" {
		t.Fatalf("a state sent with no upstream: %v, want upstream unavailable", got)
	}
	up.start()
	if got := pay(t, gw.proxy, next, 0); !got.paid {
		t.Fatalf("the state no upstream received, once one is back: %v", got)
	}
	if got := payArgs(t, gw.proxy, s, long); got.reason != "undetermined" {
		t.Fatalf("the cut state, once the upstream is back: %v", got)
	}
	if n := executions(t, ledger); total(n) != 1 {
		t.Fatalf("executions %v, want the state no upstream received, once", n)
	}
}

// total counts the executions in n, of every state.
func total(n map[string]int) int {
	sum := 0
	for _, c := range n {
		sum += c
	}
	return sum
}
