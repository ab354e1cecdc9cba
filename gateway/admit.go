package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/stateseal/stateseal/internal/jsonscan"
)

// The HTTP framing the gateway reads, and what it refuses. A request or
// a response reaches the message reader (message.go) only in the one form
// every peer reads the same way: UTF-8 JSON or SSE, identity encoding, no
// upgrade. Whatever else a peer could decode (a gzip body, a UTF-16
// charset, a media type some parser takes for JSON, a socket spliced by
// a 101) is refused here, never passed on unread: an upstream that
// decodes more than the gateway would read a state the gateway never
// opened, and a client a state it never sealed.

// A refusal of a request's framing: the HTTP status and what the client
// is told.
type framingError struct {
	status int
	msg    string
}

func (e *framingError) Error() string { return e.msg }

func refuseFraming(status int, format string, a ...any) *framingError {
	return &framingError{status, fmt.Sprintf(format, a...)}
}

// admitRequest decides how the gateway takes r: read (a POST of JSON),
// bodiless (GET, HEAD, DELETE, OPTIONS without a body), or passed
// through unread on a path the operator listed; or refused.
func (g *Gateway) admitRequest(r *http.Request) (passthrough bool, err *framingError) {
	if upgrade(r.Header) {
		// An upgrade (websocket, h2c) answered 101 splices the sockets:
		// nothing after it would be read. Refused on every path.
		return false, refuseFraming(http.StatusBadRequest, "the gateway does not proxy protocol upgrades (Upgrade, HTTP2-Settings)")
	}
	if len(r.Trailer) > 0 || len(r.Header["Trailer"]) > 0 {
		// Trailers come after the body the gateway reads, and an
		// upstream may merge them into its headers (X-Forwarded-User,
		// Content-Encoding): the gateway takes none, on any path.
		return false, refuseFraming(http.StatusBadRequest, "a request with trailers: the gateway does not take request trailers")
	}
	if name, ok := g.connectionNamesRead(r.Header); ok {
		// The header would be removed before the upstream (a proxy
		// removes what Connection names), after the gateway read it:
		// a state bound to this session or principal would run
		// upstream without it.
		return false, refuseFraming(http.StatusBadRequest, "Connection names %s, a header the gateway reads: it would not reach the upstream", name)
	}
	if !cleanPath(r.URL.Path) {
		// An upstream that resolves dot segments would serve another
		// path than the gateway matched (-passthrough) and the one its
		// base path names.
		return false, refuseFraming(http.StatusBadRequest, "path %q: want a clean absolute path (no . or .. segment, no //, no ; \\ %% or control byte once decoded)", short(r.URL.Path))
	}
	if v := r.Header[headerSession]; len(v) > 1 {
		// The state would be bound to one value; the upstream might read
		// another, or all of them joined.
		return false, refuseFraming(http.StatusBadRequest, "%d %s headers: want one", len(v), headerSession)
	}
	if g.passThrough(r) {
		return true, nil
	}
	switch r.Method {
	case http.MethodPost:
		return false, admitJSONRequest(r.Header)
	case http.MethodGet, http.MethodHead, http.MethodDelete, http.MethodOptions:
		if r.ContentLength != 0 {
			return false, refuseFraming(http.StatusBadRequest, "a %s request with a body: the gateway reads bodies of POST only", r.Method)
		}
		return false, nil
	}
	// PUT, PATCH, "post": a body the gateway does not read.
	return false, refuseFraming(http.StatusMethodNotAllowed, "method %q: the gateway takes POST, GET, HEAD, DELETE and OPTIONS (methods match exactly)", r.Method)
}

// passThrough reports whether r is for a path the operator listed as
// carrying no MCP traffic. Only a path spelled plainly matches (no
// escapes an upstream could decode into another path).
func (g *Gateway) passThrough(r *http.Request) bool {
	if len(g.PassThrough) == 0 || r.URL.RawPath != "" {
		return false
	}
	for _, p := range g.PassThrough {
		if r.URL.Path == p {
			return true
		}
	}
	return false
}

