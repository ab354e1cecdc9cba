package gateway

import (
	"strings"
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

// labelLog records the target each sealed and opened state is labelled with.
type labelLog struct {
	mrtr.Counters
	mu     sync.Mutex
	labels []string
}

func (l *labelLog) Sealed(method, target string) {
	l.mu.Lock()
	l.labels = append(l.labels, "sealed "+target)
	l.mu.Unlock()
	l.Counters.Sealed(method, target)
}

func (l *labelLog) Opened(method, target string) {
	l.mu.Lock()
	l.labels = append(l.labels, "opened "+target)
	l.mu.Unlock()
	l.Counters.Opened(method, target)
}

// TestResourceLabelsBounded makes the attack a log-reader review found: a
// client sends resources/read for URIs of its choosing, one series each,
// newlines included. Only a configured URI is named; any other is
// mrtr.Unknown, sealed or opened; a tool keeps its name.
func TestResourceLabelsBounded(t *testing.T) {
	log := &labelLog{}
	f := newFixture(t, stateReply, func(g *Gateway, o *mrtr.Options) {
		g.KnownTargets = []string{"file:///known"}
		o.Metrics = log
	})
	for i, c := range []struct{ method, target string }{
		{mrtr.MethodReadResource, "file:///client-chosen/1?\n{\"x\":1}"},
		{mrtr.MethodReadResource, "file:///client-chosen/2"},
		{mrtr.MethodReadResource, "file:///known"},
		{mrtr.MethodCallTool, "book"},
	} {
		_, m := f.post(rpcCall(2*i+1, c.method, c.target, nil, ""), v2026)
		tok := resultOf(t, m)["requestState"].(string)
		_, r := f.post(rpcCall(2*i+2, c.method, c.target, nil, tok), v2026)
		resultOf(t, r)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	want := []string{"sealed unknown", "opened unknown", "sealed unknown", "opened unknown",
		"sealed file:///known", "opened file:///known", "sealed book", "opened book"}
	if strings.Join(log.labels, "|") != strings.Join(want, "|") {
		t.Fatalf("labels %q, want %q", log.labels, want)
	}
}
