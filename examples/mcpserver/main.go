// Command mcpserver is an MCP server (go-sdk, Streamable HTTP, stateless)
// whose requestState is sealed by stateseal. It implements the fixtures
// of every server scenario of the official conformance suite, each in its
// stateless form, the input-required ones with real sealing, and is the
// server CI runs the suite against (directly, and with -no-seal behind
// sealgate).
//
//	sealctl init                     # keyset.json + stateseal.kek
//	go run ./examples/mcpserver -keyset keyset.json -addr 127.0.0.1:8080
//
// It listens at once and loads the keyset in the background, retrying
// until it loads (/readyz answers 503, with the reason, until then);
// /healthz, /readyz and /metrics are served beside /mcp. Nothing in it
// refreshes the keyset: run `sealctl refresh` or a scheduler within the
// keyset's freshness window (docs/ROTATION.md, "Freshness and refresh").
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
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mcpsdk"
	"github.com/stateseal/stateseal/seal"
	"github.com/stateseal/stateseal/stores/redis"

	// Every KEK backend, so that any keyset's URL opens.
	_ "github.com/stateseal/stateseal/backends/awskms"
	_ "github.com/stateseal/stateseal/backends/gcpkms"
	_ "github.com/stateseal/stateseal/backends/vault"

	// Every keyset store, so that --keyset takes any store's URL (Redis's
	// above).
	_ "github.com/stateseal/stateseal/stores/vaultkv"
)

func main() {
	var c config
	flag.StringVar(&c.addr, "addr", "127.0.0.1:8080", "listen address, HOST:PORT")
	flag.StringVar(&c.keyset, "keyset", "", "keyset file or store URL (default: an in-memory key). Loaded in the background, retried until it loads: /readyz is 503 until then. Nothing here refreshes it: run sealctl refresh (or a scheduler) within its freshness window (7 days by default), or every instance turns unready at once")
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
	// go-redis logs every failed dial, several a second while Redis is
	// down: through the store's logger, at most one line a second, with
	// the count of those left out.
	redis.SetLogger(slog.Default())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := newApp(c)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	// The line naming /mcp, which scripts wait for, comes once the
	// keyset loaded (app.install): until then the server answers 503.
	a.addr = ln.Addr().String()
	if c.noSeal {
		log.Printf("listening at http://%s (/healthz, /readyz, /metrics, /mcp: states in the clear, -no-seal)", a.addr)
	} else {
		log.Printf("listening at http://%s (/healthz, /readyz, /metrics); /mcp once the keyset loads", a.addr)
	}
	srv := &http.Server{Handler: a.routes(), ReadHeaderTimeout: 10 * time.Second}
	loaded := make(chan struct{})
	go func() { defer close(loaded); a.load(ctx) }()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	err = srv.Serve(ln)
	stop() // a listener that failed ends the loader too
	<-loaded
	if !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newHandler is the handler of a server with the default settings.
func newHandler(ring *keyring.Ring, audience string) (http.Handler, error) {
	return config{audience: audience, replay: "memory"}.handler(ring)
}

// newServer builds the MCP server with the sealing middleware and the
// conformance fixtures.
func newServer(sealer *seal.Sealer, o *mcpsdk.Options) (*mcp.Server, error) {
	a, err := mcpsdk.New(sealer, o)
	if err != nil {
		return nil, fmt.Errorf("stateseal middleware: %w", err)
	}
	server := fixtureServer()
	server.AddReceivingMiddleware(a.Middleware())
	return server, nil
}

// fixtureServer returns the MCP server with every fixture and no
// middleware: the input-required ones (fixtures.go), the fleet's, and the
// rest of the conformance suite's (suite_*.go).
func fixtureServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "stateseal-example", Version: "1.0.0"},
		&mcp.ServerOptions{CompletionHandler: complete, SubscribeHandler: subscribe, UnsubscribeHandler: unsubscribe})
	addFixtures(s)
	addFleetTools(s)
	addSuiteTools(s)
	addSuiteInputTools(s)
	addSuiteResources(s)
	addSuitePrompts(s)
	return s
}
