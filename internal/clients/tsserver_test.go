package clients_test

import (
	"bufio"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/internal/testkit"
)

// tsServerDir holds the TypeScript SDK's server with the suite's
// fixtures, and its pinned packages.
var tsServerDir = filepath.Join("..", "..", "conformance", "ts-server")

// A tsFixture is one case client.ts's fixtures mode runs: the result text
// the client must get through sealgate, the input requests it must be
// asked (by method), and the states sealgate seals for it (the
// TypeScript server's requestState, which it keeps in the clear).
type tsFixture struct {
	text   string
	asked  map[string]int
	states int
}

const (
	elicit = "elicitation/create"
	sample = "sampling/createMessage"
	roots  = "roots/list"
)

// tsFixtures are conformance/ts-server's fixtures, every tool and the
// prompt, with a client that declares elicitation, sampling and roots,
// and one case with elicitation only.
var tsFixtures = map[string]tsFixture{
	"elicitation":     {"Hello, Ada!", map[string]int{elicit: 1}, 0},
	"sampling":        {"Sampling response: Hi", map[string]int{sample: 1}, 0},
	"list_roots":      {"Client exposed 1 root(s): file:///r", map[string]int{roots: 1}, 0},
	"request_state":   {`state-ok: requestState received and confirmation accepted (state {"step":"confirm","fixture":"v1"})`, map[string]int{elicit: 1}, 1},
	"tampered_state":  {`state-ok: requestState accepted (state {"step":"confirm","fixture":"v1"})`, map[string]int{elicit: 1}, 1},
	"multiple_inputs": {"Hi Ada — 1 root(s) visible", map[string]int{elicit: 1, sample: 1, roots: 1}, 1},
	"multi_round":     {"Multi-round complete: Ada likes Ada", map[string]int{elicit: 2}, 2},
	"capabilities":    {"Capability-aware input requests fulfilled", map[string]int{elicit: 1, sample: 1, roots: 1}, 0},
	// Not input-required: it checks that the client's capabilities reach
	// the upstream in _meta.
	"missing_capability":            {"Client declared the sampling capability; tool executed.", map[string]int{}, 0},
	"prompt":                        {"Context: Ada", map[string]int{elicit: 1}, 0},
	"capabilities_elicitation_only": {"Capability-aware input requests fulfilled", map[string]int{elicit: 1}, 0},
}

// The ts-server's line once it listens.
var tsServerAt = regexp.MustCompile(`MCP server at (http://\S+)`)

