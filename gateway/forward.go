package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/go-json-experiment/json/jsontext"
)

// The gateway forwards a request itself, not through
// httputil.ReverseProxy. It holds the request's body whole (or, on a
// pass-through path, streams it unread), and it reads every response
// before the client gets any of it: a JSON body whole, an SSE stream
// event by event. What a general proxy adds on top is what the gateway
// refuses or drops anyway: 1xx responses (the transport skips them
// without a ClientTrace asking for them), trailers, upgrades, flush
// intervals. Without that setup, the gateway's added p50 under load went
// from 1.06-1.09 times a plain ReverseProxy's to 0.91-0.96 (BENCHMARKS.md).
//
// What it keeps of ReverseProxy, in the same order: hop-by-hop headers
// (and those the Connection header names) removed both ways, the
// client's Forwarded and X-Forwarded-* replaced by the gateway's own,
// unparsable query parameters re-encoded (so that the upstream and the
// gateway see one query), no default User-Agent added, and a stream
// that cannot be written to the client aborts the connection rather
// than ending cleanly.

// hopHeaders are the headers of one connection, never forwarded
// (RFC 9110, section 7.6.1; and the older ones ReverseProxy removes).
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// gatewayHeaders are the headers the gateway reads or sets on a request
// it forwards, folded as the most lenient server compares names
// (headerFold).
var gatewayHeaders = map[string]bool{
	"mcp-session-id": true, "mcp-protocol-version": true, "mcp-method": true, "mcp-name": true, "authorization": true,
	"content-type": true, "content-length": true, "content-encoding": true,
	"transfer-encoding": true, "accept-encoding": true, "expect": true,
	"forwarded": true, "x-forwarded-for": true, "x-forwarded-host": true, "x-forwarded-proto": true,
	"connection": true, "proxy-connection": true, "keep-alive": true, "proxy-authorization": true,
	"te": true, "trailer": true, "upgrade": true, "http2-settings": true, "host": true,
}

// removeHopByHop removes from h the hop-by-hop headers, and those its
// Connection header names.
func removeHopByHop(h http.Header) {
	for _, f := range h["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" {
				h.Del(sf)
			}
		}
	}
	for _, f := range hopHeaders {
		delete(h, f)
	}
}

// outRequest is the request the gateway sends upstream for r: its body
// is the one the gateway read (ex.sent), none, or on a pass-through path
// the client's, unread.
func (g *Gateway) outRequest(ex *exchange, r *http.Request, passthrough bool) *http.Request {
	out := r.Clone(r.Context())
	out.RequestURI, out.Close, out.Trailer = "", false, nil
	h := out.Header
	if h == nil {
		h = http.Header{}
		out.Header = h
	}
	removeHopByHop(h)
	// The gateway's own X-Forwarded-* replace the client's (SetXForwarded).
	for _, k := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		delete(h, k)
	}
	switch {
	case ex.sent != nil:
		// The upstream gets what the gateway read, in one form.
		out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(ex.sent)), int64(len(ex.sent))
		out.TransferEncoding = nil
		// (No Content-Length header: the transport writes ContentLength,
		// and ignores the header's.)
		h["Content-Type"] = jsonType
		delete(h, "Content-Encoding")
		// The body is in hand: nothing to wait for a 100 Continue for.
		delete(h, "Expect")
	case passthrough && r.ContentLength != 0:
		// The transport may read the body after RoundTrip returns, and
		// closes it on a failure: the client's body must be read by
		// neither once the handler returns, nor closed early.
		out.Body = &unclosedBody{rc: r.Body}
	default:
		out.Body, out.ContentLength = nil, 0
	}
	k := g.pick()
	ex.upstream = k
	g.direct(out, r, k)
	pr := httputil.ProxyRequest{In: r, Out: out}
	pr.SetXForwarded()
	// Compression would hide a state from the gateway's reading, in a
	// JSON body or an SSE stream: what comes back otherwise is refused.
	h["Accept-Encoding"] = identityEncoding
	// One spelling of each header the gateway reads or sets: CGI and
	// WSGI servers read Mcp_Session_Id as Mcp-Session-Id, PHP
	// Mcp.Session.Id too (net/http has made the case canonical, so only
	// a name with a byte other than a letter, a digit or '-' can be
	// another spelling).
	for k := range h {
		if !plainHeader(k) && gatewayHeaders[headerFold(k)] {
			delete(h, k)
		}
	}
	if g.StripAuthorization {
		delete(h, "Authorization")
	}
	if g.Principal != nil {
		g.Principal.Forward(r, out)
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // not Go's default
	}
	return out
}

