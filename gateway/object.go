package gateway

import (
	"bytes"
	"errors"
	"io"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
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
