package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stateseal/stateseal/gateway"
	"github.com/stateseal/stateseal/internal/loopback"
)

// Config is the gateway's configuration. Every field is a flag; each flag
// NAME can also be set by the environment variable SEALGATE_NAME (upper
// case, "-" as "_") and by the JSON file that -config names (an object of
// flag names to values: strings, numbers, booleans, or arrays for lists).
// A flag on the command line wins over the environment, which wins over
// the file.
type Config struct {
	Listen, AdminListen string
	Upstream            string // comma-separated URLs
	Audience            string

	Keyset, KEK, PreviousKEK, KeysetID string
	MinVersion                         uint64
	Poll                               time.Duration

	Principal                       string // anonymous, header, jwt or mtls
	PrincipalHeader, TrustedProxies string
	JWTIssuer, JWTAudience, JWKSURL string
	JWTClaim                        string
	JWKSRefresh                     time.Duration
	JWKSInsecureHTTP                bool
	TLSCert, TLSKey, ClientCA       string
	CertField                       string

	StripAuthorization bool
	BindSession        bool

	// The bridge for clients of the 2025 protocols (gateway.Bridge).
	Bridge                                bool
	BridgeSessionTTL, BridgeAnswerTimeout time.Duration
	BridgeMaxRounds, BridgeMaxPending     int
	BridgeMaxPendingPerPrincipal          int
	BridgeRedis                           string // redis:// URL carrying answers between instances; "" means -replay's, if Redis

	DefaultTTL time.Duration
	TTL        string // tool=duration,...
	SingleUse  string // tools, comma-separated
	Replay     string // memory, or a redis:// URL

	MaxRequestBytes, MaxResponseBytes, MaxEventBytes int64
	MaxRequestBytesInFlight                          int64
	MaxResponseBytesInFlight                         int64
	UpstreamTimeout, IdleTimeout, ShutdownTimeout    time.Duration
	UpstreamHealth                                   string // a path probed on an upstream out of turn

	// What a client connection may take (http.Server and the listener).
	ReadHeaderTimeout, BodyTimeout, ClientIdleTimeout time.Duration
	MaxConnections                                    int
	MaxHeaderBytes                                    int
	PassThrough                                       string // paths, comma-separated
	AllowedHosts, AllowedOrigins                      string // comma-separated

	LogLevel, LogFormat string

	// now is the loader's clock (nil: time.Now), set by tests to walk a
	// keyset to its expiry without waiting days; no flag sets it.
	now func() time.Time
}

