package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/stateseal/stateseal/internal/loopback"
	"github.com/stateseal/stateseal/internal/redact"
)

// JWTPrincipal verifies the request's bearer token, a JWT signed by a key
// of the issuer's JWKS, and takes the principal from one of its claims
// (sub by default). The token must name Issuer, include Audience, and
// carry an expiry that has not passed (Leeway allowed). The gateway
// checks the token only to bind states to its subject: it forwards
// Authorization upstream (unless told not to) and leaves authorization to
// the upstream.
type JWTPrincipal struct {
	Issuer   string
	Audience string
	JWKSURL  string
	// Claim holds the principal; "" means "sub".
	Claim string
	// Algorithms accepted; nil means RS256, RS384, RS512, PS256, PS384,
	// PS512, ES256, ES384, ES512 and EdDSA (never "none" or HMAC).
	Algorithms []jose.SignatureAlgorithm
	// Leeway for exp, nbf and iat; 0 means 30 seconds.
	Leeway time.Duration
	// Refresh is how often the JWKS is fetched again; 0 means 10 minutes.
	// A token naming a key id the cached set lacks makes it fetched again
	// at once, at most every MinRefresh (0 means 30 seconds).
	Refresh, MinRefresh time.Duration
	// Client fetches the JWKS; nil means a client with a 10 s timeout.
	Client *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu      sync.Mutex
	keys    *jose.JSONWebKeySet
	fetched time.Time // last attempt
	fetchOK time.Time // last success
	lastErr error
}

var defaultAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// maxJWKSBytes bounds a JWKS document.
const maxJWKSBytes = 1 << 20

func (j *JWTPrincipal) now() time.Time {
	if j.Now != nil {
		return j.Now()
	}
	return time.Now()
}

func (j *JWTPrincipal) Forward(_, _ *http.Request) {}

func (j *JWTPrincipal) Principal(r *http.Request) (string, error) {
	raw, ok := bearer(r)
	if !ok {
		return "", fmt.Errorf("%w: no bearer token", errNoPrincipal)
	}
	algs := j.Algorithms
	if algs == nil {
		algs = defaultAlgorithms
	}
	tok, err := jwt.ParseSigned(raw, algs)
	if err != nil {
		return "", fmt.Errorf("%w: %w", errNoPrincipal, because("malformed", err))
	}
	if len(tok.Headers) != 1 {
		return "", fmt.Errorf("%w: %w", errNoPrincipal, because("malformed", errors.New("want one signature")))
	}
	key, err := j.key(r.Context(), tok.Headers[0].KeyID, tok.Headers[0].Algorithm)
	if err != nil {
		return "", fmt.Errorf("%w: %w", errNoPrincipal, because("key", err))
	}
	var std jwt.Claims
	var all map[string]any
	if err := tok.Claims(key.Key, &std, &all); err != nil {
		return "", fmt.Errorf("%w: %w", errNoPrincipal, because("signature", err))
	}
	if std.Expiry == nil {
		return "", fmt.Errorf("%w: the token has no expiry", errNoPrincipal)
	}
	leeway := j.Leeway
	if leeway == 0 {
		leeway = 30 * time.Second
	}
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: j.Issuer, AnyAudience: jwt.Audience{j.Audience}, Time: j.now()}, leeway); err != nil {
		return "", fmt.Errorf("%w: %w", errNoPrincipal, err)
	}
	claim := j.Claim
	if claim == "" {
		claim = "sub"
	}
	p, _ := all[claim].(string)
	if p == "" {
		return "", fmt.Errorf("%w: the token has no %s claim", errNoPrincipal, claim)
	}
	return p, nil
}