// direct points out at upstream k: its scheme, host and path, with in's
// path and (cleaned) query appended.
func (g *Gateway) direct(out, in *http.Request, k int) {
	u := *in.URL
	u.RawQuery = cleanQuery(u.RawQuery)
	out.URL = &u
	pr := httputil.ProxyRequest{In: in, Out: out}
	pr.SetURL(g.Upstreams[k])
	out.Host = g.Upstreams[k].Host
}

// cleanQuery re-encodes a query that has a parameter Go's url.ParseQuery
// drops (a semicolon, a bad escape) or a '#', so that an upstream cannot read a
// parameter the gateway's reading skipped; as ReverseProxy does.
func cleanQuery(s string) string {
	for i := 0; i < len(s); {
		switch s[i] {
		case ';', '#':
			// '#' would end the query for an upstream that parses the
			// target as a URL.
			return reencode(s)
		case '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return reencode(s)
			}
			i += 3
		default:
			i++
		}
	}
	return s
}

func reencode(s string) string {
	v, _ := url.ParseQuery(s)
	return v.Encode()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// unclosedBody is a pass-through request's body as the transport sees it:
// Close does not close the client's body (which could block, waiting for
// a 100 Continue the client never gets), and a Read after it fails.
type unclosedBody struct {
	rc     io.ReadCloser
	closed atomic.Bool
}

var errBodyClosed = errors.New("gateway: read of a request body after the exchange ended")

func (b *unclosedBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errBodyClosed
	}
	return b.rc.Read(p)
}

func (b *unclosedBody) Close() error {
	b.closed.Store(true)
	return nil
}

// forward sends the request upstream and gives the client what the
// gateway read of the answer, or an error.
func (g *Gateway) forward(ex *exchange, w http.ResponseWriter, r *http.Request, passthrough bool) {
	out := g.outRequest(ex, r, passthrough)
	if b, ok := out.Body.(*unclosedBody); ok {
		defer b.Close()
	}
	resp, err := g.roundTrip(ex, out)
	if err != nil {
		g.upstreamFailed(w, ex, err)
		return
	}
	// readResponse watches the response for the idle timeout; it ends
	// with the exchange, whatever the way out.
	defer func() {
		if ex.w != nil {
			g.dog.unwatch(ex.w)
		}
	}()
	// Before the response is read: the headers the gateway reads its
	// framing from are the ones the client gets.
	removeHopByHop(resp.Header)
	rr, err := g.readResponse(ex, resp)
	defer g.respInFlight.Add(-rr.held) // the body is held until the client has it
	if err != nil {
		resp.Body.Close()
		g.upstreamFailed(w, ex, err)
		return
	}
	ex.out.ResponseWriter = w
	defer ex.out.stop() // no header timer touches w once ServeHTTP returns (flush.go)
	dst := ex.out.Header()
	// The headers that say how to read the body are the gateway's own,
	// from what it read (headers.go).
	copyResponseHeaders(dst, resp.Header)
	if rr.ctype != "" {
		dst["Content-Type"] = ctypeHeader(rr.ctype)
	}
	if rr.stream == nil {
		if rr.body != nil {
			dst["Content-Length"] = []string{strconv.Itoa(len(rr.body))}
		}
		ex.out.WriteHeader(resp.StatusCode)
		ex.out.Write(rr.body)
		return
	}
	stream := rr.stream
	defer stream.Close()
	ex.out.stream = true
	ex.out.WriteHeader(resp.StatusCode)
	if err := stream.writeTo(&ex.out); err != nil {
		// The client has part of the stream: ending it cleanly would
		// tell it the stream is whole. A server recovers this panic and
		// cuts the connection (as ReverseProxy does).
		if r.Context().Value(http.ServerContextKey) != nil {
			panic(http.ErrAbortHandler)
		}
	}
}