func (c *Config) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8080", "address the proxy listens on, HOST:PORT")
	fs.StringVar(&c.AdminListen, "admin-listen", "127.0.0.1:9090", "address of /healthz, /readyz and /metrics (\"\": none)")
	fs.StringVar(&c.Upstream, "upstream", "", "upstream MCP server base URL(s), comma-separated, used in turn (required)")
	fs.StringVar(&c.Audience, "audience", "", "audience bound into every state: this deployment's URL, say (required)")
	fs.StringVar(&c.Keyset, "keyset", "", "keyset file or store URL (redis://..., vault-kv://...); \"\": an in-memory key, for one gateway only. Nothing in sealgate refreshes it: run sealctl refresh (a daily CronJob, docs/GATEWAY.md) within its freshness window (7 days by default), or every gateway turns unready at once; it warns from 3 days before, in its log and in stateseal_keyset_stale_in_seconds")
	fs.StringVar(&c.KEK, "kek", "", "URL of the KEK the keyset must be under, trusted from here and never from the keyset (required for a store; default for a file: local:stateseal.kek beside it)")
	fs.StringVar(&c.PreviousKEK, "previous-kek", "", "a second trusted KEK, during a rewrap")
	fs.StringVar(&c.KeysetID, "keyset-id", "", "the only keyset id that loads (sealctl init prints it)")
	fs.Uint64Var(&c.MinVersion, "min-version", 0, "refuse keyset versions below this one, fresh loads too: raise it after an emergency (docs/ROTATION.md, \"A leaked key\")")
	fs.DurationVar(&c.Poll, "poll", 30*time.Second, "how often to poll the keyset for rotations")
	fs.StringVar(&c.Principal, "principal", "", "who a state is bound to: anonymous, header, jwt or mtls (required)")
	fs.StringVar(&c.PrincipalHeader, "principal-header", "X-Forwarded-User", "with -principal header: the header an authenticating proxy sets")
	fs.StringVar(&c.TrustedProxies, "trusted-proxies", "", "with -principal header: the proxy's addresses, CIDRs comma-separated (required)")
	fs.StringVar(&c.JWTIssuer, "jwt-issuer", "", "with -principal jwt: the issuer (iss) tokens must name")
	fs.StringVar(&c.JWTAudience, "jwt-audience", "", "with -principal jwt: the audience (aud) tokens must include")
	fs.StringVar(&c.JWKSURL, "jwks-url", "", "with -principal jwt: the issuer's JWKS URL")
	fs.BoolVar(&c.JWKSInsecureHTTP, "jwks-insecure-http", false, "with -principal jwt: accept a plain-http -jwks-url on a host other than loopback (whoever is on the path can then sign tokens for any user)")
	fs.StringVar(&c.JWTClaim, "jwt-claim", "sub", "with -principal jwt: the claim holding the principal")
	fs.DurationVar(&c.JWKSRefresh, "jwks-refresh", 10*time.Minute, "with -principal jwt: how often the JWKS is fetched again")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "serve TLS with this certificate (PEM)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "and this key (PEM)")
	fs.StringVar(&c.ClientCA, "client-ca", "", "with -principal mtls: CA certificates (PEM) that client certificates must chain to")
	fs.StringVar(&c.CertField, "cert-field", "subject", "with -principal mtls: the principal is the certificate's subject, uri (first URI SAN) or sha256")
	fs.BoolVar(&c.StripAuthorization, "strip-authorization", false, "do not forward the Authorization header upstream")
	fs.BoolVar(&c.Bridge, "bridge", true, "serve clients of the 2025 protocols (2025-11-25, 2025-06-18, 2025-03-26) in front of an upstream that speaks only 2026-07-28 and keeps nothing: initialize, sessions and input requests are the gateway's (false: pass their requests through, for an upstream that serves those versions itself)")
	fs.DurationVar(&c.BridgeSessionTTL, "bridge-session-ttl", gateway.DefaultSessionTTL, "lifetime of a bridged session id (the keyset's maximum TTL caps it); then the client gets 404 and initializes again")
	fs.DurationVar(&c.BridgeAnswerTimeout, "bridge-answer-timeout", gateway.DefaultAnswerTimeout, "how long a bridged call waits for the client's answers to one round of input requests, or for the client to take an event of its stream; then it ends with an error and nothing more goes upstream")
	fs.IntVar(&c.BridgeMaxRounds, "bridge-max-rounds", gateway.DefaultMaxRounds, "input_required answers one bridged call may go through (an upstream that asks forever is cut there)")
	fs.IntVar(&c.BridgeMaxPending, "bridge-max-pending", gateway.DefaultMaxPending, "bridged calls that may wait for their clients' answers at once on this instance (past it: 503)")
	fs.IntVar(&c.BridgeMaxPendingPerPrincipal, "bridge-max-pending-per-principal", gateway.DefaultMaxPendingPer, "the same, per principal")
	fs.StringVar(&c.BridgeRedis, "bridge-redis", "", "a redis:// URL through which an answer to a bridged input request reaches the instance that holds its call, whichever instance the balancer sends it to; empty: -replay's Redis if -replay is one, else no relay (answers reach only the instance that got them: route sessions stickily); off: no relay even with a Redis -replay")
	fs.BoolVar(&c.BindSession, "bind-session", true, "bind states to the Mcp-Session-Id header when a request has one (a stateful upstream)")
	fs.DurationVar(&c.DefaultTTL, "default-ttl", 0, "lifetime of a state (0: 10 minutes); the keyset's maximum caps it")
	fs.StringVar(&c.TTL, "ttl", "", "per-target lifetimes: name=duration,... (a tool or prompt name, a resource URI); a state is still accepted for the keyset's skew after it (30 s by default: tool=2s is refused after 2 s plus the skew)")
	fs.StringVar(&c.SingleUse, "single-use", "", "targets whose states open once, comma-separated")
	fs.StringVar(&c.Replay, "replay", "", "where single use is recorded: memory (one gateway; the default, refused unless given explicitly with a -keyset in a shared store, which implies a fleet), or a redis:// URL shared by a fleet")
	fs.Int64Var(&c.MaxRequestBytes, "max-request-bytes", 8<<20, "largest request body")
	fs.Int64Var(&c.MaxRequestBytesInFlight, "max-request-bytes-in-flight", 256<<20, "memory of all request bodies held at once; past it requests get 503 (0: no bound)")
	fs.Int64Var(&c.MaxResponseBytes, "max-response-bytes", 16<<20, "largest JSON response body (SSE streams are bounded per event)")
	fs.Int64Var(&c.MaxResponseBytesInFlight, "max-response-bytes-in-flight", 256<<20, "memory of all JSON response bodies and SSE events held at once, until each client has taken its own; past it a response is dropped with a 503 error (0: no bound)")
	fs.Int64Var(&c.MaxEventBytes, "max-event-bytes", 4<<20, "largest SSE event")
	fs.StringVar(&c.UpstreamHealth, "upstream-health", "", "a path (such as /healthz) asked every second of an upstream that refused a connection, to put it back in turn once it answers (\"\": back after its time out, 1 s doubling to 30 s)")
	fs.DurationVar(&c.UpstreamTimeout, "upstream-timeout", 30*time.Second, "time for the upstream to send its response headers")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", 5*time.Minute, "end a response after this long without a byte from upstream (0: never)")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "time for a client to send a request's headers")
	fs.DurationVar(&c.BodyTimeout, "body-timeout", 30*time.Second, "time for a client to send a request's body (0: none)")
	fs.DurationVar(&c.ClientIdleTimeout, "client-idle-timeout", 2*time.Minute, "close a client's keep-alive connection idle this long")
	fs.IntVar(&c.MaxConnections, "max-connections", 4096, "client connections served at once; more wait to be accepted (0: no cap)")
	fs.IntVar(&c.MaxHeaderBytes, "max-header-bytes", 64<<10, "largest request header block a client may send (net/http's default is 1 MiB, which 4096 connections make 4 GiB no body budget counts)")
	fs.StringVar(&c.PassThrough, "passthrough", "", "paths carrying no MCP traffic (OAuth metadata, say), comma-separated: requests for exactly these go upstream unread, with any method and body")
	fs.StringVar(&c.AllowedHosts, "allowed-hosts", "", "host names a request's Host may name, comma-separated (any port; * for any); another gets 403. Default: on a connection to a loopback address (every one with the default -listen) localhost and loopback IP addresses only, so that no web page whose name an attacker rebinds to 127.0.0.1 reaches the gateway; on a connection to another address, any")
	fs.StringVar(&c.AllowedOrigins, "allowed-origins", "", "web origins whose pages may call the gateway, scheme://host[:port] comma-separated (* for any); a request with another Origin header gets 403, one without (not a browser's) passes. Default: on a connection to a loopback address, pages served from loopback (http://localhost:6274, say); on another, none")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 15*time.Second, "on SIGTERM, time for requests in flight to finish: longer than the slowest single-use tool, and shorter than the orchestrator's grace period (Kubernetes terminationGracePeriodSeconds)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "json", "json or text")
}