// key returns the JWKS key with the id (and algorithm), fetching the set
// when it is stale or lacks the id.
func (j *JWTPrincipal) key(ctx context.Context, kid, alg string) (*jose.JSONWebKey, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	refresh, minRefresh := j.Refresh, j.MinRefresh
	if refresh == 0 {
		refresh = 10 * time.Minute
	}
	if minRefresh == 0 {
		minRefresh = 30 * time.Second
	}
	now := j.now()
	k := j.find(kid, alg)
	stale := j.keys == nil || now.Sub(j.fetchOK) >= refresh
	if (k == nil || stale) && now.Sub(j.fetched) >= minRefresh {
		j.fetched = now
		if ks, err := j.fetch(ctx); err != nil {
			j.lastErr = err // keep the keys we have
		} else {
			j.keys, j.fetchOK, j.lastErr = ks, now, nil
			k = j.find(kid, alg)
		}
	}
	if k == nil {
		if j.lastErr != nil {
			return nil, fmt.Errorf("no key %q (fetching the JWKS: %v)", kid, j.lastErr)
		}
		return nil, fmt.Errorf("no key %q in the JWKS", kid)
	}
	return k, nil
}

func (j *JWTPrincipal) find(kid, alg string) *jose.JSONWebKey {
	if j.keys == nil {
		return nil
	}
	var match *jose.JSONWebKey
	n := 0
	for i := range j.keys.Keys {
		k := &j.keys.Keys[i]
		if k.Use == "enc" || (kid != "" && k.KeyID != kid) || (k.Algorithm != "" && k.Algorithm != alg) || !k.IsPublic() {
			continue
		}
		match = k
		n++
	}
	if n != 1 {
		return nil // none, or (without a kid) more than one to choose from
	}
	return match
}

func (j *JWTPrincipal) fetch(ctx context.Context) (*jose.JSONWebKeySet, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	if j.Client != nil {
		c = new(http.Client)
		*c = *j.Client // a copy, to add the redirect rule below
	}
	next := c.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		// The JWKS decides who may sign tokens for any user: a redirect
		// must not take its fetch to plaintext (JWKSURL was checked, its
		// redirects were not).
		if err := j.secureHop(req.URL); err != nil {
			return err
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.JWKSURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		// The URL in the error as it may be shown (logs, /healthz): a
		// token in its query or user information is not.
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			return nil, fmt.Errorf("JWKS: %s %s: %w", ue.Op, redact.URL(ue.URL), ue.Err)
		}
		return nil, err
	}
	defer resp.Body.Close()
	if err := j.secureHop(resp.Request.URL); err != nil { // a client of the caller's may follow redirects its own way
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("JWKS: HTTP %d", resp.StatusCode)
	}
	b, err := readBounded(resp.Body, maxJWKSBytes)
	if err != nil {
		return nil, fmt.Errorf("JWKS: %w", err)
	}
	var ks jose.JSONWebKeySet
	if err := json.Unmarshal(b, &ks); err != nil {
		return nil, fmt.Errorf("JWKS: %w", err)
	}
	if len(ks.Keys) == 0 {
		return nil, errors.New("JWKS: no keys")
	}
	return &ks, nil
}

// secureHop refuses a JWKS fetch at u in plaintext to a host that is not
// loopback, unless JWKSURL itself names that scheme and host (sealgate
// allows it with -jwks-insecure-http).
func (j *JWTPrincipal) secureHop(u *url.URL) error {
	if u.Scheme == "https" || loopback.Host(u.Hostname()) {
		return nil
	}
	if c, err := url.Parse(j.JWKSURL); err == nil && c.Scheme == u.Scheme && c.Host == u.Host {
		return nil
	}
	return fmt.Errorf("JWKS: redirected to %s, plain %s on a host that is not loopback: refused", redact.URL(u.String()), u.Scheme)
}

// Warm fetches the JWKS once, so that a misconfigured URL shows at start.
func (j *JWTPrincipal) Warm(ctx context.Context) error {
	ks, err := j.fetch(ctx)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	j.mu.Lock()
	j.keys, j.fetched, j.fetchOK = ks, j.now(), j.now()
	j.mu.Unlock()
	return nil
}
