// Command holeserver is an MCP server (go-sdk, stateless Streamable HTTP)
// that seals its requestState without stateseal, correctly or with one
// hole on purpose, for statescan's tests:
//
//	holeserver -addr 127.0.0.1:0 -hole none        # correct: AES-GCM, bound, strict, single use
//	holeserver -addr 127.0.0.1:0 -hole no-expiry   # the same with one hole
//
// Its tools pay and refund ({"account": string, "amount": integer}) and
// its prompt pay (the same arguments, as text) ask for a confirmation
// (elicitation, {"ok": boolean}) and complete only with ok true. The correct server's token is "ag1." and padded standard
// base64 of a 12-byte nonce and the AES-256-GCM ciphertext of the payload
// and its expiry, under associated data binding the method, the tool, the
// principal (the -principal-header), a SHA-256 of the arguments and the
// audience (-audience; servers given one -key share their keys); it
// decodes strictly, refuses every failure with one message, and records
// each single-use state's nonce until it expires. Each -hole removes one
// of those (see holes).
package main

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// holes are the -hole values and what each one removes.
var holes = map[string]string{
	"none":                 "no hole: the correct server",
	"plaintext":            "the state is plain JSON, trusted as it comes back",
	"hmac-nobind":          "base64url(JSON).base64url(HMAC(JSON)): integrity only, bound to nothing, no expiry",
	"no-tool-binding":      "the tool is left out of the associated data",
	"no-args-binding":      "the arguments' digest is left out of the associated data",
	"partial-args-binding": "only the first argument by name is bound (a digest of it alone): the others move freely",
	"no-principal-binding": "the principal is left out of the associated data",
	"no-expiry":            "the expiry is sealed but never checked",
	"no-single-use":        "single-use tools are not guarded",
	"sloppy-decoding":      "any base64 spelling is accepted, and single use is keyed by the token's text",
	"leak":                 "signed, not encrypted: the readable state carries the account, a balance and an e-mail",
	"consent":              "a state that opens completes the call, whatever the answers (none, declined)",
	"weak-key":             "a JWT-like base64url(JSON).base64url(HMAC) with every binding inside the JSON, checked, but under the key \"secret\"",
	"prefix-tag":           "base64url(JSON).base64url(HMAC) with every binding inside, under a random key, but the tag compared as a prefix of the expected text (expected.startsWith(got)): an empty or cut tag passes",
	"racy-single-use":      "single use checked, then recorded in a second step: two retries of one state in flight at once both pass (the window between them is held open until a second retry has passed the check, at most 1 s)",
	"consent-in-state":     "an unsealed base64url(JSON) state whose digest of the request is checked (so editing it is refused), but whose recorded \"reply\" is trusted: a state saying accept pays without an answer",
	"unasked-answers":      "a first call (no state) that carries an accepted confirmation pays: the server takes answers it never asked for",
	"no-method-binding":    "the method is left out of the associated data: a tools/call state opens on prompts/get of the prompt of the same name",
	"no-audience-binding":  "the audience (-audience) is left out of the associated data: a state opens on every server sharing the -key",
	"decline-result":       "no hole: the correct server, but a decline is answered with an ordinary result, \"Cancelled.\" (fastmcp's documented pattern), and nothing runs",
}

type server struct {
	hole      string
	ttl       time.Duration
	singleUse map[string]bool
	principal string // header
	audience  string
	aead      cipher.AEAD
	macKey    []byte

	mu   sync.Mutex
	used map[string]time.Time
	// windows are racy-single-use's states between their check and
	// their record.
	windows map[string]*window
}

// A window is one state checked and not yet recorded: second is closed
// when a second retry of it has passed the check.
type window struct {
	passed int
	second chan struct{}
}

// raceWindow bounds how long racy-single-use holds a checked state
// before it records it, waiting for a second retry of the same state.
const raceWindow = time.Second

