package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/hashicorp/vault/api"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/replay/redisguard"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/seal"
)

func (r *running) ready() bool {
	resp, err := http.Get(r.admin + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// refusesKeyset waits for the gateway to log that the keyset does not
// load, and checks it is not ready.
func (r *running) refusesKeyset(want string) {
	r.t.Helper()
	waitFor(r.t, "the keyset refused", func() bool { return strings.Contains(r.logs.String(), "sealgate: cannot load the keyset; retrying") })
	if r.ready() {
		r.t.Fatalf("ready with a keyset it should refuse; logs:\n%s", r.logs)
	}
	for _, line := range strings.Split(r.logs.String(), "\n") {
		if strings.Contains(line, "cannot load the keyset") {
			r.t.Logf("%s", line)
		}
	}
	if !strings.Contains(r.logs.String(), want) {
		r.t.Fatalf("the refusal does not say %q; logs:\n%s", want, r.logs)
	}
}

// flow runs a two-round tools/call through the gateway at r: the first
// round's state is sealed with a key of the keyset, the retry opens it
// and the upstream gets the plaintext.
func (r *running) flow(up *upstream, keys []keyset.StoredKey) {
	r.t.Helper()
	waitFor(r.t, "readiness", r.ready)
	f := &fixture{t: r.t, url: r.proxy + "/mcp"}
	args := map[string]any{"seats": 2}
	_, m := f.post(rpcCall(1, mrtr.MethodCallTool, "book", args, ""), v2026)
	tok, _ := resultOf(r.t, m)["requestState"].(string)
	h, err := seal.Inspect(tok)
	if err != nil {
		r.t.Fatalf("first round: %v (%v)", err, m)
	}
	known := false
	for _, k := range keys {
		known = known || k.ID == h.KeyID
	}
	if !known {
		r.t.Fatalf("sealed with key %08x, not one of the keyset's", h.KeyID)
	}
	_, m = f.post(rpcCall(2, mrtr.MethodCallTool, "book", args, tok), v2026)
	if got, _ := up.Last(); got["params"].(map[string]any)["requestState"] != "plain:book" || !strings.Contains(fmt.Sprint(m["result"]), "got plain:book") {
		r.t.Fatalf("retry: upstream got %v, client got %v", got, m)
	}
}

func startUpstream(t *testing.T) (*upstream, string) {
	up := &upstream{Reply: stateReply}
	s := httptest.NewServer(up)
	t.Cleanup(s.Close)
	return up, s.URL
}

var storePolicy = keyring.Policy{PropagationDelay: time.Second, MaxTTL: time.Hour, Skew: time.Second}

// initKeyset creates a keyset at location under kek, as sealctl init
// does, and returns its id and keys.
func initKeyset(t *testing.T, location, kek string) (string, []keyset.StoredKey) {
	t.Helper()
	res, err := rotation.Init(context.Background(), location, kek, keyring.AEAD, storePolicy,
		&rotation.Options{KEK: kek, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return res.Keyset.ID, res.Keyset.Keys
}

// TestVaultKVTransit: the gateway loads a keyset from Vault KV v2, under a
// Vault transit key it is configured with (-kek) and pinned to by id
// (-keyset-id), and seals and opens with it. A gateway configured with
// another transit key, or another keyset id, does not load it.
func TestVaultKVTransit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Vault")
	}
	v := testservers.StartVault(t)
	v.Env(t)
	vc, err := api.NewClient(&api.Config{Address: v.URL()})
	if err != nil {
		t.Fatal(err)
	}
	vc.SetToken(v.Token)
	if err := vc.Sys().Mount("transit", &api.MountInput{Type: "transit"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sealgate", "other"} {
		if _, err := vc.Logical().Write("transit/keys/"+name, nil); err != nil {
			t.Fatal(err)
		}
	}
	const store, kek, other = "vault-kv://secret/stateseal/sealgate", "vault://transit/keys/sealgate", "vault://transit/keys/other"
	id, keys := initKeyset(t, store, kek)
	up, upURL := startUpstream(t)
	common := []string{"-upstream", upURL, "-principal", "anonymous", "-keyset", store}

	startRun(t, append(common, "-kek", kek, "-keyset-id", id)...).flow(up, keys)
	startRun(t, append(common, "-kek", other)...).refusesKeyset("names a KEK this instance does not trust")
	startRun(t, append(common, "-kek", kek, "-keyset-id", "ks_other")...).refusesKeyset("another keyset than the pinned one")
}

// TestAWSKMS: the same with a keyset file under an AWS KMS key
// (local-kms).
func TestAWSKMS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts local-kms")
	}
	lk := testservers.StartLocalKMS(t, "")
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(lk.Region))
	if err != nil {
		t.Fatal(err)
	}
	kc := kms.NewFromConfig(cfg, func(o *kms.Options) { o.BaseEndpoint = aws.String(lk.Endpoint()) })
	var urls []string
	for range 2 {
		out, err := kc.CreateKey(ctx, &kms.CreateKeyInput{})
		if err != nil {
			t.Fatal(err)
		}
		urls = append(urls, fmt.Sprintf("awskms://%s?region=%s&endpoint=%s", *out.KeyMetadata.KeyId, lk.Region, url.QueryEscape(lk.Endpoint())))
	}
	kek, other := urls[0], urls[1]
	store := filepath.Join(t.TempDir(), "keyset.json")
	id, keys := initKeyset(t, store, kek)
	up, upURL := startUpstream(t)
	common := []string{"-upstream", upURL, "-principal", "anonymous", "-keyset", store}

	startRun(t, append(common, "-kek", kek, "-keyset-id", id)...).flow(up, keys)
	startRun(t, append(common, "-kek", other)...).refusesKeyset("names a KEK this instance does not trust")
	startRun(t, append(common, "-kek", kek, "-keyset-id", "ks_other")...).refusesKeyset("another keyset than the pinned one")
}

