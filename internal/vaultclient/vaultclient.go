// Package vaultclient holds the Vault client that the vault backend's
// KEKs and the vault-kv store share in a process: one per configuration,
// logged in once (a Session).
package vaultclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/vault/api"
	"github.com/hashicorp/vault/api/auth/approle"

	"github.com/stateseal/stateseal/internal/loopback"
	"github.com/stateseal/stateseal/internal/share"
)

// A Session is a Vault client for one configuration: the VAULT_*
// environment and the HTTP client given to Open. The process makes
// one per configuration, and logs it in (AppRole) once; every KEK and
// keyset store opened with that configuration shares it, so loads,
// reloads and edits make no new client, connection or login. It logs in
// again only when its AppRole token nears the end of its TTL, or when
// Vault refuses it (403) and the last login is older than ten seconds (a
// revoked token).
//
// Close a Session when done with it: once every holder of a
// configuration's session has closed it, its idle connections are
// released (the login is kept for the next holder).
type Session struct {
	sh   *share.Share[string, *shared] // nil for a client the caller made (Borrow)
	s    *shared                       // sh's session
	c    *api.Client                   // the caller's client
	once sync.Once
}

// Borrow returns a session over a client the caller made and owns: Do
// calls f with it as it is (the caller keeps it logged in: no login, no
// second try after a 403), and Close leaves it alone.
func Borrow(c *api.Client) *Session { return &Session{c: c} }

// shared is the one session of a configuration.
type shared struct {
	client *api.Client     // calls, with the token
	login  *api.Client     // logins: the same transport, no token
	auth   api.AuthMethod  // nil: the token came from VAULT_TOKEN
	own    *http.Transport // the transport, if the session made it

	mu       sync.Mutex
	loggedIn time.Time
	renewAt  time.Time // log in again after this; zero: never
}

// sessions keeps a configuration's session once its last holder closes
// it: the next Open shares it again without logging in.
var sessions = share.Map[string, *shared]{Keep: true}

// relogin403 is how old a login must be before a 403 makes a new one: a
// policy that refuses a path (least privilege) must not cost a login per
// call.
var relogin403 = 10 * time.Second

// SetRelogin403 sets how old a login must be before a 403 makes a new
// one, and returns the function that restores it. Tests use it.
func SetRelogin403(d time.Duration) (restore func()) {
	old := relogin403
	relogin403 = d
	return func() { relogin403 = old }
}