var errInvalid = errors.New("invalid")

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	hole := flag.String("hole", "none", "the hole: "+strings.Join(names(), ", "))
	ttl := flag.Duration("ttl", 10*time.Minute, "a state's lifetime")
	single := flag.String("single-use", "pay", "comma-separated single-use tools")
	principal := flag.String("principal-header", "X-User", "the request header naming the principal")
	key := flag.String("key", "", "the 32-byte key in hex, shared by the servers given the same one (default: random)")
	audience := flag.String("audience", "holeserver", "this deployment's name, bound into its states")
	flag.Parse()
	if _, ok := holes[*hole]; !ok {
		log.Fatalf("holeserver: unknown -hole %q (%s)", *hole, strings.Join(names(), ", "))
	}
	s, err := newServer(*hole, *ttl, *single, *principal, *key, *audience)
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "holeserver (%s: %s): MCP server at http://%s/mcp\n", *hole, holes[*hole], ln.Addr())
	log.Fatal((&http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second}).Serve(ln))
}

func names() []string {
	var out []string
	for k := range holes {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func newServer(hole string, ttl time.Duration, single, principal, hexKey, audience string) (*server, error) {
	key := make([]byte, 32)
	rand.Read(key)
	if hexKey != "" {
		k, err := hex.DecodeString(hexKey)
		if err != nil || len(k) != 32 {
			return nil, errors.New("holeserver: -key wants 64 hex digits")
		}
		key = k
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	mk := sha256.Sum256(append([]byte("holeserver mac key\x00"), key...))
	s := &server{hole: hole, ttl: ttl, principal: principal, audience: audience, aead: aead, macKey: mk[:],
		singleUse: map[string]bool{}, used: map[string]time.Time{}, windows: map[string]*window{}}
	for _, t := range strings.Split(single, ",") {
		if t != "" {
			s.singleUse[t] = true
		}
	}
	return s, nil
}

func (s *server) handler() http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "statescan-holeserver", Version: "1.0.0"}, nil)
	for _, name := range []string{"pay", "refund"} {
		mcp.AddTool(srv, &mcp.Tool{Name: name, Description: name + " an amount to an account, after a confirmation"}, s.tool(name))
	}
	srv.AddPrompt(&mcp.Prompt{Name: "pay", Description: "a payment's text, after a confirmation",
		Arguments: []*mcp.PromptArgument{{Name: "account"}, {Name: "amount"}}}, s.prompt("pay"))
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
}

type args struct {
	Account string `json:"account"`
	Amount  int    `json:"amount"`
}

// payload is what the state carries between the rounds.
type payload struct {
	Step    string   `json:"step"`
	Account string   `json:"account,omitempty"`
	Balance *float64 `json:"balance,omitempty"`
	Email   string   `json:"email,omitempty"`
}

// request is what a state is bound to.
type request struct {
	method, tool, principal string
	args                    json.RawMessage
}

// A round is what one request of a call comes to: a question (the
// input requests and the state), a text (completed), or an error.
type round struct {
	asks  mcp.InputRequestMap
	state string
	text  string
}

func (s *server) tool(name string) mcp.ToolHandlerFor[args, any] {
	return func(_ context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		r := request{method: "tools/call", tool: name, args: req.Params.Arguments}
		if e := req.GetExtra(); e != nil && e.Header != nil {
			r.principal = e.Header.Get(s.principal)
		}
		out, err := s.call(r, a, req.Params.RequestState, req.Params.InputResponses)
		if err != nil {
			return nil, nil, err
		}
		if out.asks != nil {
			return &mcp.CallToolResult{InputRequests: out.asks, RequestState: out.state}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out.text}}}, nil, nil
	}
}

func (s *server) prompt(name string) mcp.PromptHandler {
	return func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		raw, err := json.Marshal(req.Params.Arguments)
		if err != nil {
			return nil, err
		}
		r := request{method: "prompts/get", tool: name, args: raw}
		if e := req.GetExtra(); e != nil && e.Header != nil {
			r.principal = e.Header.Get(s.principal)
		}
		a := args{Account: req.Params.Arguments["account"]}
		a.Amount, _ = strconv.Atoi(req.Params.Arguments["amount"])
		out, err := s.call(r, a, req.Params.RequestState, req.Params.InputResponses)
		if err != nil {
			return nil, err
		}
		if out.asks != nil {
			return &mcp.GetPromptResult{InputRequests: out.asks, RequestState: out.state}, nil
		}
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: out.text}}}}, nil
	}
}

