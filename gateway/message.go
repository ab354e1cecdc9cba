package gateway

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/stateseal/stateseal/internal/jsonscan"
	"github.com/stateseal/stateseal/mrtr"
)

// The gateway reads JSON-RPC messages as go-json-experiment's jsontext
// does with its defaults (its own loops in valid.go and object.go, held to
// jsontext's answers), stricter than encoding/json: member names match
// exactly (encoding/json folds case into struct fields), a name given
// twice and invalid UTF-8 are errors. So the method, target and
// requestState it checks are the ones an upstream in any language reads,
// whichever of two duplicates that upstream's parser would keep: a
// message the gateway cannot read one way only is refused, never passed
// on unchecked.
//
// This file is the gateway's reading of messages, both ways, and every
// decision about what it reads: readRequest reads the client's body,
// readUpstreamBody and readUpstreamMessage what comes back, and the
// withState methods write a message back with its state replaced. The
// gateway itself (gateway.go) only opens and seals what these return;
// HTTP framing is admit.go's, SSE framing sse.go's.

// errParse is a request body the gateway cannot read strictly, or whose
// requestState it cannot be sure it read: the client gets -32700.
var errParse = errors.New("parse error")

// A clientMessage is what the gateway read of one message from the client.
type clientMessage struct {
	m      object
	params object
	id     jsontext.Value
	method string
	// call is a request with an id: a response comes back for it.
	call bool
	// stateful is a call of a method that carries state (tools/call,
	// prompts/get, resources/read), outside a batch, with params an
	// object: its state is opened, and the one its result brings sealed,
	// under its binding.
	stateful  bool
	targetKey string // "name", or "uri" for resources/read
	target    string
	args      jsontext.Value // absent or null: nil
	state     string         // absent, null or empty: "", the first round
	// refuse is a requestState the gateway refuses unopened: in a
	// message that cannot carry one, not a string, or beside a target
	// that is not a string.
	refuse bool
}

// A clientRequest is the client's body as the gateway read it.
type clientRequest struct {
	batch bool
	// unread is a single message in which no member can be named
	// requestState, however a parser decodes names: valid UTF-8 JSON,
	// left unparsed (readLazily reads it if its response needs it).
	unread bool
	msg    clientMessage   // the message, if not a batch and not unread
	msgs   []clientMessage // for a batch, its members the gateway could read
}

// readRequest reads the client's body: one message or a batch. err is
// errParse (with the id of the message, if one was read) for a body some
// upstream might read a state in that the gateway cannot.
func readRequest(body []byte) (req clientRequest, id jsontext.Value, err error) {
	if startsArray(body) {
		// A JSON-RPC batch (protocol versions before 2025-06-18): no call
		// in it may carry state, and none is sealed for.
		req.batch = true
		v, err := validated(body)
		if err != nil {
			return req, nil, errParse
		}
		msgs, err := splitArray(v, maxBatch)
		if err != nil {
			return req, nil, errParse
		}
		for _, raw := range msgs {
			m, err := parseObject(raw)
			if err != nil {
				if hasState(raw) {
					// A state the gateway cannot read must not reach the
					// upstream unchecked.
					return req, nil, errParse
				}
				continue // the upstream answers an invalid member of a batch
			}
			q, err := readClientMessage(m, true)
			if err != nil {
				return req, q.id, err
			}
			req.msgs = append(req.msgs, q)
		}
		return req, nil, nil
	}
	if !hasState(body) {
		if !validJSON(body) {
			// Not UTF-8 JSON (UTF-16 or UTF-32, with a BOM or without,
			// a name twice): some upstream would decode a state in it
			// that the byte test cannot see.
			return req, nil, errParse
		}
		// No member is named requestState, however a parser decodes
		// names: there is nothing to open. Most requests are such, and
		// most of their responses carry no state either.
		req.unread = true
		return req, nil, nil
	}
	req.msg, err = readLazily(body, nil)
	if err != nil {
		return req, req.msg.id, err
	}
	return req, nil, nil
}