// TestRedisReplayUnavailable: with single use recorded in Redis, a state
// sent back while Redis is stopped gets the middleware's "unavailable"
// answer (-32603, data.reason "unavailable", HTTP 200) and the upstream
// never sees the request. Once Redis is back and vouches again, a new
// state opens exactly once.
func TestRedisReplayUnavailable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis")
	}
	rs := testservers.StartRedis(t)
	up, upURL := startUpstream(t)
	r := startRun(t, "-upstream", upURL, "-principal", "anonymous", "-single-use", "pay", "-replay", rs.URL())
	waitFor(t, "readiness", r.ready)
	f := &fixture{t: t, url: r.proxy + "/mcp"}
	args := map[string]any{"amount": 10}
	first := func(id int) string {
		_, m := f.post(rpcCall(id, mrtr.MethodCallTool, "pay", args, ""), v2026)
		tok, _ := resultOf(t, m)["requestState"].(string)
		if tok == "" {
			t.Fatalf("first round: %v", m)
		}
		return tok
	}
	tok := first(1)

	rs.Stop()
	before := up.Calls.Load()
	status, m := f.post(rpcCall(2, mrtr.MethodCallTool, "pay", args, tok), v2026)
	e, _ := m["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	if status != http.StatusOK || e["code"] != float64(-32603) || e["message"] != "requestState not checked, try again: unavailable" ||
		data["reason"] != "unavailable" || m["id"] != float64(2) {
		t.Fatalf("with Redis stopped: HTTP %d %v", status, m)
	}
	if n := up.Calls.Load() - before; n != 0 {
		t.Fatalf("the upstream was called %d times while the single-use check was unavailable", n)
	}

	// Redis restarted vouches for the uses recorded from its start (plus
	// the guard's clock margin) only: states sealed before are
	// unvouched (start again), and new ones open once; a new flow may be
	// sealed inside the margin, and is unvouched too.
	rs.Start()
	waitFor(t, "a new flow to open after Redis is back", func() bool {
		tok = first(3)
		_, m := f.post(rpcCall(4, mrtr.MethodCallTool, "pay", args, tok), v2026)
		if strings.Contains(fmt.Sprint(m["result"]), "got plain:pay") {
			return true
		}
		e, _ := m["error"].(map[string]any)
		data, _ := e["data"].(map[string]any)
		if e["code"] != float64(-32603) && data["reason"] != "unvouched" {
			t.Fatalf("after Redis is back: %v", m)
		}
		return false
	})
	// Used again: replayed, once the first use's confirmation (sent in
	// the background) is in; "unavailable" until then.
	waitFor(t, "the second use refused as replayed", func() bool {
		status, m = f.post(rpcCall(5, mrtr.MethodCallTool, "pay", args, tok), v2026)
		if e, _ := m["error"].(map[string]any); e["code"] == float64(-32603) {
			return false
		}
		refused(t, status, m, http.StatusBadRequest, "replayed")
		return true
	})
}