// call is one round of pay, refund or the prompt, the same for each.
func (s *server) call(r request, a args, state string, in mcp.InputResponseMap) (*round, error) {
	done := &round{text: fmt.Sprintf("%s: %d to %s done", r.tool, a.Amount, a.Account)}
	if state == "" {
		if s.hole == "unasked-answers" && confirmed(in) {
			return done, nil
		}
		return s.ask(r, a)
	}
	p, err := s.open(r, state)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid requestState"}
	}
	switch {
	case s.hole == "consent-in-state" && p.Reply == "accept":
		return done, nil
	case s.hole == "decline-result" && declined(in):
		return &round{text: "Cancelled."}, nil
	case s.hole != "consent" && !confirmed(in):
		return s.ask(r, a)
	}
	return done, nil
}

func confirmed(in mcp.InputResponseMap) bool {
	e, ok := in["confirm"].(*mcp.ElicitResult)
	return ok && e != nil && e.Action == "accept" && e.Content["ok"] == true
}

func declined(in mcp.InputResponseMap) bool {
	e, ok := in["confirm"].(*mcp.ElicitResult)
	return ok && e != nil && (e.Action == "decline" || e.Action == "cancel")
}

func (s *server) ask(r request, a args) (*round, error) {
	p := payload{Step: "confirm"}
	if s.hole == "leak" {
		b := 1234.56
		p.Account, p.Balance, p.Email = a.Account, &b, "ada@example.com"
	}
	state, err := s.seal(r, p)
	if err != nil {
		return nil, err
	}
	return &round{
		asks: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: fmt.Sprintf("%s %d to %s?", r.tool, a.Amount, a.Account),
			RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"ok": {Type: "boolean"}}, Required: []string{"ok"}}}},
		state: state,
	}, nil
}

// sealed is the sealed plaintext: the payload and its expiry (and, for
// weak-key and prefix-tag, the binding inside it, and a nonce).
type sealed struct {
	P         payload `json:"p"`
	Exp       int64   `json:"exp"` // Unix milliseconds
	Tool      string  `json:"tool,omitempty"`
	Principal string  `json:"sub,omitempty"`
	Args      string  `json:"args,omitempty"`
	Nonce     string  `json:"n,omitempty"`
}

// unsealed is consent-in-state's state: a digest of the request
// (checked), a nonce (single use), the reply recorded (trusted) and an
// expiry (checked). Its one hole is the trusted reply.
type unsealed struct {
	Ask   string `json:"ask"`
	Nonce string `json:"n"`
	Reply string `json:"reply"`
	Exp   int64  `json:"exp"` // Unix milliseconds
}

// weakKey is the weak-key hole's HMAC key.
var weakKey = []byte("secret")

// binding is the binding the weak-key and prefix-tag holes carry in the
// state.
func binding(r request) (tool, principal, args string) {
	d := argsDigest(r.args)
	return r.method + " " + r.tool, r.principal, strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(d[:]))
}

// askDigest is consent-in-state's digest of the request.
func askDigest(r request) string {
	tool, principal, args := binding(r)
	d := sha256.Sum256([]byte(tool + "\x00" + principal + "\x00" + args))
	return hex.EncodeToString(d[:])
}

// aad is the associated data binding a state to its request: each field
// length-prefixed. Holes leave a field out.
func (s *server) aad(r request) []byte {
	var b []byte
	field := func(v []byte) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	if s.hole != "no-method-binding" {
		field([]byte(r.method))
	}
	if s.hole != "no-tool-binding" {
		field([]byte(r.tool))
	}
	if s.hole != "no-principal-binding" {
		field([]byte(r.principal))
	}
	switch s.hole {
	case "no-args-binding":
	case "partial-args-binding":
		d := firstArgDigest(r.args)
		field(d[:])
	default:
		d := argsDigest(r.args)
		field(d[:])
	}
	if s.hole != "no-audience-binding" {
		field([]byte(s.audience))
	}
	return b
}

// firstArgDigest is the partial-args-binding hole's digest: of the first
// argument by name, alone.
func firstArgDigest(raw json.RawMessage) [32]byte {
	var m map[string]json.RawMessage
	json.Unmarshal(raw, &m)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		return argsDigest(nil)
	}
	return argsDigest(json.RawMessage(`{"` + keys[0] + `":` + string(m[keys[0]]) + `}`))
}

