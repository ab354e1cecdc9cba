// Command mcpserver is an MCP server (go-sdk, Streamable HTTP, stateless)
// whose requestState is sealed by stateseal. It implements the fixtures
// the official conformance suite's input-required scenarios call, with
// real sealing, and is the server CI runs the suite against.
//
//	sealctl init                     # keyset.json + stateseal.kek
//	go run ./examples/mcpserver -keyset keyset.json -addr 127.0.0.1:8080
//
// Without -keyset it seals with a key that lives in memory only.
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
	"github.com/stateseal/stateseal/mrtr"
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
	addr := flag.String("addr", "127.0.0.1:8080", "listen address, HOST:PORT")
	keyset := flag.String("keyset", "", "keyset file (default: an in-memory key)")
	kek := flag.String("kek", "", "KEK URL overriding the keyset's")
	audience := flag.String("audience", "stateseal-example", "audience bound into every state")
	flag.Parse()
	if err := run(*addr, *keyset, *kek, *audience); err != nil {
		log.Fatal(err)
	}
}

func run(addr, keyset, kek, audience string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ring, err := loadRing(ctx, keyset, kek)
	if err != nil {
		return err
	}
	handler, err := newHandler(ring, audience)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
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

func loadRing(ctx context.Context, keyset, kek string) (*keyring.Ring, error) {
	if keyset == "" {
		log.Printf("no -keyset: sealing with an in-memory key")
		return keyring.Generate(keyring.AEAD)
	}
	l := &keyring.Loader{Path: keyset, Options: keyring.LoadOptions{KEK: kek}}
	ring, err := l.Load(ctx)
	if err != nil {
		return nil, err
	}
	go l.Run(ctx, 10*time.Second)
	return ring, nil
}

// newHandler returns the HTTP handler serving MCP at /mcp.
func newHandler(ring *keyring.Ring, audience string) (http.Handler, error) {
	sealer, err := seal.New(ring)
	if err != nil {
		return nil, err
	}
	server, err := newServer(sealer, &mcpsdk.Options{Options: mrtr.Options{
		Audience: audience,
		// The conformance suite's client does not authenticate, so its
		// states are bound to no user. A server with users leaves this off
		// and binds each state to its caller (Extra.TokenInfo.UserID).
		AllowAnonymous: true,
		TTL:            map[string]time.Duration{"test_input_required_result_multi_round": 15 * time.Minute},
		Metrics:        mrtr.SlogMetrics(slog.Default()),
	}})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	return mux, nil
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
	return server, nil
}