// connectionNamesRead returns the first header r's Connection header
// names that the gateway reads from the request: the session, the
// protocol version, the credentials, the principal header, the framing.
func (g *Gateway) connectionNamesRead(h http.Header) (string, bool) {
	for _, v := range h["Connection"] {
		for t := range strings.SplitSeq(v, ",") {
			name := http.CanonicalHeaderKey(strings.TrimSpace(t))
			switch name {
			case headerSession, headerVersion, headerMethod, headerName, "Authorization", "Content-Type", "Content-Length", "Content-Encoding":
				return name, true
			}
			if hp, ok := g.Principal.(*HeaderPrincipal); ok && name == http.CanonicalHeaderKey(hp.Header) {
				return name, true
			}
		}
	}
	return "", false
}

// cleanPath reports whether p is absolute with no dot segment, no empty
// one but a trailing slash, and none of the bytes some server reads as
// more than a byte: ';' (Tomcat cuts a segment's parameters, "..;", then
// resolves the dots), '\' (a separator on some), '%' (an escape decoded
// twice) and control bytes. It is the decoded path, so an escaped dot or
// slash (%2e, %2F) is checked as the upstream may decode it.
func cleanPath(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c == ';' || c == '\\' || c == '%' || c < 0x20 || c == 0x7f {
			return false
		}
	}
	rest := p[1:]
	for rest != "" {
		seg, next, more := strings.Cut(rest, "/")
		if seg == "." || seg == ".." || seg == "" && more {
			return false
		}
		rest = next
	}
	return true
}

// CheckPassThrough reports a path that cannot be listed in
// Gateway.PassThrough: one that is not absolute and clean.
func CheckPassThrough(p string) error {
	if !strings.HasPrefix(p, "/") || strings.Contains(p, "//") || strings.Contains(p, "/./") || strings.Contains(p, "/../") ||
		strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/..") || strings.ContainsAny(p, "%?#\\") {
		return fmt.Errorf("pass-through path %q: want a clean absolute path, without escapes or a query", p)
	}
	return nil
}

// upgrade reports whether h asks for a protocol upgrade.
func upgrade(h http.Header) bool {
	if len(h["Upgrade"]) > 0 || len(h["Http2-Settings"]) > 0 {
		return true
	}
	for _, v := range h["Connection"] {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "upgrade") {
				return true
			}
		}
	}
	return false
}

// admitJSONRequest refuses a POST the gateway would not read as every
// upstream reads it: a media type other than application/json, a
// charset other than UTF-8, any content coding.
func admitJSONRequest(h http.Header) *framingError {
	if err := identity(h); err != nil {
		return refuseFraming(http.StatusUnsupportedMediaType, "request %v: the gateway reads uncompressed bodies only", err)
	}
	ct := h["Content-Type"]
	if len(ct) != 1 {
		return refuseFraming(http.StatusUnsupportedMediaType, "want one Content-Type: application/json, got %d", len(ct))
	}
	mt, _, err := messageType(ct[0])
	if err != nil || mt != "application/json" {
		return refuseFraming(http.StatusUnsupportedMediaType, "Content-Type %q: the gateway reads application/json in UTF-8 only", ct[0])
	}
	return nil
}

var errEncoded = errors.New("has a Content-Encoding")

// identity refuses a message with a content coding other than identity.
func identity(h http.Header) error {
	for _, v := range h["Content-Encoding"] {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" && !strings.EqualFold(t, "identity") {
				return fmt.Errorf("%w %q", errEncoded, v)
			}
		}
	}
	return nil
}

// jsonLike reports whether some client may read a body of media type mt
// as JSON or as an SSE stream: the gateway reads application/json and
// text/event-stream itself and refuses the rest (text/json,
// application/json-seq, application/vnd.x+json, text/event-streamx: the
// MCP Python SDK tests startswith("text/event-stream"), httpx-sse
// "in").
func jsonLike(mt string) bool {
	return strings.Contains(mt, "json") || strings.Contains(mt, "event-stream")
}

// What the gateway does with a response, by its framing.
type responseKind int

const (
	respEmpty responseKind = iota // no body to read (202 Accepted)
	respJSON                      // read, and rewritten, as JSON-RPC
	respSSE                       // rewritten event by event
	respOther                     // read, and refused if it names a state
)

// errUpstreamFraming is a response whose framing the gateway does not
// read: it is refused, as a malformed response is.
var errUpstreamFraming = fmt.Errorf("%w: framing the gateway does not read", errUpstreamResponse)