// argsDigest is SHA-256 of the arguments re-encoded with sorted keys,
// numbers as text: a prompt's arguments are strings, so that the
// prompt's {"amount":"5"} and the tool's {"amount":5} digest alike, and
// only the method (or its absence) tells their states apart.
func argsDigest(raw json.RawMessage) [32]byte {
	var v any
	if len(raw) > 0 {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		d.Decode(&v)
	}
	if m, ok := v.(map[string]any); ok {
		for k, x := range m {
			if n, ok := x.(json.Number); ok {
				m[k] = n.String()
			}
		}
	}
	b, _ := json.Marshal(v)
	return sha256.Sum256(b)
}

func nonce() string {
	n := make([]byte, 16)
	rand.Read(n)
	return hex.EncodeToString(n)
}

func (s *server) seal(r request, p payload) (string, error) {
	st := sealed{P: p, Exp: time.Now().Add(s.ttl).UnixMilli()}
	if s.hole == "weak-key" || s.hole == "prefix-tag" {
		st.Tool, st.Principal, st.Args = binding(r)
	}
	if s.hole == "consent-in-state" {
		plain, err := json.Marshal(unsealed{Ask: askDigest(r), Nonce: nonce(), Reply: "pending", Exp: st.Exp})
		return base64.RawURLEncoding.EncodeToString(plain), err
	}
	if s.hole == "prefix-tag" {
		// The last byte of the tag is at least 0x10: else the tag cut
		// by one decoded byte and re-encoded is a prefix of the text
		// (one time in 16), and truncate would find this hole too.
		for {
			st.Nonce = nonce()
			plain, err := json.Marshal(st)
			if err != nil {
				return "", err
			}
			body := base64.RawURLEncoding.EncodeToString(plain)
			if tag := s.hmacText(body); tag[len(tag)-1] >= 0x10 {
				return body + "." + base64.RawURLEncoding.EncodeToString(tag), nil
			}
		}
	}
	plain, err := json.Marshal(st)
	if err != nil {
		return "", err
	}
	switch s.hole {
	case "weak-key":
		body := base64.RawURLEncoding.EncodeToString(plain)
		m := hmac.New(sha256.New, weakKey)
		m.Write([]byte(body))
		return body + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
	case "plaintext":
		return string(plain), nil
	case "hmac-nobind":
		body := base64.RawURLEncoding.EncodeToString(plain)
		return body + "." + base64.RawURLEncoding.EncodeToString(s.hmacText(body)), nil
	case "leak":
		body := base64.StdEncoding.EncodeToString(plain)
		return body + "." + base64.StdEncoding.EncodeToString(s.mac(r, body)), nil
	}
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce)
	return "ag1." + base64.StdEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, s.aad(r))), nil
}

func (s *server) hmacText(body string) []byte {
	m := hmac.New(sha256.New, s.macKey)
	m.Write([]byte(body))
	return m.Sum(nil)
}

func (s *server) mac(r request, body string) []byte {
	m := hmac.New(sha256.New, s.macKey)
	m.Write(s.aad(r))
	m.Write([]byte(body))
	return m.Sum(nil)
}

// decode reads base64: strictly (canonical, padded standard), or as a
// sloppy server does (any alphabet, padding or spare bits).
func (s *server) decode(t string) ([]byte, error) {
	if s.hole == "sloppy-decoding" {
		t = strings.NewReplacer("-", "+", "_", "/").Replace(strings.TrimRight(t, "="))
		return base64.RawStdEncoding.DecodeString(t)
	}
	b, err := base64.StdEncoding.Strict().DecodeString(t)
	if err != nil || base64.StdEncoding.EncodeToString(b) != t {
		return nil, errInvalid
	}
	return b, nil
}

// opened is what open returns: the payload, and consent-in-state's
// recorded reply.
type opened struct {
	payload
	Reply string
}