// parseConfig reads the flags in args, then the environment, then the
// -config file, each filling only what the ones before left unset.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (*Config, error) {
	c := &Config{}
	fs := flag.NewFlagSet("sealgate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.flags(fs)
	var file string
	fs.StringVar(&file, "config", "", "JSON file of flag values (env SEALGATE_CONFIG)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || f.Name == "config" || err != nil {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", envName(f.Name), e)
			}
			set[f.Name] = true
		}
	})
	if err != nil {
		return nil, err
	}
	if file == "" {
		file = getenv("SEALGATE_CONFIG")
	}
	if file != "" {
		if err := applyFile(fs, file, set); err != nil {
			return nil, err
		}
	}
	return c, c.check()
}

func envName(flag string) string {
	return "SEALGATE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func applyFile(fs *flag.FlagSet, path string, set map[string]bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		if fs.Lookup(name) == nil || name == "config" {
			return fmt.Errorf("%s: unknown setting %q", path, name)
		}
		if set[name] {
			continue
		}
		var s string
		switch v := m[name].(type) {
		case string:
			s = v
		case json.Number:
			s = v.String()
		case bool:
			s = strconv.FormatBool(v)
		case []any:
			parts := make([]string, len(v))
			for i, p := range v {
				parts[i] = fmt.Sprint(p)
			}
			s = strings.Join(parts, ",")
		case map[string]any: // ttl as an object
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			parts := make([]string, len(keys))
			for i, k := range keys {
				parts[i] = k + "=" + fmt.Sprint(v[k])
			}
			s = strings.Join(parts, ",")
		default:
			return fmt.Errorf("%s: %s: unsupported value", path, name)
		}
		if err := fs.Set(name, s); err != nil {
			return fmt.Errorf("%s: %s: %w", path, name, err)
		}
	}
	return nil
}

