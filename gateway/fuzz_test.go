package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/mrtr"
	"github.com/stateseal/stateseal/seal"
)

// FuzzGatewayParsers feeds the gateway's three parsers what a client and
// an upstream could send: a request body (read by readMessages and open, which find
// method, target, arguments and params.requestState), and an upstream
// response read both as a JSON body (readJSON, seal) and as an SSE stream
// (sseReader). In a request, the placeholders @T1@, @T2@ and @T3@ become
// valid tokens sealed for a tools/call, a prompts/get and a
// resources/read, so that the fuzzer works with states that open.
//
// The object reader parseObject reads req and resp as the reference
// model does (objectModel: jsontext token by token). And the properties,
// under three ways an upstream or a client might read
// JSON (exact names with the last of two duplicates winning, as
// encoding/json into a map and JavaScript do; exact names with the first
// winning; names matched ignoring case, the last winning, as encoding/json
// into a struct does):
//
//   - nothing panics, and every output is bounded by its input;
//   - a request the gateway forwards carries, in params.requestState,
//     nothing, "", or the plaintext of a state that opened, and then the
//     method, target and arguments it was sealed for;
//   - a requestState in a result the client gets, in JSON or SSE, is a
//     token that opens for the call it answers, never a plaintext;
//   - the SSE stream keeps the upstream's events: each goes through byte
//     for byte or with only its data replaced, in order, and the stream
//     ends on an event boundary, a broken stream with one error event per
//     call the upstream left unanswered.
//
// With them come the request's and the response's Content-Type and
// Content-Encoding headers (reqHdr, respHdr: "Name: value" lines, a name
// twice for two headers), read by the framing checks (admit.go):
//
//   - a request admitted is application/json in UTF-8 (as
//     mime.ParseMediaType reads it) without a content coding, and a body
//     forwarded is valid UTF-8 JSON without a BOM: the form every
//     upstream reads the same, whatever it detects or decodes;
//   - a response admitted as JSON or SSE is application/json or
//     text/event-stream in UTF-8 without a content coding; one admitted as
//     another type names no json media type, and its body passes only if
//     no parser could find a requestState in it.
func FuzzGatewayParsers(f *testing.F) {
	fx := newFuzzFixture(f)
	for _, s := range []struct{ req, resp string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book","arguments":{"seats":2}}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","requestState":"plain:book"}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book","arguments":{"seats":2},"requestState":"@T1@","inputResponses":{"q":{"action":"accept"}}}}`,
			"event: message\nid: 7\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n\n"},
		{`{"jsonrpc":"2.0","id":"a","method":"prompts/get","params":{"name":"greet","arguments":{"who":"x"},"requestState":"@T2@"}}`,
			": c\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"a\",\n" +
				"data: \"result\":{\"resultType\":\"input_required\",\"requestState\":\"s\"}}\n\n"},
		{`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///r","requestState":"@T3@"}}`,
			"data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"requestState\":\"s\"}}\r\n\r\n"},
		{`[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
			`[{"jsonrpc":"2.0","id":1,"result":{"tools":[]}},{"jsonrpc":"2.0","id":2,"result":{"requestState":"x"}}]`},
		{`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book","arguments":{"seats":2},"requestState":"@T1@"}}]`,
			"\xef\xbb\xbfevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"requestState\":\"s\"}}\n\n"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"b\u006fok","arguments":{"seats":2},"requestState":"@T1@"}}`,
			"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"requestState\":\"plain\"}}\n"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book","arguments":{"seats":2},"RequestState":"forged"}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"RequestState":"plain"}}`},
	} {
		f.Add([]byte(s.req), []byte(s.resp), "Content-Type: application/json", "Content-Type: text/event-stream")
	}
	for _, h := range [][2]string{
		{"Content-Type: application/json; charset=utf-16le", "Content-Type: application/json; charset=UTF-8"},
		{"Content-Type: application/json\nContent-Encoding: gzip", "Content-Type: text/event-stream\nContent-Encoding: deflate"},
		{"Content-Type: application/json\nContent-Type: text/plain", "Content-Type: text/plain\nContent-Type: application/json"},
		{"Content-Type: APPLICATION/JSON;CHARSET=\"utf-8\"", "Content-Type: application/vnd.mcp+json"},
		{"Content-Type: application/json-seq", "Content-Type: text/json"},
		{"Content-Type: text/plain\nContent-Encoding: identity", "Content-Type: text/html; charset=utf-16"},
		{"Content-Encoding: identity, gzip", ""},
	} {
		f.Add(utf16le(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book","requestState":"x"}}`, true),
			[]byte(`{"jsonrpc":"2.0","id":1,"result":{"requestState":"plain"}}`), h[0], h[1])
	}
	f.Fuzz(func(t *testing.T, req, resp []byte, reqHdr, respHdr string) {
		checkObjectModel(t, req)
		checkObjectModel(t, resp)
		fx.check(t, req, resp)
		fx.checkFraming(t, req, resp, headers(reqHdr), headers(respHdr))
	})
}