// configKey names a configuration: a digest of every VAULT_* variable and
// the HTTP client's identity, so that no secret is kept as a map key.
func configKey(hc *http.Client) string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "VAULT_") {
			env = append(env, kv)
		}
	}
	sort.Strings(env)
	h := sha256.New()
	fmt.Fprintf(h, "%p\x00", hc)
	for _, kv := range env {
		h.Write([]byte(kv))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Open returns the session of the current configuration (the
// VAULT_* environment, and hc: nil means the Vault client's own HTTP
// client), making it and logging in if this process has none yet.
func Open(ctx context.Context, hc *http.Client) (*Session, error) {
	// newShared logs in outside the table's lock: a slow or down Vault
	// must not hold up sessions of other configurations.
	sh, err := sessions.Acquire(configKey(hc), func() (*shared, error) { return newShared(ctx, hc) },
		(*shared).closeIdle) // another Open made it meanwhile
	if err != nil {
		return nil, err
	}
	return &Session{sh: sh, s: sh.Value()}, nil
}

// closeIdle releases the idle connections of a transport s made.
func (s *shared) closeIdle() {
	if s.own != nil {
		s.own.CloseIdleConnections()
	}
}

func newShared(ctx context.Context, hc *http.Client) (*shared, error) {
	cfg := api.DefaultConfig() // VAULT_ADDR, VAULT_CACERT, ...
	if cfg.Error != nil {
		return nil, cfg.Error
	}
	if err := CheckAddress(cfg.Address); err != nil {
		return nil, err
	}
	s := new(shared)
	if hc != nil {
		cfg.HttpClient = hc
	} else if tr, ok := cfg.HttpClient.Transport.(*http.Transport); ok {
		s.own = tr
	}
	cfg.MaxRetries = 2
	var err error
	if s.client, err = api.NewClient(cfg); err != nil { // VAULT_TOKEN, VAULT_NAMESPACE
		return nil, err
	}
	role := os.Getenv("VAULT_ROLE_ID")
	if role == "" {
		return s, nil
	}
	if s.login, err = api.NewClient(cfg); err != nil {
		return nil, err
	}
	s.login.ClearToken()
	var opts []approle.LoginOption
	if m := os.Getenv("VAULT_APPROLE_MOUNT"); m != "" {
		opts = append(opts, approle.WithMountPath(m))
	}
	// The secret id is read now: a later login uses this configuration's,
	// whatever the environment says by then.
	secret := os.Getenv("VAULT_SECRET_ID")
	if secret == "" {
		return nil, errors.New("approle: VAULT_ROLE_ID is set and VAULT_SECRET_ID is empty")
	}
	if s.auth, err = approle.NewAppRoleAuth(role, &approle.SecretID{FromString: secret}, opts...); err != nil {
		return nil, fmt.Errorf("approle: %w", err)
	}
	if err := s.logIn(ctx); err != nil {
		s.closeIdle()
		return nil, err
	}
	return s, nil
}

// logIn logs in with AppRole; s.mu is held, or s is not shared yet.
func (s *shared) logIn(ctx context.Context) error {
	sec, err := s.auth.Login(ctx, s.login)
	if err != nil {
		return fmt.Errorf("approle login: %w", err)
	}
	if sec == nil || sec.Auth == nil || sec.Auth.ClientToken == "" {
		return errors.New("approle login: no token in the answer")
	}
	s.client.SetToken(sec.Auth.ClientToken)
	s.loggedIn = time.Now()
	s.renewAt = time.Time{}
	if ttl := time.Duration(sec.Auth.LeaseDuration) * time.Second; ttl > 0 {
		s.renewAt = s.loggedIn.Add(ttl * 2 / 3)
	}
	return nil
}

// fresh logs in again if the token is near its end.
func (s *shared) fresh(ctx context.Context) error {
	if s.auth == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.renewAt.IsZero() || time.Now().Before(s.renewAt) {
		return nil
	}
	return s.logIn(ctx)
}

// reauth logs in again after a 403, unless the last login is recent; it
// reports whether the call is worth repeating.
func (s *shared) reauth(ctx context.Context) bool {
	if s.auth == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.loggedIn) < relogin403 {
		return false
	}
	return s.logIn(ctx) == nil
}

// A LoginError is a failed AppRole login, as opposed to a failed call.
type LoginError struct{ Err error }

func (e *LoginError) Error() string { return e.Err.Error() }
func (e *LoginError) Unwrap() error { return e.Err }

// Do calls f with the session's client, logged in. If Vault answers 403
// and the session logs in with AppRole, it logs in again (see Session) and
// calls f once more. A failed login is a *LoginError.
func (s *Session) Do(ctx context.Context, f func(*api.Client) error) error {
	if s.s == nil {
		return f(s.c)
	}
	if err := s.s.fresh(ctx); err != nil {
		return &LoginError{err}
	}
	err := f(s.s.client)
	var re *api.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusForbidden && s.s.reauth(ctx) {
		err = f(s.s.client)
	}
	return err
}

// Close gives the session back. The last holder's Close releases the
// idle connections of a transport the session made; the session and its
// login stay for the next Open. Close is idempotent.
func (s *Session) Close() error {
	if s.sh == nil {
		return nil // the caller's client: its owner closes it
	}
	s.once.Do(func() {
		if s.sh.Release() {
			s.s.closeIdle()
		}
	})
	return nil
}

// AllowHTTPEnv names the environment variable that lets a Vault address
// use plain http to a host that is not loopback.
const AllowHTTPEnv = "STATESEAL_VAULT_ALLOW_HTTP"

// CheckAddress refuses a plain-http Vault address that is not loopback,
// unless AllowHTTPEnv is "1": the token the process sends with every
// request reads the keyset and unwraps its keys through transit, so
// whoever sees it on the network can forge tokens. Cloud KMS's insecure=1
// has the same rule.
func CheckAddress(addr string) error {
	u, err := url.Parse(addr)
	if err != nil {
		return fmt.Errorf("vault: VAULT_ADDR does not parse")
	}
	if !strings.EqualFold(u.Scheme, "http") || os.Getenv(AllowHTTPEnv) == "1" {
		return nil
	}
	if loopback.Host(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("vault: VAULT_ADDR %s sends the Vault token in the clear to a host that is not loopback; use https, or set %s=1 if the network between is trusted", u.Redacted(), AllowHTTPEnv)
}
