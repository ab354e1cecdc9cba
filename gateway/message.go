package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/stateseal/stateseal/mrtr"
)

// The gateway reads JSON-RPC messages with go-json-experiment's defaults,
// stricter than encoding/json's: member names match exactly (encoding/json
// folds case into struct fields), a name given twice and invalid UTF-8 are
// errors. So the method, target and requestState it checks are the ones an
// upstream in any language reads, whichever of two duplicates that
// upstream's parser would keep: a message the gateway cannot read one way
// only is refused, never passed on unchecked.

// object is one JSON object: its members in order, their values
// undecoded (slices of the input).
type object []member

type member struct {
	name string
	val  jsontext.Value
	obj  object // val read as an object, for a message's params or result
}

var decoders = sync.Pool{New: func() any { return jsontext.NewDecoder(bytes.NewBuffer(nil)) }}

// parseObject reads b, one JSON object, strictly (exact names, no name
// twice, valid UTF-8, no name the gateway reads spelled in another case,
// nothing after it), without decoding its values; but a member params or
// result that is an object is read the same way in the same pass.
func parseObject(b []byte) (object, error) {
	dec := decoders.Get().(*jsontext.Decoder)
	defer func() {
		dec.Reset(bytes.NewBuffer(nil))
		decoders.Put(dec)
	}()
	dec.Reset(bytes.NewBuffer(b))
	o, err := readObject(dec, b, true)
	if err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("data after the object")
	}
	return o, nil
}

// readObject reads the object that starts at dec's next token, whose
// input is b.
func readObject(dec *jsontext.Decoder, b []byte, top bool) (object, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	if tok.Kind() != '{' {
		return nil, errors.New("not an object")
	}
	o := make(object, 0, 8)
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String() // before the next call voids tok
		if err := checkName(name); err != nil {
			return nil, err
		}
		if top && (name == "params" || name == "result") && dec.PeekKind() == '{' {
			// Only a colon and blanks lie between the name and the
			// object's brace.
			start := dec.InputOffset()
			start += int64(bytes.IndexByte(b[start:], '{'))
			child, err := readObject(dec, b, false)
			if err != nil {
				return nil, err
			}
			o = append(o, member{name, jsontext.Value(b[start:dec.InputOffset()]), child})
			continue
		}
		v, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		end := dec.InputOffset()
		o = append(o, member{name, jsontext.Value(b[end-int64(len(v)) : end]), nil})
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	return o, nil
}

// The member names the gateway reads, in a message, its params or its
// result, or that an upstream or a client acts on (inputResponses,
// _meta), each with its folded form (foldName).
var significant = [...]struct{ exact, folded string }{
	{"jsonrpc", "jsonrpc"}, {"id", "id"}, {"method", "method"}, {"params", "params"}, {"result", "result"},
	{"error", "error"}, {"name", "name"}, {"uri", "uri"}, {"arguments", "arguments"},
	{"requestState", "requeststate"}, {"inputResponses", "inputresponses"}, {"_meta", "meta"},
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
			return fmt.Errorf("member %q is %q to a lenient parser", name, s.exact)
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

// get returns member k.
func (o object) get(k string) (jsontext.Value, bool) {
	for i := range o {
		if o[i].name == k {
			return o[i].val, true
		}
	}
	return nil, false
}

// str returns member k as a string: ok is false if it is absent or null,
// err is set if it is something else.
func (o object) str(k string) (s string, ok bool, err error) {
	v, present := o.get(k)
	if !present || v.Kind() == 'n' {
		return "", false, nil
	}
	if v.Kind() != '"' {
		return "", false, errors.New(k + " is not a string")
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), true, nil // valid UTF-8: read strictly
	}
	u, err := jsontext.AppendUnquote(nil, v)
	return string(u), err == nil, err
}

