package gateway

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/mrtr"
)

// TestClientsCannotFloodLogs: 200 first rounds from a client without a
// principal (found by a log-reader review: one warning each, 200 lines)
// write at most a few lines, as the principal line next to it; and text
// an upstream chooses (an SSE field name of 4 KiB) reaches an error cut.
func TestClientsCannotFloodLogs(t *testing.T) {
	var logs testkit.Buffer
	f := newFixture(t, stateReply, func(g *Gateway, o *mrtr.Options) {
		g.Principal = &HeaderPrincipal{Header: "X-Forwarded-User", Trusted: []netip.Prefix{netip.MustParsePrefix("10.9.9.9/32")}}
		g.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		o.AllowAnonymous = false
	})
	for i := range 200 {
		_, m := f.post(rpcCall(i, mrtr.MethodCallTool, "book", nil, ""), v2026)
		if _, ok := m["error"]; !ok {
			t.Fatalf("a first round without a principal was sealed: %v", m)
		}
	}
	if n := strings.Count(logs.String(), "\n"); n > 10 {
		t.Fatalf("200 requests wrote %d log lines:\n%s", n, logs.String()[:2000])
	}
	if !strings.Contains(logs.String(), "cannot seal requestState") {
		t.Fatalf("the refusal was never logged:\n%s", logs.String())
	}
	if got := short(strings.Repeat("x", 4096)); len(got) > 70 {
		t.Fatalf("short: %d bytes", len(got))
	}
	if got := short("a" + strings.Repeat("é", 40)); !strings.HasSuffix(got, "...") || !utf8.ValidString(got) {
		t.Fatalf("short cut a rune: %q", got)
	}
}
