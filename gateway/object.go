package gateway

import (
	"bytes"
	"errors"
	"io"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/stateseal/stateseal/internal/jsonscan"
)

// The mechanics of reading and writing one JSON object without decoding
// its values. What the gateway decides about what it reads (which names,
// which members, what is refused) is in message.go.

// object is one JSON object: its members in order, their values
// undecoded (slices of the input).
type object []member

type member struct {
	name string
	val  jsontext.Value
	obj  object // val read as an object, for a message's params or result
}

// A validValue is one JSON value that validJSON accepted, or a value
// inside one: the only input the cutter (splitObject) takes, since it
// decides nothing about validity and would read past the end of
// anything else.
type validValue []byte

// validated returns b as a validValue, or why it is not one.
func validated(b []byte) (validValue, error) {
	if !validJSON(b) {
		return nil, invalidJSON(b)
	}
	return validValue(b), nil
}

// invalidJSON says why b, which validJSON refused, is not
// one valid JSON object: the error path alone reads it token by token.
func invalidJSON(b []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	if _, err := dec.ReadValue(); err != nil {
		return err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return errors.New("data after the object")
	}
	return errors.New("invalid JSON")
}

// membersPerObject is the room a parse makes for the members of the
// object and of its params or result, in one allocation: an MCP message
// has about five, its params or result about as many.
const membersPerObject = 8

// splitObject cuts b, a valid JSON value (parseObject), into the members
// of its object, and those of a member params or result that is an
// object.
func splitObject(b validValue) (object, error) {
	s := scanner{b: b}
	s.space()
	if s.i >= len(b) || b[s.i] != '{' {
		return nil, errors.New("not an object")
	}
	slab := make(object, 0, 2*membersPerObject)
	s.child = slab[membersPerObject:membersPerObject:cap(slab)]
	return s.object(slab[:0:membersPerObject], true)
}

// maxMembers bounds the members the cutter splits an object into, and
// maxBatch the messages of a batch: each costs the gateway about a
// hundred times its bytes (a slab, a message), so that a flat object or
// a batch of a million {} would cost gigabytes that no body budget
// counts. An MCP message has a handful; a batch (before 2025-06-18), a
// few.
const (
	maxMembers = 1024
	maxBatch   = 256
)

var errTooMany = errors.New("more members than the gateway reads")

// splitArray cuts v, a valid JSON array, into its elements, at most max
// of them.
func splitArray(v validValue, max int) ([]validValue, error) {
	s := scanner{b: v}
	s.space()
	if s.i >= len(v) || v[s.i] != '[' {
		return nil, errors.New("not an array")
	}
	s.i++
	s.space()
	var out []validValue
	if v[s.i] == ']' {
		return out, nil
	}
	for {
		if len(out) == max {
			return nil, errTooMany
		}
		start := s.i
		s.value()
		out = append(out, v[start:s.i])
		s.space()
		if v[s.i] == ']' {
			return out, nil
		}
		s.i++ // ,
		s.space()
	}
}

// joinArray writes elements as one JSON array.
func joinArray(elems [][]byte) []byte {
	n := 2
	for _, e := range elems {
		n += len(e) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, e := range elems {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	return append(b, ']')
}

// eachName calls f with every member name in v (unescaped), at every
// depth, and whether it names a member of the object that is v's member
// result, until f returns true; it reports whether f did. It reads v
// byte by byte without recursion: v may nest as deep as validJSON
// allows.
func eachName(v validValue, f func(name string, inResult bool) bool) bool {
	// The containers open: whether each is an object, and the object
	// that is the top object's result.
	type open struct{ object, result bool }
	var buf [16]open
	stack := buf[:0]
	s := scanner{b: v}
	// name: a string here is a member name; result: the value here is
	// the top object's member result.
	name, result := false, false
	for s.space(); s.i < len(v); s.space() {
		switch c := v[s.i]; c {
		case '{', '[':
			stack = append(stack, open{object: c == '{', result: result && c == '{'})
			name, result = c == '{', false
			s.i++
		case '}', ']':
			stack = stack[:len(stack)-1]
			name = false
			s.i++
		case ',':
			name = stack[len(stack)-1].object
			s.i++
		case ':':
			s.i++
		case '"':
			start := s.i
			escaped := s.str()
			if !name {
				result = false
				continue
			}
			n, err := memberName(v[start:s.i], escaped)
			if err != nil || f(n, stack[len(stack)-1].result) {
				return true // (valid JSON unquotes)
			}
			name, result = false, len(stack) == 1 && n == "result"
		default: // a number, true, false or null
			s.value()
			result = false
		}
	}
	return false
}

// A scanner walks JSON that is known to be valid: it finds where values
// end, and never decides whether they are well formed, nor what a name
// may be (message.go's readObject).
type scanner struct {
	b     validValue
	i     int
	child object // room for the members of params or result
}

func (s *scanner) space() { s.i = jsonscan.SkipSpace(s.b, s.i) }

// object reads the object at s.i into o; top says it is the message,
// whose params or result is read too.
func (s *scanner) object(o object, top bool) (object, error) {
	s.i++ // {
	s.space()
	if s.b[s.i] == '}' {
		s.i++
		return o, nil
	}
	for {
		if len(o) == maxMembers {
			return nil, errTooMany
		}
		start := s.i
		escaped := s.str()
		name, err := memberName(s.b[start:s.i], escaped)
		if err != nil {
			return nil, err
		}
		s.space()
		s.i++ // :
		s.space()
		start = s.i
		if top && (name == "params" || name == "result") && s.b[s.i] == '{' {
			room := s.child
			if room == nil { // the second of params and result
				room = make(object, 0, membersPerObject)
			}
			s.child = nil
			child, err := s.object(room, false)
			if err != nil {
				return nil, err
			}
			o = append(o, member{name, jsontext.Value(s.b[start:s.i]), child})
		} else {
			s.value()
			o = append(o, member{name, jsontext.Value(s.b[start:s.i]), nil})
		}
		s.space()
		if s.b[s.i] == '}' {
			s.i++
			return o, nil
		}
		s.i++ // ,
		s.space()
	}
}

// str moves past the string at s.i and reports whether it has an escape.
// In valid JSON a backslash starts an escape whose next byte is never
// the string's end (nor is any hex digit of a \\u escape): the first
// quote not so escaped ends it.
func (s *scanner) str() (escaped bool) {
	b, i := s.b, s.i+1
	for {
		switch b[i] {
		case '"':
			s.i = i + 1
			return escaped
		case '\\':
			escaped = true
			i++
		}
		i++
	}
}

// value moves past the value at s.i.
func (s *scanner) value() {
	switch s.b[s.i] {
	case '"':
		s.str()
	case '{', '[':
		depth := 0
		for {
			switch s.b[s.i] {
			case '"':
				s.str()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return
				}
			}
			s.i++
		}
	default: // a number, true, false or null
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return
			}
			s.i++
		}
	}
}

// memberName is the name a quoted member name spells: one of
// commonNames costs no allocation.
func memberName(quoted []byte, escaped bool) (string, error) {
	if escaped {
		u, err := jsontext.AppendUnquote(nil, quoted)
		return string(u), err
	}
	raw := quoted[1 : len(quoted)-1]
	for _, n := range commonNames {
		if string(raw) == n {
			return n, nil
		}
	}
	return string(raw), nil
}

// commonNames are the member names of MCP messages, their params and
// results.
var commonNames = [...]string{"jsonrpc", "id", "method", "params", "result", "error", "_meta", "name", "uri",
	"arguments", "requestState", "inputResponses", "inputRequests", "resultType", "content", "structuredContent", "isError"}

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
