package scan_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/stateseal/stateseal/internal/testkit"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stateseal/stateseal/scan"
)

// docSection is docs/SCAN.md's "What your server must serve".
func docSection(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "SCAN.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "\n## What your server must serve\n")
	if !ok {
		t.Fatal(`docs/SCAN.md has no "What your server must serve"`)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	return sec
}

// decode reads JSON into a generic value, numbers as json.Number, so
// that two documents compare as JSON and not as text.
func decode(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

// docServer serves what docs/SCAN.md says a server must, from its
// example messages alone: each first call is answered with the
// documented input_required (a fresh random state, kept in a map with
// what it is bound to, taken once), each retry that brings a state it
// issued, from the same principal, for the same call, with an accepted
// confirmation, with the documented completed result on an event
// stream. Each refusal is one of the kinds SCAN.md lists: no credential
// is a 401 with an empty body, another principal's state a 403 with a
// JSON-RPC error, a shortened state a 403 HTML page, any other unknown
// state a 400 text page, another call's state a JSON-RPC error, a
// missing or declined answer a fresh input_required.
type docServer struct {
	t         *testing.T
	ask, done map[string]any

	mu     sync.Mutex
	states map[string]binding
	issued []string // every state, in order
	seen   []seenRequest
}

type binding struct{ method, name, args, user string }

type seenRequest struct {
	httpMethod string
	header     http.Header
	body       []byte
	method     string
	target     string // params.name or params.uri
}

func (s *docServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body := testkit.Must(io.ReadAll(r.Body))
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name           string                     `json:"name"`
			URI            string                     `json:"uri"`
			Arguments      json.RawMessage            `json:"arguments"`
			RequestState   *string                    `json:"requestState"`
			InputResponses map[string]json.RawMessage `json:"inputResponses"`
		} `json:"params"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		s.t.Errorf("a request that is not JSON-RPC: %s", body)
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	target := req.Params.Name
	if req.Method == scan.ResourcesRead {
		target = req.Params.URI
	}
	s.mu.Lock()
	s.seen = append(s.seen, seenRequest{r.Method, r.Header.Clone(), body, req.Method, target})
	s.mu.Unlock()

	user := r.Header.Get("X-User")
	if user == "" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var args any
	if req.Params.Arguments != nil {
		args = decode(s.t, req.Params.Arguments)
	}
	canon := testkit.Must(json.Marshal(args))
	b := binding{req.Method, target, string(canon), user}
	if req.Params.RequestState == nil {
		s.askFor(w, req.ID, b)
		return
	}
	st := *req.Params.RequestState
	s.mu.Lock()
	got, ok := s.states[st]
	delete(s.states, st)
	s.mu.Unlock()
	switch {
	case !ok && len(st) < 27:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "<html><body>forbidden</body></html>")
	case !ok:
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, "unknown state")
	case got.user != user:
		s.rpcError(w, http.StatusForbidden, req.ID, -32001, "another principal's state")
	case got != b:
		s.rpcError(w, http.StatusBadRequest, req.ID, -32602, "the state of another call")
	case string(req.Params.InputResponses["confirm"]) != `{"action":"accept","content":{"ok":true}}`:
		s.askFor(w, req.ID, b)
	default:
		// The completed result on an event stream, after a
		// notification statescan must pass over.
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"paying"}}`)
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", s.message(s.done, req.ID, ""))
	}
}

// askFor answers the documented input_required with a fresh state bound
// to b.
func (s *docServer) askFor(w http.ResponseWriter, id json.RawMessage, b binding) {
	raw := make([]byte, 20)
	rand.Read(raw)
	st := base64.RawURLEncoding.EncodeToString(raw) // 27 characters
	s.mu.Lock()
	s.states[st] = b
	s.issued = append(s.issued, st)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Write(s.message(s.ask, id, st))
}

func (s *docServer) rpcError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b := testkit.Must(json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}}))
	w.Write(b)
}

// message is a documented answer with the request's id and, when st is
// not empty, the state in place of the documented one.
func (s *docServer) message(doc map[string]any, id json.RawMessage, st string) []byte {
	m := map[string]any{}
	for k, v := range doc {
		m[k] = v
	}
	m["id"] = id
	if st != "" {
		res := map[string]any{}
		for k, v := range doc["result"].(map[string]any) {
			res[k] = v
		}
		res["requestState"] = st
		m["result"] = res
	}
	b := testkit.Must(json.Marshal(m))
	return b
}

