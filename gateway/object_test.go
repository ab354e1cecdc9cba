package gateway

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// objectModel is parseObject as the gateway first wrote it: jsontext's
// decoder token by token, a string per name. parseObject must read every
// input as it does (FuzzGatewayParsers, TestObjectModel): the same
// members, values and params or result, and an error for the same
// inputs.
func objectModel(b []byte) (object, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	o, err := readObjectModel(dec, b, true)
	if err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("data after the object")
	}
	return o, nil
}

func readObjectModel(dec *jsontext.Decoder, b []byte, top bool) (object, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	if tok.Kind() != '{' {
		return nil, errors.New("not an object")
	}
	o := object{}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String()
		if err := checkName(name); err != nil {
			return nil, err
		}
		if top && (name == "params" || name == "result") && dec.PeekKind() == '{' {
			start := dec.InputOffset()
			start += int64(bytes.IndexByte(b[start:], '{'))
			child, err := readObjectModel(dec, b, false)
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

// checkObjectModel fails t if parseObject reads b otherwise than
// objectModel.
func checkObjectModel(t *testing.T, b []byte) {
	t.Helper()
	got, gerr := parseObject(b)
	want, werr := objectModel(b)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("%q: parseObject error %v, the model's %v", b, gerr, werr)
	}
	if gerr != nil {
		return
	}
	if err := sameObject(got, want); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
}

func sameObject(got, want object) error {
	if len(got) != len(want) {
		return errors.New("members differ in number")
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.name != w.name || !bytes.Equal(g.val, w.val) || (g.obj == nil) != (w.obj == nil) {
			return errors.New("member " + w.name + " differs")
		}
		if g.obj != nil {
			if err := sameObject(g.obj, w.obj); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestObjectModel: strings whose quotes and backslashes a scan must tell
// apart, values nested in values, blanks everywhere, and what is
// refused.
func TestObjectModel(t *testing.T) {
	for _, b := range []string{
		`{}`, ` { } `, `{"a":1}`, "\t{\"a\" : 1 , \"b\":[ ] }\r\n",
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"b","arguments":{"x":[1,{"y":"}"}]},"requestState":"s"}}`,
		`{"a":"\"","b":"\\","c":"\\\"","d":"\\\\","e":"x\\\"}y","f":"\u0022"}`,
		`{"params":{},"result":{}}`, `{"params":{"a":{"params":{}}},"result":[{"x":1}]}`,
		`{"params":[],"result":"{"}`, `{"params":null}`, `{"\u0070arams":{"name":"x"}}`,
		`{"id":-1.5e+3,"x":true,"y":false,"z":null}`, `{"a":{"b":{"c":{"d":"]"}}}}`,
		`{"params":{"name":"x"},"params":{"name":"y"}}`, `{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`,
		`{"\u0061":1,"a":2}`, `{"a":1} x`, `{"a":1}{}`, `[]`, `"x"`, `{"a":}`, `{"a":1,}`,
		"{\"a\":\"\xff\"}", `{"Params":{}}`, `{"request_state":"s"}`, `{"name":"\ud800"}`,
		`{"a":"` + string(bytes.Repeat([]byte(`\\`), 7)) + `\"}`, `{"a":"` + string(bytes.Repeat([]byte(`\\`), 8)) + `"}`,
		``, ` `, `{`, `{"a"`, `{"a":1`,
	} {
		checkObjectModel(t, []byte(b))
	}
}