func (c *Config) check() error {
	var errs []error
	if c.Upstream == "" {
		errs = append(errs, errors.New("-upstream is required"))
	}
	if c.Audience == "" {
		errs = append(errs, errors.New("-audience is required: name this deployment, so that its states cannot move to another service sharing the keyset"))
	}
	switch c.Principal {
	case "anonymous":
	case "header":
		if c.TrustedProxies == "" {
			errs = append(errs, errors.New("-principal header needs -trusted-proxies: the addresses of the proxy that sets the header (a header from any other address is removed, never trusted)"))
		}
		if c.PrincipalHeader == "" {
			errs = append(errs, errors.New("-principal header needs -principal-header (default X-Forwarded-User)"))
		}
	case "jwt":
		if c.JWTIssuer == "" || c.JWTAudience == "" || c.JWKSURL == "" {
			errs = append(errs, errors.New("-principal jwt needs -jwt-issuer, -jwt-audience and -jwks-url"))
		} else if err := checkJWKSURL(c.JWKSURL, c.JWKSInsecureHTTP); err != nil {
			errs = append(errs, err)
		}
	case "mtls":
		if c.TLSCert == "" || c.TLSKey == "" || c.ClientCA == "" {
			errs = append(errs, errors.New("-principal mtls needs -tls-cert, -tls-key and -client-ca"))
		}
	case "":
		errs = append(errs, errors.New("-principal is required: anonymous, header, jwt or mtls"))
	default:
		errs = append(errs, fmt.Errorf("-principal %q: want anonymous, header, jwt or mtls", c.Principal))
	}
	for _, p := range splitList(c.PassThrough) {
		if err := gateway.CheckPassThrough(p); err != nil {
			errs = append(errs, fmt.Errorf("-passthrough: %w", err))
		}
	}
	for _, h := range splitList(c.AllowedHosts) {
		if err := gateway.CheckAllowedHost(h); err != nil {
			errs = append(errs, fmt.Errorf("-allowed-hosts: %w", err))
		}
	}
	for _, o := range splitList(c.AllowedOrigins) {
		if err := gateway.CheckAllowedOrigin(o); err != nil {
			errs = append(errs, fmt.Errorf("-allowed-origins: %w", err))
		}
	}
	if c.ReadHeaderTimeout <= 0 || c.ClientIdleTimeout <= 0 || c.BodyTimeout < 0 || c.MaxConnections < 0 {
		errs = append(errs, errors.New("-read-header-timeout and -client-idle-timeout must be positive, -body-timeout and -max-connections not negative"))
	}
	if c.SingleUse != "" && c.Replay == "" && sharedKeyset(c.Keyset) {
		errs = append(errs, fmt.Errorf("-single-use with the in-memory guard and -keyset %s in a shared store: that is how a fleet of gateways is configured, and each gateway's memory guard sees only its own uses (another gateway refuses its states as unvouched): give every gateway -replay redis://... on one Redis (docs/FLEET.md), or, for one gateway only, -replay memory", redactURL(c.Keyset)))
	}
	// A body is read into a buffer one byte past its bound (to tell a
	// body over it), and an SSE event is held twice (as read and as
	// written) in buffers that grow by doubling: a budget that cannot
	// hold one of each refuses every large one.
	if c.MaxRequestBytesInFlight < 0 || c.MaxRequestBytesInFlight > 0 && c.MaxRequestBytesInFlight <= c.MaxRequestBytes {
		errs = append(errs, errors.New("-max-request-bytes-in-flight must be 0 (no bound) or more than -max-request-bytes"))
	}
	if c.MaxResponseBytesInFlight < 0 || c.MaxResponseBytesInFlight > 0 && (c.MaxResponseBytesInFlight <= c.MaxResponseBytes || c.MaxResponseBytesInFlight < 3*c.MaxEventBytes) {
		errs = append(errs, errors.New("-max-response-bytes-in-flight must be 0 (no bound), or more than -max-response-bytes and at least 3 times -max-event-bytes"))
	}
	if c.MaxHeaderBytes <= 0 {
		errs = append(errs, errors.New("-max-header-bytes must be positive"))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("-tls-cert and -tls-key go together"))
	}
	return errors.Join(errs...)
}

