package gateway

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stateseal/stateseal/internal/testkit"
)

// TestPrincipalReasons: each way a JWT is refused is counted under its
// own reason, from the bounded set; a good token counts nothing.
func TestPrincipalReasons(t *testing.T) {
	is := newIssuer(t)
	s := is.key(t, "k1")
	now := time.Now()
	g := &Gateway{Principal: &JWTPrincipal{Issuer: "https://id.test", Audience: "https://mcp.test", JWKSURL: is.srv.URL, MinRefresh: time.Nanosecond}}
	good := jwt.Claims{Issuer: "https://id.test", Subject: "alice", Audience: jwt.Audience{"https://mcp.test"}, Expiry: jwt.NewNumericDate(now.Add(time.Hour))}
	k := testkit.Must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	rogue := testkit.Must(jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", "k1")))
	other := testkit.Must(jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", "nope")))
	with := func(f func(*jwt.Claims)) string { c := good; f(&c); return "Bearer " + token(t, s, c) }
	for auth, want := range map[string]string{
		"Bearer " + token(t, s, good):     "",
		"":                                "missing",
		"Bearer not.a.jwt":                "malformed",
		"Bearer " + token(t, other, good): "key",
		"Bearer " + token(t, rogue, good): "signature",
		with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-time.Hour)) }):   "expired",
		with(func(c *jwt.Claims) { c.NotBefore = jwt.NewNumericDate(now.Add(time.Hour)) }): "not_yet_valid",
		with(func(c *jwt.Claims) { c.Issuer = "https://evil.test" }):                       "issuer",
		with(func(c *jwt.Claims) { c.Audience = jwt.Audience{"https://other.test"} }):      "audience",
		with(func(c *jwt.Claims) { c.Subject = "" }):                                       "claim",
	} {
		before := g.Stats.Principal.Failures()
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		g.principal(r)
		after := g.Stats.Principal.Failures()
		for _, reason := range PrincipalReasons {
			d := after[reason] - before[reason]
			if reason == want && d != 1 || reason != want && d != 0 {
				t.Errorf("want reason %q: %s counted %d", want, reason, d)
			}
		}
	}
}