// headers reads "Name: value" lines.
func headers(s string) http.Header {
	h := http.Header{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			h[http.CanonicalHeaderKey(strings.TrimSpace(k))] = append(h[http.CanonicalHeaderKey(strings.TrimSpace(k))], strings.TrimSpace(v))
		}
	}
	return h
}

// utf8Media reports whether a Content-Type is media type want with no
// charset or UTF-8, as mime.ParseMediaType reads it.
func utf8Media(ct, want string) bool {
	mt, params, err := mime.ParseMediaType(ct)
	cs, has := params["charset"]
	return err == nil && mt == want && (!has || strings.EqualFold(cs, "utf-8"))
}

func identityOnly(h http.Header) bool {
	for _, v := range h["Content-Encoding"] {
		for _, t := range strings.Split(v, ",") {
			if t = strings.ToLower(strings.TrimSpace(t)); t != "" && t != "identity" {
				return false
			}
		}
	}
	return true
}

func (fx *fuzzFixture) checkFraming(t *testing.T, req, resp []byte, reqH, respH http.Header) {
	if admitJSONRequest(reqH) == nil {
		if len(reqH["Content-Type"]) != 1 || !utf8Media(reqH.Get("Content-Type"), "application/json") || !identityOnly(reqH) {
			t.Fatalf("request admitted with %v", reqH)
		}
		if _, out, forwarded := fx.inspect(t, req); forwarded && (!jsontext.Value(out).IsValid() || bytes.HasPrefix(out, []byte("\xef\xbb\xbf"))) {
			t.Fatalf("forwarded a body that is not UTF-8 JSON: %q", out)
		}
	}
	r := &http.Response{StatusCode: 200, Header: respH, ContentLength: int64(len(resp))}
	kind, own, err := admitResponse(r)
	if err != nil {
		return
	}
	if (kind == respJSON || kind == respSSE) && len(respH["Content-Type"]) == 1 && respH["Content-Type"][0] != "" {
		// One plain charset=utf-8 at most, whatever reader the client
		// has, and the client is told the media type alone.
		_, params, _ := strings.Cut(respH["Content-Type"][0], ";")
		if p := strings.Trim(params, " \t"); p != "" && !strings.EqualFold(p, "charset=utf-8") || own != "application/json" && own != "text/event-stream" {
			t.Fatalf("response admitted with %v, written as %q", respH, own)
		}
	}
	ct := respH["Content-Type"]
	if !identityOnly(respH) || len(ct) > 1 {
		t.Fatalf("response admitted with %v", respH)
	}
	switch {
	case len(ct) == 0 || ct[0] == "":
	case kind == respJSON && !utf8Media(ct[0], "application/json"), kind == respSSE && !utf8Media(ct[0], "text/event-stream"):
		t.Fatalf("response admitted as %d with %v", kind, respH)
	case kind == respOther:
		if mt, _ := testkit.Must2(mime.ParseMediaType(ct[0])); strings.Contains(mt, "json") {
			t.Fatalf("a json media type admitted as another: %v", respH)
		}
		if checkOther(resp) == nil {
			for _, v := range views {
				for _, msg := range messages(resp) {
					if m, ok := v.read(msg); ok {
						if _, has := m["requestState"]; has {
							t.Fatalf("a body of another type with a requestState passes (%s): %q", v.name, resp)
						}
					}
				}
			}
		}
	}
}

