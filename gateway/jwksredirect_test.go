package gateway

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestJWKSRedirectToPlaintext: the https JWKS URL redirects to plain http
// on a host that is not loopback (an IdP or CDN misconfigured, or a
// network attacker's answer), which a client following redirects would
// fetch keys from: whoever is on that path could then sign tokens for any
// user. The fetch is refused before the request goes out, with the
// caller's client and with the default one; a redirect to https is
// followed. (Found by a network-attacker review.)
func TestJWKSRedirectToPlaintext(t *testing.T) {
	var plainHits atomic.Int64
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plainHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"attacker"}]}`))
	}))
	defer plain.Close()
	good := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"good"}]}`))
	}))
	defer good.Close()
	// jwks.example.test is not loopback by name; the client's dialer
	// takes it to the plain server on loopback.
	target := "http://jwks.example.test/jwks.json"
	idp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("good") {
			http.Redirect(w, r, good.URL+"/jwks.json", http.StatusFound)
			return
		}
		http.Redirect(w, r, target, http.StatusFound)
	}))
	defer idp.Close()
	tr := idp.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: idp.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if strings.HasPrefix(addr, "jwks.example.test:") {
			addr = plain.Listener.Addr().String()
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	c := &http.Client{Transport: tr}
	j := &JWTPrincipal{Issuer: "i", Audience: "a", JWKSURL: idp.URL + "/jwks.json", Client: c}
	err := j.Warm(context.Background())
	if err == nil || !strings.Contains(err.Error(), "not loopback") || plainHits.Load() != 0 {
		t.Fatalf("redirect to plaintext: Warm %v, %d requests reached the plain server", err, plainHits.Load())
	}
	j = &JWTPrincipal{Issuer: "i", Audience: "a", JWKSURL: idp.URL + "/jwks.json?good", Client: c}
	if err := j.Warm(context.Background()); err != nil {
		t.Fatalf("redirect to https: %v", err)
	}
}
