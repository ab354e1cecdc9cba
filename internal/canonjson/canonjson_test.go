package canonjson

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/gowebpki/jcs"
)

var lim = Limits{MaxBytes: 1 << 20, MaxDepth: 64}

var exclude = []string{"_meta", "inputResponses", "requestState"}

func canonOf(t *testing.T, in string) string {
	t.Helper()
	out, err := Append(nil, []byte(in), lim, exclude)
	if err != nil {
		t.Fatalf("Append(%s): %v", in, err)
	}
	return string(out)
}

func TestCanonical(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{``, `{}`},
		{" \t\r\n", `{}`},
		{`null`, `{}`},
		{`{}`, `{}`},
		{`{ "b" : [ 1.0, 2e0, -0, 1E2 ], "a":"\u00e9" }`, `{"a":"é","b":[1,2,0,100]}`},
		{`{"n":0.1,"m":1e21,"k":1e-7,"z":12345678901234567e3}`, `{"k":1e-7,"m":1e+21,"n":0.1,"z":12345678901234567000}`},
		{`{"\u20ac":1,"\r":2,"a":3}`, `{"\r":2,"a":3,"€":1}`},
		// The protocol members go at the top level only.
		{`{"_meta":{"a":1},"x":{"_meta":1},"inputResponses":{},"requestState":"s","y":2}`, `{"x":{"_meta":1},"y":2}`},
		{`{"requestState":"s"}`, `{}`},
		// An escaped name is compared after unescaping.
		{`{"\u005fmeta":1,"a":1}`, `{"a":1}`},
	} {
		if got := canonOf(t, c.in); got != c.want {
			t.Errorf("Append(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestRefuses(t *testing.T) {
	for _, c := range []struct {
		in   string
		want error
	}{
		{`{"Amount":1000,"amount":1}`, ErrFolded},
		{`{"amount":1,"AMOUNT":1000}`, ErrFolded},
		{`{"a":{"b":[{"key":1,"KEY":2}]}}`, ErrFolded},
		{`{"k":1,"\u212a":2}`, ErrFolded}, // KELVIN SIGN folds with k
		{`{"ſ":1,"S":2}`, ErrFolded},      // LATIN SMALL LETTER LONG S folds with s
		{`{"a":1,"a":2}`, ErrDuplicate},
		{`{"a":1,"\u0061":2}`, ErrDuplicate},
		{`{"n":9007199254740993}`, ErrNumber},
		{`{"n":-9007199254740993}`, ErrNumber},
		{`{"n":12345678901234567890}`, ErrNumber},
		{`{"n":0.10000000000000001}`, ErrNumber},
		{`{"n":1e400}`, ErrNumber},
		{`{"n":-1e400}`, ErrNumber},
		{`{"n":1e-400}`, ErrNumber},
		{`[1]`, ErrNotObject},
		{`"x"`, ErrNotObject},
		{`1`, ErrNotObject},
		{`{"a":1} {}`, ErrSyntax},
		{`{"a":1}x`, ErrSyntax},
		{`{"a":`, ErrSyntax},
		{"{\"a\":\"\xff\"}", ErrSyntax},
		{`{"a":"\ud800"}`, ErrSyntax},
		{"\ufeff{}", ErrNotObject},
		{"\v{}", ErrNotObject},
		{"{}\f", ErrSyntax},
		{`{"a":01}`, ErrSyntax},
		{`{"a":NaN}`, ErrSyntax},
		{`{"_meta":1,"_meta":2}`, ErrDuplicate},
		{`{"_meta":{"a":1,"a":2}}`, ErrDuplicate},
		// The protocol members are left out of the text, not out of the rules.
		{`{"_meta":{"a":1,"A":2}}`, ErrFolded},
		{`{"_meta":1e400}`, ErrNumber},
		{`{"requestState":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`, ErrTooDeep},
	} {
		_, err := Append(nil, []byte(c.in), lim, exclude)
		if !errors.Is(err, c.want) {
			t.Errorf("Append(%q) = %v, want %v", c.in, err, c.want)
		}
	}
}

// TestLargeObjects: objects of more than 16 members take the hashed
// path for their names.
func TestLargeObjects(t *testing.T) {
	var members []string
	for i := range 20 {
		members = append(members, fmt.Sprintf(`"n%d":%d`, 19-i, i))
	}
	obj := func(extra string) []byte { return []byte("{" + strings.Join(members, ",") + extra + "}") }
	for extra, want := range map[string]error{`,"N7":1`: ErrFolded, `,"n7":1`: ErrDuplicate, `,"\u212a":1,"k":2`: ErrFolded, `,"x":1`: nil} {
		if _, err := Append(nil, obj(extra), lim, exclude); !errors.Is(err, want) || want == nil && err != nil {
			t.Errorf("20 members and %s: %v, want %v", extra, err, want)
		}
	}
	got, err := Append(nil, obj(""), lim, exclude)
	if err != nil || !strings.HasPrefix(string(got), `{"n0":19,"n1":18,"n10":9,`) {
		t.Errorf("20 members: %s %v", got, err)
	}
}

func TestNumbersKept(t *testing.T) {
	for _, n := range []string{"0", "-0", "0.0", "1", "-1", "1.5", "0.1", "1e2", "1E+2", "100e-2",
		"9007199254740992", "9007199254740991", "-9007199254740992", "1.7976931348623157e308",
		"5e-324", "123456789012345", "1234567890123456", "0.30000000000000004", "2.5e-8"} {
		if _, err := Append(nil, []byte(`{"n":`+n+`}`), lim, exclude); err != nil {
			t.Errorf("%s refused: %v", n, err)
		}
	}
}

func TestBounds(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 64) + "1" + strings.Repeat("}", 64)
	if _, err := Append(nil, []byte(deep), lim, exclude); err != nil {
		t.Errorf("depth 64 refused: %v", err)
	}
	deeper := strings.Repeat(`{"a":`, 64) + "[1]" + strings.Repeat("}", 64)
	if _, err := Append(nil, []byte(deeper), lim, exclude); !errors.Is(err, ErrTooDeep) {
		t.Errorf("depth 65: %v, want ErrTooDeep", err)
	}
	// Nesting is bounded by MaxDepth alone, up to MaxDepthLimit.
	limit := Limits{MaxBytes: 1 << 20, MaxDepth: MaxDepthLimit}
	nest := func(n int) []byte { return []byte(strings.Repeat("[", n-1) + strings.Repeat("]", n-1)) }
	if _, err := Append(nil, append(append([]byte(`{"a":`), nest(MaxDepthLimit)...), '}'), limit, exclude); err != nil {
		t.Errorf("depth %d at its bound refused: %v", MaxDepthLimit, err)
	}
	if _, err := Append(nil, append(append([]byte(`{"a":`), nest(MaxDepthLimit+1)...), '}'), limit, exclude); !errors.Is(err, ErrTooDeep) {
		t.Errorf("depth %d: %v, want ErrTooDeep", MaxDepthLimit+1, err)
	}
	for _, bad := range []Limits{{1, 0}, {0, 1}, {1, MaxDepthLimit + 1}} {
		if _, err := Append(nil, []byte(`{}`), bad, exclude); err == nil {
			t.Errorf("limits %+v accepted", bad)
		}
	}
	small := Limits{MaxBytes: 10, MaxDepth: 64}
	if _, err := Append(nil, []byte(`{"a":"123"}`), small, exclude); !errors.Is(err, ErrTooLarge) {
		t.Errorf("11 bytes over a 10-byte limit: %v", err)
	}
	if _, err := Append(nil, []byte(`{"a":"12"}`), small, exclude); err != nil {
		t.Errorf("10 bytes at a 10-byte limit: %v", err)
	}
}

// TestMatchesJCS compares the canonical text with another RFC 8785
// implementation on inputs both accept.
func TestMatchesJCS(t *testing.T) {
	for _, in := range []string{
		`{"b":[1,2.5,true,null,{"z":"\u00e9\ud83d\ude00<>&\u2028","y":-1.5e-9}],"a":{"c":{}}}`,
		`{"€":1,"\r":2,"ö":3,"\ud83d\ude00":4,"\ufb33":5,"1":6}`,
		`{"n":[1e21,1e20,0.000001,1e-7,123.456,-0.0,5e-324,1.7976931348623157e308]}`,
		`{"s":"\u0000\u001f\"\\/\b\f\n\r\t"}`,
	} {
		want, err := jcs.Transform([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if got := canonOf(t, in); got != string(want) {
			t.Errorf("Append(%s)\n = %s\nJCS %s", in, got, want)
		}
	}
}

// TestFoldHash: names that encoding/json's folding matches hash equal,
// for these names and for every character and the others of its orbit.
func TestFoldHash(t *testing.T) {
	names := []string{"a", "A", "k", "K", "\u212a", "s", "S", "ſ", "ß", "ẞ", "Σ", "σ", "ς", "ǅ", "ǆ", "Ǆ", "é", "É", "i", "İ", "ı"}
	for _, x := range names {
		for _, y := range names {
			hx, hy := foldHash([]byte(x)), foldHash([]byte(y))
			if (hx == hy) != strings.EqualFold(x, y) {
				t.Errorf("%q %q: hashes equal %v, EqualFold %v", x, y, hx == hy, strings.EqualFold(x, y))
			}
		}
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if 0xD800 <= r && r < 0xE000 {
			continue
		}
		h := foldHash(utf8.AppendRune(nil, r))
		for o := unicode.SimpleFold(r); o != r; o = unicode.SimpleFold(o) {
			if foldHash(utf8.AppendRune(nil, o)) != h {
				t.Fatalf("%U and %U fold together but hash apart", r, o)
			}
		}
	}
}

// BenchmarkAppend: the canonical text of a 150 KB object of mixed members
// (bench/ measures the whole digest against other implementations).
func BenchmarkAppend(b *testing.B) {
	var big strings.Builder
	big.WriteString(`{"items":[`)
	for i := 0; big.Len() < 150_000; i++ {
		if i > 0 {
			big.WriteByte(',')
		}
		fmt.Fprintf(&big, `{"id":%d,"name":"item number %d","price":%d.25,"tags":["a","b","c"],"ok":true,"note":null}`, i, i, i%1000)
	}
	big.WriteString(`],"requestState":"abc","_meta":{"progressToken":1}}`)
	in := []byte(big.String())
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	var out []byte
	for b.Loop() {
		var err error
		if out, err = Append(out[:0], in, lim, exclude); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzJSONText: whatever Append accepts, jsontext (another RFC 8785
// implementation) accepts too and writes to the same canonical text.
func FuzzJSONText(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, ` { "b" : "x" , "a" : -12 } `, `{"a":true,"B":null,"c":[false,{}]}`,
		`{"a":-0}`, `{"a":1.5e300,"b":-2.5E-7,"c":100e-2,"d":0.000001}`, `{"\u00e9":"\u0000\u001f\ud83d\ude00","\ufb33":"<>&\/"}`,
		`{"a":123456789012345678}`, `{"a":1e21,"b":1e20,"c":12345678901234567e-30}`} {
		f.Add([]byte(s))
	}
	opts := []jsontext.Options{jsontext.CanonicalizeRawInts(true), jsontext.CanonicalizeRawFloats(true), jsontext.ReorderRawObjects(true)}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := Append(nil, in, lim, nil)
		if err != nil || len(in) > 700 { // strconv misreads numbers of more than 800 digits
			return
		}
		if s := bytes.Trim(in, " \t\r\n"); len(s) == 0 || string(s) == "null" {
			return
		}
		want, err := jsontext.AppendFormat(nil, in, opts...)
		if err != nil {
			t.Fatalf("%q: Append accepted it, jsontext refuses: %v", in, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%q:\nAppend   %s\njsontext %s", in, got, want)
		}
	})
}

// TestUnicodeVersion: FORMAT.md's rule 7 folds by Unicode 15.0.0, the
// version of Go's unicode tables that foldHash and bytes.EqualFold use. A
// Go release with newer tables folds more names together (the vector
// fold-unicode-16-pair then fails too): the format must not follow it
// silently.
func TestUnicodeVersion(t *testing.T) {
	if unicode.Version != "15.0.0" {
		t.Fatalf("Go's unicode tables are %s; FORMAT.md's folding is 15.0.0's", unicode.Version)
	}
}
