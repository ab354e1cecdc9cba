package canonjson

import (
	"bytes"
	"testing"
)

// full runs Append without the fast path.
func full(in []byte) ([]byte, error) {
	noFlat = true
	defer func() { noFlat = false }()
	return Append(nil, in, lim, exclude)
}

// FuzzFlat: the fast path and the full path agree on every input: the
// same canonical text, or both refuse.
func FuzzFlat(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, ` { "b" : "x" , "a" : -12 } `, `{"a":true,"B":null,"c":false}`,
		`{"a":1,"A":2}`, `{"a":1,"a":2}`, `{"a":-0}`, `{"a":01}`, `{"a":1.5}`, `{"_meta":1,"x":"y"}`,
		`{"a":"\u0041"}`, `{"a":"é"}`, `{"a":123456789012345678}`, `{"a":1}x`, `{"a":1,}`, `{,}`, `{"a" 1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err1 := Append(nil, in, lim, exclude)
		want, err2 := full(in)
		if (err1 == nil) != (err2 == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%q: fast path %s %v, full path %s %v", in, got, err1, want, err2)
		}
	})
}