// startsArray reports whether b, past JSON's blanks, starts an array: a
// batch.
func startsArray(b []byte) bool {
	i := jsonscan.SkipSpace(b, 0)
	return i < len(b) && b[i] == '['
}

// readLazily reads one message of the client's, which readRequest left
// unread or found may carry a state. valid is the body as validated
// already (readRequest did, for one it left unread), or nil.
func readLazily(body []byte, valid validValue) (clientMessage, error) {
	var err error
	if valid == nil {
		if valid, err = validated(body); err != nil {
			return clientMessage{}, errParse
		}
	}
	m, err := readObject(valid)
	if err != nil {
		return clientMessage{}, errParse
	}
	return readClientMessage(m, false)
}

// readClientMessage reads one message from the client, in a batch or not.
func readClientMessage(m object, batch bool) (clientMessage, error) {
	q := clientMessage{m: m}
	id, hasID := m.get("id")
	if hasID && !plainID(id) {
		return q, errParse
	}
	q.id = id
	method, hasMethod, _ := m.str("method")
	q.method = method
	q.call = hasID && hasMethod && id.Kind() != 'n'
	params, perr := m.object("params")
	if pv, _ := m.get("params"); perr != nil && hasState(pv) {
		// Params the gateway cannot read, which may hold a state: it
		// must not reach the upstream unchecked.
		return q, errParse
	}
	var hasRS bool
	if perr == nil && params != nil {
		rs, ok := params.get("requestState")
		hasRS = ok && rs.Kind() != 'n'
	}
	carries := method == mrtr.MethodCallTool || method == mrtr.MethodGetPrompt || method == mrtr.MethodReadResource
	if !q.call || !carries || batch || perr != nil || params == nil {
		// A requestState where none is ever sealed is refused
		// unopened, as mcpgo's request hook refuses it.
		q.refuse = hasRS
		return q, nil
	}
	q.params, q.stateful, q.targetKey = params, true, "name"
	if method == mrtr.MethodReadResource {
		q.targetKey = "uri"
	} else if args, ok := params.get("arguments"); ok && args.Kind() != 'n' {
		q.args = args
	}
	target, _, terr := params.str(q.targetKey)
	q.target = target
	if !hasRS {
		return q, nil
	}
	token, _, err := params.str("requestState")
	q.state, q.refuse = token, err != nil || terr != nil
	return q, nil
}

// withState is the message with its requestState replaced by the state
// opened, and its target written out again as the gateway read it: the
// upstream gets the message in the one form the gateway read.
func (q *clientMessage) withState(plain string) ([]byte, error) {
	if err := q.params.setString("requestState", plain); err != nil {
		return nil, err
	}
	if err := q.params.setString(q.targetKey, q.target); err != nil {
		return nil, err
	}
	q.m.put("params", q.params.marshal())
	return q.m.marshal(), nil
}

// An upstreamMessage is what the gateway read of one message from upstream.
type upstreamMessage struct {
	m      object
	result object
	id     jsontext.Value
	// answers is a response (a result or an error) naming an id: it
	// answers that call.
	answers  bool
	isResult bool
	// stray is a member a parser may read as requestState anywhere but
	// as the result's own (strayState): never sealed, so refused.
	stray bool
	state string // the result's requestState; "" if none
}

// readUpstreamBody reads a JSON response body: one message (batch false,
// to read with readUpstreamMessage), or a batch, split into its messages
// (none if no member in it can be named requestState: the body passes).
func readUpstreamBody(body []byte) (msgs []validValue, batch bool, err error) {
	v, err := validated(body)
	if err != nil {
		return nil, false, errors.New("not JSON")
	}
	if !startsArray(body) {
		return nil, false, nil
	}
	if !hasState(body) {
		return nil, true, nil
	}
	msgs, err = splitArray(v, maxBatch)
	return msgs, true, err
}