// object returns member k as an object, nil if absent or null.
func (o object) object(k string) (object, error) {
	v, present := o.get(k)
	if !present || v.Kind() == 'n' {
		return nil, nil
	}
	if v.Kind() != '{' {
		return nil, errors.New(k + " is not an object")
	}
	for i := range o {
		if o[i].name == k && o[i].obj != nil {
			return o[i].obj, nil // read with o
		}
	}
	return parseObject(v)
}

// put sets member k to the JSON value b.
func (o *object) put(k string, b []byte) {
	for i := range *o {
		if (*o)[i].name == k {
			(*o)[i].val, (*o)[i].obj = b, nil
			return
		}
	}
	*o = append(*o, member{k, b, nil})
}

// setString sets member k to the string v.
func (o *object) setString(k string, v string) error {
	b, err := jsontext.AppendQuote(nil, v)
	if err != nil {
		return err
	}
	o.put(k, b)
	return nil
}

// marshal encodes the object, its members in their order.
func (o object) marshal() []byte {
	n := 2
	for _, m := range o {
		n += len(m.name) + len(m.val) + 4
	}
	b := make([]byte, 0, n+16)
	b = append(b, '{')
	for i, m := range o {
		if i > 0 {
			b = append(b, ',')
		}
		b, _ = jsontext.AppendQuote(b, m.name) // names came from valid JSON
		b = append(b, ':')
		b = append(b, m.val...)
	}
	return append(b, '}')
}

// idKey is the key of a JSON-RPC id in a map of calls: its canonical text.
func idKey(id jsontext.Value) string {
	if isCanonicalID(id) {
		return string(id)
	}
	v := id.Clone()
	if v.Canonicalize() != nil {
		return string(id)
	}
	return string(v)
}

// isCanonicalID reports whether id, valid JSON, is already in canonical
// form, as most ids are: a string without an escape (nothing in it needs
// one), or a small integer written plainly.
func isCanonicalID(id jsontext.Value) bool {
	switch {
	case len(id) >= 2 && id[0] == '"':
		return bytes.IndexByte(id, '\\') < 0
	case len(id) == 0 || len(id) > 15 || len(id) > 1 && id[0] == '0':
		return false
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
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
var errBadState = errors.New("sealgate: requestState is not a string")

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
// backwards and those after it after, case folded, skipping '_' and '-'.
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
	return true
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

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// strayState reports whether the message raw (valid JSON) has a member
// whose name a parser may read as requestState (in any case, with ſ for
// s, with '_' or '-', escaped) anywhere but as the member requestState of its result: in
// error.data, nested deeper in a result, in a notification's or a server
// request's params. The gateway seals only a result's own requestState,
// so any other would reach the client in plaintext: the message is
// refused instead. Called only when hasState(raw).
func strayState(raw []byte) bool {
	dec := decoders.Get().(*jsontext.Decoder)
	defer func() {
		dec.Reset(bytes.NewBuffer(nil))
		decoders.Put(dec)
	}()
	dec.Reset(bytes.NewBuffer(raw))
	stray, err := walkNames(dec, true, false)
	return stray || err != nil
}

// walkNames reads one value from dec, reporting a stray requestState in
// it; top says it is the message, result that it is the message's
// result.
func walkNames(dec *jsontext.Decoder, top, result bool) (bool, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return false, err
	}
	switch tok.Kind() {
	case '{':
		for dec.PeekKind() != '}' {
			nt, err := dec.ReadToken()
			if err != nil {
				return false, err
			}
			name := nt.String()
			if foldsTo(name, "requeststate") && !(result && name == "requestState") {
				return true, nil
			}
			if stray, err := walkNames(dec, false, top && name == "result"); stray || err != nil {
				return stray, err
			}
		}
	case '[':
		for dec.PeekKind() != ']' {
			if stray, err := walkNames(dec, false, false); stray || err != nil {
				return stray, err
			}
		}
	default:
		return false, nil
	}
	_, err = dec.ReadToken()
	return false, err
}

// strayError replaces a response carrying a requestState elsewhere than
// as its result's own (error.data, deeper in the result).
var strayError = rpcError{Code: codeInternalError, Message: "upstream response carried a requestState the gateway does not seal"}
