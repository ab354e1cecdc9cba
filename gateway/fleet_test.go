package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/replay/redisguard"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/seal"
	"github.com/stateseal/stateseal/stores/redis"
)

// TestGatewayFleet: two gateways in front of two instances of the example
// server (its own sealing off), one keyset in Redis, one Redis replay
// guard. Users run multi-round flows with every round sent to a random
// gateway, while the keyset rotates: the new key seals on both gateways
// once its activation passes, and no valid flow is refused.
func TestGatewayFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis and two servers")
	}
	rs := testservers.StartRedis(t)
	kekValue := strings.TrimSpace(sealctl(t, t.TempDir(), "kek"))
	t.Setenv("SEALGATE_FLEET_KEK", kekValue)
	const kek = "local://env/SEALGATE_FLEET_KEK"
	store := rs.URL() + "?key=sealgate:fleet"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ro := &rotation.Options{KEK: kek, Logger: slog.New(slog.DiscardHandler)}
	policy := keyring.Policy{PropagationDelay: 2 * time.Second, MaxTTL: time.Minute, Skew: 2 * time.Second}
	if _, err := rotation.Init(ctx, store, kek, keyring.AEAD, policy, ro); err != nil {
		t.Fatal(err)
	}
	var ups []*url.URL
	for range 2 {
		u := testkit.Must(url.Parse(startExample(t)))
		ups = append(ups, u)
	}
	client, err := redis.NewClient(rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var gateways []string
	var rings []*keyring.Ring
	for range 2 {
		l := &keyset.Loader{Path: store, Options: keyset.LoadOptions{KEK: kek}, Logger: slog.New(slog.DiscardHandler)}
		ring, err := l.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go l.Run(ctx, 200*time.Millisecond)
		st, err := newStates(ring, &mrtr.Options{Audience: "https://fleet.test", Metrics: &mrtr.Counters{},
			SingleUse: mrtr.Targets("fleet_pay"), Replay: redisguard.New(client, nil)})
		if err != nil {
			t.Fatal(err)
		}
		g := &Gateway{Upstreams: ups, BindSession: true, MaxRequestBytes: 1 << 20, MaxResponseBytes: 1 << 20, MaxEventBytes: 1 << 20,
			IdleTimeout: time.Minute, Logger: slog.New(slog.DiscardHandler),
			Principal: &HeaderPrincipal{Header: "X-User", Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}
		g.SetStates(st)
		ts := httptest.NewServer(g)
		defer ts.Close()
		gateways = append(gateways, ts.URL+"/mcp")
		rings = append(rings, ring)
	}

	// A Redis just started vouches for single use only from its start
	// plus the guard's clock margin: states sealed before are
	// "unvouched" (redisguard, "What Redis forgot"). Wait for one flow
	// to go through before the load.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	waitFor(t, "the replay guard to vouch", func() bool {
		m, err := fleetRound(hc, gateways[0], "fleet_pay", "warm", map[string]any{"n": -1}, "", 1)
		if err != nil {
			return false
		}
		state, _ := m["result"].(map[string]any)["requestState"].(string)
		m, err = fleetRound(hc, gateways[1], "fleet_pay", "warm", map[string]any{"n": -1}, state, 2)
		return err == nil && m["error"] == nil
	})

	var flows, rejected, failed atomic.Int64
	var lastErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("user-%d", w)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tool, rounds := "fleet_flow", 3
				if i%3 == 2 {
					tool, rounds = "fleet_pay", 2
				}
				args := map[string]any{"n": w*1_000_000 + i}
				state := ""
				for r := range rounds {
					gw := gateways[rand.IntN(len(gateways))]
					m, err := fleetRound(hc, gw, tool, user, args, state, 100+r)
					if err != nil {
						failed.Add(1)
						lastErr.Store(err.Error())
						break
					}
					if e, ok := m["error"]; ok {
						rejected.Add(1)
						lastErr.Store(fmt.Sprint(e))
						break
					}
					res, _ := m["result"].(map[string]any)
					if r == rounds-1 {
						if res["resultType"] == "input_required" {
							failed.Add(1)
						} else {
							flows.Add(1)
						}
						break
					}
					state, _ = res["requestState"].(string)
					if state == "" {
						failed.Add(1)
						lastErr.Store(fmt.Sprint(m))
						break
					}
				}
			}
		}()
	}
	// Rotate under load; wait (on conditions) for the new key to seal on
	// both gateways after its activation, with flows completing.
	waitFor(t, "flows before the rotation", func() bool { return flows.Load() >= 50 })
	res, err := rotation.Rotate(ctx, store, nil, ro)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new key sealing on both gateways", func() bool {
		for _, r := range rings {
			if k, err := r.Current().Primary(time.Now()); err != nil || k.ID != res.Key {
				return false
			}
		}
		return true
	})
	after := flows.Load()
	waitFor(t, "flows after the switch", func() bool { return flows.Load() >= after+100 })
	close(stop)
	wg.Wait()
	// A first round now carries a token of the new key, from either gateway.
	for _, gw := range gateways {
		m, err := fleetRound(hc, gw, "fleet_flow", "check", map[string]any{"n": 1}, "", 1)
		if err != nil {
			t.Fatal(err)
		}
		tok, _ := m["result"].(map[string]any)["requestState"].(string)
		h, err := seal.Inspect(tok)
		if err != nil || h.KeyID != res.Key {
			t.Fatalf("after the switch %s seals with key %v (%v), want %v", gw, h.KeyID, err, res.Key)
		}
	}
	t.Logf("gateway fleet: flows=%d rejected_valid=%d failed=%d (2 gateways, 2 upstreams, rotation to key %08x mid-load)", flows.Load(), rejected.Load(), failed.Load(), res.Key)
	if rejected.Load() != 0 || failed.Load() != 0 {
		t.Fatalf("valid rounds refused or failed: %d, %d; last: %v", rejected.Load(), failed.Load(), lastErr.Load())
	}
}

// fleetRound sends one round of a tools/call as a 2026-07-28 client.
func fleetRound(hc *http.Client, gw, tool, user string, args map[string]any, state string, id int) (map[string]any, error) {
	p := map[string]any{"name": tool, "arguments": args, "_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    version2026,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "fleet", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
	}}
	if state != "" {
		p["requestState"] = state
		p["inputResponses"] = map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{}}}
	}
	b := testkit.Must(json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": p}))
	req := testkit.Must(http.NewRequest(http.MethodPost, gw, bytes.NewReader(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(headerVersion, version2026)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	req.Header.Set("X-User", user)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		evs := sseData(body)
		if len(evs) == 0 {
			return nil, fmt.Errorf("HTTP %d: empty stream", resp.StatusCode)
		}
		body = []byte(evs[len(evs)-1])
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("HTTP %d %q: %v", resp.StatusCode, body, err)
	}
	return m, nil
}
