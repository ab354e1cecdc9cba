package gateway

import "net/http"

// defaultTransport is the gateway's transport when Gateway.Transport is
// nil: a clone of http.DefaultTransport.
func defaultTransport() *http.Transport {
	return http.DefaultTransport.(*http.Transport).Clone()
}
