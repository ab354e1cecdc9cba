package gateway

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// TestValidJSON holds validJSON to jsontext's answer on inputs at each
// of its edges.
func TestValidJSON(t *testing.T) {
	many := func(n int, last string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			b.WriteString(`"k` + strings.Repeat("x", i) + `":1,`)
		}
		b.WriteString(last + "}")
		return b.String()
	}
	cases := []string{
		``, ` `, `{}`, `[]`, ` {} `, "\t\r\n[ ]\n", `{ }`, `[ 1 , 2 ]`, `{"a":1}`, `{"a" : 1 , "b" : [ ] }`,
		`{"a":1,}`, `[1,]`, `{,}`, `[,]`, `{"a"}`, `{"a":}`, `{:1}`, `{1:1}`, `{"a":1 "b":2}`, `[1 2]`,
		`{]`, `[}`, `{"a":[}`, `{{}}`, `[[]`, `[]]`, `{}{}`, `{} x`, `1 2`,
		`true`, `false`, `null`, `tru`, `nul`, `truex`, `True`, `nan`, `[true,false,null]`,
		`0`, `-0`, `01`, `-01`, `1.`, `1.5`, `.5`, `-`, `+1`, `1e`, `1e+`, `1e5`, `1E-5`, `1.5e+10`, `-1.0e0`, `2.`, `0x1`, `1e05`, `00`,
		`""`, `"a"`, `"\""`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\x"`, `"\u0041"`, `"\u00e9"`, `"\u004"`, `"\u00G1"`,
		`"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`, `"\ud83d\u0041"`, `"\ud83d\ud83d"`, `"\ud83dx"`, `"\ud83d\"`, `"\uD83D\uDE00"`,
		"\"\x00\"", "\"\x1f\"", "\"\x7f\"", "\"\xff\"", "\"\xc3\xa9\"", "\"\xc3\"", "\"\xe2\x82\xac\"", "\"\xed\xa0\x80\"",
		"\"\xf4\x90\x80\x80\"", "\"\xf0\x9f\x98\x80\"", "\"\xc0\xaf\"", "\"\xef\xbf\xbd\"", "\"\xef\xbb\xbf\"", "\xef\xbb\xbf{}",
		`"a`, `"a\`, `"a\"`, `{"a":"b}`,
		`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":{"a":1},"b":{"a":1}}`, `{"a":{"b":1,"b":2}}`, `[{"a":1},{"a":1}]`,
		`{"a":[{"a":1}],"a":2}`, `{"\ud83d\ude00":1,"😀":2}`, `{"":1,"":2}`, `{"":1}`,
		many(40, `"k":2`), many(40, `"kxxx":2`), many(40, `"k\u0078":2`), many(31, `"k":2`), many(32, `"kx":2`), many(33, `"kxx":2`),
		many(63, `"k":2`), many(64, `"kx":2`), many(65, `"kxx":2`), many(70, `"k\u0078\u0078\u0078":2`), many(70, `"new":2`),
		`{"` + strings.Repeat("a", 1020) + `":1,"b":2,"c":3,"b":4}`, `{"` + strings.Repeat("a", 1020) + `":1,"b":2,"c":3,"d":4}`,
		`{"a":{"` + strings.Repeat("x", 2000) + `":1,"a":1},"a":2}`,
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000), strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		strings.Repeat(`{"a":`, 9999) + "[]" + strings.Repeat("}", 9999), strings.Repeat(`{"a":`, 10000) + "[]" + strings.Repeat("}", 10000),
		strings.Repeat("[", 500) + strings.Repeat("]", 499),
	}
	for _, c := range cases {
		if got, want := validJSON([]byte(c)), jsontext.Value(c).IsValid(); got != want {
			t.Errorf("validJSON(%.60q) = %v, jsontext says %v", c, got, want)
		}
	}
}

// FuzzValidJSON: validJSON and jsontext agree on every input.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"b","arguments":{"x":[1,2.5e3,true,null]},"requestState":"s\u00e9\ud83d\ude00"}}`,
		`{"a":1,"\u0061":2}`, `[[{"a":{"b":[]}}]]`, "\"\xed\xa0\x80\"", `-0.0e-0`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), jsontext.Value(b).IsValid(); got != want {
			t.Fatalf("validJSON(%q) = %v, jsontext says %v", b, got, want)
		}
	})
}
