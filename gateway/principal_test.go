package gateway

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/mrtr"
)

// issuer is a JWKS served from a local httptest server.
type issuer struct {
	mu      sync.Mutex
	keys    []jose.JSONWebKey
	fetches atomic.Int64
	srv     *httptest.Server
}

func newIssuer(t *testing.T) *issuer {
	is := &issuer{}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		is.fetches.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: is.keys})
	}))
	t.Cleanup(is.srv.Close)
	return is
}

// key adds a new signing key to the JWKS and returns its signer.
func (is *issuer) key(t *testing.T, kid string) jose.Signer {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	is.keys = append(is.keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"})
	is.mu.Unlock()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func token(t *testing.T, s jose.Signer, c jwt.Claims) string {
	tok, err := jwt.Signed(s).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestJWTPrincipal(t *testing.T) {
	is := newIssuer(t)
	s1 := is.key(t, "k1")
	now := time.Now()
	j := &JWTPrincipal{Issuer: "https://id.test", Audience: "https://mcp.test", JWKSURL: is.srv.URL, MinRefresh: time.Nanosecond}
	good := jwt.Claims{Issuer: "https://id.test", Subject: "alice", Audience: jwt.Audience{"https://mcp.test"}, Expiry: jwt.NewNumericDate(now.Add(time.Hour))}
	req := func(auth string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		return r
	}
	if p, err := j.Principal(req("Bearer " + token(t, s1, good))); p != "alice" || err != nil {
		t.Fatalf("valid token: %q %v", p, err)
	}
	bad := func(name string, c jwt.Claims) {
		if p, err := j.Principal(req("Bearer " + token(t, s1, c))); err == nil {
			t.Errorf("%s: accepted as %q", name, p)
		}
	}
	c := good
	c.Issuer = "https://evil.test"
	bad("another issuer", c)
	c = good
	c.Audience = jwt.Audience{"https://other.test"}
	bad("another audience", c)
	c = good
	c.Expiry = jwt.NewNumericDate(now.Add(-time.Hour))
	bad("expired", c)
	c = good
	c.Expiry = nil
	bad("no expiry", c)
	c = good
	c.Subject = ""
	bad("no subject", c)
	// Signed by a key the issuer does not publish.
	k := testkit.Must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	rogue := testkit.Must(jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", "k1")))
	if _, err := j.Principal(req("Bearer " + token(t, rogue, good))); err == nil {
		t.Error("a token signed by another key was accepted")
	}
	// HMAC with the public key as secret, and alg none: refused.
	hs := testkit.Must(jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("secret-secret-secret-secret-1234")}, nil))
	if _, err := j.Principal(req("Bearer " + token(t, hs, good))); err == nil {
		t.Error("an HS256 token was accepted")
	}
	for _, h := range []string{"", "Basic abc", "Bearer ", "Bearer not.a.jwt"} {
		if _, err := j.Principal(req(h)); err == nil {
			t.Errorf("Authorization %q accepted", h)
		}
	}
	// The issuer rotates: a token with a new key id makes the JWKS fetched
	// again, once.
	s2 := is.key(t, "k2")
	before := is.fetches.Load()
	if p, err := j.Principal(req("Bearer " + token(t, s2, good))); p != "alice" || err != nil {
		t.Fatalf("new key: %q %v", p, err)
	}
	if is.fetches.Load() != before+1 {
		t.Fatalf("fetched %d times for a new key", is.fetches.Load()-before)
	}
}

// TestJWTThroughGateway: a state sealed for one subject does not open for
// another, and a request whose token does not verify cannot carry state.
func TestJWTThroughGateway(t *testing.T) {
	is := newIssuer(t)
	s := is.key(t, "k1")
	f := newFixture(t, stateReply, func(g *Gateway, o *mrtr.Options) {
		o.AllowAnonymous = false
		g.Principal = &JWTPrincipal{Issuer: "https://id.test", Audience: "https://mcp.test", JWKSURL: is.srv.URL}
	})
	claims := func(sub string, exp time.Duration) string {
		return "Bearer " + token(t, s, jwt.Claims{Issuer: "https://id.test", Subject: sub, Audience: jwt.Audience{"https://mcp.test"}, Expiry: jwt.NewNumericDate(time.Now().Add(exp))})
	}
	alice := map[string]string{headerVersion: version2026, "Authorization": claims("alice", time.Hour)}
	_, m := f.post(rpcCall(1, mrtr.MethodCallTool, "book", nil, ""), alice)
	tok := resultOf(t, m)["requestState"].(string)
	_, h := f.up.Last()
	if h.Get("Authorization") != alice["Authorization"] {
		t.Fatal("Authorization was not forwarded")
	}
	status, m := f.post(rpcCall(2, mrtr.MethodCallTool, "book", nil, tok), map[string]string{headerVersion: version2026, "Authorization": claims("bob", time.Hour)})
	refused(t, status, m, http.StatusBadRequest, "invalid")
	status, m = f.post(rpcCall(2, mrtr.MethodCallTool, "book", nil, tok), map[string]string{headerVersion: version2026, "Authorization": claims("alice", -time.Hour)})
	refused(t, status, m, http.StatusBadRequest, "invalid")
	_, m = f.post(rpcCall(3, mrtr.MethodCallTool, "book", nil, tok), alice)
	if !strings.Contains(resultOf(t, m)["content"].([]any)[0].(map[string]any)["text"].(string), "got plain:book") {
		t.Fatalf("alice's retry: %v", m)
	}
}

// TestCertPrincipal: the principal is the verified client certificate's
// subject; a client without one cannot carry state.
func TestCertPrincipal(t *testing.T) {
	caKey := testkit.Must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER := testkit.Must(x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey))
	ca := testkit.Must(x509.ParseCertificate(caDER))
	client := func(cn string) tls.Certificate {
		k := testkit.Must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		der := testkit.Must(x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey))
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
	}
	f := newFixture(t, stateReply, func(g *Gateway, o *mrtr.Options) {
		o.AllowAnonymous = false
		g.Principal = &CertPrincipal{}
	})
	// Serve the same gateway over TLS with client certificates.
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	ts := httptest.NewUnstartedServer(f.gw)
	ts.TLS = &tls.Config{ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven}
	ts.StartTLS()
	defer ts.Close()
	u := testkit.Must(url.Parse(ts.URL + "/mcp"))
	f.url = u.String()
	use := func(cert *tls.Certificate) {
		tr := ts.Client().Transport.(*http.Transport).Clone()
		if cert != nil {
			tr.TLSClientConfig.Certificates = []tls.Certificate{*cert}
		} else {
			tr.TLSClientConfig.Certificates = nil
		}
		f.hc = &http.Client{Transport: tr}
	}
	alice, bob := client("alice"), client("bob")
	use(&alice)
	_, m := f.post(rpcCall(1, mrtr.MethodCallTool, "book", nil, ""), v2026)
	tok := resultOf(t, m)["requestState"].(string)
	use(&bob)
	status, m := f.post(rpcCall(2, mrtr.MethodCallTool, "book", nil, tok), v2026)
	refused(t, status, m, http.StatusBadRequest, "invalid")
	use(nil)
	status, m = f.post(rpcCall(2, mrtr.MethodCallTool, "book", nil, tok), v2026)
	refused(t, status, m, http.StatusBadRequest, "invalid")
	use(&alice)
	_, m = f.post(rpcCall(3, mrtr.MethodCallTool, "book", nil, tok), v2026)
	if m["result"] == nil {
		t.Fatalf("alice's retry: %v", m)
	}
}
