package gateway

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/stateseal/stateseal/mrtr"
)

// exchange is what the gateway knows of one request while its response
// comes back: what each step of the walk (ServeHTTP) read, the calls it
// made, by JSON-RPC id, and what it holds until the exchange ends.
type exchange struct {
	g       *Gateway
	st      *mrtr.States // loaded once: one exchange, one configuration
	r       *http.Request
	version string // MCP-Protocol-Version
	// passthrough: the request's path carries no MCP traffic, and its
	// body goes upstream unread (admitRequest).
	passthrough bool
	calls       map[string]*call
	single      *call       // the one call of a request that is not a batch
	lazy        []byte      // the request, if open left it unread
	sent        []byte      // the body sent upstream, if the gateway read it
	upstream    int         // the index of the upstream chosen
	w           *watched    // for the idle timeout
	out         flushWriter // the client's ResponseWriter
	// Held until the exchange ends (end): the bytes taken from the
	// request and response budgets, a pass-through body, a stream.
	reqHeld, respHeld int64
	unclosed          *unclosedBody
	stream            *sseBody
	// written: the transport began writing the single-use request (a
	// header field into its buffer), so the upstream may have it.
	written atomic.Bool
}

// end gives back what the exchange held, whichever way it ended, in
// the order it was taken, last first; then settles a single-use state.
func (ex *exchange) end() {
	if ex.stream != nil {
		ex.stream.Close()
	}
	ex.out.stop() // no header timer touches the ResponseWriter once ServeHTTP returns (flush.go)
	ex.g.respInFlight.Add(-ex.respHeld)
	if ex.w != nil {
		ex.g.dog.unwatch(ex.w)
	}
	if ex.unclosed != nil {
		ex.unclosed.Close()
	}
	ex.g.inFlight.Add(-ex.reqHeld)
	ex.settle()
}

// A call is one JSON-RPC request sent upstream.
type call struct {
	id       jsontext.Value
	req      mrtr.Request // Method is empty for a call that carries no state
	mc       *mrtr.Call   // made on first use: the principal is looked up then
	answered bool         // the client has its answer, the upstream's or an error of the gateway's
	// upstreamAnswered: the answer is the upstream's, so the call ran;
	// without it a single-use state is in doubt (settle).
	upstreamAnswered bool
}

func (c *call) stateful() bool { return c.req.Method != "" }

// mrtrCall returns the call's mrtr.Call, looking up the principal the
// first time.
func (ex *exchange) mrtrCall(c *call, st *mrtr.States) *mrtr.Call {
	if c.mc == nil {
		c.req.Principal = ex.g.principal(ex.r)
		c.mc = st.Call(c.req)
	}
	return c.mc
}

func (g *Gateway) principal(r *http.Request) string {
	if g.Principal == nil {
		return ""
	}
	p, err := g.Principal.Principal(r)
	if err != nil {
		g.principalFailed(err)
		return ""
	}
	return p
}

// settle ends the exchange of a single-use state: one the gateway gave to
// the upstream, whose answer it never saw (the connection reset or went
// silent mid-answer, the client or a shutdown cut it, the answer was
// refused unread), may or may not have run, and its retry is told so
// (reason "undetermined") rather than "replayed". A state taken back
// (no upstream accepted the connection) is no longer Used; one whose
// request the transport never began to write is taken back here.
func (ex *exchange) settle() {
	c := ex.single
	if c == nil || c.mc == nil || !c.mc.Used() || c.upstreamAnswered {
		return
	}
	ctx := context.WithoutCancel(ex.r.Context())
	if !ex.written.Load() {
		// Not a byte of it left the gateway: usable again.
		c.mc.Release(ctx)
		return
	}
	c.mc.Doubt(ctx)
}