// readResponse reads the upstream's answer, or refuses it: a JSON body
// (or one of another type, or none) read whole and sealed, returned as
// body; an SSE stream returned as stream, to be read, sealed and written
// event by event. held is what the body took from the response budget,
// given back by the caller when the client has it, even on error.
func (g *Gateway) readResponse(ex *exchange, resp *http.Response) (rr readResult, err error) {
	kind, ctype, err := admitResponse(resp)
	if err != nil {
		return rr, err
	}
	if ex.r.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		kind = respEmpty // no body, whatever its headers say
	}
	if g.IdleTimeout > 0 {
		ex.w = &watched{body: resp.Body}
		ex.progress()
		g.dog.watch(ex.w, g.IdleTimeout)
	}
	switch kind {
	case respSSE:
		return readResult{ctype: ctype, stream: newSSEReader(resp.Body, ex)}, nil
	case respEmpty:
		resp.Body.Close()
		if ex.r.Method == http.MethodHead {
			// The type of the body a GET would get, as the gateway
			// would write it.
			rr.ctype = ctype
		}
		return rr, nil
	}
	if g.MaxResponseBytes > 0 && resp.ContentLength > g.MaxResponseBytes {
		return rr, fmt.Errorf("%w: a JSON response over %d bytes", errUpstreamResponse, g.MaxResponseBytes)
	}
	body, held, err := readBudgeted(progressReader{resp.Body, ex}, resp.ContentLength, g.MaxResponseBytes, g.MaxResponseBytesInFlight, &g.respInFlight)
	rr.held = held
	resp.Body.Close()
	if err != nil && ex.w != nil && ex.w.timedOut.Load() {
		err = errIdle
	}
	switch {
	case errors.Is(err, errTooLarge):
		return rr, fmt.Errorf("%w: a JSON response over %d bytes", errUpstreamResponse, g.MaxResponseBytes)
	case errors.Is(err, errBudget):
		return rr, fmt.Errorf("%w: the gateway holds %d bytes of responses, its bound (-max-response-bytes-in-flight)", errResponseBudget, g.MaxResponseBytesInFlight)
	case err != nil:
		return rr, fmt.Errorf("%w: %w", errUpstreamRead, err)
	}
	untyped := ctype == "" && kind == respJSON
	switch {
	case untyped && !looksJSON(body):
		// Read as a body of another type, and typed as the text the
		// gateway checked it is: untyped, a server would sniff a type
		// for it, a client a charset.
		kind, ctype = respOther, otherType("text/plain")
	case untyped:
		// Read as JSON: the client is told so, rather than left to
		// sniff a type of its own.
		ctype = "application/json"
	}
	rr.ctype = ctype
	if kind == respOther {
		rr.body = body
		return rr, checkOther(body)
	}
	rr.body, err = ex.rewriteBody(body)
	return rr, err
}

// A readResult is what readResponse read of an answer.
type readResult struct {
	body   []byte   // a body read whole, to write as it is
	stream *sseBody // or a stream, to write event by event
	ctype  string   // the Content-Type to write; "" for none
	held   int64    // bytes of body taken from the response budget
}

// ctypeHeader is the header value for the Content-Type the gateway
// writes, shared for the usual two.
func ctypeHeader(ct string) []string {
	switch ct {
	case "application/json":
		return jsonType
	case "text/event-stream":
		return sseType
	}
	return []string{ct}
}

// upstreamFailed answers a request whose upstream failed: a JSON-RPC
// error for its call if it was one.
func (g *Gateway) upstreamFailed(w http.ResponseWriter, ex *exchange, err error) {
	g.Stats.UpstreamErrors.Add(1)
	status, msg := http.StatusBadGateway, "upstream unavailable"
	switch {
	case errors.Is(err, errNoUpstream):
		msg = errNoUpstream.Error()
	case errors.Is(err, errUpstreamResponse):
		g.Stats.Malformed.Add(1)
		msg = errUpstreamResponse.Error()
	case errors.Is(err, errResponseBudget):
		// The upstream answered; the gateway cannot hold the answer.
		status, msg = http.StatusServiceUnavailable, "upstream response dropped: "+errResponseBudget.Error()
	case errors.Is(err, errIdle), errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		status, msg = http.StatusGatewayTimeout, "upstream timed out"
	}
	g.logger().Warn("gateway: upstream failed", "status", status, "err", err)
	if ex.calls == nil {
		http.Error(w, msg, status)
		return
	}
	ex.resolve()
	var id jsontext.Value
	if ex.single != nil {
		id = ex.single.id
	}
	writeJSON(w, status, errorMessage(id, rpcError{Code: codeInternalError, Message: msg}))
}
