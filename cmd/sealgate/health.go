package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stateseal/stateseal/gateway"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/replay"
	"github.com/stateseal/stateseal/replay/redisguard"
	"github.com/stateseal/stateseal/stores"
)

// health is what /healthz reports and /readyz decides on.
type health struct {
	g        *gateway.Gateway
	guard    replay.Guard // nil without single use
	shutting *atomic.Bool
	lastWarm atomic.Int64                  // UnixNano of the last JWKS fetch /readyz made
	loader   atomic.Pointer[keyset.Loader] // nil: no -keyset, or not loaded yet
	loadErr  atomic.Pointer[string]        // why the first load failed, until one succeeds
	ring     atomic.Pointer[keyring.Ring]  // the loaded ring, for its primary key
}

type healthReport struct {
	Status    string                  `json:"status"` // "ok", or why the gateway is not ready
	Ready     bool                    `json:"ready"`
	Keyset    map[string]any          `json:"keyset"`
	Guard     map[string]any          `json:"guard,omitempty"`
	JWKS      map[string]any          `json:"jwks,omitempty"`
	Upstreams []gateway.UpstreamState `json:"upstreams"`
}

// report reads every part's state. Readiness fails when the gateway
// cannot do its job: shutting down, no keyset loaded, the keyset gone
// from the store that answers, or, with -principal
// jwt, a JWKS never fetched (no token can be verified: it is fetched
// here, at most every 5 s, since no request arrives while not ready).
// A guard that does not answer leaves the gateway ready: plain flows
// still work, and single-use ones answer unavailable.
func (h *health) report(ctx context.Context) healthReport {
	r := healthReport{Status: "ok", Ready: true, Keyset: map[string]any{"loaded": h.g.Ready()}, Upstreams: h.g.UpstreamStates()}
	notReady := func(why string) {
		if r.Ready {
			r.Status, r.Ready = why, false
		}
	}
	if h.shutting.Load() {
		notReady("shutting down")
	}
	if !h.g.Ready() {
		if e := h.loadErr.Load(); e != nil {
			r.Keyset["error"] = *e
			notReady("no keyset loaded: " + *e)
		} else {
			notReady("no keyset loaded")
		}
	}
	if l := h.loader.Load(); l != nil {
		kh := l.Health()
		r.Keyset["health"] = kh
		if k, err := h.ring.Load().Current().Primary(time.Now()); err == nil {
			r.Keyset["primary_key"] = keyring.FormatID(k.ID) // as logs, sealctl and /metrics show it
		}
		// The store answers, and holds no keyset (a Redis restarted
		// without persistence, a key deleted): the gateway seals with the
		// keys it loaded but can follow no rotation, and a gateway
		// started now could not load. (keyset.Health has the error's
		// text only; stores.ErrNotFound's is fixed.)
		if !kh.Outage && strings.Contains(kh.Error, stores.ErrNotFound.Error()) {
			notReady("the keyset vanished from its store: " + kh.Error)
		}
		// The installed keyset's freshness window has passed: nobody
		// renewed it, or the store is frozen on it (keyset.ErrStale). The
		// gateway keeps serving its keys, but an operator must look.
		if kh.Stale {
			notReady("the keyset is stale: " + kh.Error)
		}
	}
	if j, ok := h.g.Principal.(*gateway.JWTPrincipal); ok {
		fetched, err := j.JWKSState()
		if fetched.IsZero() && time.Since(time.Unix(0, h.lastWarm.Load())) >= 5*time.Second {
			h.lastWarm.Store(time.Now().UnixNano())
			wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			if werr := j.Warm(wctx); werr != nil {
				err = werr
			}
			cancel()
			fetched, _ = j.JWKSState()
		}
		r.JWKS = map[string]any{"fetched": !fetched.IsZero()}
		if !fetched.IsZero() {
			r.JWKS["last_fetch"] = fetched.UTC().Format(time.RFC3339)
		}
		if err != nil {
			r.JWKS["error"] = err.Error()
		}
		if fetched.IsZero() {
			notReady("JWKS never fetched: no token can be verified")
		}
	}
	switch g := h.guard.(type) {
	case nil:
	case *replay.Memory:
		r.Guard = map[string]any{"kind": "memory", "entries": g.Len()}
	case *redisguard.Guard:
		r.Guard = map[string]any{"kind": "redis"}
		ectx, cancel := context.WithTimeout(ctx, time.Second)
		epoch, err := g.Epoch(ectx)
		var from time.Time
		if err == nil {
			from, err = g.SealFrom(ectx)
		}
		if err == nil {
			err = g.Policy(ectx) // an eviction policy set since the start
		}
		cancel()
		if err != nil {
			r.Guard["error"] = err.Error()
		} else {
			r.Guard["vouches_from"] = epoch.UTC().Format(time.RFC3339Nano)
			r.Guard["seals_vouched_from"] = from.UTC().Format(time.RFC3339)
			// A single-use state sealed before from would be refused
			// unvouched (Redis just started, or lost its records): not
			// ready until then, up to 2 s.
			if time.Now().Before(from) {
				notReady("single use: Redis vouches for states sealed from " + from.UTC().Format(time.RFC3339) + " (it started or lost its records just now)")
			}
		}
	}
	return r
}

func (h *health) healthz(w http.ResponseWriter, r *http.Request) {
	rep := h.report(r.Context())
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(rep)
}

func (h *health) readyz(w http.ResponseWriter, r *http.Request) {
	rep := h.report(r.Context())
	if !rep.Ready {
		http.Error(w, rep.Status, http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ok\n"))
}
