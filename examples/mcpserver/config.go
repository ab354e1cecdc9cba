package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/mcpsdk"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/replay"
	"github.com/stateseal/stateseal/replay/redisguard"
	"github.com/stateseal/stateseal/seal"
	"github.com/stateseal/stateseal/stores/redis"
)

// config is the server's flags.
type config struct {
	addr, keyset, kek, audience string
	previousKEK, keysetID       string
	minVersion                  uint64
	principalHeader             string
	singleUse                   string
	replay                      string
	poll                        time.Duration
	clockOffset                 time.Duration
	noSeal                      bool
}

func (c config) now() time.Time { return time.Now().Add(c.clockOffset) }

// loadOptions is the trust the flags configure: the KEK (and the old one
// during a rewrap), the pinned keyset id, the version floor.
func (c config) loadOptions() keyset.LoadOptions {
	return keyset.LoadOptions{KEK: c.kek, PreviousKEK: c.previousKEK, KeysetID: c.keysetID, MinVersion: c.minVersion, Now: c.now}
}

// handler returns the HTTP handler serving MCP at /mcp, with the guard
// -replay names and the default metrics (the rejection log).
func (c config) handler(ring *keyring.Ring) (http.Handler, error) {
	var g replay.Guard
	if c.singleUse != "" {
		var err error
		if g, err = guard(c.replay); err != nil {
			return nil, err
		}
	}
	return c.serve(ring, g, mrtr.SlogMetrics(slog.Default()))
}

// serve returns the HTTP handler serving MCP at /mcp, stateless (the
// go-sdk sends input_required to clients only from a stateless handler),
// with g as the replay guard of -single-use and m as the metrics.
func (c config) serve(ring *keyring.Ring, g replay.Guard, m mrtr.Metrics) (http.Handler, error) {
	sealer, err := seal.New(ring, &seal.Options{Now: c.now})
	if err != nil {
		return nil, err
	}
	o := &mcpsdk.Options{Options: mrtr.Options{
		Audience: c.audience,
		TTL:      map[string]time.Duration{"test_input_required_result_multi_round": 15 * time.Minute},
		Metrics:  m,
	}}
	if h := c.principalHeader; h != "" {
		o.Principal = func(_ context.Context, req mcp.Request) string {
			if e := req.GetExtra(); e != nil && e.Header != nil {
				return e.Header.Get(h)
			}
			return ""
		}
	} else {
		// The conformance suite's client does not authenticate, so its
		// states are bound to no user. A server with users leaves this off
		// and binds each state to its caller (Extra.TokenInfo.UserID).
		o.AllowAnonymous = true
	}
	if c.singleUse != "" {
		o.SingleUse = mrtr.Targets(strings.Split(c.singleUse, ",")...)
		o.Replay = g
	}
	server, err := newServer(sealer, o)
	if err != nil {
		return nil, err
	}
	if c.noSeal {
		server = fixtureServer()
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	return mux, nil
}

// guard returns the replay guard -replay names. A redis:// URL takes the
// client's parameters (stores/redis) and guard_timeout, the bound on each
// check (redisguard.Options.Timeout).
func guard(where string) (replay.Guard, error) {
	if where == "memory" || where == "" {
		return replay.NewMemory(0), nil
	}
	where, o, err := redisguard.SplitURL(where)
	if err != nil {
		return nil, fmt.Errorf("-replay: %w", err)
	}
	client, err := redis.NewClient(where)
	if err != nil {
		return nil, err
	}
	return redisguard.New(client, &o), nil
}
