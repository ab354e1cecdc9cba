//go:build unix

package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/mrtr"
)

// TestResponseBudget: clients that do not read their large JSON answers
// hold, together, no more than MaxResponseBytesInFlight of them: the
// next large answer is dropped at once with a 503 JSON-RPC error (the
// gateway's memory does not grow), and once the slow clients go the
// budget is whole again.
func TestResponseBudget(t *testing.T) {
	const size = 8 << 20 // more than loopback's socket buffers hold
	big := strings.Repeat("x", size-100)
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		b := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + big + `"}]}}`
		b = b + strings.Repeat(" ", size-len(b))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, b)
	}, func(g *Gateway, _ *mrtr.Options) {
		g.MaxResponseBytes = size
		g.MaxResponseBytesInFlight = 2*(size+1) + 1000 // two held answers fit, not three
	})
	host := strings.TrimPrefix(strings.TrimSuffix(f.url, "/mcp"), "http://")
	send := func() net.Conn {
		// A small receive window: the client takes its answer slowly.
		d := net.Dialer{Control: smallReceiveBuffer}
		c, err := d.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(60 * time.Second))
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"report"}}`
		io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
		return c
	}
	var slow []net.Conn
	for i := 0; i < 2; i++ {
		slow = append(slow, send())
		waitFor(t, "a slow client's answer held", func() bool { return f.gw.respInFlight.Load() >= int64(i+1)*size })
	}
	resp, err := http.ReadResponse(bufio.NewReader(send()), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := testkit.Must(io.ReadAll(resp.Body))
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !bytes.Contains(b, []byte(`"code":-32603`)) || !bytes.Contains(b, []byte("holding as many responses")) {
		t.Fatalf("a third answer: HTTP %d %.200s", resp.StatusCode, b)
	}
	// A body is held in a buffer of its size, or one byte more where
	// the end of the body came in a read of its own.
	if held := f.gw.respInFlight.Load(); held < 2*size || held > 2*(size+1) {
		t.Fatalf("%d bytes held, want the two slow answers' %d", held, 2*size)
	}
	for _, c := range slow {
		c.Close()
	}
	waitFor(t, "the budget given back", func() bool { return f.gw.respInFlight.Load() == 0 })
	resp, err = http.ReadResponse(bufio.NewReader(send()), nil)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || n != size {
		t.Fatalf("after: HTTP %d, %d bytes", resp.StatusCode, n)
	}
	waitFor(t, "the budget given back", func() bool { return f.gw.respInFlight.Load() == 0 })
}

// TestSealedCopyCounted: the sealed copy of a JSON answer is held until
// the client has it, and counted in MaxResponseBytesInFlight with the
// body it was made from (never refused: its call is answered in it).
// One slow client of a large answer with a state then holds about twice
// its size, and an answer that would fit beside the body alone is
// dropped with 503.
func TestSealedCopyCounted(t *testing.T) {
	const size = 8 << 20
	big := strings.Repeat("x", size-300)
	f := newFixture(t, func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		b := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + big + `"}]}}`
		if params, _ := msg["params"].(map[string]any); params["name"] == "ask" {
			b = `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"ok":{"method":"elicitation/create","params":{"message":"ok?","requestedSchema":{"type":"object","properties":{}}}}},"requestState":"plain","content":[{"type":"text","text":"` + big + `"}]}}`
		}
		b = b + strings.Repeat(" ", size-len(b))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, b)
	}, func(g *Gateway, _ *mrtr.Options) {
		g.MaxResponseBytes = size
		// The asked answer's body and one more fit; its sealed copy too,
		// then, and the second does not.
		g.MaxResponseBytesInFlight = 2*(size+1) + 1000
	})
	host := strings.TrimPrefix(strings.TrimSuffix(f.url, "/mcp"), "http://")
	send := func(name string) net.Conn {
		d := net.Dialer{Control: smallReceiveBuffer}
		c := testkit.Must(d.Dial("tcp", host))
		t.Cleanup(func() { c.Close() })
		testkit.Check(c.SetDeadline(time.Now().Add(60 * time.Second)))
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `"}}`
		testkit.Must(io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+headerVersion+": "+version2026+"\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body))
		return c
	}
	slow := send("ask")
	waitFor(t, "the answer and its sealed copy held", func() bool { return f.gw.respInFlight.Load() >= 2*size })
	if sealed := f.gw.Stats.Sealed.Load(); sealed != 1 {
		t.Fatalf("%d answers sealed, want 1", sealed)
	}
	resp, err := http.ReadResponse(bufio.NewReader(send("report")), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := testkit.Must(io.ReadAll(resp.Body))
	testkit.Check(resp.Body.Close())
	if resp.StatusCode != http.StatusServiceUnavailable || !bytes.Contains(b, []byte("holding as many responses")) {
		t.Fatalf("an answer beside a held sealed one: HTTP %d %.200s", resp.StatusCode, b)
	}
	testkit.Check(slow.Close())
	waitFor(t, "the budget given back", func() bool { return f.gw.respInFlight.Load() == 0 })
}

// smallReceiveBuffer sets a socket's receive buffer before it connects,
// so that the peer's writes block once a few kilobytes are in flight.
func smallReceiveBuffer(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
	})
	if err != nil {
		return err
	}
	return serr
}
