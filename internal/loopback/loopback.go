// Package loopback tells whether a host a URL names is this machine. Every
// client in this module follows one rule with it: plaintext (http://,
// redis://) only to loopback, unless the configuration says otherwise in
// so many words, because whoever is on the path reads and changes what
// crosses it (a token, a data key, a single-use guard's answer).
package loopback

import (
	"net"
	"net/netip"
	"strings"
)

// Host reports whether host (a URL's Hostname: no port, no brackets) is
// "localhost" or a loopback IP address. Other names are not resolved: a
// name that resolves to loopback today may not tomorrow.
func Host(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// Addr is Host for an address host:port; an address that does not split
// is not loopback.
func Addr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && Host(host)
}
