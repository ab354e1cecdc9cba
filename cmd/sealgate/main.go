// Command sealgate is a reverse proxy for MCP Streamable HTTP that seals
// requestState (MCP 2026-07-28 multi round-trip requests) in front of an
// MCP server written in any language: beside one server as a sidecar, or
// in front of a fleet.
//
// A tools/call, prompts/get or resources/read that carries
// params.requestState has it opened before the request goes upstream,
// bound to the method, the target, the principal, the audience, the MCP
// session (when the upstream is stateful) and the arguments' digest; a
// state that does not open is answered as stateseal's go-sdk middleware
// answers it, and the upstream never sees the request. Every result the
// upstream sends back with a requestState, in a JSON body or in an SSE
// stream, has it sealed. Everything else passes through.
//
//	sealctl init
//	sealgate -upstream http://127.0.0.1:3000 -audience https://mcp.example.com \
//	         -keyset keyset.json -principal jwt -jwt-issuer https://id.example.com \
//	         -jwt-audience https://mcp.example.com -jwks-url https://id.example.com/jwks.json
//
// docs/GATEWAY.md has the deployment guide.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/stateseal/stateseal/gateway"
	"github.com/stateseal/stateseal/gateway/redisrelay"
	"github.com/stateseal/stateseal/internal/loopback"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/otelmetrics"
	"github.com/stateseal/stateseal/replay"
	"github.com/stateseal/stateseal/replay/redisguard"
	"github.com/stateseal/stateseal/seal"
	"github.com/stateseal/stateseal/stores"
	"github.com/stateseal/stateseal/stores/redis"

	// Every KEK backend, so that any keyset's KEK URL opens.
	_ "github.com/stateseal/stateseal/backends/awskms"
	_ "github.com/stateseal/stateseal/backends/gcpkms"
	_ "github.com/stateseal/stateseal/backends/vault"

	// Every keyset store.
	_ "github.com/stateseal/stateseal/stores/vaultkv"
)

