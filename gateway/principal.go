package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// A PrincipalSource says who sent a request: the principal its states are
// bound to. A request without one cannot carry state (unless the source
// is Anonymous).
type PrincipalSource interface {
	// Principal returns the request's authenticated caller, or an error.
	Principal(r *http.Request) (string, error)
	// Forward adjusts the request going upstream (out) for what the
	// source trusts: HeaderPrincipal removes its header when it came from
	// an address it does not trust.
	Forward(in, out *http.Request)
}

// errNoPrincipal: the request has no principal this source accepts.
var errNoPrincipal = errors.New("gateway: no principal")

// Anonymous binds every state to no one: for an upstream without users,
// whose tools act the same for every caller (mrtr.Options.AllowAnonymous).
type Anonymous struct{}

func (Anonymous) Principal(*http.Request) (string, error) { return "", nil }
func (Anonymous) Forward(_, _ *http.Request)              {}

// HeaderPrincipal takes the principal from a header that an
// authenticating proxy in front of the gateway sets, and only on requests
// from that proxy's addresses. From any other address the header is
// ignored and removed before the request goes upstream, so that a client
// cannot name itself to the upstream either.
type HeaderPrincipal struct {
	Header  string         // such as X-Forwarded-User
	Trusted []netip.Prefix // the proxy's addresses
}

func (h *HeaderPrincipal) trusted(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range h.Trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func (h *HeaderPrincipal) Principal(r *http.Request) (string, error) {
	if !h.trusted(r) {
		return "", fmt.Errorf("%w: %s set by an untrusted address", errNoPrincipal, h.Header)
	}
	if h.variant(r.Header) {
		// X_Forwarded_User beside X-Forwarded-User: which one an
		// upstream reads is its choice, not the proxy's.
		return "", fmt.Errorf("%w: %s spelled another way too", errNoPrincipal, h.Header)
	}
	v := r.Header.Values(h.Header)
	if len(v) != 1 || v[0] == "" {
		return "", fmt.Errorf("%w: want one %s header", errNoPrincipal, h.Header)
	}
	return v[0], nil
}

// Forward removes the header from a request from an untrusted address,
// and, from any address, every other spelling of its name that a server
// may read as the same: WSGI and CGI map X_Forwarded_User and
// X-Forwarded-User to one variable, PHP X.Forwarded.User too, so a name
// is compared as headerFold folds it.
func (h *HeaderPrincipal) Forward(in, out *http.Request) {
	trusted := h.trusted(in)
	canon := http.CanonicalHeaderKey(h.Header)
	want := headerFold(h.Header)
	for k := range out.Header {
		if sameHeader(k, want) && (!trusted || k != canon) {
			delete(out.Header, k)
		}
	}
}

// variant reports whether hdr has the header under another spelling.
func (h *HeaderPrincipal) variant(hdr http.Header) bool {
	canon, want := http.CanonicalHeaderKey(h.Header), headerFold(h.Header)
	for k := range hdr {
		if k != canon && sameHeader(k, want) {
			return true
		}
	}
	return false
}

// headerFold is a header name as the most lenient server compares it:
// case folded, and every byte but a letter or a digit read as '-'. CGI
// and WSGI servers read '_' as '-'; PHP reads '.' and ' ' as '_' too
// ($_SERVER), so X.Forwarded.User is HTTP_X_FORWARDED_USER there.
func headerFold(name string) string {
	b := []byte(name)
	for i, c := range b {
		b[i] = foldByte(c)
	}
	return string(b)
}

func foldByte(c byte) byte {
	switch {
	case 'A' <= c && c <= 'Z':
		return c + 'a' - 'A'
	case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return c
	}
	return '-'
}

// plainHeader reports whether name is spelled only with letters, digits
// and '-': its canonical form is then the only spelling of its fold
// (net/http has made the case canonical).
func plainHeader(name string) bool {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c != '-' && foldByte(c) == '-' {
			return false
		}
	}
	return true
}

// sameHeader reports whether headerFold(name) is folded, without
// allocating: it runs on every header of every request.
func sameHeader(name, folded string) bool {
	if len(name) != len(folded) {
		return false
	}
	for i := 0; i < len(name); i++ {
		if foldByte(name[i]) != folded[i] {
			return false
		}
	}
	return true
}

// CertPrincipal takes the principal from the client's TLS certificate,
// verified by the gateway's listener against its client CAs: the
// certificate's subject, its first URI SAN (a SPIFFE id), or the SHA-256
// of the certificate.
type CertPrincipal struct {
	Field string // "subject" (default), "uri" or "sha256"
}

func (c *CertPrincipal) Principal(r *http.Request) (string, error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return "", fmt.Errorf("%w: no verified client certificate", errNoPrincipal)
	}
	cert := r.TLS.VerifiedChains[0][0]
	switch c.Field {
	case "", "subject":
		if s := cert.Subject.String(); s != "" {
			return s, nil
		}
	case "uri":
		if len(cert.URIs) > 0 {
			return cert.URIs[0].String(), nil
		}
	case "sha256":
		sum := sha256.Sum256(cert.Raw)
		return "sha256:" + hex.EncodeToString(sum[:]), nil
	}
	return "", fmt.Errorf("%w: the client certificate has no %s", errNoPrincipal, c.Field)
}

func (*CertPrincipal) Forward(_, _ *http.Request) {}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	v := r.Header.Values("Authorization")
	if len(v) != 1 {
		return "", false
	}
	scheme, tok, ok := strings.Cut(v[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