// mayAnswer is the byte test for a message from upstream that holds no
// requestState (hasState is false): whether it may answer a call, to
// mark the exchange's one call answered without parsing it. It only
// decides whether a broken stream gets an error event for that call.
func mayAnswer(raw []byte) bool {
	return bytes.Contains(raw, []byte(`"id"`)) && (bytes.Contains(raw, []byte(`"result"`)) || bytes.Contains(raw, []byte(`"error"`)))
}

// passesUnread reports whether an SSE event (its raw lines) can go to the
// client byte for byte without its data being read: no member in it can
// be named requestState, and it answers no call still waiting.
func passesUnread(ev []byte, allAnswered bool) bool {
	return !hasState(ev) && (allAnswered || !bytes.Contains(ev, []byte(`"id"`)))
}

// readUpstreamMessage reads one message from upstream; valid is raw as
// validated already (readUpstreamBody validates a JSON body whole), or
// nil to validate it first.
func readUpstreamMessage(raw []byte, valid validValue) (upstreamMessage, error) {
	var u upstreamMessage
	var err error
	if valid == nil {
		if valid, err = validated(raw); err != nil {
			return u, err
		}
	}
	m, err := readObject(valid)
	if err != nil {
		return u, err
	}
	u.m = m
	id, hasID := m.get("id")
	_, isResult := m.get("result")
	_, isError := m.get("error")
	if hasID && !plainID(id) {
		return u, errors.New("an id that is not a string, a number or null, or is over 256 bytes")
	}
	u.id, u.answers, u.isResult = id, hasID && (isResult || isError), isResult
	if !hasState(raw) {
		return u, nil
	}
	if !onlyResultState(raw, m) && strayState(valid) {
		u.stray = true
		return u, nil
	}
	if !isResult {
		return u, nil
	}
	res, err := m.object("result")
	if err != nil {
		return u, err
	}
	state, ok, err := res.str("requestState")
	if err != nil {
		return u, err
	}
	if ok {
		u.result, u.state = res, state
	}
	return u, nil
}

// withState is the message with its result's requestState replaced by
// the sealed token.
func (u *upstreamMessage) withState(token string) ([]byte, error) {
	if err := u.result.setString("requestState", token); err != nil {
		return nil, err
	}
	u.m.put("result", u.result.marshal())
	return u.m.marshal(), nil
}

// The member names the gateway reads, in a message, its params or its
// result, or that an upstream or a client acts on (inputResponses,
// _meta), each with its folded form (foldName).
var significant = [...]struct{ exact, folded string }{
	{"jsonrpc", "jsonrpc"}, {"id", "id"}, {"method", "method"}, {"params", "params"}, {"result", "result"},
	{"error", "error"}, {"name", "name"}, {"uri", "uri"}, {"arguments", "arguments"},
	{"requestState", "requeststate"}, {"inputResponses", "inputresponses"}, {"_meta", "meta"},
}

// parseObject reads b, one JSON object, strictly (exact names, no name
// twice, valid UTF-8, no name the gateway reads spelled in another case,
// nothing after it), without decoding its values; but a member params or
// result that is an object is read the same way in the same pass.
//
// b is validated whole first, as jsontext.Value.IsValid reads JSON with
// its defaults (validJSON: RFC 7493, no name twice at any depth, valid
// UTF-8, one value). Only then does splitObject cut the valid object
// into its members, which needs no decision about validity.
func parseObject(b []byte) (object, error) {
	v, err := validated(b)
	if err != nil {
		return nil, err
	}
	return readObject(v)
}

// readObject cuts v (splitObject) and refuses a name of it, or of its
// params or result, that a lenient parser reads as one the gateway
// reads (checkName).
func readObject(v validValue) (object, error) {
	o, err := splitObject(v)
	if err != nil {
		return nil, err
	}
	for _, m := range o {
		if err := checkName(m.name); err != nil {
			return nil, err
		}
		for _, c := range m.obj {
			if err := checkName(c.name); err != nil {
				return nil, err
			}
		}
	}
	return o, nil
}