// checkJWKSURL refuses a JWKS URL that is not https, unless it names a
// loopback host or insecure is set: the JWKS decides who may sign tokens.
func checkJWKSURL(s string, insecure bool) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("-jwks-url %s: want an https:// URL", redactURL(s))
	}
	if u.Scheme == "https" || insecure {
		return nil
	}
	if loopback.Host(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("-jwks-url %s is plain http to another host: whoever is on the path could sign tokens for any user; use https, or -jwks-insecure-http", redactURL(s))
}

// sharedKeyset reports whether a -keyset names a store several gateways
// can share (anything but a file).
func sharedKeyset(ks string) bool {
	scheme, _, ok := strings.Cut(ks, "://")
	return ok && scheme != "file"
}

// redactList is redactURL for each of a comma-separated list.
func redactList(s string) string {
	l := splitList(s)
	for i := range l {
		l[i] = redactURL(l[i])
	}
	return strings.Join(l, ",")
}

// redactURL is a URL without its user information and query, for an
// error message or a log.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(a URL)"
	}
	return u.Scheme + "://" + u.Host + u.Path
}

// knownTargets are the targets the configuration names (-single-use,
// -ttl): metrics may label rejections with them.
func (c *Config) knownTargets() []string {
	names := splitList(c.SingleUse)
	ttl, _ := c.ttls()
	for k := range ttl {
		names = append(names, k)
	}
	return names
}

// ttls parses -ttl.
func (c *Config) ttls() (map[string]time.Duration, error) {
	if c.TTL == "" {
		return nil, nil
	}
	m := map[string]time.Duration{}
	for _, kv := range strings.Split(c.TTL, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, fmt.Errorf("-ttl: %q is not name=duration", kv)
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("-ttl: %s: %w", k, err)
		}
		m[k] = d
	}
	return m, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// flagHelp is the error of -h.
var flagHelp = flag.ErrHelp