func (s *server) open(r request, state string) (*opened, error) {
	var plain []byte
	var replayKey string
	switch s.hole {
	case "plaintext":
		plain = []byte(state)
	case "consent-in-state":
		b, err := base64.RawURLEncoding.Strict().DecodeString(state)
		if err != nil {
			return nil, errInvalid
		}
		var u unsealed
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		if d.Decode(&u) != nil || d.More() || u.Ask != askDigest(r) || time.Now().After(time.UnixMilli(u.Exp)) {
			return nil, errInvalid
		}
		if err := s.spend(r, u.Nonce, time.UnixMilli(u.Exp)); err != nil {
			return nil, err
		}
		return &opened{Reply: u.Reply}, nil
	case "prefix-tag":
		// The hole: the tag the client sent is compared over its own
		// length, and a state without a tag has an empty one.
		body, tag, _ := strings.Cut(state, ".")
		if !strings.HasPrefix(base64.RawURLEncoding.EncodeToString(s.hmacText(body)), tag) {
			return nil, errInvalid
		}
		var err error
		if plain, err = base64.RawURLEncoding.Strict().DecodeString(body); err != nil {
			return nil, errInvalid
		}
	case "hmac-nobind":
		body, tag, ok := strings.Cut(state, ".")
		t, err := base64.RawURLEncoding.Strict().DecodeString(tag)
		if !ok || err != nil || !hmac.Equal(t, s.hmacText(body)) {
			return nil, errInvalid
		}
		if plain, err = base64.RawURLEncoding.Strict().DecodeString(body); err != nil {
			return nil, errInvalid
		}
	case "weak-key":
		body, tag, ok := strings.Cut(state, ".")
		t, err := base64.RawURLEncoding.Strict().DecodeString(tag)
		m := hmac.New(sha256.New, weakKey)
		m.Write([]byte(body))
		if !ok || err != nil || !hmac.Equal(t, m.Sum(nil)) {
			return nil, errInvalid
		}
		if plain, err = base64.RawURLEncoding.Strict().DecodeString(body); err != nil {
			return nil, errInvalid
		}
		replayKey = string(t)
	case "leak":
		body, tag, ok := strings.Cut(state, ".")
		t, err := s.decode(tag)
		if !ok || err != nil || !hmac.Equal(t, s.mac(r, body)) {
			return nil, errInvalid
		}
		if plain, err = s.decode(body); err != nil {
			return nil, errInvalid
		}
		replayKey = string(t)
	default:
		rest, ok := strings.CutPrefix(state, "ag1.")
		if !ok {
			return nil, errInvalid
		}
		b, err := s.decode(rest)
		n := s.aead.NonceSize()
		if err != nil || len(b) < n {
			return nil, errInvalid
		}
		if plain, err = s.aead.Open(nil, b[:n], b[n:], s.aad(r)); err != nil {
			return nil, errInvalid
		}
		replayKey = string(b[:n])
		if s.hole == "sloppy-decoding" {
			replayKey = state
		}
	}
	var st sealed
	if err := json.Unmarshal(plain, &st); err != nil {
		return nil, errInvalid
	}
	if s.hole == "weak-key" || s.hole == "prefix-tag" {
		if tool, principal, args := binding(r); st.Tool != tool || st.Principal != principal || st.Args != args {
			return nil, errInvalid
		}
	}
	if s.hole == "prefix-tag" {
		replayKey = st.Nonce
	}
	exp := time.UnixMilli(st.Exp)
	if s.hole != "no-expiry" && s.hole != "hmac-nobind" && s.hole != "plaintext" && time.Now().After(exp) {
		return nil, errInvalid
	}
	if err := s.spend(r, replayKey, exp); err != nil {
		return nil, err
	}
	return &opened{payload: st.P}, nil
}

// spend records a single-use tool's state as used until exp, and
// refuses one already used.
func (s *server) spend(r request, key string, exp time.Time) error {
	if !s.singleUse[r.tool] || s.hole == "no-single-use" || key == "" {
		return nil
	}
	s.mu.Lock()
	now := time.Now()
	for k, e := range s.used {
		if now.After(e) {
			delete(s.used, k)
		}
	}
	if _, ok := s.used[key]; ok {
		s.mu.Unlock()
		return errInvalid
	}
	if s.hole != "racy-single-use" {
		s.used[key] = exp
		s.mu.Unlock()
		return nil
	}
	// The hole: the check above and the record below are two steps. The
	// window between them is held open until a second retry of the same
	// state has passed the check (or raceWindow has passed), so that two
	// retries sent at once both pass, every time, not by luck.
	w := s.windows[key]
	if w == nil {
		w = &window{second: make(chan struct{})}
		s.windows[key] = w
	}
	w.passed++
	if w.passed == 2 {
		close(w.second)
	}
	s.mu.Unlock()
	t := time.NewTimer(raceWindow)
	select {
	case <-w.second:
	case <-t.C:
	}
	t.Stop()
	s.mu.Lock()
	s.used[key] = exp
	if s.windows[key] == w {
		delete(s.windows, key)
	}
	s.mu.Unlock()
	return nil
}
