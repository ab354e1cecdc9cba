// Command holeserver is an MCP server (go-sdk, stateless Streamable HTTP)
// that seals its requestState without stateseal, correctly or with one
// hole on purpose, for statescan's tests:
//
//	holeserver -addr 127.0.0.1:0 -hole none        # correct: AES-GCM, bound, strict, single use
//	holeserver -addr 127.0.0.1:0 -hole no-expiry   # the same with one hole
//
// Its tools pay and refund ({"account": string, "amount": integer}) ask
// for a confirmation (elicitation, {"ok": boolean}) and complete only with
// ok true. The correct server's token is "ag1." and padded standard
// base64 of a 12-byte nonce and the AES-256-GCM ciphertext of the payload
// and its expiry, under associated data binding the method, the tool, the
// principal (the -principal-header) and a SHA-256 of the arguments; it
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
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"sort"
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
}

type server struct {
	hole      string
	ttl       time.Duration
	singleUse map[string]bool
	principal string // header
	aead      cipher.AEAD
	macKey    []byte

	mu   sync.Mutex
	used map[string]time.Time
}

var errInvalid = errors.New("invalid")

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	hole := flag.String("hole", "none", "the hole: "+strings.Join(names(), ", "))
	ttl := flag.Duration("ttl", 10*time.Minute, "a state's lifetime")
	single := flag.String("single-use", "pay", "comma-separated single-use tools")
	principal := flag.String("principal-header", "X-User", "the request header naming the principal")
	flag.Parse()
	if _, ok := holes[*hole]; !ok {
		log.Fatalf("holeserver: unknown -hole %q (%s)", *hole, strings.Join(names(), ", "))
	}
	s, err := newServer(*hole, *ttl, *single, *principal)
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

func newServer(hole string, ttl time.Duration, single, principal string) (*server, error) {
	key := make([]byte, 32)
	rand.Read(key)
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	s := &server{hole: hole, ttl: ttl, principal: principal, aead: aead, macKey: make([]byte, 32), singleUse: map[string]bool{}, used: map[string]time.Time{}}
	rand.Read(s.macKey)
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
	tool, principal string
	args            json.RawMessage
}

func (s *server) tool(name string) mcp.ToolHandlerFor[args, any] {
	return func(_ context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		r := request{tool: name, args: req.Params.Arguments}
		if e := req.GetExtra(); e != nil && e.Header != nil {
			r.principal = e.Header.Get(s.principal)
		}
		if req.Params.RequestState == "" {
			return s.ask(r, a)
		}
		if _, err := s.open(r, req.Params.RequestState); err != nil {
			return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid requestState"}
		}
		if s.hole != "consent" && !confirmed(req.Params.InputResponses) {
			return s.ask(r, a)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s: %d to %s done", name, a.Amount, a.Account)}}}, nil, nil
	}
}

func confirmed(in mcp.InputResponseMap) bool {
	e, ok := in["confirm"].(*mcp.ElicitResult)
	return ok && e != nil && e.Action == "accept" && e.Content["ok"] == true
}

func (s *server) ask(r request, a args) (*mcp.CallToolResult, any, error) {
	p := payload{Step: "confirm"}
	if s.hole == "leak" {
		b := 1234.56
		p.Account, p.Balance, p.Email = a.Account, &b, "ada@example.com"
	}
	state, err := s.seal(r, p)
	if err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{Message: fmt.Sprintf("%s %d to %s?", r.tool, a.Amount, a.Account),
			RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"ok": {Type: "boolean"}}, Required: []string{"ok"}}}},
		RequestState: state,
	}, nil, nil
}

// sealed is the sealed plaintext: the payload and its expiry (and, for
// weak-key, the binding inside it).
type sealed struct {
	P         payload `json:"p"`
	Exp       int64   `json:"exp"` // Unix milliseconds
	Tool      string  `json:"tool,omitempty"`
	Principal string  `json:"sub,omitempty"`
	Args      string  `json:"args,omitempty"`
}

// weakKey is the weak-key hole's HMAC key.
var weakKey = []byte("secret")

// binding is the weak-key hole's binding, carried in the state.
func binding(r request) (tool, principal, args string) {
	d := argsDigest(r.args)
	return r.tool, r.principal, strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(d[:]))
}

// aad is the associated data binding a state to its request: each field
// length-prefixed. Holes leave a field out.
func (s *server) aad(r request) []byte {
	var b []byte
	field := func(v []byte) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	field([]byte("tools/call"))
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

// argsDigest is SHA-256 of the arguments re-encoded with sorted keys.
func argsDigest(raw json.RawMessage) [32]byte {
	var v any
	if len(raw) > 0 {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		d.Decode(&v)
	}
	b, _ := json.Marshal(v)
	return sha256.Sum256(b)
}

func (s *server) seal(r request, p payload) (string, error) {
	st := sealed{P: p, Exp: time.Now().Add(s.ttl).UnixMilli()}
	if s.hole == "weak-key" {
		st.Tool, st.Principal, st.Args = binding(r)
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
		m := hmac.New(sha256.New, s.macKey)
		m.Write([]byte(body))
		return body + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
	case "leak":
		body := base64.StdEncoding.EncodeToString(plain)
		return body + "." + base64.StdEncoding.EncodeToString(s.mac(r, body)), nil
	}
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce)
	return "ag1." + base64.StdEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, s.aad(r))), nil
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

func (s *server) open(r request, state string) (*payload, error) {
	var plain []byte
	var replayKey string
	switch s.hole {
	case "plaintext":
		plain = []byte(state)
	case "hmac-nobind":
		body, tag, ok := strings.Cut(state, ".")
		t, err := base64.RawURLEncoding.Strict().DecodeString(tag)
		m := hmac.New(sha256.New, s.macKey)
		m.Write([]byte(body))
		if !ok || err != nil || !hmac.Equal(t, m.Sum(nil)) {
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
	if s.hole == "weak-key" {
		if tool, principal, args := binding(r); st.Tool != tool || st.Principal != principal || st.Args != args {
			return nil, errInvalid
		}
	}
	exp := time.UnixMilli(st.Exp)
	if s.hole != "no-expiry" && s.hole != "hmac-nobind" && s.hole != "plaintext" && time.Now().After(exp) {
		return nil, errInvalid
	}
	if s.singleUse[r.tool] && s.hole != "no-single-use" && replayKey != "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		now := time.Now()
		for k, e := range s.used {
			if now.After(e) {
				delete(s.used, k)
			}
		}
		if _, ok := s.used[replayKey]; ok {
			return nil, errInvalid
		}
		s.used[replayKey] = exp
	}
	return &st.P, nil
}
