package main

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/otelmetrics"
	"github.com/stateseal/stateseal/replay"
	"github.com/stateseal/stateseal/replay/redisguard"
)

// app is the running server. It listens at once and loads the keyset in
// the background, retrying until it loads, as sealgate does: until then
// /readyz and /mcp answer 503 and /healthz names the error (a store down,
// a KEK not trusted, an expired keyset), so that a store outage at start
// is an unready pod, not a crash loop.
type app struct {
	c       config
	addr    string       // the listener's, set before load runs
	guard   replay.Guard // nil without -single-use
	reg     *prometheus.Registry
	metrics *otelmetrics.Metrics

	mcp     atomic.Pointer[http.Handler]  // nil until a keyset loaded
	ring    atomic.Pointer[keyring.Ring]  // the ring mcp seals with
	loader  atomic.Pointer[keyset.Loader] // nil without -keyset, or until loaded
	loadErr atomic.Pointer[string]        // why the last first-load attempt failed
}

func newApp(c config) (*app, error) {
	a := &app{c: c, reg: prometheus.NewRegistry()}
	exp, err := otelprom.New(otelprom.WithRegisterer(a.reg))
	if err != nil {
		return nil, err
	}
	if a.metrics, err = otelmetrics.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))); err != nil {
		return nil, err
	}
	if c.singleUse != "" {
		if a.guard, err = guard(c.replay); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// loadOnce makes one attempt at loading the keyset with a new loader.
func loadOnce(ctx context.Context, c config) (*keyset.Loader, *keyring.Ring, error) {
	l := &keyset.Loader{Path: c.keyset, Options: c.loadOptions()}
	ring, err := l.Load(ctx)
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	return l, ring, nil
}

// load loads the keyset, retrying with backoff (1 s doubling to 30 s)
// until it loads or ctx ends, installs the MCP handler, then follows the
// keyset until ctx ends.
func (a *app) load(ctx context.Context) {
	if a.c.keyset == "" {
		if a.c.noSeal {
			log.Printf("-no-seal: states in the clear, sealed by nothing here (put sealgate in front)")
		} else {
			log.Printf("no -keyset: sealing with an in-memory key")
		}
		ring, err := keyring.Generate(keyring.AEAD)
		if err == nil {
			err = a.install(ring)
		}
		if err != nil {
			log.Printf("cannot serve: %v", err)
		}
		return
	}
	start, wait := time.Now(), time.Second
	var (
		l    *keyset.Loader
		ring *keyring.Ring
	)
	for attempt := 1; ; attempt++ {
		var err error
		if l, ring, err = loadOnce(ctx, a.c); err == nil {
			if attempt > 1 {
				log.Printf("keyset load recovered after %s (%d attempts): ready", time.Since(start).Round(time.Millisecond), attempt)
			}
			break
		}
		msg := err.Error()
		a.loadErr.Store(&msg)
		log.Printf("cannot load the keyset; not ready, retrying in %s: %v", wait, err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
	defer l.Close()
	if err := a.metrics.ObserveLoader(l, ring); err != nil {
		log.Printf("keyset metrics: %v", err)
	}
	if err := a.install(ring); err != nil {
		msg := err.Error()
		a.loadErr.Store(&msg)
		log.Printf("cannot serve: %v", err)
		return
	}
	// Ready from here: the handler and the ring are in place.
	a.loader.Store(l)
	a.loadErr.Store(nil)
	l.Run(ctx, a.c.poll)
}

// install builds the MCP handler on ring and serves it.
func (a *app) install(ring *keyring.Ring) error {
	h, err := a.c.serve(ring, a.guard, mrtr.TeeMetrics(a.metrics, mrtr.SlogMetrics(slog.Default())))
	if err != nil {
		return err
	}
	a.ring.Store(ring)
	a.mcp.Store(&h)
	log.Printf("stateseal example MCP server at http://%s/mcp", a.addr)
	return nil
}

// routes serves /mcp, /healthz (alive: 200 with the state below as JSON),
// /readyz (200 once a keyset is loaded; 503, with the reason, before and
// once the installed keyset is stale) and /metrics (Prometheus text:
// otelmetrics' instruments). A store or KMS outage once loaded leaves the
// server ready: the last good keyset keeps serving, and /healthz says so.
func (a *app) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h := a.mcp.Load()
		if h == nil {
			http.Error(w, "not ready: "+a.report(r.Context()).status, http.StatusServiceUnavailable)
			return
		}
		(*h).ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(a.report(r.Context()))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if rep := a.report(r.Context()); !rep.Ready {
			http.Error(w, rep.status, http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
	return mux
}

// healthReport is /healthz: the loader's keyset.Health (its fields at
// the top level, as before), the key that seals now, and the replay
// guard's state, as sealgate's /healthz shows them.
type healthReport struct {
	keyset.Health
	PrimaryKey string         `json:"primary_key,omitempty"` // 8 hex digits, as logs and sealctl show it
	Guard      map[string]any `json:"guard,omitempty"`
	status     string         // why not ready, for /readyz
	guardWait  string         // why single-use states sealed now would be refused
}

func (a *app) report(ctx context.Context) healthReport {
	var r healthReport
	switch l := a.loader.Load(); {
	case l != nil:
		r.Health = l.Health()
	case a.c.keyset == "" && a.mcp.Load() != nil:
		r.Health = keyset.Health{Ready: true} // an in-memory key
	default:
		if e := a.loadErr.Load(); e != nil {
			r.Error = *e
		}
	}
	switch {
	case r.Ready:
		r.status = "ok"
	case r.Stale:
		r.status = "the keyset is stale: " + r.Error
	case r.Error != "":
		r.status = "no keyset loaded: " + r.Error
	default:
		r.status = "no keyset loaded"
	}
	if ring := a.ring.Load(); ring != nil && !a.c.noSeal {
		if k, err := ring.Current().Primary(a.c.now()); err == nil {
			r.PrimaryKey = keyring.FormatID(k.ID)
		}
	}
	switch g := a.guard.(type) {
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
			if a.c.now().Before(from) {
				r.guardWait = "single use: Redis vouches for states sealed from " + from.UTC().Format(time.RFC3339) + " (it started or lost its records just now)"
			}
		}
	}
	if r.guardWait != "" && r.Ready {
		r.Ready, r.status = false, r.guardWait
	}
	return r
}