func main() {
	c, err := parseConfig(os.Args[1:], os.Getenv, os.Stderr)
	if err != nil {
		if errors.Is(err, flagHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "sealgate:", err)
		os.Exit(2)
	}
	floor := ballast(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = run(ctx, c, os.Stderr)
	runtime.KeepAlive(floor) // live until the gateway stops
	if err != nil {
		fmt.Fprintln(os.Stderr, "sealgate:", err)
		os.Exit(1)
	}
}

func newLogger(c *Config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	o := &slog.HandlerOptions{Level: level}
	switch c.LogFormat {
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	}
	return nil, fmt.Errorf("-log-format %q: want json or text", c.LogFormat)
}

// run serves until ctx is done, then shuts down gracefully.
func run(ctx context.Context, c *Config, logw io.Writer) error {
	log, err := newLogger(c, logw)
	if err != nil {
		return err
	}
	redis.SetLogger(log) // go-redis's own lines as the gateway's JSON records
	g, err := newGateway(c, log)
	if err != nil {
		return err
	}
	if err := checkKeysetLocation(ctx, c); err != nil {
		return err
	}
	principal, tlsConf, err := newPrincipal(ctx, c, log)
	if err != nil {
		return err
	}
	g.Principal = principal

	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer mp.Shutdown(context.Background())
	metrics, err := otelmetrics.New(mp)
	if err != nil {
		return err
	}
	if err := gatewayMetrics(mp.Meter("github.com/stateseal/stateseal/cmd/sealgate"), g); err != nil {
		return err
	}

	o, err := statesOptions(c, log)
	if err != nil {
		return err
	}
	o.Metrics = mrtr.TeeMetrics(metrics, mrtr.SlogMetrics(log)) // counted, and refusals logged at warning level as the middleware does (at most one line a second per method, target and reason)

	var shutting atomic.Bool
	h := &health{g: g, guard: o.Replay, shutting: &shutting}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return err
	}
	// No ReadTimeout or WriteTimeout: they would end SSE streams. The
	// body's deadline is the gateway's BodyTimeout.
	// The requests in flight are waited for after a shutdown's deadline
	// closed their connections: each records, before the process
	// exits, that a single-use call it cut may not have run.
	var inflight sync.WaitGroup
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inflight.Add(1)
		defer inflight.Done()
		g.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: c.ReadHeaderTimeout, IdleTimeout: c.ClientIdleTimeout, MaxHeaderBytes: c.MaxHeaderBytes,
		TLSConfig: tlsConf, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	if c.MaxConnections > 0 {
		// Past the cap, an idle connection is closed for a new one, or
		// the new one waits (and those after it, in the kernel's
		// backlog).
		lim := limitConns(ln, c.MaxConnections)
		ln, srv.ConnState = lim, lim.state
	}
	servers := []*http.Server{srv}
	errc := make(chan error, 2)
	if c.AdminListen != "" {
		aln, err := net.Listen("tcp", c.AdminListen)
		if err != nil {
			ln.Close()
			return err
		}
		mux := http.NewServeMux()
		// /healthz answers 200 while the process runs (liveness), with
		// every part's state as JSON; /readyz decides readiness.
		mux.HandleFunc("GET /healthz", h.healthz)
		mux.HandleFunc("GET /readyz", h.readyz)
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		admin := &http.Server{Handler: loopbackHosts(mux), ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, admin)
		log.Info("sealgate: admin endpoints", "addr", "http://"+aln.Addr().String())
		go func() { errc <- serve(admin, aln, false) }()
	}
	scheme := "http"
	if tlsConf != nil {
		scheme = "https"
	}
	log.Info("sealgate: proxying", "addr", scheme+"://"+ln.Addr().String(), "upstreams", redactList(c.Upstream), "principal", c.Principal)
	if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() && c.AllowedHosts == "" {
		// Not refused: the names a fleet's clients use are not known
		// here. But who may reach the gateway must not go unsaid.
		log.Info("sealgate: -listen is not loopback and no -allowed-hosts: a request to a loopback address must name localhost or a loopback IP, one to another address any host (list the names clients use in -allowed-hosts); a browser's request (one with an Origin) to another address is refused unless -allowed-origins lists its origin (docs/GATEWAY.md, \"Host and Origin\")")
	}
	go func() { errc <- serve(srv, ln, tlsConf != nil) }()

	// The keyset loads in the background, retried until it does: until
	// then /readyz says 503 and so does the proxy.
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		loadKeyset(ctx, c, g, o, metrics, log, h)
	}()

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutting.Store(true)
	if g.Bridge != nil {
		defer g.Bridge.Close()
	}
	log.Info("sealgate: shutting down", "timeout", c.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
	defer cancel()
	var errs []error
	for _, s := range servers {
		if err := s.Shutdown(sctx); err != nil {
			s.Close() // streams still open at the deadline
			errs = append(errs, err)
		}
	}
	if g.Bridge != nil {
		// Bridged calls waiting for answers hold their connections
		// themselves: net/http's Shutdown does not see them. Answers
		// relayed from other instances still reach them meanwhile.
		if err := g.Bridge.Shutdown(sctx); err != nil {
			errs = append(errs, fmt.Errorf("bridged calls cut: %w", err))
		}
	}
	<-loaded
	if len(errs) > 0 {
		log.Warn("sealgate: shutdown deadline passed; closed the connections left", "err", errors.Join(errs...))
		// Their requests end at once (their contexts are cancelled);
		// a single-use one records its doubt within the guard's
		// timeout.
		done := make(chan struct{})
		go func() { inflight.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			log.Warn("sealgate: requests still running 5 s after their connections closed")
		}
	}
	log.Info("sealgate: stopped")
	return nil
}

