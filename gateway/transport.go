package gateway

import "net/http"

// maxIdlePerUpstream is how many idle connections the default transport
// keeps to each upstream. http.DefaultTransport keeps 2, so past two
// concurrent requests the gateway would dial (and close) a connection
// for most requests: measured in BenchmarkConcurrency.
const maxIdlePerUpstream = 256

// maxResponseHeaderBytes bounds an upstream's response headers.
const maxResponseHeaderBytes = 64 << 10

// defaultTransport is the gateway's transport when Gateway.Transport is
// nil: a clone of http.DefaultTransport that keeps maxIdlePerUpstream
// idle connections to each upstream, with no total bound but that
// (there are len(Upstreams) hosts; the default's total of 100 would cap
// one upstream below 256).
func defaultTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = maxIdlePerUpstream
	// Go's default is 10 MiB of response headers, which the client
	// gets too (copyResponseHeaders), outside the response budget.
	t.MaxResponseHeaderBytes = maxResponseHeaderBytes
	return t
}
