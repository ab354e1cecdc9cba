// Package gateway is a reverse proxy for MCP Streamable HTTP that seals
// requestState (MCP 2026-07-28 multi round-trip requests) in front of an
// MCP server written in any language. A Gateway is an http.Handler: set
// its fields, install the States that open and seal (SetStates), and
// serve it, or mount it in a mux of your own. cmd/sealgate is this
// package behind flags.
//
// A tools/call, prompts/get or resources/read that carries
// params.requestState has it opened before the request goes upstream,
// bound to the method, the target, the principal, the audience, the MCP
// session (when the upstream is stateful) and the arguments' digest; a
// state that does not open is answered as stateseal's go-sdk middleware
// answers it, and the upstream never sees the request. Every result the
// upstream sends back with a requestState, in a JSON body or in an SSE
// stream, has it sealed.
//
// Before anything, origin.go admits a request's Host and Origin: a web
// page whose name was rebound to the gateway's address is refused
// (Gateway.AllowedHosts, Gateway.AllowedOrigins). The security boundary
// is in three files, one per layer, each read in one pass: admit.go checks a request's and a response's HTTP framing,
// sse.go an SSE stream's, and message.go holds every decision about what
// the gateway reads of a message, both ways (readRequest,
// readUpstreamMessage), on the mechanics of valid.go (what is valid JSON)
// and object.go (a message's members). ServeHTTP, in gateway.go, only
// opens and seals what they return: read or refuse, open, forward, read
// the answer or refuse it, seal, write. forward.go forwards, on its own
// rather than through httputil.ReverseProxy: it sends the request the
// gateway read and gives the client only what the gateway read of the
// answer (no 1xx response, no trailer, no upgrade).
//
// Clients of the 2025 protocols, in front of an upstream that speaks
// only 2026-07-28, are served by a Bridge (Gateway.Bridge, bridge*.go):
// it answers their initialize and sessions, sends their requests through
// the same walk in the 2026-07-28 form, and carries out input_required
// as their protocol's own requests on the call's stream; a Relay
// (gateway/redisrelay) carries their answers across a fleet. A call
// waiting for its client's answers holds its connection itself, off
// net/http's books: call Bridge.Shutdown after http.Server.Shutdown.
//
// docs/GATEWAY.md has the deployment guide.
package gateway