// loopbackHosts refuses, with 403, a request that reached the admin
// listener on a loopback address but names another host than localhost
// or a loopback IP: a web page whose name an attacker rebinds to
// 127.0.0.1 would read /healthz and /metrics from the user's browser.
// A probe or scraper of another machine reaches it on another address,
// with whatever name it uses.
func loopbackHosts(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
		host := r.Host
		if hp, _, err := net.SplitHostPort(host); err == nil {
			host = hp
		} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
			host = host[1 : len(host)-1]
		}
		if (!ok || a.IP.IsLoopback()) && !loopback.Host(strings.TrimSuffix(host, ".")) {
			http.Error(w, "sealgate: Host not allowed on a loopback address", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func serve(s *http.Server, ln net.Listener, tls bool) error {
	var err error
	if tls {
		err = s.ServeTLS(ln, "", "")
	} else {
		err = s.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func newGateway(c *Config, log *slog.Logger) (*gateway.Gateway, error) {
	g := &gateway.Gateway{
		HealthPath:               c.UpstreamHealth,
		KnownTargets:             c.knownTargets(),
		BindSession:              c.BindSession,
		StripAuthorization:       c.StripAuthorization,
		MaxRequestBytes:          c.MaxRequestBytes,
		MaxRequestBytesInFlight:  c.MaxRequestBytesInFlight,
		MaxResponseBytesInFlight: c.MaxResponseBytesInFlight,
		MaxResponseBytes:         c.MaxResponseBytes,
		MaxEventBytes:            c.MaxEventBytes,
		IdleTimeout:              c.IdleTimeout,
		BodyTimeout:              c.BodyTimeout,
		PassThrough:              splitList(c.PassThrough),
		AllowedHosts:             splitList(c.AllowedHosts),
		AllowedOrigins:           splitList(c.AllowedOrigins),
		Logger:                   log,
	}
	if c.Bridge {
		g.Bridge = &gateway.Bridge{Audience: c.Audience, SessionTTL: c.BridgeSessionTTL, AnswerTimeout: c.BridgeAnswerTimeout,
			MaxRounds: c.BridgeMaxRounds, MaxPending: c.BridgeMaxPending, MaxPendingPerPrincipal: c.BridgeMaxPendingPerPrincipal, Logger: log}
		where := c.BridgeRedis
		if where == "" && (strings.HasPrefix(c.Replay, redis.Scheme+"://") || strings.HasPrefix(c.Replay, redis.SchemeTLS+"://")) {
			where, _, _ = redisguard.SplitURL(c.Replay)
		}
		if where != "" && where != "off" {
			client, err := redis.NewClient(where)
			if err != nil {
				return nil, fmt.Errorf("-bridge-redis: %w (off: no relay)", err)
			}
			g.Bridge.Relay = redisrelay.New(client)
			log.Info("sealgate: bridge for 2025 clients: answers relayed between instances through Redis", "redis", redactURL(where))
		} else if strings.HasPrefix(c.Keyset, redis.Scheme+"://") || strings.HasPrefix(c.Keyset, redis.SchemeTLS+"://") || strings.HasPrefix(c.Keyset, "vault") {
			// A shared keyset: a fleet, most likely, whose balancer may
			// send a bridged answer to another instance.
			log.Warn("sealgate: bridge for 2025 clients: a shared keyset and no relay for bridged answers: an answer that reaches another instance than the one holding its call is refused (404); route sessions stickily, or set -bridge-redis (docs/GATEWAY.md, \"Clients of the 2025 protocols\")")
		}
	}
	for _, s := range splitList(c.Upstream) {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("-upstream %s: want an http or https URL", redactURL(s))
		}
		if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
			// A client's query is appended to the upstream's, and a
			// server reading the last value of a parameter would read
			// the client's: a base URL carries no parameters.
			return nil, fmt.Errorf("-upstream %s: want a base URL without a query or fragment", redactURL(s))
		}
		if u.Scheme == "http" && !loopback.Host(u.Hostname()) {
			// Not refused: a mesh's mutual TLS or a private network may
			// carry it. But it must not go unsaid.
			log.Warn("sealgate: -upstream is plain http to a host that is not loopback: every opened state, the upstream's plaintext states and the forwarded credentials cross that network in the clear; use https, or make sure the network is protected (a mesh's mutual TLS)", "upstream", redactURL(s))
		}
		g.Upstreams = append(g.Upstreams, u)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = c.UpstreamTimeout
	t.MaxIdleConnsPerHost = 256
	t.MaxIdleConns = 0 // the default's 100 in all would cap one upstream below 256
	g.Transport = t
	return g, nil
}

func newPrincipal(ctx context.Context, c *Config, log *slog.Logger) (gateway.PrincipalSource, *tls.Config, error) {
	var tlsConf *tls.Config
	if c.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return nil, nil, err
		}
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if c.ClientCA != "" {
			pem, err := os.ReadFile(c.ClientCA)
			if err != nil {
				return nil, nil, err
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, nil, fmt.Errorf("-client-ca %s: no certificate", c.ClientCA)
			}
			tlsConf.ClientCAs = pool
			// Requests without a certificate still pass (the upstream
			// decides about them); they cannot carry state.
			tlsConf.ClientAuth = tls.VerifyClientCertIfGiven
		}
	}
	switch c.Principal {
	case "anonymous":
		return gateway.Anonymous{}, tlsConf, nil
	case "header":
		h := &gateway.HeaderPrincipal{Header: c.PrincipalHeader}
		for _, s := range splitList(c.TrustedProxies) {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				a, aerr := netip.ParseAddr(s)
				if aerr != nil {
					return nil, nil, fmt.Errorf("-trusted-proxies %q: %w", s, err)
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			h.Trusted = append(h.Trusted, p.Masked())
		}
		return h, tlsConf, nil
	case "jwt":
		j := &gateway.JWTPrincipal{Issuer: c.JWTIssuer, Audience: c.JWTAudience, JWKSURL: c.JWKSURL, Claim: c.JWTClaim, Refresh: c.JWKSRefresh}
		if err := j.Warm(ctx); err != nil {
			// Not fatal: the issuer may come up after the gateway.
			log.Warn("sealgate: cannot fetch the JWKS yet", "url", redactURL(c.JWKSURL), "err", err)
		}
		return j, tlsConf, nil
	case "mtls":
		return &gateway.CertPrincipal{Field: c.CertField}, tlsConf, nil
	}
	return nil, nil, fmt.Errorf("-principal %q", c.Principal)
}

// statesOptions is the mrtr configuration, without Metrics.
func statesOptions(c *Config, log *slog.Logger) (*mrtr.Options, error) {
	ttl, err := c.ttls()
	if err != nil {
		return nil, err
	}
	o := &mrtr.Options{
		Audience:       c.Audience,
		AllowAnonymous: c.Principal == "anonymous",
		DefaultTTL:     c.DefaultTTL,
		TTL:            ttl,
		Logger:         log,
	}
	if names := splitList(c.SingleUse); len(names) > 0 {
		o.SingleUse = mrtr.Targets(names...)
		switch c.Replay {
		case "memory", "":
			o.Replay = replay.NewMemory(0)
		default:
			where, ro, err := redisguard.SplitURL(c.Replay)
			if err != nil {
				return nil, fmt.Errorf("-replay: %w", err)
			}
			client, err := redis.NewClient(where)
			if err != nil {
				return nil, fmt.Errorf("-replay: %w", err)
			}
			ro.Logger = log
			guard := redisguard.New(client, &ro)
			// A Redis that may evict records refuses every single use for
			// ever: a configuration to refuse at start, not to retry.
			pctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			perr := guard.Policy(pctx)
			cancel()
			if perr != nil {
				guard.Close()
				return nil, fmt.Errorf("-replay %s: %w", redactURL(c.Replay), perr)
			}
			o.Replay = guard
		}
	}
	return o, nil
}

// checkKeysetLocation opens a Redis -keyset store once, which reads the
// URL and dials nothing: a location no retry can mend (plain redis://
// off loopback, an unknown parameter, a ca= file missing) ends the
// process at start, as the same mistake in -replay does, instead of an
// unready gateway retrying for ever. A store that does not answer yet is
// not this: the load retries. (Opening a vault-kv store logs in, so it is
// left to the load.)
func checkKeysetLocation(ctx context.Context, c *Config) error {
	if !strings.HasPrefix(c.Keyset, redis.Scheme+"://") && !strings.HasPrefix(c.Keyset, redis.SchemeTLS+"://") {
		return nil
	}
	s, err := keyset.OpenStore(ctx, c.Keyset, nil)
	if err != nil {
		return fmt.Errorf("-keyset: %w", err)
	}
	return stores.Close(s)
}

// loadKeyset loads the keyset, retrying until it loads or ctx ends, then
// installs the States on g and follows the keyset's changes until ctx
// ends.
func loadKeyset(ctx context.Context, c *Config, g *gateway.Gateway, o *mrtr.Options, m *otelmetrics.Metrics, log *slog.Logger, h *health) {
	var ring *keyring.Ring
	var l *keyset.Loader
	if c.Keyset == "" {
		log.Warn("sealgate: no -keyset: sealing with an in-memory key, for one gateway only")
		ring, _ = keyring.Generate(keyring.AEAD)
	} else {
		l = &keyset.Loader{Path: c.Keyset, Logger: log, Options: keyset.LoadOptions{KEK: c.KEK, PreviousKEK: c.PreviousKEK, KeysetID: c.KeysetID, MinVersion: c.MinVersion, Now: c.now}}
		defer l.Close()
		start, wait := time.Now(), time.Second
		for attempt := 1; ; attempt++ {
			var err error
			if ring, err = l.Load(ctx); err == nil {
				if attempt > 1 {
					log.Info("sealgate: keyset load recovered", "after", time.Since(start).Round(time.Millisecond).String(), "attempts", attempt)
				}
				break
			}
			log.Error("sealgate: cannot load the keyset; retrying", "err", err, "in", wait.String())
			msg := err.Error()
			h.loadErr.Store(&msg) // for /healthz, until a load succeeds
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, 30*time.Second)
		}
		h.ring.Store(ring) // before the loader: report reads it once the loader is set
		h.loader.Store(l)
		h.loadErr.Store(nil)
		if err := m.ObserveLoader(l, ring); err != nil {
			log.Warn("sealgate: keyset metrics", "err", err)
		}
	}
	st, err := newStates(ring, o)
	if err != nil {
		log.Error("sealgate: cannot seal", "err", err)
		return
	}
	g.SetStates(st)
	msg := "sealgate: keyset loaded; ready"
	if j, ok := g.Principal.(*gateway.JWTPrincipal); ok {
		if fetched, _ := j.JWKSState(); fetched.IsZero() {
			msg = "sealgate: keyset loaded; not ready until the JWKS is fetched (/readyz retries it)" // as /readyz says
		}
	}
	log.Info(msg)
	if l != nil {
		l.Run(ctx, c.Poll)
	}
}

// newStates is the one place the gateway builds a Sealer and its States.
func newStates(ring *keyring.Ring, o *mrtr.Options) (*mrtr.States, error) {
	s, err := seal.New(ring, nil)
	if err != nil {
		return nil, err
	}
	return mrtr.New(s, o)
}

// gatewayMetrics exports the gateway's own counts.
func gatewayMetrics(meter metric.Meter, g *gateway.Gateway) error {
	refused, err := meter.Int64ObservableCounter("sealgate.requests.refused", metric.WithDescription("requests answered by the gateway without reaching the upstream: a state that did not open, a message it cannot read"))
	if err != nil {
		return err
	}
	sealed, err := meter.Int64ObservableCounter("sealgate.results.sealed", metric.WithDescription("results whose requestState the gateway sealed"))
	if err != nil {
		return err
	}
	upstream, err := meter.Int64ObservableCounter("sealgate.upstream.errors", metric.WithDescription("upstream requests that failed: unreachable, timed out, broken or malformed responses"))
	if err != nil {
		return err
	}
	malformed, err := meter.Int64ObservableCounter("sealgate.upstream.malformed", metric.WithDescription("upstream responses that were not JSON-RPC"))
	if err != nil {
		return err
	}
	principal, err := meter.Int64ObservableCounter("sealgate.principal.failures", metric.WithDescription("requests whose credentials the -principal source refused (they reach the upstream without a principal, and carry no state), by reason: one of gateway.PrincipalReasons"))
	if err != nil {
		return err
	}
	pending, err := meter.Int64ObservableGauge("sealgate.bridge.pending", metric.WithDescription("bridged calls of 2025-protocol clients waiting for their answers on this instance (bounded by -bridge-max-pending)"))
	if err != nil {
		return err
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if g.Bridge != nil {
			o.ObserveInt64(pending, int64(g.Bridge.Pending()))
		}
		for reason, n := range g.Stats.Principal.Failures() {
			o.ObserveInt64(principal, n, metric.WithAttributes(attribute.String("reason", reason)))
		}
		o.ObserveInt64(refused, g.Stats.Refused.Load())
		o.ObserveInt64(sealed, g.Stats.Sealed.Load())
		o.ObserveInt64(upstream, g.Stats.UpstreamErrors.Load())
		o.ObserveInt64(malformed, g.Stats.Malformed.Load())
		return nil
	}, refused, sealed, upstream, malformed, principal, pending)
	return err
}
