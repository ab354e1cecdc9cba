package gateway

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// Host and Origin: which web pages may reach the gateway. A page whose
// name an attacker rebinds to this machine's address (DNS rebinding)
// makes the browser send the gateway requests that name the attacker's
// host in Host and its origin in Origin; MCP's Streamable HTTP transport
// says a server MUST validate Origin and answer one present and invalid
// with 403 (2025-11-25, "Security Warning"; 2026-07-28, "Security &
// Endpoint"). The upstream behind the gateway sees the gateway's Host,
// never the client's, so its own check cannot see the attack: the
// gateway checks both before anything else, on every path, for every
// protocol version.

// admitOrigin refuses a request, with 403, whose Host the gateway does
// not serve or whose Origin it does not allow (Gateway.AllowedHosts,
// Gateway.AllowedOrigins); nil admits it. A refusal is logged at most
// once a second: an attack, or a name the operator has to list.
func (g *Gateway) admitOrigin(r *http.Request) *framingError {
	err := g.origin.admit(r)
	if err != nil && g.origin.log.allow() {
		g.logger().Warn("gateway: refused a request for its Host or Origin: a web page's, or a name or origin to list in AllowedHosts or AllowedOrigins (sealgate -allowed-hosts, -allowed-origins)", "err", err.msg)
	}
	return err
}

// originCheck is what the gateway reads of AllowedHosts and
// AllowedOrigins (set once, by init), and the log of its refusals.
type originCheck struct {
	hosts, origins allowList
	log            everySecond
}

func (c *originCheck) admit(r *http.Request) *framingError {
	local := arrivedOnLoopback(r)
	ok := true // any host, without a list, on another address than loopback
	if host, read := hostName(r.Host); !c.hosts.any {
		switch {
		case c.hosts.names != nil:
			ok = read && c.hosts.names[host]
		case local:
			ok = read && loopbackName(host)
		}
	}
	if !ok {
		return refuseFraming(http.StatusForbidden, "Host %q is not allowed here (a web page whose name was rebound to this address?)", short(r.Host))
	}
	vals := r.Header["Origin"]
	if len(vals) == 0 || len(vals) == 1 && vals[0] == "" || c.origins.any {
		// No Origin: not a browser's request (every browser sends one
		// with a POST, and with any request a page makes of another
		// origin), and the Host check stands.
		return nil
	}
	if len(vals) > 1 {
		return refuseFraming(http.StatusForbidden, "%d Origin headers: want one", len(vals))
	}
	o, ok := parseOrigin(vals[0])
	switch {
	case !ok:
	case c.origins.names != nil:
		ok = c.origins.names[o.String()]
	case local:
		ok = (o.scheme == "http" || o.scheme == "https") && loopbackName(o.host)
	default:
		ok = false
	}
	if !ok {
		return refuseFraming(http.StatusForbidden, "Origin %q is not allowed here: no page of that origin may call this gateway", short(vals[0]))
	}
	return nil
}

// An allowList is AllowedHosts or AllowedOrigins as the gateway reads
// it: any ("*"), the names (normalized: hostName, parseOrigin), or
// neither (the list is empty: the default).
type allowList struct {
	any   bool
	names map[string]bool
}

// newAllowList reads a list, each entry normalized by norm; an entry
// that does not read matches nothing (Check* report it).
func newAllowList(entries []string, norm func(string) (string, error)) allowList {
	if len(entries) == 0 {
		return allowList{}
	}
	l := allowList{names: map[string]bool{}}
	for _, e := range entries {
		if e == "*" {
			l.any = true
			continue
		}
		if n, err := norm(e); err == nil {
			l.names[n] = true
		}
	}
	return l
}

// arrivedOnLoopback reports whether r reached the server on a loopback
// address (or on an address it cannot tell: the stricter rule then).
func arrivedOnLoopback(r *http.Request) bool {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	return !ok || a.IP.IsLoopback()
}

