package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// The headers a client gets with a response are the gateway's wherever
// they describe the body it read: a header that tells a client how to
// read the bytes (their media type, charset, length, coding, range or
// digest) is written by the gateway from what it read, or the response
// is refused, never passed on as the upstream spelled it. A client that
// reads a header differently from the gateway (Go's mime.ParseMediaType
// lets an RFC 2231 "charset*" override "charset", Python's email reader
// takes the other) would otherwise decode the bytes in a charset in which
// they spell a plaintext state the gateway never saw. docs/GATEWAY.md,
// "Response headers", lists what passes and why.

// ownedHeaders are the response headers the gateway writes itself, or
// drops: it never copies them from the upstream.
var ownedHeaders = map[string]bool{
	"content-type":   true, // written from the media type the gateway read
	"content-length": true, // computed from the body the client gets
	// Admitted as identity only, and dropped: the client gets the bytes
	// the gateway read, uncoded.
	"content-encoding": true,
	// Digests and validators of the upstream's body, which sealing
	// changes: a client or cache checking them would refuse the body,
	// or keep it under the upstream's name.
	"content-md5": true, "digest": true, "content-digest": true, "repr-digest": true, "etag": true,
	// The gateway serves no ranges (a partial response is refused).
	"accept-ranges": true,
	// MIME's, which no HTTP client should read, but one may.
	"content-transfer-encoding": true,
}

// passedContentHeaders are the Content-* headers copied from the
// upstream: they say nothing about how to read the bytes. Every other
// Content-* header is dropped, whatever new meaning a client gives it.
var passedContentHeaders = map[string]bool{
	"content-language": true, "content-disposition": true, "content-location": true,
	"content-security-policy": true, "content-security-policy-report-only": true,
}

// copyResponseHeaders copies to dst the upstream's headers the gateway
// does not own (hop-by-hop ones are gone already): every name spelled
// plainly (a name another spelling of an owned one, "Content_Type", is
// dropped: some readers fold '_' into '-').
func copyResponseHeaders(dst, src http.Header) {
	for k, vv := range src {
		if !keepResponseHeader(k) {
			continue
		}
		dst[k] = append(dst[k], vv...)
	}
}

func keepResponseHeader(name string) bool {
	// The common names are canonical and plain: looked up without
	// folding, which allocates.
	switch name {
	case "Content-Type", "Content-Length", "Content-Encoding", "Etag":
		return false
	case "Date", "Cache-Control", "Mcp-Session-Id", "Server", "Vary", "Www-Authenticate", "Retry-After", "Set-Cookie", "X-Content-Type-Options":
		return true
	}
	f := headerFold(name)
	// A Content-* header in another spelling is dropped, even one passed
	// in its plain spelling: a reader may take either.
	if ownedHeaders[f] || !plainHeader(name) && strings.HasPrefix(f, "content-") {
		return false
	}
	if strings.HasPrefix(f, "content-") {
		return passedContentHeaders[f]
	}
	return true
}

// errMediaType is a Content-Type the gateway does not read as every
// client reads it.
var errMediaType = errors.New("a media type the gateway does not read")

// mediaType reads a Content-Type strictly (RFC 9110, section 8.3.1):
// type/subtype, lower-cased, and its parameters, each a token name and a
// token or quoted-string value. It refuses what readers disagree on: a
// name with '*' (RFC 2231's charset*=, and its continuations), a name
// given twice, bytes outside the grammar.
func mediaType(ct string) (mt string, params map[string]string, err error) {
	mt, rest, _ := strings.Cut(ct, ";")
	mt = strings.ToLower(trimOWS(mt))
	typ, sub, ok := strings.Cut(mt, "/")
	if !ok || !isToken(typ) || !isToken(sub) {
		return "", nil, fmt.Errorf("%w: %q is not type/subtype", errMediaType, mt)
	}
	for rest != "" {
		var p string
		p, rest = cutParam(rest)
		p = trimOWS(p)
		name, value, ok := strings.Cut(p, "=")
		name = strings.ToLower(name)
		if !ok || !isToken(name) || strings.Contains(name, "*") {
			return "", nil, fmt.Errorf("%w: parameter %q", errMediaType, p)
		}
		if value, ok = paramValue(value); !ok {
			return "", nil, fmt.Errorf("%w: parameter %q", errMediaType, p)
		}
		if params == nil {
			params = map[string]string{}
		}
		if _, dup := params[name]; dup {
			return "", nil, fmt.Errorf("%w: parameter %q given twice", errMediaType, name)
		}
		params[name] = value
	}
	return mt, params, nil
}

// cutParam cuts the first parameter off s, at a ';' outside a quoted
// string.
func cutParam(s string) (param, rest string) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == ';' && !quoted:
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// paramValue reads a token or a quoted-string.
func paramValue(v string) (string, bool) {
	if isToken(v) {
		return v, true
	}
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	var b strings.Builder
	for i := 1; i < len(v)-1; i++ {
		c := v[i]
		if c == '\\' {
			if i++; i == len(v)-1 {
				return "", false
			}
			c = v[i]
		}
		if c < 0x20 && c != '\t' || c == 0x7f || c == '"' && v[i-1] != '\\' {
			return "", false
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

func trimOWS(s string) string { return strings.Trim(s, " \t") }

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?={}`, c) >= 0 {
			return false
		}
	}
	return true
}

// messageType reads the Content-Type of a JSON or SSE message, request or
// response: its media type, which may carry no parameter but one
// charset=utf-8, spelled plainly. Anything else (a second charset,
// charset*=, a quoted or other spelling of the charset, any other
// parameter) is refused: the gateway reads these bodies as UTF-8, and so
// must every reader after it. Another media type comes back with its
// parameters, which the gateway does not pass on (otherType).
func messageType(ct string) (mt string, params map[string]string, err error) {
	if ct == "application/json" || ct == "text/event-stream" {
		return ct, nil, nil // the usual, without the parser's allocations
	}
	if mt, params, err = mediaType(ct); err != nil {
		return "", nil, err
	}
	if mt != "application/json" && mt != "text/event-stream" || len(params) == 0 {
		return mt, params, nil
	}
	if _, rest, _ := strings.Cut(ct, ";"); !asciiEqualFold(trimOWS(rest), "charset=utf-8") {
		return "", nil, fmt.Errorf("%w: %q: a JSON or SSE body may carry one parameter only, charset=utf-8", errMediaType, ct)
	}
	return mt, nil, nil
}

// otherType is the Content-Type the gateway writes for a body of another
// media type mt: mt alone, with charset=utf-8, whatever parameters the
// upstream gave. Parameters are where readers disagree (a quoted
// "\\" that Python's email reader takes for an escaped quote hides a
// charset=cp037 from the gateway's reading), and a body the gateway
// checked as UTF-8 text (checkOther) must be read as such: with no
// charset, requests and aiohttp guess one (cp037 for an EBCDIC body).
func otherType(mt string) string {
	return mt + "; charset=utf-8"
}

// asciiEqualFold is strings.EqualFold over ASCII only: Unicode's folding
// takes "ſ" (U+017F) for "s", and no reader of headers does.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
