package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/mrtr"
)

// TestStreamingMemory: a 10 MB SSE response (640 progress notifications
// of 16 KB, then an input_required result) passes through the gateway
// event by event, in order, its state sealed, while the process's heap
// stays flat: the gateway holds one event at a time, never the stream.
func TestStreamingMemory(t *testing.T) {
	const events, size = 640, 16 << 10
	pad := strings.Repeat("x", size-120)
	f := newFixture(t, func(w http.ResponseWriter, _ *http.Request, msg map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		bw := bufio.NewWriterSize(w, 64<<10)
		for i := range events {
			fmt.Fprintf(bw, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":%d,\"message\":\"%s\"}}\n\n", i, pad)
		}
		b := testkit.Must(json.Marshal(result(msg, stateResult(msg))))
		fmt.Fprintf(bw, "event: message\ndata: %s\n\n", b)
		bw.Flush()
	}, nil)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		if m.HeapInuse > peak.Load() {
			peak.Store(m.HeapInuse)
		}
	}
	b := testkit.Must(json.Marshal(rpcCall(1, mrtr.MethodCallTool, "book", nil, "")))
	resp, err := http.Post(f.url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	total, n, next := 0, 0, 0
	var last []byte
	for {
		line, err := br.ReadSlice('\n')
		total += len(line)
		if bytes.HasPrefix(line, []byte("data: ")) {
			if bytes.Contains(line, []byte("notifications/progress")) {
				if !bytes.Contains(line, []byte(fmt.Sprintf(`"progress":%d,`, next))) {
					t.Fatalf("event %d out of order", next)
				}
				next++
			} else {
				last = append(last[:0], line...)
			}
			n++
			if n%32 == 0 {
				sample()
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil && err != bufio.ErrBufferFull {
			t.Fatal(err)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(bytes.TrimPrefix(last, []byte("data: ")), &m); err != nil {
		t.Fatal(err)
	}
	tok, _ := resultOf(t, m)["requestState"].(string)
	if next != events || tok == "" || strings.Contains(tok, "plain") {
		t.Fatalf("%d progress events, state %q", next, tok)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	growth := int64(peak.Load()) - int64(before.HeapInuse)
	t.Logf("streamed %.1f MB in %d events; heap in use %.1f MB before, peak %.1f MB (growth %.1f MB); allocated %.1f MB in all",
		float64(total)/1e6, n, float64(before.HeapInuse)/1e6, float64(peak.Load())/1e6, float64(growth)/1e6, float64(after.TotalAlloc-before.TotalAlloc)/1e6)
	if total < 10<<20 {
		t.Fatalf("streamed only %d bytes", total)
	}
	if growth > 4<<20 {
		t.Fatalf("heap grew by %d bytes while streaming %d", growth, total)
	}
}

// TestSSEAsClientsRead: the gateway splits a stream into lines and events
// as an SSE client does, so that no data line it did not read reaches the
// client: a BOM that starts the stream is dropped, a line "data" is a data
// field, a line ending exactly where the gateway's read buffer does is
// not an empty line, and a CR alone (TestMalformedUpstream) is refused.
func TestSSEAsClientsRead(t *testing.T) {
	stateResult := func(id any, pad int) string {
		b := testkit.Must(json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{
			"_meta": map[string]any{"pad": strings.Repeat("x", pad)}, "resultType": "input_required", "requestState": "plain:book"}}))
		return string(b)
	}
	// A data line of 16 KiB (the reader's buffer) up to its LF, then the
	// rest of the message on a second data line.
	first, end := `data: {"jsonrpc":"2.0","id":1,"result":{"_meta":{"pad":"`, `"},`
	long := first + strings.Repeat("x", 16<<10-len(first)-len(end)) + end + "\n" +
		`data: "resultType":"input_required","requestState":"plain:book"}}` + "\n\n"
	for _, c := range []struct{ name, stream string }{
		{"BOM then data", "\xef\xbb\xbfdata: " + stateResult(1, 0) + "\n\n"},
		{"data without a colon", "event: message\ndata\ndata: " + stateResult(1, 0) + "\n\n"},
		{"line as long as the buffer", long},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, func(w http.ResponseWriter, _ *http.Request, _ map[string]any) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, c.stream)
			}, nil)
			_, m := f.post(rpcCall(1, mrtr.MethodCallTool, "book", nil, ""), v2026)
			res, _ := m["result"].(map[string]any)
			tok, _ := res["requestState"].(string)
			if tok == "" || strings.Contains(tok, "plain") {
				t.Fatalf("got %v", m)
			}
			if _, err := f.gw.states.Load().Open(context.Background(), mrtr.Request{Method: mrtr.MethodCallTool, Target: "book"}, tok); err != nil {
				t.Fatalf("sealed state does not open: %v", err)
			}
		})
	}
}

// TestSSEHeadersAtOnce: the headers of a stream reach the client while
// the upstream holds its first event (the gateway's own timer flushes
// them alone after headerDelay, not ReverseProxy's), once each.
func TestSSEHeadersAtOnce(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	f := newFixture(t, func(w http.ResponseWriter, _ *http.Request, msg map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-release
		b := testkit.Must(json.Marshal(result(msg, stateResult(msg))))
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", b)
	}, nil)
	b := testkit.Must(json.Marshal(rpcCall(1, mrtr.MethodCallTool, "book", nil, "")))
	type answer struct {
		resp *http.Response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.Post(f.url, "application/json", bytes.NewReader(b))
		got <- answer{resp, err}
	}()
	var a answer
	select {
	case a = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("no headers while the upstream holds its first event")
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	defer a.resp.Body.Close()
	if ct := a.resp.Header.Values("Content-Type"); len(ct) != 1 || ct[0] != "text/event-stream" || a.resp.ContentLength != -1 {
		t.Fatalf("headers %v, length %d", a.resp.Header, a.resp.ContentLength)
	}
	unblock()
	body := testkit.Must(io.ReadAll(a.resp.Body))
	var m map[string]any
	testkit.Check(json.Unmarshal([]byte(sseData(body)[0]), &m))
	if tok, _ := resultOf(t, m)["requestState"].(string); tok == "" || strings.Contains(tok, "plain") {
		t.Fatalf("event: %q", body)
	}
}