type fuzzFixture struct {
	g      *Gateway
	st     *mrtr.States
	tokens [3][]byte
	bound  [3]mrtr.Request
	plain  [3]string
}

func newFuzzFixture(f *testing.F) *fuzzFixture {
	ring, err := keyring.Generate(keyring.AEAD)
	if err != nil {
		f.Fatal(err)
	}
	st, err := newStates(ring, &mrtr.Options{Audience: "https://fuzz.test", AllowAnonymous: true, Metrics: &mrtr.Counters{}})
	if err != nil {
		f.Fatal(err)
	}
	up := testkit.Must(url.Parse("http://upstream.invalid"))
	g := &Gateway{Upstreams: []*url.URL{up}, Principal: Anonymous{}, BindSession: true,
		MaxRequestBytes: 1 << 20, MaxResponseBytes: 1 << 20, MaxEventBytes: 4 << 10,
		Logger: slog.New(slog.DiscardHandler)}
	g.SetStates(st)
	fx := &fuzzFixture{g: g, st: st, bound: [3]mrtr.Request{
		{Method: mrtr.MethodCallTool, Target: "book", Arguments: []byte(`{"seats":2}`)},
		{Method: mrtr.MethodGetPrompt, Target: "greet", Arguments: []byte(`{"who":"x"}`)},
		{Method: mrtr.MethodReadResource, Target: "file:///r"},
	}}
	// Plaintexts no input can know: one the upstream sees came from a
	// state that opened.
	secret := make([]byte, 8)
	rand.Read(secret)
	for i, r := range fx.bound {
		fx.plain[i] = fmt.Sprintf("secret-%x-%d", secret, i)
		tok, err := st.Seal(r, fx.plain[i])
		if err != nil {
			f.Fatal(err)
		}
		fx.tokens[i] = []byte(tok)
	}
	return fx
}

func (fx *fuzzFixture) request() *exchange {
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	return &exchange{g: fx.g, st: fx.st, r: r, version: version2026}
}

// inspect runs the request reader as ServeHTTP does; a refused request
// (or none) gets a first-round tools/call in its place, so that the
// response parsers always run.
func (fx *fuzzFixture) inspect(t *testing.T, body []byte) (*exchange, []byte, bool) {
	ex := fx.request()
	out, ref := inspect(ex, body)
	if ref == nil {
		return ex, out, true
	}
	ex = fx.request()
	first := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book","arguments":{"seats":2}}}`)
	out, ref = inspect(ex, first)
	if ref != nil {
		t.Fatalf("a first round refused: %v", ref.rpcError)
	}
	return ex, out, false
}

func (fx *fuzzFixture) check(t *testing.T, req, resp []byte) {
	for i, tok := range fx.tokens {
		req = bytes.ReplaceAll(req, fmt.Appendf(nil, "@T%d@", i+1), tok)
	}
	for _, p := range fx.plain {
		if bytes.Contains(req, []byte(p)) || bytes.Contains(resp, []byte(p)) {
			return // cannot happen: the plaintexts are random
		}
	}

	// The request.
	ex, out, forwarded := fx.inspect(t, req)
	if forwarded {
		if len(out) > len(req) {
			t.Fatalf("forwarded request grew from %d to %d bytes", len(req), len(out))
		}
		for _, v := range views {
			fx.checkForwarded(t, v, out)
		}
	}

	// The response as a JSON body.
	if body, err := sealJSON(ex, resp); err == nil {
		if !jsontext.Value(body).IsValid() {
			t.Fatalf("response rewritten into invalid JSON: %q", body)
		}
		if len(body) > 4*len(resp)+256 {
			t.Fatalf("JSON response grew from %d to %d bytes", len(resp), len(body))
		}
		for _, v := range views {
			fx.checkToClient(t, v, ex, out, body)
		}
	}

	// The response as an SSE stream, against a fresh exchange for the
	// same request.
	ex, out, _ = fx.inspect(t, req)
	failed0 := fx.g.Stats.UpstreamErrors.Load()
	rc := newSSEReader(io.NopCloser(bytes.NewReader(resp)), ex.g, ex)
	var buf bytes.Buffer
	err := rc.writeTo(&buf)
	rc.Close()
	if err != nil {
		t.Fatalf("SSE read: %v", err)
	}
	stream := buf.Bytes()
	failed := fx.g.Stats.UpstreamErrors.Load() != failed0
	if len(stream) > 4*len(resp)+256*(1+len(ex.calls)) {
		t.Fatalf("SSE stream grew from %d to %d bytes", len(resp), len(stream))
	}
	fx.checkStream(t, ex, out, resp, stream, failed)
}