// loopbackName reports whether a normalized host name is this machine's:
// localhost, or a loopback IP address. Other names are not resolved: a
// rebound name resolves to loopback too.
func loopbackName(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// hostName is the name a Host header names, port and brackets removed,
// ASCII letters lower case, a final dot removed ("LocalHost.:8080" is
// "localhost", "[::1]:8080" is "::1"); false if it is not a host[:port].
func hostName(h string) (string, bool) {
	name, port := h, ""
	if strings.HasPrefix(h, "[") {
		i := strings.IndexByte(h, ']')
		if i < 0 {
			return "", false
		}
		name, port = h[1:i], h[i+1:]
		if port != "" && port[0] != ':' {
			return "", false
		}
		if _, err := netip.ParseAddr(name); err != nil || !strings.Contains(name, ":") {
			return "", false
		}
	} else if i := strings.IndexByte(h, ':'); i >= 0 {
		name, port = h[:i], h[i:]
	}
	for i := 1; i < len(port); i++ {
		if port[i] < '0' || port[i] > '9' {
			return "", false
		}
	}
	return normName(name)
}

// normName lower-cases a host name's ASCII letters and removes a final
// dot; false if it is empty or has a byte no host name has.
func normName(name string) (string, bool) {
	name = strings.TrimSuffix(name, ".")
	if name == "" {
		return "", false
	}
	b := []byte(name)
	for i, c := range b {
		switch {
		case 'A' <= c && c <= 'Z':
			b[i] = c + 'a' - 'A'
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == ':':
		default:
			return "", false
		}
	}
	return string(b), true
}

// An origin is a web origin, normalized: scheme and host in lower case,
// the scheme's default port left out.
type origin struct{ scheme, host, port string }

func (o origin) String() string {
	h := o.host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if o.port != "" {
		h += ":" + o.port
	}
	return o.scheme + "://" + h
}

// parseOrigin reads an Origin header's value: scheme://host[:port], and
// nothing else (no path, query, user). "null", the origin of a sandboxed
// page or a file, is no origin the gateway can allow.
func parseOrigin(s string) (origin, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" || u.User != nil || u.Path != "" ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.HasSuffix(u.Host, ":") {
		return origin{}, false
	}
	host, ok := hostName(u.Host)
	if !ok {
		return origin{}, false
	}
	o := origin{scheme: u.Scheme, host: host, port: u.Port()}
	if o.scheme == "http" && o.port == "80" || o.scheme == "https" && o.port == "443" {
		o.port = ""
	}
	return o, true
}

// hostEntry normalizes an AllowedHosts entry: a name or an IP address,
// without a port.
func hostEntry(s string) (string, error) {
	name := s
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		name = s[1 : len(s)-1]
	}
	n, ok := normName(name)
	if ok && strings.Contains(n, ":") {
		_, err := netip.ParseAddr(n)
		ok = err == nil
	}
	if !ok {
		return "", fmt.Errorf("allowed host %q: want a host name or an IP address, without a port (any port is allowed), or *", s)
	}
	return n, nil
}

// originEntry normalizes an AllowedOrigins entry.
func originEntry(s string) (string, error) {
	o, ok := parseOrigin(s)
	if !ok {
		return "", fmt.Errorf("allowed origin %q: want a web origin, scheme://host[:port] (https://app.example.com), or *", s)
	}
	return o.String(), nil
}

// CheckAllowedHost reports an entry that cannot be listed in
// Gateway.AllowedHosts (one with a port, say).
func CheckAllowedHost(s string) error {
	if s == "*" {
		return nil
	}
	_, err := hostEntry(s)
	return err
}

// CheckAllowedOrigin reports an entry that cannot be listed in
// Gateway.AllowedOrigins (one with a path, or "null").
func CheckAllowedOrigin(s string) error {
	if s == "*" {
		return nil
	}
	_, err := originEntry(s)
	return err
}
