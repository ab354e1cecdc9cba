package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/replay/redisguard"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/seal"
	"github.com/stateseal/stateseal/stores/redis"
)

// fleet is four instances of the example server sharing a keyset in
// Redis, wrapped by a Vault transit key, and a Redis replay guard.
type fleet struct {
	redis     *testservers.Redis
	vault     *testservers.Vault
	keyset    string // the store URL
	env       []string
	instances []*instance
	o         *rotation.Options
}

// fleetKEK is the KEK every instance is configured to trust.
const fleetKEK = "vault://transit/keys/fleet"

// fleetPolicy: a short propagation delay and token lifetime, so that a
// rotation and a safe retirement fit in a test.
var fleetPolicy = keyring.Policy{PropagationDelay: 2 * time.Second, MaxTTL: 5 * time.Second, Skew: 2 * time.Second}

func newFleet(t *testing.T, n int, persistentVault bool, p keyring.Policy) *fleet {
	f := &fleet{redis: testservers.StartRedis(t), o: &rotation.Options{KEK: fleetKEK, Logger: slog.New(slog.DiscardHandler)}}
	if persistentVault {
		f.vault = testservers.StartVaultServer(t)
	} else {
		f.vault = testservers.StartVault(t)
	}
	f.vault.Env(t)
	vc, err := api.NewClient(&api.Config{Address: f.vault.URL()})
	if err != nil {
		t.Fatal(err)
	}
	vc.SetToken(f.vault.Token)
	if err := vc.Sys().Mount("transit", &api.MountInput{Type: "transit"}); err != nil {
		t.Fatal(err)
	}
	if _, err := vc.Logical().Write("transit/keys/fleet", nil); err != nil {
		t.Fatal(err)
	}
	f.keyset = f.redis.URL() + "?key=stateseal:fleet"
	if _, err := rotation.Init(context.Background(), f.keyset, fleetKEK, keyring.AEAD, p, f.o); err != nil {
		t.Fatal(err)
	}
	f.env = []string{"VAULT_ADDR=" + f.vault.URL(), "VAULT_TOKEN=" + f.vault.Token}
	for i := range n {
		f.add(t, fmt.Sprintf("instance-%d", i))
	}
	f.waitSingleUse(t)
	return f
}

// waitSingleUse waits until states sealed now are past the Redis guard's
// epoch: a Redis that just started vouches only for states sealed from
// the second after its start plus the clock margin (docs/FLEET.md), and
// this fleet starts along with its Redis.
func (f *fleet) waitSingleUse(t *testing.T) {
	client, err := redis.NewClient(f.redis.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	g := redisguard.New(client, nil)
	defer g.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		et, err := g.Epoch(context.Background())
		if err == nil && !time.Now().Truncate(time.Second).Before(et.Add(redisguard.DefaultClockMargin)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the single-use epoch did not pass: %v %v", et, err)
		}
	}
}

func (f *fleet) add(t *testing.T, name string, extra ...string) *instance {
	args := append([]string{"-keyset", f.keyset, "-kek", fleetKEK, "-audience", "fleet", "-principal-header", "X-User",
		"-single-use", "fleet_pay", "-replay", f.redis.URL(), "-poll", "500ms"}, extra...)
	in := startInstance(t, name, f.env, args...)
	f.instances = append(f.instances, in)
	return in
}

// counts are the fleet test's verdict.
type counts struct {
	flows, rejectedValid, replaysAccepted, forgedAccepted, attacks atomic.Int64
	unanswered                                                     atomic.Int64
	mu                                                             sync.Mutex
	keys                                                           map[uint32]time.Time // key id -> last time a client got a token of it
	firstErr                                                       string
}

func (c *counts) sawToken(tok string) {
	h, err := seal.Inspect(tok)
	if err != nil {
		return
	}
	c.mu.Lock()
	c.keys[h.KeyID] = time.Now()
	c.mu.Unlock()
}

func (c *counts) reject(what string, err error) {
	c.rejectedValid.Add(1)
	c.mu.Lock()
	if c.firstErr == "" {
		c.firstErr = what + ": " + err.Error()
	}
	c.mu.Unlock()
}