// A view reads a JSON object's members as one kind of parser would: the
// value each name the gateway cares about gets, or ok false if that
// parser rejects the input.
type view struct {
	name string
	read func(b []byte) (map[string]jsontext.Value, bool)
}

// The names that matter in a message, its params or its result.
var foldedNames = []string{"jsonrpc", "id", "method", "params", "result", "error", "name", "uri", "arguments", "requestState"}

var views = []view{
	{"exact names, last duplicate wins", func(b []byte) (map[string]jsontext.Value, bool) { return members(b, exactNames, true) }},
	{"exact names, first duplicate wins", func(b []byte) (map[string]jsontext.Value, bool) { return members(b, exactNames, false) }},
	{"names folded (encoding/json into a struct), last wins", func(b []byte) (map[string]jsontext.Value, bool) { return members(b, caseFolded, true) }},
	{"names folded, '_' and '-' dropped (pydantic, the Python SDK), first wins", func(b []byte) (map[string]jsontext.Value, bool) {
		return members(b, snake, false)
	}},
}

// How members compares names: exactly, folding case as encoding/json
// does, or also dropping '_' and '-' as pydantic's aliases do (foldsTo).
const (
	exactNames = iota
	caseFolded
	snake
)

// members reads the object b: invalid UTF-8 is allowed (encoding/json and
// JavaScript replace it), duplicates resolved first or last, names
// matched exactly, folded as encoding/json matches struct fields
// (bytes.EqualFold), or folded without '_' and '-' (pydantic).
func members(b []byte, fold int, last bool) (map[string]jsontext.Value, bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(b), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, false
	}
	m := map[string]jsontext.Value{}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, false
		}
		name := tok.String()
		v, err := dec.ReadValue()
		if err != nil {
			return nil, false
		}
		switch fold {
		case caseFolded:
			for _, s := range foldedNames {
				if strings.EqualFold(name, s) {
					name = s
				}
			}
		case snake:
			for _, s := range significant {
				if foldsTo(name, s.folded) {
					name = s.exact
				}
			}
		}
		if _, seen := m[name]; seen && !last {
			continue
		}
		m[name] = v.Clone()
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, false
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, false
	}
	return m, true
}

