package rotation

import (
	"strings"
	"testing"
	"time"
)

func dur(d time.Duration) *time.Duration { return &d }

// TestSetPolicy: a policy change is one authenticated edit; lowering the
// maximum TTL or the skew needs Force and says until when tokens break;
// an invalid policy and a change to nothing write nothing.
func TestSetPolicy(t *testing.T) {
	path, clk, o := setup(t)
	old := read(t, path).Policy

	res, err := SetPolicy(ctx, path, &PolicyChange{MaxTTL: dur(2 * time.Hour), Freshness: dur(48 * time.Hour)}, o)
	if err != nil {
		t.Fatal(err)
	}
	ks := read(t, path)
	if ks.Version != 2 || ks.Policy.MaxTTL != 2*time.Hour || ks.Policy.Skew != old.Skew || res.OldPolicy != old {
		t.Fatalf("after raising the max TTL: version %d, policy %+v, old %+v", ks.Version, ks.Policy, res.OldPolicy)
	}
	if !ks.Expires.Equal(t0.Add(48 * time.Hour)) {
		t.Fatalf("expires %v, want the new window from now", ks.Expires)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "have not loaded this version") {
		t.Fatalf("raising the max TTL warned %q", res.Warnings)
	}

	// Lowering the max TTL breaks tokens in flight: refused, naming when
	// it would stop mattering (now + propagation delay + old TTL + skew).
	clk.advance(time.Minute)
	_, err = SetPolicy(ctx, path, &PolicyChange{MaxTTL: dur(30 * time.Minute)}, o)
	until := clk.t.Add(old.PropagationDelay + 2*time.Hour + old.Skew).Format(time.RFC3339)
	if err == nil || !strings.Contains(err.Error(), "lowering the maximum TTL from 2h0m0s to 30m0s") || !strings.Contains(err.Error(), until) {
		t.Fatalf("lowering the max TTL: %v (want until %s)", err, until)
	}
	_, err = SetPolicy(ctx, path, &PolicyChange{Skew: dur(5 * time.Second)}, o)
	if err == nil || !strings.Contains(err.Error(), "lowering the skew from 30s to 5s") {
		t.Fatalf("lowering the skew: %v", err)
	}
	// Invalid: the rotation interval must exceed the propagation delay.
	_, err = SetPolicy(ctx, path, &PolicyChange{RotationInterval: dur(time.Minute)}, o)
	if err == nil || !strings.Contains(err.Error(), "must exceed the propagation delay") {
		t.Fatalf("invalid policy: %v", err)
	}
	if v := read(t, path).Version; v != 2 {
		t.Fatalf("a refused change wrote version %d", v)
	}

	res, err = SetPolicy(ctx, path, &PolicyChange{MaxTTL: dur(30 * time.Minute), Skew: dur(5 * time.Second), Force: true}, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) < 2 || !strings.HasPrefix(res.Warnings[0], "forced: lowering the maximum TTL") || !strings.HasPrefix(res.Warnings[1], "forced: lowering the skew") {
		t.Fatalf("forced warnings %q", res.Warnings)
	}
	if ks := read(t, path); ks.Version != 3 || ks.Policy.MaxTTL != 30*time.Minute || ks.Policy.Skew != 5*time.Second {
		t.Fatalf("forced change: %+v", ks)
	}

	// The same values again: nothing written.
	res, err = SetPolicy(ctx, path, &PolicyChange{Skew: dur(5 * time.Second)}, o)
	if err != nil || res.Keyset.Version != 3 || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "nothing written") {
		t.Fatalf("no change: %+v, %v", res, err)
	}
	if v := read(t, path).Version; v != 3 {
		t.Fatalf("no change wrote version %d", v)
	}
}
