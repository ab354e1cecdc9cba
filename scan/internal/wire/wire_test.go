package wire

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRequest: the body and headers a stateless 2026-07-28 server
// requires (the go-sdk's and sealgate's checks).
func TestRequest(t *testing.T) {
	var got *http.Request
	var body map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		if err := json.Unmarshal(b, &body); err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"q":{}},"requestState":"S"}}`)
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := c.Do(context.Background(), &Request{Method: "tools/call", Name: "pay", Arguments: json.RawMessage(`{"a":1}`),
		State: "S0", HasState: true, Header: http.Header{"Authorization": {"Bearer x"}}})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Mcp-Protocol-Version": ProtocolVersion, "Mcp-Method": "tools/call", "Mcp-Name": "pay",
		"Authorization": "Bearer x", "Accept": "application/json, text/event-stream"} {
		if got.Header.Get(k) != v {
			t.Errorf("%s: %q, want %q", k, got.Header.Get(k), v)
		}
	}
	p := body["params"].(map[string]any)
	meta := p["_meta"].(map[string]any)
	if meta["io.modelcontextprotocol/protocolVersion"] != ProtocolVersion || meta["io.modelcontextprotocol/clientCapabilities"] == nil || p["requestState"] != "S0" || p["name"] != "pay" {
		t.Errorf("params %v", p)
	}
	if rep.Result == nil || !rep.Result.InputRequired() || *rep.Result.RequestState != "S" {
		t.Errorf("reply %+v", rep)
	}
}

// TestSSE: the response with our id is found after a notification.
func TestSSE(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n")
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\ndata: \"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}\n\n")
	}))
	defer srv.Close()
	c := newClient(t, srv.URL)
	rep, err := c.Do(context.Background(), &Request{Method: "tools/call", Name: "t"})
	if err != nil || rep.Result == nil || rep.Result.InputRequired() {
		t.Fatalf("%+v %v", rep, err)
	}
}

// TestRedirectRefused: nothing is sent anywhere but the target.
func TestRedirectRefused(t *testing.T) {
	var hit atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit.Store(true) }))
	defer other.Close()
	srv := httptest.NewServer(http.RedirectHandler(other.URL, http.StatusTemporaryRedirect))
	defer srv.Close()
	c := newClient(t, srv.URL)
	_, err := c.Do(context.Background(), &Request{Method: "tools/call", Name: "t"})
	if !errors.Is(err, ErrTransport) || !strings.Contains(err.Error(), "redirect") || hit.Load() {
		t.Fatalf("err %v, other server hit: %v", err, hit.Load())
	}
}

// TestNotJSON: an HTTP error page is a reply without a message.
func TestNotJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL)
	rep, err := c.Do(context.Background(), &Request{Method: "tools/call", Name: "t"})
	if err != nil || rep.Status != 401 || rep.Result != nil || rep.Error != nil || !strings.Contains(rep.Text, "401") {
		t.Fatalf("%+v %v", rep, err)
	}
}

// TestEmptyBody: an empty 401 reads "HTTP 401, an empty body", not
// "HTTP 401 :".
func TestEmptyBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	rep, err := newClient(t, srv.URL).Do(context.Background(), &Request{Method: "tools/call", Name: "t"})
	if err != nil || rep.Text != "HTTP 401, an empty body" {
		t.Fatalf("%+v %v", rep, err)
	}
}

func newClient(t *testing.T, url string) *Client {
	t.Helper()
	c, err := NewClient(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// FuzzRead: any answer, JSON or SSE, is read without a panic, and a
// reply carries at most one of a result, an error and a text.
func FuzzRead(f *testing.F) {
	f.Add(true, []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"resultType\":\"input_required\",\"requestState\":\"S\"}}\n\n"))
	f.Add(false, []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid"}}`))
	f.Add(false, []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`))
	f.Add(true, []byte("data: {\"id\":2}\n\ndata: [1,\ndata: 2]\n\n"))
	f.Fuzz(func(t *testing.T, sse bool, body []byte) {
		ct := "application/json"
		if sse {
			ct = "text/event-stream"
		}
		resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ct}}, Body: io.NopCloser(strings.NewReader(string(body)))}
		rep, err := read(resp, 1)
		if err != nil {
			return
		}
		n := 0
		if rep.Result != nil {
			n++
			rep.Result.InputRequired()
		}
		if rep.Error != nil {
			n++
		}
		if rep.Text != "" {
			n++
		}
		if n != 1 {
			t.Fatalf("%q: reply %+v", body, rep)
		}
	})
}