// checkName refuses a name that a lenient parser reads as one the
// gateway reads, but that is not spelled as it: another case ("Name",
// "requeſtState": encoding/json matches struct fields ignoring case), or
// with '_' or '-' ("request_state": the Python SDK's pydantic models
// take a field's snake_case name beside its camelCase alias). An
// upstream or a client would read a target or a state the gateway never
// checked or sealed.
func checkName(name string) error {
	if name == "" {
		return nil
	}
	for _, s := range significant {
		if name == s.exact {
			return nil // no two of them fold together
		}
	}
	first := firstLetter(name)
	for _, s := range significant {
		// ſ and the Kelvin sign, which fold to ASCII letters, are two
		// and three bytes long; no folded name here starts with s or k,
		// so a name folding to one starts with its first letter, in
		// either case, after any '_' and '-'.
		if first == s.folded[0] && foldsTo(name, s.folded) {
			return fmt.Errorf("member %q is %q to a lenient parser", short(name), s.exact)
		}
	}
	return nil
}

// firstLetter is name's first byte that is not '_' or '-', lower case.
func firstLetter(name string) byte {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c != '_' && c != '-' {
			return c | 0x20
		}
	}
	return 0
}

// foldsTo reports whether name, with every '_' and '-' dropped and case
// folded (ſ is s, the Kelvin sign k), is folded (lower-case ASCII): the
// way the lenient readers of JSON-RPC compare member names.
func foldsTo(name, folded string) bool {
	j := 0
	for _, r := range name {
		if r == '_' || r == '-' {
			continue
		}
		if j == len(folded) {
			return false
		}
		c := rune(folded[j])
		if r != c && !('A' <= r && r <= 'Z' && r+('a'-'A') == c) && !(r == '\u017f' && c == 's') && !(r == '\u212a' && c == 'k') {
			return false
		}
		j++
	}
	return j == len(folded)
}

// Error codes, as the go-sdk middleware (package mcpsdk) answers them.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeInvalidParams  = -32602
	codeInternalError  = -32603
)

type rpcError struct {
	Code    int               `json:"code"`
	Message string            `json:"message"`
	Data    map[string]string `json:"data,omitempty"`
}

// errorMessage is a JSON-RPC error response to id (null if empty).
func errorMessage(id jsontext.Value, e rpcError) []byte {
	if len(id) == 0 {
		id = jsontext.Value("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      jsontext.Value `json:"id"`
		Error   rpcError       `json:"error"`
	}{"2.0", id, e})
	return b
}

// stateError is what a client is told about a state that did not open,
// or could not be sealed: mrtr.ClientError, as mcpsdk's middleware answers.
func stateError(err error) rpcError {
	a := mrtr.ClientError(err)
	e := rpcError{Code: a.Code, Message: a.Message}
	if a.Reason != "" {
		e.Data = map[string]string{"reason": a.Reason}
	}
	return e
}

// errBadState is a requestState that is present but not a string.
var errBadState = errors.New("gateway: requestState is not a string")

// sealError is the error that replaces a result whose state could not be
// sealed: the plaintext never reaches the client.
var sealError = rpcError{Code: codeInternalError, Message: "cannot seal requestState"}

// hasState reports whether b may hold a member that some JSON parser
// reads as requestState: the cheap test before a message is parsed. That
// is the name in any mix of cases (encoding/json matches struct fields
// ignoring case, and folds U+017F LONG S to s), with '_' or '-' anywhere
// in it (pydantic reads request_state), or with an escape in it.
func hasState(b []byte) bool {
	if bytes.Contains(b, []byte(`\u`)) || bytes.Contains(b, []byte("\u017f")) {
		return true
	}
	return hasFoldedState(b, 'q') || hasFoldedState(b, 'Q')
}

