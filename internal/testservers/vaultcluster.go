package testservers

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A VaultCluster is three Vault servers on loopback sharing integrated
// storage (raft), initialized with one unseal key and unsealed. Standbys
// forward requests to the leader, so a client may talk to any node.
type VaultCluster struct {
	t     testing.TB
	Nodes []*Vault
	Token string
}

// StartVaultCluster starts the three nodes, initializes the first, joins
// the others to it and waits until all three are voters.
func StartVaultCluster(t testing.TB) *VaultCluster {
	t.Helper()
	bin := findBinary(t, VaultBinary)
	c := &VaultCluster{t: t}
	for i := range 3 {
		dir := t.TempDir()
		port, cport := FreePort(t), FreePort(t)
		cfg := filepath.Join(dir, "vault.hcl")
		os.WriteFile(cfg, fmt.Appendf(nil, `storage "raft" {
  path    = %q
  node_id = "node%d"
}
listener "tcp" {
  address         = "127.0.0.1:%d"
  cluster_address = "127.0.0.1:%d"
  tls_disable     = true
}
disable_mlock = true
api_addr      = "http://127.0.0.1:%d"
cluster_addr  = "https://127.0.0.1:%d"
`, dir, i, port, cport, port, cport), 0o600)
		p := start(t, "vault", bin, port, []string{"HOME=" + dir}, "server", "-config="+cfg)
		c.Nodes = append(c.Nodes, &Vault{Process: p})
	}
	first := c.Nodes[0]
	var init struct {
		Keys      []string `json:"keys_base64"`
		RootToken string   `json:"root_token"`
	}
	if err := first.call("PUT", "/v1/sys/init", `{"secret_shares":1,"secret_threshold":1}`, &init); err != nil {
		t.Fatalf("vault init: %v", err)
	}
	c.Token = init.RootToken
	for _, n := range c.Nodes {
		n.Token, n.unsealKey = init.RootToken, init.Keys[0]
	}
	first.unsealOnly()
	c.waitLeader()
	// Autopilot makes a joined node a voter once it has been healthy for
	// the stabilization time (10 s by default): a second here.
	if err := first.authDo("POST", "/v1/sys/storage/raft/autopilot/configuration", `{"server_stabilization_time":"1s"}`, nil); err != nil {
		t.Fatalf("vault autopilot: %v", err)
	}
	for _, n := range c.Nodes[1:] {
		if err := n.call("POST", "/v1/sys/storage/raft/join", fmt.Sprintf(`{"leader_api_addr":%q}`, first.URL()), nil); err != nil {
			t.Fatalf("vault raft join: %v", err)
		}
		n.unsealOnly()
	}
	c.waitVoters(3)
	return c
}

// unsealOnly unseals a cluster node; a standby's health is not 200, so
// the wait is for "unsealed" alone.
func (v *Vault) unsealOnly() {
	v.t.Helper()
	waitLong(v.t, 60*time.Second, "vault to unseal", func() bool {
		var st struct {
			Sealed bool `json:"sealed"`
		}
		if err := v.call("PUT", "/v1/sys/unseal", fmt.Sprintf(`{"key":%q}`, v.unsealKey), &st); err != nil {
			return false
		}
		return !st.Sealed
	})
}

// Leader returns the node that is active now, waiting for one.
func (c *VaultCluster) Leader() *Vault {
	c.t.Helper()
	return c.waitLeader()
}

func (c *VaultCluster) waitLeader() *Vault {
	c.t.Helper()
	var leader *Vault
	waitLong(c.t, 60*time.Second, "a vault leader", func() bool {
		for _, n := range c.Nodes {
			if n.cmd == nil {
				continue
			}
			var l struct {
				IsSelf bool `json:"is_self"`
			}
			if n.call("GET", "/v1/sys/leader", "", &l) == nil && l.IsSelf && n.healthy() {
				leader = n
				return true
			}
		}
		return false
	})
	return leader
}

func (v *Vault) healthy() bool {
	return v.call("GET", "/v1/sys/health", "", nil) == nil
}

// waitVoters waits until the leader's raft configuration counts n voters.
func (c *VaultCluster) waitVoters(n int) {
	c.t.Helper()
	waitLong(c.t, 60*time.Second, fmt.Sprintf("%d raft voters", n), func() bool {
		l := c.waitLeader()
		var cfg struct {
			Data struct {
				Config struct {
					Servers []struct {
						Voter  bool `json:"voter"`
						Leader bool `json:"leader"`
					} `json:"servers"`
				} `json:"config"`
			} `json:"data"`
		}
		if err := l.authCall("GET", "/v1/sys/storage/raft/configuration", &cfg); err != nil {
			return false
		}
		voters := 0
		for _, s := range cfg.Data.Config.Servers {
			if s.Voter {
				voters++
			}
		}
		return voters >= n
	})
}

// Standby returns a running node that is not the leader.
func (c *VaultCluster) Standby() *Vault {
	c.t.Helper()
	l := c.waitLeader()
	for _, n := range c.Nodes {
		if n != l && n.cmd != nil {
			return n
		}
	}
	c.t.Fatal("no standby is running")
	return nil
}

// KillLeader kills the leader (SIGKILL), waits for another node to take
// over and returns the dead one; Rejoin starts it again.
func (c *VaultCluster) KillLeader() *Vault {
	c.t.Helper()
	l := c.waitLeader()
	l.Stop()
	c.waitLeader()
	return l
}

// Rejoin starts a stopped node again, unseals it and waits for three
// voters.
func (c *VaultCluster) Rejoin(v *Vault) {
	c.t.Helper()
	v.Start()
	v.unsealOnly()
	c.waitVoters(3)
}

// authCall is call with the root token.
func (v *Vault) authCall(method, path string, out any) error {
	return v.authDo(method, path, "", out)
}

func (v *Vault) authDo(method, path, body string, out any) error {
	req, _ := http.NewRequest(method, v.URL()+path, strings.NewReader(body))
	req.Header.Set("X-Vault-Token", v.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}