// messages splits a body into its messages: the elements of a batch, or
// the body.
func messages(b []byte) [][]byte {
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '[' {
		return [][]byte{b}
	}
	dec := jsontext.NewDecoder(bytes.NewReader(b), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if _, err := dec.ReadToken(); err != nil {
		return nil
	}
	var out [][]byte
	for dec.PeekKind() != ']' {
		v, err := dec.ReadValue()
		if err != nil {
			return out
		}
		out = append(out, v.Clone())
	}
	return out
}

// str decodes a JSON string as encoding/json does (invalid UTF-8
// replaced); ok is false for anything else.
func str(v jsontext.Value) (string, bool) {
	if len(v) == 0 || v[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

func isNull(v jsontext.Value) bool { return len(v) == 0 || string(v) == "null" }

// checkForwarded: a requestState the upstream reads is absent, null, ""
// or a plaintext that opened, for the request it was sealed for.
func (fx *fuzzFixture) checkForwarded(t *testing.T, v view, body []byte) {
	for _, msg := range messages(body) {
		m, ok := v.read(msg)
		if !ok {
			continue
		}
		p, ok := v.read(m["params"])
		if !ok {
			continue
		}
		rs := p["requestState"]
		if isNull(rs) {
			continue
		}
		s, ok := str(rs)
		if !ok {
			t.Fatalf("%s: the upstream gets a requestState that is not a string: %s\nforwarded: %s", v.name, rs, body)
		}
		if s == "" {
			continue
		}
		i := 0
		for i < len(fx.plain) && fx.plain[i] != s {
			i++
		}
		if i == len(fx.plain) {
			t.Fatalf("%s: the upstream gets a requestState that did not open: %q\nforwarded: %s", v.name, s, body)
		}
		b := fx.bound[i]
		method, _ := str(m["method"])
		key := "name"
		if b.Method == mrtr.MethodReadResource {
			key = "uri"
		}
		target, _ := str(p[key])
		if method != b.Method || target != b.Target {
			t.Fatalf("%s: the state of %s %q reaches the upstream as %q %q\nforwarded: %s", v.name, b.Method, b.Target, method, target, body)
		}
		if b.Method != mrtr.MethodReadResource {
			want := testkit.Must(seal.ArgsDigest(b.Arguments))
			args := p["arguments"]
			if isNull(args) {
				args = nil
			}
			got, err := seal.ArgsDigest(args)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: the state of %s %q reaches the upstream with other arguments %s\nforwarded: %s", v.name, b.Method, b.Target, args, body)
			}
		}
	}
}

// checkToClient: every result.requestState the client reads in body is a
// token that opens for the call the message answers, a call the upstream
// read (in the request forwarded, fwd) as the state is bound.
func (fx *fuzzFixture) checkToClient(t *testing.T, v view, ex *exchange, fwd, body []byte) {
	for _, msg := range messages(body) {
		m, ok := v.read(msg)
		if !ok {
			continue
		}
		res, ok := v.read(m["result"])
		if !ok {
			continue
		}
		rs := res["requestState"]
		if isNull(rs) {
			continue
		}
		s, ok := str(rs)
		if !ok {
			t.Fatalf("%s: the client gets a requestState that is not a string: %s\nin: %s", v.name, rs, body)
		}
		if s == "" {
			continue
		}
		var c *call
		if id := m["id"]; len(id) > 0 {
			c = ex.calls[idKey(id)]
		}
		if c == nil || !c.stateful() {
			t.Fatalf("%s: the client gets a requestState %q for a call that cannot carry one (id %s)\nin: %s", v.name, s, m["id"], body)
		}
		if _, err := fx.st.Open(context.Background(), c.req, s); err != nil {
			t.Fatalf("%s: the client gets a requestState %q that does not open for %s %q: %v\nin: %s", v.name, s, c.req.Method, c.req.Target, err, body)
		}
		for _, uv := range views {
			fx.checkBinding(t, uv, c, fwd)
		}
	}
}

// checkBinding: the call c, for which a state was sealed, is the call the
// upstream read in fwd (a view that rejects fwd reads no call).
func (fx *fuzzFixture) checkBinding(t *testing.T, v view, c *call, fwd []byte) {
	for _, msg := range messages(fwd) {
		m, ok := v.read(msg)
		if !ok || len(m["id"]) == 0 || idKey(m["id"]) != idKey(c.id) {
			continue
		}
		p, ok := v.read(m["params"])
		if !ok {
			continue
		}
		method, _ := str(m["method"])
		key := "name"
		if c.req.Method == mrtr.MethodReadResource {
			key = "uri"
		}
		target, _ := str(p[key])
		if method != c.req.Method || target != c.req.Target {
			t.Fatalf("%s: a state sealed for %s %q, where the upstream read %s %q\nforwarded: %s", v.name, c.req.Method, c.req.Target, method, target, fwd)
		}
		if c.req.Method != mrtr.MethodReadResource {
			want := testkit.Must(seal.ArgsDigest(c.req.Arguments))
			args := p["arguments"]
			if isNull(args) {
				args = nil
			}
			if got, err := seal.ArgsDigest(args); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: a state sealed for arguments %s, where the upstream read %s\nforwarded: %s", v.name, c.req.Arguments, args, fwd)
			}
		}
	}
}

// An sseBlock is one event of a stream as the SSE specification splits
// it (lines end in CRLF, LF or CR; an empty line ends the event).
type sseBlock struct {
	raw    []byte   // the event's bytes, its closing empty line included
	fields [][]byte // the lines other than data and comments, in order
	data   []byte   // its data lines' values joined, as a client reads them
	ndata  int
}

// splitSSE splits a stream into its complete events, and returns what
// follows the last of them.
func splitSSE(b []byte) ([]sseBlock, []byte) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) // a client drops a leading BOM
	var blocks []sseBlock
	cur := sseBlock{}
	start := 0
	for i := 0; i < len(b); {
		end := bytes.IndexAny(b[i:], "\r\n")
		if end < 0 {
			break // an unterminated line
		}
		line := b[i : i+end]
		next := i + end + 1
		if b[i+end] == '\r' && next < len(b) && b[next] == '\n' {
			next++
		}
		i = next
		if len(line) == 0 {
			cur.raw = b[start:i]
			blocks = append(blocks, cur)
			cur, start = sseBlock{}, i
			continue
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch {
		case len(name) == 0: // a comment
		case string(name) == "data":
			if cur.ndata > 0 {
				cur.data = append(cur.data, '\n')
			}
			cur.data = append(cur.data, value...)
			cur.ndata++
		default:
			cur.fields = append(cur.fields, line)
		}
	}
	return blocks, b[start:]
}

