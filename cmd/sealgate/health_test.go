package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/stateseal/stateseal/gateway"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/replay"
)

// TestHealthJWKS: with -principal jwt, a JWKS never fetched (the issuer
// down at start) makes the gateway not ready, and /healthz says why, as
// JSON; once the JWKS answers, the readiness check fetches it and the
// gateway is ready. The guard and the upstreams are reported too.
func TestHealthJWKS(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	up := testkit.Must(url.Parse("http://127.0.0.1:1"))
	g := &gateway.Gateway{Upstreams: []*url.URL{up}, Principal: &gateway.JWTPrincipal{Issuer: "i", Audience: "a", JWKSURL: "http://" + addr + "/jwks"}}
	var shutting atomic.Bool
	h := &health{g: g, guard: replay.NewMemory(0), shutting: &shutting}
	rep := h.report(context.Background())
	if rep.Ready || rep.JWKS["fetched"] != false || rep.JWKS["error"] == nil || rep.Guard["kind"] != "memory" || len(rep.Upstreams) != 1 {
		t.Fatalf("JWKS down: %+v", rep)
	}
	pub, _ := testkit.Must2(ed25519.GenerateKey(rand.Reader))
	doc := testkit.Must(json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: "k", Algorithm: "EdDSA", Use: "sig"}}}))
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(doc) }))
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	h.lastWarm.Store(0) // the readiness check fetches at most every 5 s
	rep = h.report(context.Background())
	// No keyset in this test: ready stays false, for that reason only.
	if rep.JWKS["fetched"] != true || rep.Status != "no keyset loaded" {
		t.Fatalf("JWKS up: %+v", rep)
	}
}

// TestHealthKeysetVanished: a keyset deleted from its store (a file
// here; a Redis restarted without persistence in production) makes the
// gateway not ready, and /healthz says why; it is ready again once the
// keyset is back.
func TestHealthKeysetVanished(t *testing.T) {
	up := httptest.NewServer(http.NotFoundHandler())
	defer up.Close()
	ks := keysetDir(t)
	r := startRun(t, "-upstream", up.URL, "-principal", "anonymous", "-keyset", ks)
	waitFor(t, "readiness", r.ready)
	saved, err := os.ReadFile(ks)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(ks)
	waitFor(t, "not ready", func() bool { return !r.ready() })
	resp, err := http.Get(r.admin + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body := testkit.Must(io.ReadAll(resp.Body))
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "vanished") {
		t.Fatalf("/healthz with the keyset gone: %d %s", resp.StatusCode, body)
	}
	if err := os.WriteFile(ks, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ready again", r.ready)
}

// TestHealthKeysetNeverLoaded: a keyset that cannot be loaded at start
// (here its KEK is missing: a configuration error, not an outage) keeps
// the gateway unready and retrying, and /healthz says why, not only
// that no keyset is loaded; once the KEK is back, it loads.
func TestHealthKeysetNeverLoaded(t *testing.T) {
	up := httptest.NewServer(http.NotFoundHandler())
	defer up.Close()
	ks := keysetDir(t)
	kek := strings.TrimSuffix(ks, "keyset.json") + "stateseal.kek"
	saved := testkit.Must(os.ReadFile(kek))
	testkit.Check(os.Remove(kek))
	r := startRun(t, "-upstream", up.URL, "-principal", "anonymous", "-keyset", ks)
	var rep healthReport
	waitFor(t, "/healthz naming the load error", func() bool {
		resp, err := http.Get(r.admin + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		rep = healthReport{}
		return json.NewDecoder(resp.Body).Decode(&rep) == nil && rep.Keyset["error"] != nil
	})
	if rep.Ready || !strings.HasPrefix(rep.Status, "no keyset loaded: ") || !strings.Contains(rep.Status, "KEK") {
		t.Fatalf("/healthz: %+v", rep)
	}
	testkit.Check(os.WriteFile(kek, saved, 0o600))
	waitFor(t, "ready once the KEK is back", r.ready)
	if !strings.Contains(r.logs.String(), `"msg":"sealgate: keyset load recovered","after":`) {
		t.Fatalf("no line saying the load recovered:\n%s", r.logs.String())
	}
	// The key that seals, as sealctl list and /metrics name it.
	_, body := r.get(t, "/healthz")
	rep = healthReport{}
	testkit.Check(json.Unmarshal([]byte(body), &rep))
	k, ok := testkit.Must(keyset.ReadFile(context.Background(), ks)).Primary(time.Now())
	if !ok || rep.Keyset["primary_key"] != keyring.FormatID(k.ID) {
		t.Fatalf("/healthz primary_key: %s, want %v", body, k)
	}
}