// admitResponse says how the gateway reads resp, and the Content-Type it
// writes for what it read ("" for none), or refuses it.
func admitResponse(resp *http.Response) (responseKind, string, error) {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return 0, "", fmt.Errorf("%w: a 101 Switching Protocols", errUpstreamFraming)
	}
	if resp.StatusCode == http.StatusPartialContent || len(resp.Header["Content-Range"]) > 0 {
		return 0, "", fmt.Errorf("%w: a partial body (the gateway reads whole bodies)", errUpstreamFraming)
	}
	if err := identity(resp.Header); err != nil {
		return 0, "", fmt.Errorf("%w: %v (the gateway asks for identity)", errUpstreamFraming, err)
	}
	ct := resp.Header["Content-Type"]
	if len(ct) > 1 {
		return 0, "", fmt.Errorf("%w: %d Content-Type headers", errUpstreamFraming, len(ct))
	}
	if len(ct) == 0 || ct[0] == "" {
		if resp.ContentLength == 0 {
			return respEmpty, "", nil
		}
		return respJSON, "", nil // read as JSON if it is, else as other (readAnswer)
	}
	mt, params, err := messageType(ct[0])
	switch {
	case err != nil:
		return 0, "", fmt.Errorf("%w: Content-Type: %v", errUpstreamFraming, err)
	case mt == "text/event-stream":
		return respSSE, "text/event-stream", nil
	case mt == "application/json":
		return respJSON, "application/json", nil
	case jsonLike(mt):
		return 0, "", fmt.Errorf("%w: Content-Type %q, which a client may read as JSON or SSE", errUpstreamFraming, ct[0])
	}
	if cs, ok := params["charset"]; ok && !asciiEqualFold(cs, "utf-8") && !asciiEqualFold(cs, "us-ascii") {
		return 0, "", fmt.Errorf("%w: Content-Type %q: a charset the gateway does not read", errUpstreamFraming, ct[0])
	}
	return respOther, otherType(mt), nil
}

// checkOther refuses a body of another media type that a client could
// read a state from: one that is not UTF-8 text (the gateway writes it
// as such; in another charset, EBCDIC say, its bytes may spell a state
// the byte test cannot see), has a control character but tab, CR and LF
// (a NUL hides the name in UTF-16), or names requestState in any
// spelling, quoted or not (a YAML or JSON5 reader takes it bare).
func checkOther(body []byte) error {
	if !utf8.Valid(body) || hasState(body) || bareState(body) || letterEscape(body) {
		return fmt.Errorf("%w: a body of another media type that may hold a requestState", errUpstreamFraming)
	}
	for _, c := range body {
		if c < 0x20 && c != '\t' && c != '\r' && c != '\n' || c == 0x7f {
			return fmt.Errorf("%w: a body of another media type with control characters", errUpstreamFraming)
		}
	}
	return nil
}

// letterEscape reports whether b has a backslash escape that YAML, JSON5
// or a language's string may read as a letter (\x53, \U00000053, and
// \u, which hasState refuses too), or a backslash ending a line: a name
// spelled with them hides from the byte tests.
func letterEscape(b []byte) bool {
	for i := bytes.IndexByte(b, '\\'); i >= 0 && i+1 < len(b); {
		switch b[i+1] {
		case 'x', 'X', 'u', 'U', '\n', '\r':
			return true
		}
		j := bytes.IndexByte(b[i+2:], '\\')
		if j < 0 {
			return false
		}
		i += 2 + j
	}
	return false
}

// bareState reports whether b names requeststate in any case, with any
// '_' and '-' between its letters, quoted or not.
func bareState(b []byte) bool {
	const want = "requeststate"
	n := 0
	for _, c := range b {
		if c == '_' || c == '-' {
			continue
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		switch {
		case c == want[n]:
			n++
		case c == want[0]:
			n = 1
		default:
			n = 0
		}
		if n == len(want) {
			return true
		}
	}
	return false
}

// looksJSON reports whether an untyped body is a JSON object or array.
func looksJSON(b []byte) bool {
	i := jsonscan.SkipSpace(b, 0)
	return i < len(b) && (b[i] == '{' || b[i] == '[') && validJSON(b)
}
