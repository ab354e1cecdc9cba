package main

// The test upstream and client package gateway's tests use (gateway/gatewaytest), for the tests
// here that run the whole command.

import (
	"net/http"
	"testing"

	"github.com/stateseal/stateseal/gateway/gatewaytest"
)

// A fixture is a client of the gateway at url.
type fixture struct {
	t   *testing.T
	url string
	hc  *http.Client
}

// The shared test ends of JSON-RPC over HTTP, by the names these tests use.
type upstream = gatewaytest.Upstream

var (
	stateReply = gatewaytest.StateReply
	rpcCall    = gatewaytest.Call
	resultOf   = gatewaytest.ResultOf
	refused    = gatewaytest.Refused
)

// post sends one JSON-RPC message and returns the status and the decoded
// reply (the last message of an SSE stream).
func (f *fixture) post(msg any, hdr map[string]string) (int, map[string]any) {
	f.t.Helper()
	return gatewaytest.Post(f.t, f.hc, f.url, msg, hdr)
}

var v2026 = map[string]string{"Mcp-Protocol-Version": "2026-07-28"}