// TestTypeScriptClientTSServer: the TypeScript SDK's client at its
// default protocol (2025-11-25), with elicitation, sampling and roots
// handlers, completes every fixture of the TypeScript SDK's own stateless
// server (conformance/ts-server) through sealgate's bridge, each with its
// result, after exactly the input requests the fixture makes; the client
// never sees (nor sends) a requestState or anything else of the
// 2026-07-28 input-required vocabulary; the server's plain requestState
// is sealed by sealgate on the way out and opened on the way back, as
// many times as the fixtures issue one. Without the input requests' capability,
// the upstream's own error reaches the client. The same server alone
// completes none of them at that protocol.
func TestTypeScriptClientTSServer(t *testing.T) {
	installed(t, node, filepath.Join(tsDir, "node_modules", "@modelcontextprotocol", "client"),
		filepath.Join(tsServerDir, "node_modules", "@modelcontextprotocol", "server"))
	b, err := bases()
	if err != nil {
		t.Fatal(err)
	}
	nodePath, script := testkit.Must(filepath.Abs(node)), testkit.Must(filepath.Abs(filepath.Join(tsServerDir, "server.ts")))
	var upstream string
	up, err := start(b.dir, "ts-server", func(log []byte) bool {
		if m := tsServerAt.FindSubmatch(log); m != nil {
			upstream = string(m[1])
			return true
		}
		return false
	}, nodePath, script, "--port", "0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.stop)
	gw, err := b.startGateway("ts-gateway", upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.stop)

	seen := runTSClient(t, map[string]any{"fixtures": []map[string]string{
		{"name": "ts-gateway", "url": gw.url},
		{"name": "ts-server", "url": upstream},
	}})
	for _, c := range sortedKeys(tsFixtures) {
		want := tsFixtures[c]
		l, ok := seen["ts-gateway/"+c]
		switch {
		case !ok:
			t.Errorf("ts-gateway %s: client.ts printed no line", c)
		case l.Error != nil || l.Text != want.text:
			t.Errorf("ts-gateway %s: %q %+v, want %q", c, l.Text, l.Error, want.text)
		}
		if l.Protocol != "2025-11-25" {
			t.Errorf("ts-gateway %s: the client negotiated %q, want its default 2025-11-25", c, l.Protocol)
		}
		if !maps.Equal(l.Handled, want.asked) || !maps.Equal(l.Wire, want.asked) {
			t.Errorf("ts-gateway %s: the handlers answered %v, the wire carried %v; want %v", c, l.Handled, l.Wire, want.asked)
		}
		if len(l.Leaks) > 0 {
			t.Errorf("ts-gateway %s: the 2025 client saw the 2026-07-28 input-required vocabulary: %v", c, l.Leaks)
		}
		t.Logf("| TypeScript 2.4.0, default protocol | ts-server via sealgate | %s | result %q | %s | %d |", c, l.Text, asked(l.Wire), want.states)

		// The control: at the same protocol, the stateless server alone
		// cannot ask for input.
		d := seen["ts-server/"+c]
		if d.Error == nil && d.Text == want.text && len(want.asked) > 0 {
			t.Errorf("ts-server %s: completed at the default protocol without the bridge: %q", c, d.Text)
		}
		if d.Error != nil {
			t.Logf("| TypeScript 2.4.0, default protocol | ts-server alone | %s | `%s` | %s | |", c, d.Error.Text, asked(d.Wire))
		} else {
			t.Logf("| TypeScript 2.4.0, default protocol | ts-server alone | %s | result %q | %s | |", c, d.Text, asked(d.Wire))
		}
	}

	// Without sampling declared, the upstream's own error, as it sent it:
	// a JSON-RPC error for an input request it may not make, a tool
	// error from the tool that requires the capability.
	if l := seen["ts-gateway/sampling_undeclared"]; l.Error == nil || l.Error.Class != "ProtocolError" || l.Error.Code != -32021 ||
		l.Error.Message != "Cannot request input 'capital_question' (sampling/createMessage): the request's client capabilities do not declare the required capability" ||
		l.Error.Data.RequiredCapabilities["sampling"] == nil || len(l.Wire) > 0 || len(l.Leaks) > 0 {
		t.Errorf("ts-gateway sampling_undeclared: %q %+v (input requests %v, leaks %v); want the upstream's -32021 naming sampling, and no input request", l.Text, l.Error, l.Wire, l.Leaks)
	} else {
		t.Logf("| TypeScript 2.4.0, default protocol, no sampling | ts-server via sealgate | sampling | `%s` (code %d, data.requiredCapabilities %v) | none | 0 |", l.Error.Text, l.Error.Code, l.Error.Data.RequiredCapabilities)
	}
	if l := seen["ts-gateway/missing_capability_undeclared"]; l.Error == nil || l.Error.Message != "tool error: Missing required client capabilities: sampling" || len(l.Wire) > 0 || len(l.Leaks) > 0 {
		t.Errorf("ts-gateway missing_capability_undeclared: %q %+v (input requests %v, leaks %v); want the tool's error naming sampling", l.Text, l.Error, l.Wire, l.Leaks)
	} else {
		t.Logf("| TypeScript 2.4.0, default protocol, no sampling | ts-server via sealgate | missing_capability | `%s` | none | 0 |", l.Error.Text)
	}

	// The server's state, kept in the clear, went out sealed and came back
	// opened, once a round that carried one; none was refused.
	m := metrics(t, gw.admin)
	for _, c := range sortedKeys(tsFixtures) {
		tool := "test_input_required_result_" + c
		switch c {
		case "missing_capability":
			tool = "test_missing_capability"
		case "capabilities_elicitation_only":
			continue // counted with capabilities
		}
		for _, kind := range []string{"sealed", "opened"} {
			if got := m[fmt.Sprintf("stateseal_states_%s_total/%s", kind, tool)]; got != tsFixtures[c].states {
				t.Errorf("%s: sealgate %s %d states, want %d", tool, kind, got, tsFixtures[c].states)
			}
		}
	}
	if n := m["stateseal_states_rejected_total"]; n != 0 {
		t.Errorf("sealgate refused %d states", n)
	}
}

// asked writes a count of input requests by method, "none" for none.
func asked(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// metrics reads sealgate's stateseal_states_{sealed,opened}_total by
// target, as "NAME/TARGET", and stateseal_states_rejected_total summed
// over its labels, from its /metrics.
func metrics(t *testing.T, admin string) map[string]int {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	target := regexp.MustCompile(`[{,]target="([^"]*)"`)
	out := map[string]int{}
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		line := sc.Text()
		name, _, ok := strings.Cut(line, "{")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("/metrics: %q: %v", line, err)
		}
		switch name {
		case "stateseal_states_sealed_total", "stateseal_states_opened_total":
			if m := target.FindStringSubmatch(line); m != nil {
				out[name+"/"+m[1]] += int(v)
			}
		case "stateseal_states_rejected_total":
			out[name] += int(v)
		}
	}
	return out
}
