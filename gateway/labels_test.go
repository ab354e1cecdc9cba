package gateway

import (
	"sync"
	"testing"

	"github.com/stateseal/stateseal/mrtr"
)

// targetLog records the target each rejection is labelled with.
type targetLog struct {
	mrtr.Counters
	mu      sync.Mutex
	targets []string
}

func (l *targetLog) Rejected(method, target, reason string) {
	l.mu.Lock()
	l.targets = append(l.targets, target)
	l.mu.Unlock()
	l.Counters.Rejected(method, target, reason)
}

// TestKnownTargetLabels: a rejected state for a target in KnownTargets
// is labelled with it, even when it did not authenticate; any other
// target a client names stays mrtr.Unknown.
func TestKnownTargetLabels(t *testing.T) {
	log := &targetLog{}
	f := newFixture(t, stateReply, func(g *Gateway, o *mrtr.Options) {
		g.KnownTargets = []string{"pay"}
		o.Metrics = log
	})
	for _, name := range []string{"pay", "chosen-by-the-client"} {
		_, m := f.post(rpcCall(1, "tools/call", name, nil, ""), v2026)
		tok := resultOf(t, m)["requestState"].(string)
		f.post(rpcCall(2, "tools/call", name, nil, tok[:len(tok)-2]+"AA"), v2026)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.targets) != 2 || log.targets[0] != "pay" || log.targets[1] != mrtr.Unknown {
		t.Fatalf("rejections labelled %q, want [pay unknown]", log.targets)
	}
}