// flow runs one multi-round flow as cl, each round on a random instance,
// and hands its states to the attacker.
func flow(ctx context.Context, cl *client, tool string, n int, c *counts, attack chan<- stolen) {
	args := map[string]any{"n": n}
	res, err := cl.call(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	var states []string
	for err == nil && res.NeedsInput() {
		states = append(states, res.RequestState)
		c.sawToken(res.RequestState)
		res, err = cl.call(ctx, retry(tool, args, res.RequestState))
	}
	switch {
	case err != nil && rejected(err):
		c.reject(fmt.Sprintf("%s %s round %d", cl.user, tool, len(states)+1), err)
		return
	case err != nil:
		c.unanswered.Add(1)
		return
	}
	want := fmt.Sprintf("paid %d", n)
	if tool == "fleet_flow" {
		want = fmt.Sprintf("flow %d done after 3 rounds", n)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != want {
		c.reject(tool, fmt.Errorf("answer %q, want %q", got, want))
		return
	}
	c.flows.Add(1)
	select {
	case attack <- stolen{user: cl.user, tool: tool, args: args, states: states}:
	default: // the attacker is busy; flows do not wait for it
	}
}

// stolen is a completed flow's states, as a client that kept them has.
type stolen struct {
	user   string
	tool   string
	args   map[string]any
	states []string
}

// attacker tries every stolen state where it must not open: again on a
// single-use tool, on another tool, as another user, with other
// arguments, and changed.
func attacker(ctx context.Context, mallory *client, victim *client, in <-chan stolen, c *counts) {
	for s := range in {
		last := s.states[len(s.states)-1]
		try := func(cl *client, p *mcp.CallToolParams, counter *atomic.Int64) {
			c.attacks.Add(1)
			res, err := cl.call(ctx, p)
			if err == nil {
				c.sawToken(res.RequestState)
				counter.Add(1)
			}
		}
		if s.tool == "fleet_pay" {
			try(victim, retry(s.tool, s.args, last), &c.replaysAccepted) // the same user, again
		}
		other := "fleet_pay"
		if s.tool == "fleet_pay" {
			other = "fleet_flow"
		}
		try(victim, retry(other, s.args, s.states[0]), &c.forgedAccepted)
		try(mallory, retry(s.tool, s.args, s.states[0]), &c.forgedAccepted)
		try(victim, retry(s.tool, map[string]any{"n": s.args["n"].(int) + 1}, s.states[0]), &c.forgedAccepted)
		b := []byte(s.states[0])
		i := rand.IntN(len(b))
		b[i] = "AB"[rand.IntN(2)] // another character, or the same: only changes count
		if string(b) != s.states[0] {
			try(victim, retry(s.tool, s.args, string(b)), &c.forgedAccepted)
		}
	}
}

// TestFleet: four instances under a bounded load of multi-round flows,
// every round on a random instance, through a rotation (the propagation
// delay passes, the new key seals everywhere, the old one is retired once
// safe) and an instance killed and restarted, while an attacker replays,
// moves and changes states. It prints the verdict line and fails unless
// no valid round was rejected, no replay or forgery accepted, and at least
// 1000 flows completed.
func TestFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a fleet")
	}
	ctx := context.Background()
	f := newFleet(t, 4, false, fleetPolicy)
	c := &counts{keys: map[uint32]time.Time{}}
	attack := make(chan stolen, 64)
	mallory := connect(t, "mallory", f.instances)
	var attackers sync.WaitGroup
	attackers.Go(func() { attacker(ctx, mallory, connect(t, "user-0", f.instances), attack, c) })

	start := time.Now()
	stop := make(chan struct{})
	var workers sync.WaitGroup
	for w := range 8 {
		cl := connect(t, fmt.Sprintf("user-%d", w), f.instances)
		workers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tool := "fleet_flow"
				if i%3 == 0 {
					tool = "fleet_pay"
				}
				flow(ctx, cl, tool, w*1_000_000+i, c, attack)
			}
		})
	}

	// The events, on a timeline, while the load runs. Each waits on the
	// load (flows completed), or on the clock where the keyset's times
	// decide: a key activates, or becomes safe to retire, at a moment.
	waitFlows := func(n int64, what string) {
		t.Helper()
		target := c.flows.Load() + n
		for deadline := time.Now().Add(30 * time.Second); c.flows.Load() < target; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d flows completed, want %d within 30 s", what, c.flows.Load(), target)
			}
		}
	}
	waitFlows(20, "before the rotation")
	ks0 := readKeyset(t, f)
	res, err := rotation.Rotate(ctx, f.keyset, nil, f.o)
	if err != nil {
		t.Fatal(err)
	}
	newKey, oldKey := res.Key, ks0.Keys[0].ID
	activation := time.Now().Add(fleetPolicy.PropagationDelay)
	waitFlows(10, "after the rotation")
	f.instances[2].kill() // mid-flow: its rounds go to the others
	waitFlows(30, "with an instance killed")
	f.instances[2].start(f.env)
	time.Sleep(time.Until(activation.Add(time.Second)))
	switched := time.Now()
	safe, _ := rotation.SafeToRetire(readKeyset(t, f), oldKey)
	time.Sleep(time.Until(safe.Add(time.Second)))
	if _, err := rotation.Retire(ctx, f.keyset, oldKey, nil, f.o); err != nil {
		t.Fatalf("retiring the old key once safe: %v", err)
	}
	for time.Since(start) < 60*time.Second && (c.flows.Load() < 1000 || time.Since(start) < 15*time.Second) {
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	workers.Wait()
	close(attack)
	attackers.Wait()

	fmt.Printf("fleet: flows=%d rejected_valid=%d replays_accepted=%d forged_accepted=%d\n",
		c.flows.Load(), c.rejectedValid.Load(), c.replaysAccepted.Load(), c.forgedAccepted.Load())
	t.Logf("attacks tried: %d; rounds no instance answered: %d; first rejection: %s", c.attacks.Load(), c.unanswered.Load(), c.firstErr)
	if c.rejectedValid.Load() != 0 || c.replaysAccepted.Load() != 0 || c.forgedAccepted.Load() != 0 || c.flows.Load() < 1000 {
		t.Errorf("the fleet failed its verdict")
	}
	if c.attacks.Load() < 100 {
		t.Errorf("only %d attacks tried", c.attacks.Load())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if last, ok := c.keys[oldKey]; ok && last.After(switched) {
		t.Errorf("a client got a token of the old key %08x at %v, after the new key %08x became primary everywhere (%v)", oldKey, last, newKey, switched)
	}
	if _, ok := c.keys[newKey]; !ok {
		t.Errorf("no client got a token of the new key %08x", newKey)
	}
}

func readKeyset(t *testing.T, f *fleet) *keyset.Keyset {
	t.Helper()
	s, err := keyset.OpenStore(context.Background(), f.keyset, nil)
	if err != nil {
		t.Fatal(err)
	}
	ks, _, err := keyset.Read(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}