// hasFoldedState looks for "requeststate" folded around each q (a rare
// letter in JSON), one of q and Q.
func hasFoldedState(b []byte, q byte) bool { return countFolded(b, q, 1) > 0 }

// countFolded counts the "requeststate" around each q in b, in any case
// and with any '_' and '-' between its letters, up to max.
func countFolded(b []byte, q byte, max int) int {
	n := 0
	for i := 0; n < max; {
		j := bytes.IndexByte(b[i:], q)
		if j < 0 {
			break
		}
		i += j
		if foldedAround(b, i, "er", "ueststate") {
			n++
		}
		i++
	}
	return n
}

// foldedAround reports whether the letters before b[i] spell before
// backwards and those after it after, case folded, skipping '_' and '-',
// and the string around them holds nothing else: a quote on each side,
// past any '_' and '-'. A member name that folds to requeststate is
// exactly that between its quotes (an escape in it is caught by
// hasState's test for \u; no other escape folds away), while a longer
// string that contains the letters (a tool named
// test_input_required_result_request_state) is not a name any parser
// reads as requestState, and needs no parse.
func foldedAround(b []byte, i int, before, after string) bool {
	k := i - 1
	for j := 0; j < len(before); j++ {
		for k >= 0 && (b[k] == '_' || b[k] == '-') {
			k--
		}
		if k < 0 || b[k]|0x20 != before[j] {
			return false
		}
		k--
	}
	for k >= 0 && (b[k] == '_' || b[k] == '-') {
		k--
	}
	if k < 0 || b[k] != '"' {
		return false
	}
	k = i + 1
	for j := 0; j < len(after); j++ {
		for k < len(b) && (b[k] == '_' || b[k] == '-') {
			k++
		}
		if k >= len(b) || b[k]|0x20 != after[j] {
			return false
		}
		k++
	}
	for k < len(b) && (b[k] == '_' || b[k] == '-') {
		k++
	}
	return k < len(b) && b[k] == '"'
}

// onlyResultState reports, without a second reading of raw, that the one
// requestState the message m (read from raw) holds is its result's own:
// raw spells the name once, in no way but plainly, and the result has
// it. Then no other member can be named so.
func onlyResultState(raw []byte, m object) bool {
	if bytes.Contains(raw, []byte(`\u`)) || bytes.Contains(raw, []byte("\u017f")) ||
		countFolded(raw, 'q', 2)+countFolded(raw, 'Q', 2) != 1 {
		return false
	}
	res, err := m.object("result")
	if err != nil || res == nil {
		return false
	}
	_, ok := res.get("requestState")
	return ok
}

// strayState reports whether the message v has a member whose name a
// parser may read as requestState (in any case, with ſ for s, with '_'
// or '-', escaped) anywhere but as the member requestState of its
// result: in error.data, nested deeper in a result, in a notification's
// or a server request's params. The gateway seals only a result's own
// requestState, so any other would reach the client in plaintext: the
// message is refused instead. Called only when hasState(v); the cutter
// walks the names (eachName), this decides.
func strayState(v validValue) bool {
	return eachName(v, func(name string, inResult bool) bool {
		return foldsTo(name, "requeststate") && !(inResult && name == "requestState")
	})
}

// strayError replaces a response carrying a requestState elsewhere than
// as its result's own (error.data, deeper in the result).
var strayError = rpcError{Code: codeInternalError, Message: "upstream response carried a requestState the gateway does not seal"}

// maxIDBytes bounds a JSON-RPC id: canonicalizing one (idKey) costs
// many times its bytes, outside every body budget.
const maxIDBytes = 256

// plainID reports whether id is what JSON-RPC allows, a string, a number
// or null, of at most maxIDBytes.
func plainID(id jsontext.Value) bool {
	switch id.Kind() {
	case '"', '0', 'n':
		return len(id) <= maxIDBytes
	}
	return false
}
