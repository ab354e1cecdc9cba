package gateway

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/replay"
)

// TestNoResendAfterWrite cuts the upstream connection after a single-use
// state's request was written and acted on, with and without the
// Idempotency-Key headers a client may send (found by a network-attacker
// review: with them, net/http's transport sent the POST again on a fresh
// connection, and the state ran twice). The tool runs once; the client
// gets an error, and its retry "undetermined".
func TestNoResendAfterWrite(t *testing.T) {
	for _, hdr := range []string{"", "Idempotency-Key", "X-Idempotency-Key", "idempotency-key"} {
		t.Run("header="+hdr, func(t *testing.T) {
			var execs atomic.Int64
			f := newFixture(t, func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
				p, _ := msg["params"].(map[string]any)
				if s, _ := p["requestState"].(string); s != "" {
					execs.Add(1)
					// The upstream acted; then the connection is cut
					// before the answer (an RST on the path, a crash).
					c, _, err := w.(http.Hijacker).Hijack()
					if err != nil {
						t.Error(err)
						return
					}
					c.Close()
					return
				}
				stateReply(w, r, msg)
			}, func(g *Gateway, o *mrtr.Options) {
				o.SingleUse = mrtr.Targets("pay")
				o.Replay = replay.NewMemory(0)
			})
			h := map[string]string{}
			for k, v := range v2026 {
				h[k] = v
			}
			if hdr != "" {
				h[hdr] = "client-chosen"
			}
			_, first := f.post(rpcCall(1, mrtr.MethodCallTool, "pay", map[string]any{"n": 1}, ""), h)
			tok, _ := resultOf(t, first)["requestState"].(string)
			if tok == "" {
				t.Fatalf("no state: %v", first)
			}
			// The retry of a single-use state goes on a fresh connection
			// (TestSingleUseNotOnDeadKeptAlive); were it the first round's
			// idle one, net/http would resend it with those headers.
			_, second := f.post(rpcCall(2, mrtr.MethodCallTool, "pay", map[string]any{"n": 1}, tok), h)
			if n := execs.Load(); n != 1 {
				t.Fatalf("the single-use state ran %d times upstream; want 1", n)
			}
			if _, ok := second["error"]; !ok {
				t.Fatalf("the client got %v; want an error", second)
			}
			// And it stays used: the gateway never saw the upstream's
			// answer, so it cannot say the call ran.
			status, third := f.post(rpcCall(3, mrtr.MethodCallTool, "pay", map[string]any{"n": 1}, tok), h)
			refused(t, status, third, http.StatusBadRequest, "undetermined")
		})
	}
}
