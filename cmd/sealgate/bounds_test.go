package main

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/internal/testkit"
)

// TestBoundsConfig holds the startup checks on the memory bounds: a
// budget that cannot hold one body (or, for responses, an event as read
// and as rewritten) would refuse everything, so it is refused at start,
// and 0 (no bound) and the smallest working budgets are accepted.
func TestBoundsConfig(t *testing.T) {
	base := []string{"-upstream", "http://u", "-audience", "a", "-principal", "anonymous"}
	for _, c := range []struct {
		args []string
		bad  string // the flag the error names; "" if accepted
	}{
		{[]string{"-max-header-bytes", "0"}, "-max-header-bytes"},
		{[]string{"-max-header-bytes", "-1"}, "-max-header-bytes"},
		{[]string{"-max-header-bytes", "1024"}, ""},
		{[]string{"-max-request-bytes", "1000", "-max-request-bytes-in-flight", "1000"}, "-max-request-bytes-in-flight"},
		{[]string{"-max-request-bytes", "1000", "-max-request-bytes-in-flight", "999"}, "-max-request-bytes-in-flight"},
		{[]string{"-max-request-bytes-in-flight", "-1"}, "-max-request-bytes-in-flight"},
		{[]string{"-max-request-bytes", "1000", "-max-request-bytes-in-flight", "1001"}, ""},
		{[]string{"-max-request-bytes-in-flight", "0"}, ""},
		{[]string{"-max-response-bytes", "1000", "-max-event-bytes", "100", "-max-response-bytes-in-flight", "1000"}, "-max-response-bytes-in-flight"},
		{[]string{"-max-response-bytes", "100", "-max-event-bytes", "1000", "-max-response-bytes-in-flight", "2999"}, "-max-response-bytes-in-flight"},
		{[]string{"-max-response-bytes-in-flight", "-1"}, "-max-response-bytes-in-flight"},
		{[]string{"-max-response-bytes", "100", "-max-event-bytes", "1000", "-max-response-bytes-in-flight", "3000"}, ""},
		{[]string{"-max-response-bytes", "1000", "-max-event-bytes", "100", "-max-response-bytes-in-flight", "1001"}, ""},
		{[]string{"-max-response-bytes-in-flight", "0"}, ""},
	} {
		_, err := parseConfig(append(append([]string(nil), base...), c.args...), func(string) string { return "" }, io.Discard)
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("%q refused: %v", c.args, err)
		case c.bad != "" && err == nil:
			t.Errorf("%q accepted", c.args)
		case c.bad != "" && !strings.Contains(err.Error(), c.bad+" must"):
			t.Errorf("%q: error %q does not name %s", c.args, err, c.bad)
		}
	}
}

// TestHeaderBytes sends the built binary a request whose header block is
// past -max-header-bytes (64 KiB by default; net/http reads 4 KiB more
// before it counts): 431 from net/http, before the gateway reads it; one
// inside it is forwarded.
func TestHeaderBytes(t *testing.T) {
	up := startPay(t, newLedger(t))
	g := startGatewayProc(t, "-upstream", up.URL())
	send := func(pad int) (int, string, error) {
		body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"ms":0}}}`)
		req := testkit.Must(http.NewRequest("POST", g.proxy+"/mcp", bytes.NewReader(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("X-Pad", strings.Repeat("p", pad))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		// After a 431 the server closes the connection with the request
		// unread, which may reset the answer's body: its status is what
		// counts.
		out, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out), err
	}
	if code, out, err := send(60 << 10); err != nil || code != 200 || !strings.Contains(out, "requestState") {
		t.Fatalf("a 60 KiB header block: %d %s %v", code, out, err)
	}
	if code, out, err := send(80 << 10); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("an 80 KiB header block: %d %s %v, want 431", code, out, err)
	}
}
