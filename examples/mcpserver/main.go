// Command mcpserver is an MCP server (go-sdk, Streamable HTTP, stateless)
// whose requestState is sealed by stateseal. It implements the fixtures
// the official conformance suite's input-required scenarios call, with
// real sealing, and is the server CI runs the suite against.
//
//	sealctl init                     # keyset.json + stateseal.kek
//	go run ./examples/mcpserver -keyset keyset.json -addr 127.0.0.1:8080
//
// Without -keyset it seals with a key that lives in memory only. -keyset
// also takes a store URL (redis://..., vault-kv://...), which is how the
// fleet test runs four instances on one keyset; -principal-header,
// -single-use and -replay bind states to users and make tools single use;
// -keyset-id, -min-version and -previous-kek are keyset.LoadOptions'
// KeysetID, MinVersion and PreviousKEK.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/mcpsdk"
	"github.com/stateseal/stateseal/seal"

	// Every KEK backend, so that any keyset's URL opens.
	_ "github.com/stateseal/stateseal/backends/awskms"
	_ "github.com/stateseal/stateseal/backends/gcpkms"
	_ "github.com/stateseal/stateseal/backends/vault"

	// Every keyset store, so that --keyset takes any store's URL.
	_ "github.com/stateseal/stateseal/stores/redis"
	_ "github.com/stateseal/stateseal/stores/vaultkv"
)

func main() {
	var c config
	flag.StringVar(&c.addr, "addr", "127.0.0.1:8080", "listen address, HOST:PORT")
	flag.StringVar(&c.keyset, "keyset", "", "keyset file or store URL (default: an in-memory key)")
	flag.StringVar(&c.kek, "kek", "", "URL of the KEK the keyset must be under: trusted from here, never from the keyset (required with a store; default for a file: local:stateseal.kek beside it)")
	flag.StringVar(&c.previousKEK, "previous-kek", "", "URL of a KEK trusted too, while a rewrap moves the keyset from it to -kek; remove it after")
	flag.StringVar(&c.keysetID, "keyset-id", "", "the only keyset id that loads (default: the first one loaded is pinned until restart)")
	flag.Uint64Var(&c.minVersion, "min-version", 0, "refuse keyset versions below this one, fresh loads too: raise it after an emergency (docs/ROTATION.md, \"A leaked key\")")
	flag.StringVar(&c.audience, "audience", "stateseal-example", "audience bound into every state")
	flag.StringVar(&c.principalHeader, "principal-header", "", "bind states to this request header's value, set by an authenticating proxy in front (default: no principal, AllowAnonymous)")
	flag.StringVar(&c.singleUse, "single-use", "", "comma-separated tools whose states open once")
	flag.StringVar(&c.replay, "replay", "memory", "where single use is recorded: memory, or a redis:// URL shared by a fleet (guard_timeout=500ms bounds each check; dial_timeout, read_timeout, pool_size, max_retries... tune the client)")
	flag.DurationVar(&c.poll, "poll", 10*time.Second, "how often to poll the keyset (a Redis store also notifies)")
	flag.DurationVar(&c.clockOffset, "clock-offset", 0, "run this instance's clock ahead (or behind) by this much: clock-skew tests only")
	flag.BoolVar(&c.noSeal, "no-seal", false, "serve without the middleware, states in the clear: for load baselines, or as the upstream behind sealgate (which seals for it); never exposed alone")
	flag.Parse()
	if err := run(c); err != nil {
		log.Fatal(err)
	}
}

func run(c config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ring, health, err := loadRing(ctx, c)
	if err != nil {
		return err
	}
	mcpHandler, err := c.handler(ring)
	if err != nil {
		return err
	}
	handler := withHealth(mcpHandler, health)
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	log.Printf("stateseal example MCP server at http://%s/mcp", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// loadRing returns the ring the server seals with and a function that
// reports its health.
func loadRing(ctx context.Context, c config) (*keyring.Ring, func() keyset.Health, error) {
	if c.keyset == "" {
		if c.noSeal {
			log.Printf("-no-seal: states in the clear, sealed by nothing here (put sealgate in front)")
		} else {
			log.Printf("no -keyset: sealing with an in-memory key")
		}
		ring, err := keyring.Generate(keyring.AEAD)
		return ring, func() keyset.Health { return keyset.Health{Ready: true} }, err
	}
	l := &keyset.Loader{Path: c.keyset, Options: c.loadOptions()}
	ring, err := l.Load(ctx)
	if err != nil {
		return nil, nil, err
	}
	go func() { l.Run(ctx, c.poll); l.Close() }()
	return ring, l.Health, nil
}

// withHealth serves /healthz (alive; the loader's state as JSON) and
// /readyz (200 once a keyset is loaded, 503 before, and once the installed
// keyset expired: keyset.Health.Stale) beside h. A store or
// KMS outage does not make the server unready: the last good keyset keeps
// serving, and /healthz says so.
func withHealth(h http.Handler, health func() keyset.Health) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(health())
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !health().Ready {
			http.Error(w, "no keyset loaded, or the installed one expired (see /healthz)", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
	return mux
}

// newHandler is the handler of a server with the default settings.
func newHandler(ring *keyring.Ring, audience string) (http.Handler, error) {
	return config{audience: audience, replay: "memory"}.handler(ring)
}

// newServer builds the MCP server with the sealing middleware and the
// conformance fixtures.
func newServer(sealer *seal.Sealer, o *mcpsdk.Options) (*mcp.Server, error) {
	server := mcp.NewServer(&mcp.Implementation{Name: "stateseal-example", Version: "1.0.0"}, nil)
	a, err := mcpsdk.New(sealer, o)
	if err != nil {
		return nil, fmt.Errorf("stateseal middleware: %w", err)
	}
	server.AddReceivingMiddleware(a.Middleware())
	addFixtures(server)
	addFleetTools(server)
	return server, nil
}
