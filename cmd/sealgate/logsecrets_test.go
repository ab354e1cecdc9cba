package main

import (
	"strings"
	"testing"
)

// TestLogsHoldNoCredentials reads sealgate's logs and /healthz as a log
// reader would, with credentials in the -upstream and -jwks-url URLs
// (user information, an access_token query): none shows. A plain-http
// upstream on a host that is not loopback is warned about. (Found by a
// log-reader review: both URLs were logged raw, and the JWKS fetch's
// error, with its query token, reached /healthz.)
func TestLogsHoldNoCredentials(t *testing.T) {
	up := "http://upuser:UpstreamPW@127.0.0.1:1/,http://upstream.example.test:8080/"
	r := startRun(t, "-upstream", up, "-principal", "jwt",
		"-jwt-issuer", "i", "-jwt-audience", "a", "-jwks-url", "https://jwksuser:JwksPW@127.0.0.1:1/jwks?access_token=JwksTok")
	waitFor(t, "the keyset", func() bool { return strings.Contains(r.logs.String(), "sealgate: keyset loaded") })
	_, health := r.get(t, "/healthz")
	r.stop()
	logs := r.logs
	all := logs.String() + health
	for _, secret := range []string{"UpstreamPW", "JwksPW", "JwksTok"} {
		if strings.Contains(all, secret) {
			t.Errorf("%s shows:\n%s", secret, all)
		}
	}
	if !strings.Contains(logs.String(), "plain http to a host that is not loopback") || !strings.Contains(logs.String(), "upstream.example.test") {
		t.Errorf("no warning for the plain-http upstream off loopback:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "not ready until the JWKS is fetched") || strings.Contains(logs.String(), "keyset loaded; ready") {
		t.Errorf("the log says ready while the JWKS was never fetched:\n%s", logs.String())
	}
	if strings.Count(logs.String(), "plain http to a host that is not loopback") != 1 {
		t.Errorf("the loopback upstream was warned about too:\n%s", logs.String())
	}
}
