package testservers

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A Vault is a Vault server with a root token: a dev server (in memory)
// or, from StartVaultServer, one that keeps its data.
type Vault struct {
	*Process
	Token     string
	unsealKey string // "" for a dev server
}

// URL is the server's address as VAULT_ADDR takes it.
func (v *Vault) URL() string { return "http://" + v.Addr() }

// StartVault starts a Vault dev server.
func StartVault(t testing.TB) *Vault {
	t.Helper()
	bin := findBinary(t, VaultBinary)
	b := make([]byte, 16)
	rand.Read(b)
	token := "root-" + hex.EncodeToString(b)
	port := FreePort(t)
	p := start(t, "vault", bin, port, []string{"VAULT_DEV_ROOT_TOKEN_ID=" + token, "HOME=" + t.TempDir()},
		"server", "-dev", "-dev-no-store-token", "-dev-listen-address=127.0.0.1:"+strconv.Itoa(port))
	v := &Vault{Process: p, Token: token}
	v.waitHealthy()
	return v
}

// Resume starts a stopped server again, unsealed if it keeps its data.
func (v *Vault) Resume() {
	v.Start()
	if v.unsealKey != "" {
		v.unseal()
		return
	}
	v.waitHealthy()
}

// Restart stops the server and starts it again. A dev server comes back
// empty; one from StartVaultServer comes back with its data, unsealed.
func (v *Vault) Restart() {
	v.Stop()
	v.Start()
	if v.unsealKey != "" {
		v.unseal()
		return
	}
	v.waitHealthy()
}

func (v *Vault) waitHealthy() {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(v.URL() + "/v1/sys/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			v.t.Fatalf("vault at %s not healthy: %v", v.URL(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Env sets VAULT_ADDR and VAULT_TOKEN for the test, as an operator's shell
// would.
func (v *Vault) Env(t testing.TB) {
	t.Setenv("VAULT_ADDR", v.URL())
	t.Setenv("VAULT_TOKEN", v.Token)
}

// A LocalKMS is local-kms, the AWS KMS API on loopback.
type LocalKMS struct {
	*Process
	Region string
}

// Endpoint is the URL an awskms URL's endpoint parameter takes.
func (l *LocalKMS) Endpoint() string { return "http://" + l.Addr() }

// StartLocalKMS starts local-kms with an empty database and seed, a YAML
// seeding file (local-kms's format), or "". It listens on every
// interface; tests send it traffic on 127.0.0.1 only.
func StartLocalKMS(t testing.TB, seed string) *LocalKMS {
	t.Helper()
	bin := findBinary(t, LocalKMSBinary)
	dir := t.TempDir()
	seedPath := filepath.Join(dir, "seed.yaml")
	if seed != "" {
		if err := os.WriteFile(seedPath, []byte(seed), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	port := FreePort(t)
	const region = "eu-west-1"
	p := start(t, "local-kms", bin, port, []string{
		"PORT=" + strconv.Itoa(port), "KMS_REGION=" + region, "KMS_ACCOUNT_ID=111122223333",
		"KMS_DATA_PATH=" + filepath.Join(dir, "data"), "KMS_SEED_PATH=" + seedPath,
	})
	// The SDK signs requests; local-kms does not check the signature.
	t.Setenv("AWS_ACCESS_KEY_ID", "local-kms-test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local-kms-test")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return &LocalKMS{Process: p, Region: region}
}

// A Redis is redis-server.
type Redis struct {
	*Process
	// Password is the one StartRedisAuth required ("" for none).
	Password string
}

// URL is the server's redis:// URL, with the password if there is one.
func (r *Redis) URL() string {
	if r.Password != "" {
		return (&url.URL{Scheme: "redis", User: url.UserPassword("", r.Password), Host: r.Addr(), Path: "/0"}).String()
	}
	return fmt.Sprintf("redis://%s/0", r.Addr())
}

// StartRedis starts redis-server on loopback only, with an append-only
// file synced on every write, so that Restart brings its data back.
func StartRedis(t testing.TB) *Redis { return startRedis(t, "") }

// StartRedisAuth starts redis-server as StartRedis does, requiring
// password from every client (requirepass).
func StartRedisAuth(t testing.TB, password string) *Redis { return startRedis(t, password) }

func startRedis(t testing.TB, password string) *Redis {
	t.Helper()
	var args []string
	if password != "" {
		args = append(args, "--requirepass", password)
	}
	r := startRedisArgs(t, args...)
	r.Password = password
	return r
}

// StartRedisVolatile starts redis-server on loopback without persistence,
// so that Restart brings it back empty, as a Redis used as a cache does;
// args are more redis-server options (such as "--replicaof", HOST, PORT).
func StartRedisVolatile(t testing.TB, args ...string) *Redis {
	t.Helper()
	bin := findBinary(t, RedisBinary)
	port := FreePort(t)
	args = append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir()}, args...)
	return &Redis{Process: start(t, "redis", bin, port, nil, args...)}
}

// StartVaultServer starts a Vault server that keeps its data in a
// directory (file storage), initialized with one unseal key and unsealed,
// so that Restart brings it back with everything written before: what a
// test of a store going down and coming back needs. A dev server keeps
// nothing across a restart. Each of listener is a line added to the TCP
// listener's configuration (max_request_size = N, say).
func StartVaultServer(t testing.TB, listener ...string) *Vault {
	t.Helper()
	bin := findBinary(t, VaultBinary)
	dir := t.TempDir()
	port := FreePort(t)
	cfg := filepath.Join(dir, "vault.hcl")
	os.WriteFile(cfg, fmt.Appendf(nil, `storage "file" { path = %q }
listener "tcp" {
  address     = "127.0.0.1:%d"
  tls_disable = true
  %s
}
disable_mlock = true
api_addr      = "http://127.0.0.1:%d"
`, filepath.Join(dir, "data"), port, strings.Join(listener, "\n  "), port), 0o600)
	p := start(t, "vault", bin, port, []string{"HOME=" + dir}, "server", "-config="+cfg)
	v := &Vault{Process: p}
	var init struct {
		Keys      []string `json:"keys_base64"`
		RootToken string   `json:"root_token"`
	}
	if err := v.call("PUT", "/v1/sys/init", `{"secret_shares":1,"secret_threshold":1}`, &init); err != nil {
		t.Fatalf("vault init: %v", err)
	}
	v.Token, v.unsealKey = init.RootToken, init.Keys[0]
	v.unseal()
	return v
}

func (v *Vault) unseal() {
	if err := v.call("PUT", "/v1/sys/unseal", fmt.Sprintf(`{"key":%q}`, v.unsealKey), nil); err != nil {
		v.t.Fatalf("vault unseal: %v", err)
	}
	v.waitHealthy()
}

func (v *Vault) call(method, path, body string, out any) error {
	req, _ := http.NewRequest(method, v.URL()+path, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}