// checkStream: the stream the client gets from the upstream's in.
func (fx *fuzzFixture) checkStream(t *testing.T, ex *exchange, fwd, in, out []byte, failed bool) {
	inEv, _ := splitSSE(in)
	outEv, rest := splitSSE(out)
	if len(rest) > 0 {
		t.Fatalf("the client's stream ends inside an event: %q\nupstream: %q\nclient: %q", rest, in, out)
	}
	for _, ev := range outEv {
		for _, v := range views {
			fx.checkToClient(t, v, ex, fwd, ev.data)
		}
	}
	k := 0
	for ; k < len(outEv) && k < len(inEv); k++ {
		o, i := outEv[k], inEv[k]
		if bytes.Equal(o.raw, i.raw) {
			continue
		}
		// Rewritten: the same fields in the same order, one data line.
		same := len(o.fields) == len(i.fields) && o.ndata == 1 && i.ndata > 0
		for j := 0; same && j < len(o.fields); j++ {
			same = bytes.Equal(o.fields[j], i.fields[j])
		}
		if !same {
			break
		}
	}
	if !failed && (k != len(inEv) || k != len(outEv)) {
		t.Fatalf("event %d changed, or events added or lost, in a stream that did not fail\nupstream: %q\nclient: %q", k, in, out)
	}
	// After a failure, only error events, one per call not answered.
	seen := map[string]bool{}
	for _, o := range outEv[k:] {
		var m struct {
			ID    jsontext.Value `json:"id"`
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if !failed || !bytes.HasPrefix(o.raw, []byte("event: message\ndata: ")) || json.Unmarshal(o.data, &m) != nil || m.Error.Code != codeInternalError {
			t.Fatalf("event %d is neither the upstream's nor an error event: %q\nupstream: %q\nclient: %q", k, o.raw, in, out)
		}
		key := idKey(m.ID)
		if c := ex.calls[key]; c == nil || seen[key] {
			t.Fatalf("an error event for id %s, which is no call or was answered\nclient: %q", m.ID, out)
		}
		seen[key] = true
	}
}

// FuzzReaders feeds arbitrary bytes to the gateway's readers directly,
// not through net/http (whose server recovers a handler's panic) and
// with no recover of its own: the message readers (readRequest,
// readLazily, readUpstreamBody, readUpstreamMessage), the validator and,
// on what it accepts, the cutter (splitObject, splitArray, readObject,
// eachName), the SSE field readers and the media type readers. That none
// panics is the first property; with it:
//
//   - a reader accepts only what the validator does (validJSON, as
//     jsontext.Value.IsValid reads it), and the cutter's pieces of a
//     valid value are valid values;
//   - the cutter's walk of names finds a stray requestState exactly when
//     jsontext's token walk does (strayModel), and never in a message
//     the byte test (hasState) passes unparsed;
//   - a message written back (marshal) is valid JSON.
func FuzzReaders(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book","requestState":"s"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"requestState":"s","content":[{"RequestState":1}]}}`,
		`[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":{"requestState":"x"}}]`,
		`{"id":"\u0041","result":{"request\u0053tate":"s"},"error":{"data":{"request_state":1}}}`,
		`{"a":[{"b":{"c":[1,2,{"requestState":"s"}]}}],"result":[{"requestState":"s"}]}`,
		`{"params":{"name":"x"`, `[1,`, `{"a":"\`, `"\ud83d"`, `{"a" 1}`, `[[[[[[[[[[`, ` {} `, `nul`,
		"data: {\"id\":1}\nevent: message\nid: 1\r\n\r\n:c\n", "\xef\xbb\xbfdata\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		valid := validJSON(b)
		if req, _, err := readRequest(b); err == nil && !valid {
			t.Fatalf("readRequest accepted invalid JSON (unread %v)", req.unread)
		}
		if _, err := readLazily(b, nil); err == nil && !valid {
			t.Fatal("readLazily accepted invalid JSON")
		}
		msgs, _, err := readUpstreamBody(b)
		if err == nil && !valid {
			t.Fatal("readUpstreamBody accepted invalid JSON")
		}
		for _, m := range msgs {
			if !validJSON(m) {
				t.Fatalf("readUpstreamBody cut an invalid message %q", m)
			}
			_, _ = readUpstreamMessage(m, m) // only that it returns
		}
		if u, err := readUpstreamMessage(b, nil); err == nil {
			if !valid {
				t.Fatal("readUpstreamMessage accepted invalid JSON")
			}
			if u.state != "" {
				if out, err := u.withState("sealed"); err == nil && !validJSON(out) {
					t.Fatalf("a sealed message written as invalid JSON: %q", out)
				}
			}
		}
		if m, err := parseObject(b); err == nil && !validJSON(m.marshal()) {
			t.Fatalf("an object written back as invalid JSON: %q", m.marshal())
		}
		checkCutter(t, b, valid)
		// The SSE and media type readers take any bytes.
		_, _ = dataValue(b)
		_, _ = unknownField(b)
		_ = loneCR(b)
		_, _, _ = messageType(string(b))
		_ = checkOther(b)
		_ = looksJSON(b)
		_ = hasState(b)
		_ = mayAnswer(b)
	})
}

// checkCutter runs the cutter on b if the validator accepts it.
func checkCutter(t *testing.T, b []byte, valid bool) {
	v, err := validated(b)
	if (err == nil) != valid {
		t.Fatalf("validated and validJSON disagree: %v, %v", err, valid)
	}
	if err != nil {
		return
	}
	if got, want := strayState(v), strayModel(v); got != want {
		t.Fatalf("the cutter's walk finds a stray requestState %v, jsontext's %v", got, want)
	}
	if !hasState(v) && strayState(v) {
		t.Fatal("a stray requestState in a message the byte test passes unparsed")
	}
	if o, err := splitObject(v); err == nil {
		for _, m := range o {
			if !validJSON(m.val) {
				t.Fatalf("member %q cut as invalid JSON %q", m.name, m.val)
			}
		}
		if id, ok := o.get("id"); ok && plainID(id) {
			_ = idKey(id)
		}
	}
	_, _ = readObject(v)
	elems, err := splitArray(v, maxBatch)
	if err == nil && !startsArray(v) {
		t.Fatal("splitArray cut a value that is not an array")
	}
	for _, e := range elems {
		if !validJSON(e) {
			t.Fatalf("element cut as invalid JSON %q", e)
		}
	}
}