// TestServeAsDocumented: docs/SCAN.md's "What your server must serve"
// is what statescan does. A server written from its four example
// messages alone is scanned: the first request and the honest retry are
// the documented ones (as JSON), every request is a POST of one of the
// three documented methods, to a target given, with the documented
// headers and no other; the documented answers run the baseline to its
// end; and each kind of refusal the doc lists (a 401 with an empty body,
// a 403 with a JSON-RPC error, an HTML page, a text page, a JSON-RPC
// error, a fresh input_required) is read as a refusal: nothing fails.
func TestServeAsDocumented(t *testing.T) {
	sec := docSection(t)
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(sec, -1)
	if len(blocks) != 4 {
		t.Fatalf("%d json blocks in the section, want 4 (first request, input_required, retry, completed)", len(blocks))
	}
	first, ask, retry, done := decode(t, []byte(blocks[0][1])), decode(t, []byte(blocks[1][1])), decode(t, []byte(blocks[2][1])), decode(t, []byte(blocks[3][1]))
	s := &docServer{t: t, ask: ask.(map[string]any), done: done.(map[string]any), states: map[string]binding{}}
	srv := httptest.NewServer(s)
	defer srv.Close()

	c := &scan.Config{
		URL: srv.URL + "/mcp",
		Targets: []scan.Target{{Name: "pay", Arguments: json.RawMessage(`{"account":"A1","amount":5}`), SingleUse: true, MoveTo: "refund",
			OtherMethods: []scan.Move{{Method: scan.PromptsGet, Name: "pay", Arguments: json.RawMessage(`{"account":"A1","amount":"5"}`)}}}},
		Header:      header("X-User", "alice"),
		OtherHeader: header("X-User", "bob"),
		Rate:        1000,
	}
	r := runScan(t, c)
	wantFails(t, r)

	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) < 2 || len(s.issued) < 1 {
		t.Fatalf("%d requests, %d states", len(s.seen), len(s.issued))
	}
	if got := decode(t, s.seen[0].body); !reflect.DeepEqual(got, first) {
		t.Errorf("the first request is not the documented one:\n got %s\nwant %s", s.seen[0].body, blocks[0][1])
	}
	// The documented retry, with the state the server issued.
	retry.(map[string]any)["params"].(map[string]any)["requestState"] = s.issued[0]
	if got := decode(t, s.seen[1].body); !reflect.DeepEqual(got, retry) {
		t.Errorf("the retry is not the documented one:\n got %s\nwant %s", s.seen[1].body, blocks[2][1])
	}

	// Only the documented headers, each named in the section.
	documented := map[string]string{
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "", "Mcp-Name": "",
		"X-User": "", "Content-Length": "", "User-Agent": "", "Accept-Encoding": "",
	}
	for h := range documented {
		if h != "X-User" && !strings.Contains(sec, "`"+h+"`") && !strings.Contains(sec, "`"+h+":") {
			t.Errorf("the section does not name the header %s", h)
		}
	}
	targets := map[string]map[string]bool{scan.ToolsCall: {"pay": true, "refund": true}, scan.PromptsGet: {"pay": true}}
	methods := map[string]int{}
	for _, q := range s.seen {
		methods[q.method]++
		if q.httpMethod != http.MethodPost {
			t.Errorf("an HTTP %s", q.httpMethod)
		}
		if !targets[q.method][q.target] {
			t.Errorf("%s %q: not a target given", q.method, q.target)
		}
		for h, vs := range q.header {
			want, ok := documented[h]
			if !ok {
				t.Errorf("%s %s: an undocumented header %s: %q", q.method, q.target, h, vs)
			} else if want != "" && (len(vs) != 1 || vs[0] != want) {
				t.Errorf("%s: %q, documented %q", h, vs, want)
			}
		}
		if q.header.Get("Mcp-Method") != q.method || q.header.Get("Mcp-Name") != q.target {
			t.Errorf("Mcp-Method %q, Mcp-Name %q for %s %s", q.header.Get("Mcp-Method"), q.header.Get("Mcp-Name"), q.method, q.target)
		}
	}
	if methods[scan.ToolsCall] == 0 || methods[scan.PromptsGet] == 0 {
		t.Errorf("methods sent: %v", methods)
	}

	// Each kind of refusal is read as one, and reads as SCAN.md shows it.
	for id, want := range map[string]string{
		"no-credential":   "HTTP 401, an empty body",
		"other-principal": `JSON-RPC error -32001 "another principal's state" (HTTP 403)`,
		"truncate":        "HTTP 403 text/html: <html>",
		"tamper":          "HTTP 400 text/plain: unknown state",
		"other-args":      `JSON-RPC error -32602 "the state of another call" (HTTP 400)`,
		"no-responses":    "a fresh input_required",
		"declined":        "a fresh input_required",
	} {
		var found bool
		for _, f := range r.Checks {
			if f.ID == id {
				found = true
				if f.Result != scan.Pass || !strings.Contains(f.Detail, want) {
					t.Errorf("%s: %s %q, want pass with %q", id, f.Result, f.Detail, want)
				}
			}
		}
		if !found {
			t.Errorf("%s did not run", id)
		}
	}
	doc := testkit.Must(os.ReadFile(filepath.Join("..", "docs", "SCAN.md")))
	for _, shown := range []string{"`HTTP 401, an empty body`", "`HTTP 403 text/html: <html>...`", `(HTTP 400)`} {
		if !bytes.Contains(doc, []byte(shown)) {
			t.Errorf("docs/SCAN.md does not show a refusal as %s", shown)
		}
	}
}
