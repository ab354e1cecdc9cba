package gateway

import (
	"net/http"
	"testing"
)

// TestDefaultTransportKeepsConnections: with no Transport, the gateway
// keeps idle connections for 256 concurrent requests to an upstream, not
// http.DefaultTransport's 2 (past which it dials for most requests).
func TestDefaultTransportKeepsConnections(t *testing.T) {
	g := &Gateway{}
	g.init()
	tr, ok := g.transport.(*http.Transport) // under the failover between upstreams
	if !ok {
		t.Fatalf("default transport is %T", g.transport)
	}
	if tr.MaxIdleConnsPerHost != 256 || tr.MaxIdleConns != 0 {
		t.Fatalf("idle connections: %d per host, %d in all; want 256 per host and no total bound", tr.MaxIdleConnsPerHost, tr.MaxIdleConns)
	}
	if tr == http.DefaultTransport {
		t.Fatal("the gateway changed http.DefaultTransport itself")
	}
}
