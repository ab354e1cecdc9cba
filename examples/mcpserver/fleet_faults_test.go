package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/seal"
)

// runFlow runs one flow of tool as cl and returns its states and the
// error of the round that failed, if any.
func runFlow(ctx context.Context, cl *client, tool string, n int) ([]string, error) {
	args := map[string]any{"n": n}
	res, err := cl.call(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	var states []string
	for err == nil && res.NeedsInput() {
		states = append(states, res.RequestState)
		res, err = cl.call(ctx, retry(tool, args, res.RequestState))
	}
	return states, err
}

// mustFlows runs n flows of tool and fails the test on any error.
func mustFlows(t *testing.T, cl *client, tool string, n int, what string) {
	t.Helper()
	for i := range n {
		if _, err := runFlow(context.Background(), cl, tool, i); err != nil {
			t.Fatalf("%s: %s flow %d: %v", what, tool, i, err)
		}
	}
}

const reloadFailed = "stateseal keyset reload failed"

// logCount counts s in every instance's log.
func (f *fleet) logCount(s string) int {
	n := 0
	for _, in := range f.instances {
		n += in.logCount(s)
	}
	return n
}

// reports returns each instance's count of reported reload failures.
func (f *fleet) reports() []int {
	var n []int
	for _, in := range f.instances[:3] {
		n = append(n, in.logCount(reloadFailed))
	}
	return n
}

// health returns what instance i's /healthz says.
func (f *fleet) health(t *testing.T, i int) keyset.Health {
	t.Helper()
	var h keyset.Health
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", f.instances[i].port))
	if err != nil {
		return h
	}
	defer resp.Body.Close()
	testkit.Check(json.NewDecoder(resp.Body).Decode(&h))
	return h
}

// waitHealth waits until what holds of the health of each of the first
// three instances (the fourth may be down in other tests).
func (f *fleet) waitHealth(t *testing.T, what string, ok func(keyset.Health) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for i := range f.instances[:3] {
		for !ok(f.health(t, i)) {
			if time.Now().After(deadline) {
				t.Fatalf("instance %d: %s: not within 30 s (%+v)", i, what, f.health(t, i))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// waitPolls waits until each of the first three instances has polled its
// keyset n more times.
func (f *fleet) waitPolls(t *testing.T, n uint64) {
	t.Helper()
	var from []uint64
	for i := range f.instances[:3] {
		from = append(from, f.health(t, i).Polls)
	}
	for i := range f.instances[:3] {
		deadline := time.Now().Add(60 * time.Second)
		for f.health(t, i).Polls < from[i]+n {
			if time.Now().After(deadline) {
				t.Fatalf("instance %d did not poll %d more times in 60 s", i, n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// checkReportedOnce fails unless every instance reported exactly one more
// failure than in before. A reload against a server that is down takes as
// long as its client's retries, so it waits for the reports first, then
// for several more polls.
func (f *fleet) checkReportedOnce(t *testing.T, before []int, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		done := true
		for i, n := range f.reports() {
			done = done && n > before[i]
		}
		if done {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.waitPolls(t, 6) // six more polls, each of which could report again
	for i, n := range f.reports() {
		if n-before[i] != 1 {
			t.Errorf("%s: instance %d reported %d failures, want 1", what, i, n-before[i])
		}
	}
}

// waitKey waits until every instance seals with key: each does once it
// has loaded the keyset that holds it.
func (f *fleet) waitKey(t *testing.T, cl *client, key uint32, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for i := range f.instances {
		for {
			res, err := cl.sessions[i].CallTool(context.Background(), &mcp.CallToolParams{Name: "fleet_flow", Arguments: map[string]any{"n": 0}})
			if err == nil && res.NeedsInput() && keyOf(res.RequestState) == key {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("instance %d does not seal with key %08x after %v", i, key, within)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestFleetFaults: the KMS stopped during a reload, the keyset store (and
// replay guard) stopped, the keyset corrupted in the store, and clocks
// within and beyond the skew. Instances keep serving with their last good
// keys, report each failure once, and recover when it is over; single-use
// tools fail closed while Redis is down and never run twice.
func TestFleetFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a fleet")
	}
	ctx := context.Background()
	// States live a minute here, so that one paid before an outage is
	// still valid after it: refused then for being used, not for age.
	f := newFleet(t, 3, true, keyring.Policy{PropagationDelay: 2 * time.Second, MaxTTL: time.Minute, Skew: 2 * time.Second})
	alice := connect(t, "alice", f.instances)
	mustFlows(t, alice, "fleet_flow", 5, "at start")

	t.Run("KMSDownDuringReload", func(t *testing.T) {
		// Rotate a copy of the keyset while the KMS is up, then stop the
		// KMS and put the rotated keyset in the store: every instance must
		// unwrap the new key, and cannot.
		s := testkit.Must(keyset.OpenStore(ctx, f.keyset, nil))
		data, rev := testkit.Must2(s.Read(ctx))
		copyPath := filepath.Join(t.TempDir(), "keyset.json")
		testkit.Check(os.WriteFile(copyPath, data, 0o600))
		res, err := rotation.Rotate(ctx, copyPath, &rotation.RotateOptions{Immediate: true}, f.o)
		if err != nil {
			t.Fatal(err)
		}
		next := testkit.Must(os.ReadFile(copyPath))
		before := f.reports()
		f.vault.Stop()
		if _, err := s.Write(ctx, next, rev); err != nil {
			t.Fatal(err)
		}
		f.waitHealth(t, "the KMS outage seen", func(h keyset.Health) bool { return h.Outage })
		mustFlows(t, alice, "fleet_flow", 20, "KMS down")
		mustFlows(t, alice, "fleet_pay", 5, "KMS down")
		f.checkReportedOnce(t, before, "KMS down")
		f.vault.Resume()
		f.waitKey(t, alice, res.Key, 10*time.Second)
		mustFlows(t, alice, "fleet_flow", 5, "KMS back")
	})

	t.Run("StoreAndGuardDown", func(t *testing.T) {
		states, err := runFlow(ctx, alice, "fleet_pay", 42)
		if err != nil {
			t.Fatal(err)
		}
		paid := states[len(states)-1]
		before := f.reports()
		f.redis.Stop()
		f.waitHealth(t, "the store outage seen", func(h keyset.Health) bool { return h.Outage })
		mustFlows(t, alice, "fleet_flow", 20, "Redis down")
		// Single use fails closed: the second round of a payment is refused
		// as unavailable, with a clear error, and does not run.
		_, err = runFlow(ctx, alice, "fleet_pay", 7)
		if reason(err) != "unavailable" {
			t.Fatalf("a single-use round with Redis down: %v, want reason unavailable", err)
		}
		f.checkReportedOnce(t, before, "store down")
		f.redis.Start()
		deadline := time.Now().Add(15 * time.Second)
		for {
			if _, err := runFlow(ctx, alice, "fleet_pay", 8); err == nil {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("payments did not recover with Redis: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// What was paid before the outage is still refused, as replayed.
		replayed := f.logCount("reason=replayed")
		if _, err := alice.call(ctx, retry("fleet_pay", map[string]any{"n": 42}, paid)); !rejected(err) || f.logCount("reason=replayed") != replayed+1 {
			t.Fatalf("a payment replayed after the outage: %v; instances logged %d replays, want %d", err, f.logCount("reason=replayed"), replayed+1)
		}
		// The loaders recovered: a rotation reaches every instance.
		res, err := rotation.Rotate(ctx, f.keyset, &rotation.RotateOptions{Immediate: true}, f.o)
		if err != nil {
			t.Fatal(err)
		}
		f.waitKey(t, alice, res.Key, 10*time.Second)
	})

	t.Run("KeysetCorrupted", func(t *testing.T) {
		s := testkit.Must(keyset.OpenStore(ctx, f.keyset, nil))
		good, rev := testkit.Must2(s.Read(ctx))
		before := f.reports()
		rev2, err := s.Write(ctx, []byte(`{"format": "stateseal-keyset-v3", "broken`), rev)
		if err != nil {
			t.Fatal(err)
		}
		f.waitHealth(t, "the broken keyset seen", func(h keyset.Health) bool { return h.Error != "" && !h.Outage })
		mustFlows(t, alice, "fleet_flow", 20, "keyset corrupted")
		f.checkReportedOnce(t, before, "keyset corrupted")
		if _, err := s.Write(ctx, good, rev2); err != nil {
			t.Fatal(err)
		}
		res, err := rotation.Rotate(ctx, f.keyset, &rotation.RotateOptions{Immediate: true}, f.o)
		if err != nil {
			t.Fatal(err)
		}
		f.waitKey(t, alice, res.Key, 10*time.Second)
	})

	t.Run("Clocks", func(t *testing.T) {
		// The keyset's skew is 2 s. One instance runs 1 s ahead, within it;
		// one 30 s ahead, beyond it.
		within := f.add(t, "ahead-1s", "-clock-offset", "1s")
		beyond := f.add(t, "ahead-30s", "-clock-offset", "30s")
		bob := connect(t, "bob", []*instance{f.instances[0], within})
		mustFlows(t, bob, "fleet_flow", 20, "clocks within the skew")
		far := connect(t, "bob", []*instance{beyond})
		near := connect(t, "bob", []*instance{f.instances[0]})
		args := map[string]any{"n": 1}
		res, err := far.call(ctx, &mcp.CallToolParams{Name: "fleet_flow", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		// Not yet valid is told to the client as "invalid".
		n := f.instances[0].logCount("reason=invalid")
		if _, err := near.call(ctx, retry("fleet_flow", args, res.RequestState)); !rejected(err) || f.instances[0].logCount("reason=invalid") != n+1 {
			t.Errorf("a state issued 30 s ahead, opened now: %v, want it refused as invalid (not yet valid)", err)
		}
		// The keyset's maximum TTL is a minute: 30 s ahead, a state sealed
		// now is still valid there. Beyond it, it has expired.
		_ = beyond
		res = testkit.Must(near.call(ctx, &mcp.CallToolParams{Name: "fleet_flow", Arguments: args}))
		if _, err := far.call(ctx, retry("fleet_flow", args, res.RequestState)); err != nil {
			t.Errorf("a state issued now, opened 30 s ahead with a minute to live: %v", err)
		}
		farther := f.add(t, "ahead-90s", "-clock-offset", "90s")
		farthest := connect(t, "bob", []*instance{farther})
		res = testkit.Must(near.call(ctx, &mcp.CallToolParams{Name: "fleet_flow", Arguments: args}))
		if _, err := farthest.call(ctx, retry("fleet_flow", args, res.RequestState)); !rejected(err) || farther.logCount("reason=expired") != 1 {
			t.Errorf("a state issued now, opened 90 s ahead: %v, want it refused as expired", err)
		}
	})
	fmt.Printf("fleet faults: KMS, store and guard down, keyset corrupted, clocks: served throughout with the last good keys\n")
}

// keyOf is the key id in a token's header.
func keyOf(tok string) uint32 {
	h, err := seal.Inspect(tok)
	if err != nil {
		return 0
	}
	return h.KeyID
}