// TestRedisReplayEvicting (a new user's trial): a guard Redis that may
// evict keys refuses every single use for ever, so the gateway does not
// start on it, and says what to set; /healthz would otherwise look
// healthy while every confirmation answers "unavailable".
func TestRedisReplayEvicting(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis")
	}
	rs := testservers.StartRedisVolatile(t)
	admin := goredis.NewClient(&goredis.Options{Addr: rs.Addr()})
	defer admin.Close()
	for _, kv := range [][2]string{{"maxmemory", "100mb"}, {"maxmemory-policy", "allkeys-lru"}} {
		if err := admin.ConfigSet(context.Background(), kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	c, err := parseConfig([]string{"-upstream", "http://127.0.0.1:1", "-audience", "https://gw.test", "-principal", "anonymous",
		"-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-single-use", "pay", "-replay", rs.URL()}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	err = run(context.Background(), c, &logs)
	if err == nil || !strings.Contains(err.Error(), "noeviction") {
		t.Fatalf("run with an evicting guard Redis: %v, want a refusal naming noeviction", err)
	}
}

// TestRedisReplayWrongPassword (a log-reader review): a guard Redis that
// refuses the URL's password would answer every single use "unavailable"
// for ever while the gateway looked ready: it does not start, and the
// error shows no password.
func TestRedisReplayWrongPassword(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis")
	}
	rs := testservers.StartRedisAuth(t, "right-password")
	wrong := "redis://:wrong-password@" + rs.Addr() + "/0"
	c, err := parseConfig([]string{"-upstream", "http://127.0.0.1:1", "-audience", "https://gw.test", "-principal", "anonymous",
		"-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-single-use", "pay", "-replay", wrong}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	err = run(context.Background(), c, &logs)
	if err == nil || !strings.Contains(err.Error(), "credentials") || strings.Contains(err.Error()+logs.String(), "wrong-password") {
		t.Fatalf("run with a wrong guard password: %v\n%s", err, logs.String())
	}
}

// TestReplayGuardTimeout (a new user's trial): the guard_timeout the
// docs give a fleet's -replay URL is taken, and a bad one refused.
func TestReplayGuardTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis")
	}
	rs := testservers.StartRedisVolatile(t)
	base := []string{"-upstream", "http://127.0.0.1:1", "-audience", "https://gw.test", "-principal", "anonymous", "-single-use", "pay"}
	c, err := parseConfig(append(base, "-replay", rs.URL()+"?guard_timeout=200ms&max_retries=-1"), func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o, err := statesOptions(c, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("guard_timeout=200ms: %v", err)
	}
	if g, ok := o.Replay.(*redisguard.Guard); !ok {
		t.Fatalf("guard %T", o.Replay)
	} else {
		g.Close()
	}
	c, err = parseConfig(append(base, "-replay", rs.URL()+"?guard_timeout=soon"), func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := statesOptions(c, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "guard_timeout") {
		t.Fatalf("guard_timeout=soon: %v", err)
	}
}

// TestKeysetLocationRefusedAtStart (a new user's trial): a -keyset Redis
// URL no retry can mend ends the process at start, as in -replay,
// instead of an unready gateway retrying for ever; a Redis that is down
// is retried.
func TestKeysetLocationRefusedAtStart(t *testing.T) {
	base := []string{"-upstream", "http://127.0.0.1:1", "-audience", "https://gw.test", "-principal", "anonymous",
		"-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-kek", "local://env/K"}
	for _, ks := range []string{"redis://:pw@redis.internal:6379/0?key=k", "rediss://127.0.0.1:6379/0?key=k&ca=/nonexistent.pem", "redis://127.0.0.1:6379/0?key=k&colour=red"} {
		c, err := parseConfig(append(base, "-keyset", ks), func(string) string { return "" }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var logs testkit.Buffer
		err = run(context.Background(), c, &logs)
		if err == nil || !strings.Contains(err.Error(), "-keyset") || strings.Contains(err.Error(), ":pw@") {
			t.Fatalf("-keyset %s: %v", ks, err)
		}
	}
	r := startRun(t, "-upstream", "http://127.0.0.1:1", "-principal", "anonymous", "-kek", "local://env/K",
		"-keyset", "redis://127.0.0.1:1/0?key=k&dial_timeout=100ms")
	waitFor(t, "a retry", func() bool { return strings.Contains(r.logs.String(), "cannot load the keyset; retrying") })
}
