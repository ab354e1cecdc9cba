package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"
)

// A Bridge serves clients of the 2025 protocols (2025-11-25, 2025-06-18,
// 2025-03-26) in front of an upstream that speaks only 2026-07-28 and
// keeps nothing between requests. It answers what the older versions ask
// of a server (initialize, ping, sessions), sends every other request
// upstream in the 2026-07-28 form (the client's capabilities in _meta,
// the version and routing headers) through the gateway's own walk, so
// that every state is opened and sealed as for any client, and carries
// out an input_required answer the way the older versions do: each input
// request goes to the client as a request of the server's on the call's
// SSE stream, the client's answers come back as POSTs, and the upstream
// is retried with them and the requestState, round after round. A legacy
// client never sees a requestState.
//
// Sessions need no store: the session id is the client's principal,
// version, capabilities and expiry, sealed with the gateway's keyset
// (bound to the principal and audience), so any instance serves any
// request of a session. A call waiting for the client's answers is held
// by the instance that sent the input requests: an answer that reaches
// another instance reaches it through Relay (Redis, in a fleet), or is
// refused with a clear error: without a Relay, route a session's
// requests to one instance (docs/GATEWAY.md, "Clients of the 2025
// protocols").
//
// A call waiting for its client's answers gives its handler back to
// net/http and holds its HTTP/1.1 connection itself (bridge_park.go), so
// that thousands of calls waiting for people cost little; net/http's
// Shutdown neither waits for nor closes such a call: a server that stops
// gracefully calls Shutdown after http.Server.Shutdown.
//
// The bridge is the gateway's one seam for those clients (bridge*.go):
// a request that does not say 2026-07-28 in its MCP-Protocol-Version
// header goes to it, and a 2026-07-28 request walks as it always has.
type Bridge struct {
	// Audience is bound into every session id; it must be the States'
	// audience (cmd/sealgate's -audience).
	Audience string
	// SessionTTL is a session's lifetime; 0 means an hour. The keyset's
	// maximum TTL caps it. A request with an expired session id gets 404,
	// and the client starts a new session.
	SessionTTL time.Duration
	// AnswerTimeout ends a call whose client has not answered every input
	// request of a round within it: the client gets an error and nothing
	// more goes upstream. It also bounds each write of the call's stream:
	// a client that does not take an event within it is cut, as one
	// gone. 0 means 5 minutes.
	AnswerTimeout time.Duration
	// MaxRounds bounds the input_required answers one call may go
	// through; past it the call ends with an error. 0 means 8.
	MaxRounds int
	// MaxInputRequests bounds the input requests of one round; 0 means 16.
	MaxInputRequests int
	// MaxPending and MaxPendingPerPrincipal bound the calls waiting for
	// a client's answers, on this instance and per principal: past
	// either, a call whose upstream answers input_required gets 503
	// (Retry-After) before any input request goes to the client (its
	// first round has gone upstream: a round that asks has no effect to
	// undo). With an Anonymous principal source every client is the one
	// principal "". 0 means 10,000 and 100. A waiting call holds its
	// request and its input requests in memory (docs/BENCHMARKS.md has
	// the figure per call); its request's bytes leave the
	// MaxRequestBytesInFlight budget once read, so that calls waiting for
	// people do not keep other requests out.
	MaxPending, MaxPendingPerPrincipal int
	// Relay, if set, carries an answer that reaches this instance to
	// the one holding its call. nil: such an answer is refused (404).
	Relay Relay
	// Logger receives why relayed answers cannot be received; nil means
	// slog.Default().
	Logger *slog.Logger

	once      sync.Once
	stopRelay func()
	instance  string // this bridge's id in the input request ids it makes
	pending   pendingCalls
	parked    parkedCalls
}

// Bridge defaults.
const (
	DefaultSessionTTL       = time.Hour
	DefaultAnswerTimeout    = 5 * time.Minute
	DefaultMaxRounds        = 8
	DefaultMaxInputRequests = 16
	DefaultMaxPending       = 10000
	DefaultMaxPendingPer    = 100
)

// The versions the bridge serves, newest first: an initialize asking for
// another is answered with the newest (the client then decides).
var bridgeVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

func (b *Bridge) init() {
	b.once.Do(func() {
		var id [6]byte
		rand.Read(id[:])
		b.instance = hex.EncodeToString(id[:])
		b.pending.init()
		if err := b.listen(); err != nil {
			// Answers relayed here are refused (no listener: the
			// sender is told the holder is gone); the rest works.
			b.logger().Error("sealgate bridge: cannot receive relayed answers", "err", err)
		}
		if b.SessionTTL <= 0 {
			b.SessionTTL = DefaultSessionTTL
		}
		if b.AnswerTimeout <= 0 {
			b.AnswerTimeout = DefaultAnswerTimeout
		}
		if b.MaxRounds <= 0 {
			b.MaxRounds = DefaultMaxRounds
		}
		if b.MaxInputRequests <= 0 {
			b.MaxInputRequests = DefaultMaxInputRequests
		}
		if b.MaxPending <= 0 {
			b.MaxPending = DefaultMaxPending
		}
		if b.MaxPendingPerPrincipal <= 0 {
			b.MaxPendingPerPrincipal = DefaultMaxPendingPer
		}
	})
}

func (b *Bridge) logger() *slog.Logger {
	if b.Logger != nil {
		return b.Logger
	}
	return slog.Default()
}

// Pending is the number of calls waiting for a client's answers.
func (b *Bridge) Pending() int {
	b.init()
	return b.pending.len()
}

// bridged reports whether r is for the bridge: the gateway has one, r
// is on no PassThrough path, and r says a 2025 version in its
// MCP-Protocol-Version header, or says none and carries a session
// (2025 clients send the header after initialize) or is a POST, which
// the bridge reads: an initialize is its own, anything else goes to the
// walk as it came (walkOnly). A 2026-07-28 request, or one naming a
// version no one knows, walks: the upstream answers it.
func (g *Gateway) bridged(r *http.Request) bool {
	if g.Bridge == nil {
		return false
	}
	v, ok := r.Header[headerVersion]
	if ok && (len(v) != 1 || !slices.Contains(bridgeVersions, v[0])) {
		return false // first: a 2026-07-28 request pays one header lookup
	}
	if g.passThrough(r) || r.Context().Value(walkOnly{}) != nil {
		return false
	}
	return ok || r.Method == http.MethodPost || len(r.Header[headerSession]) > 0
}

// walkOnly marks a request the bridge read and gives back to the walk.
type walkOnly struct{}
