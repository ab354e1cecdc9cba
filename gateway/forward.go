package gateway

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strings"
	"sync/atomic"
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

// forward is the walk's third step: it sends the request upstream
// (outRequest, then roundTrip in upstreams.go) and returns the answer's
// head, its hop-by-hop headers removed, for readAnswer.
func (ex *exchange) forward() (*http.Response, error) {
	out := ex.g.outRequest(ex, ex.r, ex.passthrough)
	if b, ok := out.Body.(*unclosedBody); ok {
		ex.unclosed = b // closed when the exchange ends
	}
	resp, err := ex.g.roundTrip(ex, out)
	if err != nil {
		return nil, err
	}
	// Before the response is read: the headers the gateway reads its
	// framing from are the ones the client gets.
	removeHopByHop(resp.Header)
	return resp, nil
}
