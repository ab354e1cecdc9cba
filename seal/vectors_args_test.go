package seal

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/internal/canonjson"
	"github.com/stateseal/stateseal/internal/testkit"
)

// An argsVector pins one rule of the argument digest (docs/FORMAT.md).
type argsVector struct {
	Name     string  `json:"name"`
	Comment  string  `json:"comment"`
	Input    *string `json:"input,omitempty"`     // the arguments, as text
	InputHex string  `json:"input_hex,omitempty"` // or as bytes, when not valid UTF-8
	// Params, instead of either, is the text of a request's params
	// object: the input is its arguments member's value as written, or
	// empty when it has none. None of the three for config vectors.
	Params   *string `json:"params,omitempty"`
	MaxBytes int     `json:"max_args_bytes"`
	MaxDepth int     `json:"max_args_depth"`
	// Canonical and Digest (hex) for accepted input; Refused names the
	// rule that refuses it.
	Canonical *string `json:"canonical"`
	Digest    string  `json:"digest,omitempty"`
	Refused   string  `json:"refused,omitempty"`
}

// refusals maps the names vectors use for refusals to their errors.
var refusals = map[string]error{
	"size": canonjson.ErrTooLarge, "not_object": canonjson.ErrNotObject, "syntax": canonjson.ErrSyntax,
	"depth": canonjson.ErrTooDeep, "duplicate_name": canonjson.ErrDuplicate,
	"case_fold": canonjson.ErrFolded, "number": canonjson.ErrNumber,
	"config": errConfigBounds, // the bounds themselves are refused
}

// errConfigBounds stands for a configuration error: ArgsOptions whose
// bounds are out of range fail with an error that is not ErrArguments.
var errConfigBounds = errors.New("bounds refused when configured")

func (v *argsVector) input(t *testing.T) []byte {
	switch {
	case v.Input != nil:
		return []byte(*v.Input)
	case v.Params != nil:
		// What a Go server holds of the arguments: go-sdk's
		// CallToolParamsRaw and mcp-go's RawArguments are a
		// json.RawMessage, the value's bytes from its first to its last.
		var p struct {
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal([]byte(*v.Params), &p); err != nil {
			t.Fatalf("%s: params: %v", v.Name, err)
		}
		return p.Arguments
	}
	return unhex(t, v.InputHex)
}

// hasInput reports whether the vector carries an input in any form.
func (v *argsVector) hasInput() bool { return v.Input != nil || v.InputHex != "" || v.Params != nil }

// limits are the vector's bounds, 0 taken as the default (docs/FORMAT.md,
// "Argument digest").
func (v *argsVector) limits() canonjson.Limits {
	lim := canonjson.Limits{MaxBytes: v.MaxBytes, MaxDepth: v.MaxDepth}
	if lim.MaxBytes == 0 {
		lim.MaxBytes = DefaultMaxArgsBytes
	}
	if lim.MaxDepth == 0 {
		lim.MaxDepth = DefaultMaxArgsDepth
	}
	return lim
}

func (v *argsVector) options() ArgsOptions {
	return ArgsOptions{MaxBytes: v.MaxBytes, MaxDepth: v.MaxDepth}
}

// run digests the vector's input and reports whether the result is the
// one the vector expects, and what it got.
func (v *argsVector) run(t *testing.T) (ok bool, got string) {
	if v.Refused == "config" {
		// The bounds alone are refused: there is no input to refuse, so a
		// package that never checks its bounds fails here (a size bound of
		// -1 would refuse any input it was given).
		if v.hasInput() {
			return false, "a config vector with an input"
		}
		_, derr := v.options().Digest(nil)
		return derr != nil && !errors.Is(derr, ErrArguments), "error " + errString(derr)
	}
	in := v.input(t)
	canon, err := canonjson.Append(nil, in, v.limits(), excludedArgs)
	d, derr := v.options().Digest(in)
	if (err == nil) != (derr == nil) {
		t.Fatalf("%s: canonjson.Append and Digest disagree: %v, %v", v.Name, err, derr)
	}
	if v.Refused != "" {
		return errors.Is(err, refusals[v.Refused]), "error " + errString(err)
	}
	if err != nil {
		return false, "error " + err.Error()
	}
	return v.Canonical != nil && string(canon) == *v.Canonical && hex.EncodeToString(d) == v.Digest, string(canon)
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestArgsVectors(t *testing.T) {
	vf := readVectors(t)
	if len(vf.ArgsVectors) < 40 {
		t.Fatalf("%d argument vectors, want at least 40", len(vf.ArgsVectors))
	}
	for _, v := range vf.ArgsVectors {
		if _, known := refusals[v.Refused]; v.Refused != "" && !known {
			t.Errorf("%s: unknown refusal %q", v.Name, v.Refused)
		}
		if ok, got := v.run(t); !ok {
			t.Errorf("%s: got %s; want canonical %v refused %q", v.Name, got, deref(v.Canonical), v.Refused)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}

// av builds an argument vector from the implementation itself; TestArgsVectors
// then holds it to what it says.
func av(t *testing.T, name, comment, input string, edit ...func(*argsVector)) argsVector {
	v := argsVector{Name: name, Comment: comment, Input: &input, MaxBytes: DefaultMaxArgsBytes, MaxDepth: DefaultMaxArgsDepth}
	for _, e := range edit {
		e(&v)
	}
	in := v.input(t)
	if _, err := v.options().Digest(in); err != nil && !errors.Is(err, ErrArguments) {
		// Refused when configured, whatever the input: the vector carries
		// none, so that refusing an input cannot pass it.
		v.Refused, v.Input, v.InputHex, v.Params = "config", nil, "", nil
		return v
	}
	canon, err := canonjson.Append(nil, in, v.limits(), excludedArgs)
	if err != nil {
		for r, e := range refusals {
			if errors.Is(err, e) {
				v.Refused = r
			}
		}
		if v.Refused == "" {
			t.Fatalf("%s: unnamed refusal %v", name, err)
		}
		return v
	}
	c := string(canon)
	v.Canonical = &c
	d := testkit.Must(v.options().Digest(in))
	v.Digest = hex.EncodeToString(d)
	return v
}

func bounds(bytes, depth int) func(*argsVector) {
	return func(v *argsVector) { v.MaxBytes, v.MaxDepth = bytes, depth }
}

func asHex(v *argsVector) { v.InputHex, v.Input = hex.EncodeToString([]byte(*v.Input)), nil }

func argsVectors(t *testing.T) []argsVector {
	return []argsVector{
		av(t, "typical", "a tool call's arguments, reordered, with whitespace", ` { "to" : "LIS", "from":"BER", "passengers": 2 } `),
		// Rule 1: size.
		av(t, "size-at-limit", "10 bytes under a 10-byte limit", `{"a":"12"}`, bounds(10, 64)),
		av(t, "size-over-limit", "11 bytes over a 10-byte limit", `{"a":"123"}`, bounds(10, 64)),
		av(t, "size-counts-bytes", "9 characters but 10 bytes (é is two) over a 9-byte limit: the size counts bytes", `{"a":"é"}`, bounds(9, 64)),
		av(t, "size-counts-whitespace", "9 bytes of object and 2 of whitespace over a 10-byte limit: the size is taken before trimming", ` {"a":"1"} `, bounds(10, 64)),
		// Rule 2: whitespace and empty input.
		av(t, "empty", "no bytes at all: the empty object", ``),
		av(t, "whitespace-only", "JSON whitespace only: the empty object", " \t\r\n"),
		av(t, "null", "null: the empty object", `null`),
		av(t, "null-over-limit", "null over a 3-byte limit: the size is checked first, so refused, not the empty object", `null`, bounds(3, 64)),
		av(t, "null-in-whitespace", "null between JSON whitespace: the empty object", " null\n"),
		av(t, "member-null-kept", "a member whose value is null is a member, written as such: not absent, not the empty object", `{"a":null}`),
		av(t, "byte-order-mark", "a UTF-8 byte-order mark is not JSON whitespace", "\ufeff{}"),
		av(t, "vertical-tab", "\\v is not JSON whitespace", "\v{}"),
		av(t, "no-break-space", "U+00A0 is not JSON whitespace", "\u00a0{}"),
		av(t, "form-feed-after", "\\f after the object is not JSON whitespace", "{}\f"),
		// Rule 3: an object.
		av(t, "array", "an array is not an arguments object", `[1,2]`),
		av(t, "string", "a string is not an arguments object", `"x"`),
		av(t, "number", "a number is not an arguments object", `1`),
		av(t, "true", "true is not an arguments object", `true`),
		// Rule 4: valid JSON, once.
		av(t, "trailing-object", "a second value after the object", `{"a":1} {}`),
		av(t, "trailing-garbage", "data after the object", `{"a":1}x`),
		av(t, "unterminated", "an object that does not end", `{"a":`),
		av(t, "leading-zero", "01 is not a JSON number", `{"a":01}`),
		av(t, "nan", "NaN is not JSON", `{"a":NaN}`),
		av(t, "invalid-utf8", "a 0xff byte in a string", "{\"a\":\"\xff\"}", asHex),
		av(t, "lone-high-surrogate", "an escaped high surrogate with no low one", `{"a":"\ud800"}`),
		av(t, "lone-low-surrogate", "an escaped low surrogate with no high one", `{"a":"\udc00x"}`),
		av(t, "surrogate-pair", "an escaped surrogate pair is one character", `{"a":"\ud83d\ude00"}`),
		av(t, "raw-control-character", "a raw U+0001 in a string: control characters must be escaped", "{\"a\":\"\x01\"}"),
		av(t, "invalid-escape", "\\x is not one of JSON's escapes", `{"a":"\x41"}`),
		av(t, "noncharacters", "U+FFFE, U+FFFF and U+FDD0, escaped and raw, are Unicode scalar values: accepted, written as UTF-8", `{"a":"\ufffe\uffff\ufdd0","b":"`+"\uffff\U0010fffe"+`"}`),
		av(t, "plus-sign", "+1 is not a JSON number", `{"a":+1}`),
		av(t, "trailing-comma", "a comma after the last member", `{"a":1,}`),
		av(t, "trailing-comma-array", "a comma after the last element", `{"a":[1,]}`),
		av(t, "raw-unit-separator", "a raw U+001F, the last control character: refused", "{\"a\":\"\x1f\"}"),
		av(t, "raw-del-and-c1", "raw U+007F, U+0080 and U+009F are not control characters to JSON: accepted, written as UTF-8", "{\"a\":\"\u007f\u0080\u009f\"}"),
		av(t, "escape-upper-case-hex", "\\u escapes in upper-case hex: \\u00E9 is é", `{"a":"\u00E9\u00C9\u002F"}`),
		av(t, "duplicate-name-hex-case", "\\u00e9 and \\u00E9 are one name", `{"\u00e9":1,"\u00E9":2}`),
		av(t, "encoded-surrogate", "U+D800 encoded in three bytes (ED A0 80) is not UTF-8", "{\"a\":\"\xed\xa0\x80\"}", asHex),
		av(t, "overlong-utf8", "/ in an overlong two-byte form (C0 AF) is not UTF-8", "{\"a\":\"\xc0\xaf\"}", asHex),
		// Rule 5: depth.
		av(t, "depth-at-limit", "three levels under a limit of 3: the object, an object, an array", `{"a":{"b":[1]}}`, bounds(1<<20, 3)),
		av(t, "depth-over-limit", "four levels over a limit of 3", `{"a":{"b":[[1]]}}`, bounds(1<<20, 3)),
		av(t, "depth-empty-array-at-limit", "an empty array is a level: three levels under a limit of 3", `{"a":{"b":[]}}`, bounds(1<<20, 3)),
		av(t, "depth-empty-array-over-limit", "an empty array is a level: four levels over a limit of 3", `{"a":{"b":[[]]}}`, bounds(1<<20, 3)),
		av(t, "depth-empty-object-over-limit", "an empty object is a level: four levels over a limit of 3", `{"a":{"b":{"c":{}}}}`, bounds(1<<20, 3)),
		av(t, "depth-bound-one", "a limit of 1, the smallest: the arguments object alone", `{"a":1,"b":"x"}`, bounds(1<<20, 1)),
		av(t, "depth-bound-one-over", "a limit of 1: an empty array inside is a second level", `{"a":[]}`, bounds(1<<20, 1)),
		av(t, "depth-default-bound-at-limit", "64 levels (the object and 63 arrays) with both bounds 0, the defaults: 4 MiB and 64 levels, so accepted", `{"a":`+strings.Repeat("[", 63)+strings.Repeat("]", 63)+`}`, bounds(0, 0)),
		av(t, "depth-default-bound-over-limit", "65 levels with both bounds 0, the defaults: over 64 levels, refused (0 is the default, not no bound)", `{"a":`+strings.Repeat("[", 64)+strings.Repeat("]", 64)+`}`, bounds(0, 0)),
		av(t, "config-depth-bound-10001", "a depth bound of 10 001: refused when configured, whatever the input, never clamped to 10 000", `{"a":1}`, bounds(0, 10001)),
		av(t, "config-negative-depth-bound", "a depth bound of -1: refused when configured, not the default", `{"a":1}`, bounds(0, -1)),
		av(t, "config-negative-size-bound", "a size bound of -1: refused when configured, not the default", `{"a":1}`, bounds(-1, 0)),
		av(t, "depth-at-largest-bound", "10 000 levels (the object and 9 999 arrays) under the largest limit, 10 000: accepted, though many parsers stop at 512 or 1 000", `{"a":`+strings.Repeat("[", 9999)+strings.Repeat("]", 9999)+`}`, bounds(1<<20, MaxArgsDepthLimit)),
		av(t, "depth-past-largest-bound", "10 001 levels under the largest limit, 10 000", `{"a":`+strings.Repeat("[", 10000)+strings.Repeat("]", 10000)+`}`, bounds(1<<20, MaxArgsDepthLimit)),
		// Rule 6: duplicate names.
		av(t, "duplicate-name", "one name twice", `{"a":1,"a":2}`),
		av(t, "duplicate-name-escaped", `"a" and "\u0061" are one name`, `{"a":1,"\u0061":2}`),
		av(t, "duplicate-name-nested", "one name twice in a nested object", `{"o":{"x":1,"x":1}}`),
		av(t, "duplicate-inside-protocol-member", "a duplicate inside _meta, which the digest leaves out: still refused", `{"_meta":{"a":1,"a":2},"b":1}`),
		// Rule 7: case folding.
		av(t, "fold-ascii", "Amount and amount: encoding/json keeps the last, RFC 8785 sorts both orders to one text", `{"Amount":1000,"amount":1}`),
		av(t, "fold-kelvin", "k and U+212A KELVIN SIGN fold together", `{"k":1,"\u212a":2}`),
		av(t, "fold-long-s", "s and U+017F LATIN SMALL LETTER LONG S fold together", `{"S":1,"ſ":2}`),
		av(t, "fold-titlecase", "U+01C5 and U+01C6 fold together", `{"ǅ":1,"ǆ":2}`),
		av(t, "fold-nested-in-array", "in an object inside an array", `{"l":[{"id":1,"ID":2}]}`),
		av(t, "fold-protocol-member", "_meta and _Meta fold together, though the digest would leave _meta out", `{"_meta":1,"_Meta":2}`),
		av(t, "fold-dotless-i", "ı (U+0131) folds to itself: upper-casing it then lower-casing would make it i", `{"i":1,"ı":2}`),
		av(t, "fold-dotted-capital-i", "İ (U+0130) folds to itself: lower-casing it would make it i", `{"I":1,"İ":2}`),
		av(t, "fold-unicode-14-pair", "U+A7C0 and U+A7C1, a case pair since Unicode 14.0, fold together", `{"\ua7c0":1,"\ua7c1":2}`),
		av(t, "fold-unicode-16-pair", "U+A7CB and U+0264 became a case pair in Unicode 16.0: under 15.0.0 they do not fold together", `{"\u0264":1,"\ua7cb":2}`),
		av(t, "sharp-s-is-not-ss", "simple folding, not full: ß and ss stay two names", `{"ß":1,"ss":2}`),
		// Rule 8: exact numbers.
		av(t, "numbers-same-value", "1.0, 1e2, 100e-2 and -0 are 1, 100, 1 and 0", `{"a":1.0,"b":1e2,"c":100e-2,"d":-0}`),
		av(t, "numbers-ecmascript", "ECMAScript forms: 1e21, 1e-7, 0.1, 2^53, the largest and smallest doubles", `{"a":1e21,"b":0.0000001,"c":0.1,"d":9007199254740992,"e":1.7976931348623157e308,"f":5e-324}`),
		av(t, "numbers-ecmascript-boundaries", "plain decimals from 1e-6 up to, not including, 1e21", `{"a":1e20,"b":1e16,"c":0.000001,"d":1.5e-6,"e":1e-5}`),
		av(t, "integer-beyond-double", "2^53+1: a double rounds it to 2^53, an int64 keeps it", `{"n":9007199254740993}`),
		av(t, "negative-integer-beyond-double", "-(2^53+1)", `{"n":-9007199254740993}`),
		av(t, "fraction-beyond-double", "0.10000000000000001 is the double 0.1, but not the decimal 0.1", `{"n":0.10000000000000001}`),
		av(t, "overflow", "1e400 is beyond any double", `{"n":1e400}`),
		av(t, "underflow", "1e-400 is not zero, but a double rounds it to 0", `{"n":1e-400}`),
		av(t, "zero-underflow", "0e-400 is zero", `{"n":0e-400}`),
		av(t, "number-long-exact", "1 followed by 800 zeros, times 10^-800: exactly 1, however long the text (strconv.ParseFloat reads it as 0.1)", `{"n":1`+strings.Repeat("0", 800)+`e-800}`),
		av(t, "number-long-inexact", "1, 800 zeros and a 1, times 10^-801: not the decimal 1", `{"n":1`+strings.Repeat("0", 800)+`1e-801}`),
		// Rule 9: protocol members.
		av(t, "protocol-members", "_meta, inputResponses and requestState at the top level are left out", `{"_meta":{"progressToken":1},"inputResponses":{"x":{}},"requestState":"abc","a":1}`),
		av(t, "protocol-members-only", "only protocol members: the empty object", `{"requestState":"abc"}`),
		av(t, "protocol-members-nested", "deeper down they stay", `{"x":{"_meta":1,"requestState":"s"}}`),
		av(t, "protocol-member-escaped", "a name is compared after unescaping: \\u005fmeta is _meta", `{"\u005fmeta":1,"a":1}`),
		av(t, "protocol-member-case", "_Meta is not _meta: it stays", `{"_Meta":1,"a":1}`),
		av(t, "depth-inside-protocol-member", "four levels inside _meta, over a limit of 3: the digest leaves _meta out, but its value is checked", `{"_meta":{"a":[[1]]},"b":1}`, bounds(1<<20, 3)),
		av(t, "syntax-inside-protocol-member", "01 inside _meta: refused, though the digest leaves _meta out (a reader must not skip it unread)", `{"_meta":{"a":01},"b":1}`),
		av(t, "fold-inside-protocol-member", "a and A inside _meta fold together: refused, though the digest leaves _meta out", `{"_meta":{"a":1,"A":2}}`),
		av(t, "number-inside-protocol-member", "1e400 as requestState's value: refused, though the digest leaves it out", `{"requestState":1e400,"b":1}`),
		// Rule 10: serialization.
		av(t, "sort-utf16", "names sort by UTF-16 code units: U+1F600 (D83D DE00) before U+FB33", `{"\ufb33":1,"\ud83d\ude00":2,"a":3}`),
		av(t, "string-escapes", "minimal escapes: control characters as \\u00xx, / and U+2028 as themselves", `{"s":"\u00e9\u001f\"\\\/\u2028\t"}`),
		av(t, "string-short-escapes", "U+0008, U+000C, U+000A, U+000D and U+0009 as \\b \\f \\n \\r \\t", `{"s":"\u0008\u000c\u000a\u000d\u0009"}`),
		av(t, "string-del-and-c1", "U+007F and U+0080 to U+009F are not escaped: only U+0000 to U+001F are", `{"s":"\u007f\u0080\u0085\u009f"}`),
		av(t, "string-html-characters", "<, > and & as themselves", `{"s":"<a href=\"x\">&amp;</a>"}`),
		// Issue 46: simple folding is the C and S lines, not C alone; a
		// request's params with and without arguments.
		av(t, "fold-capital-sharp-s", "ẞ (U+1E9E) folds to ß (U+00DF) by its S line, which simple folding takes and C lines alone do not", `{"ß":1,"ẞ":2}`),
		av(t, "fold-greek-prosgegrammeni", "ᾈ (U+1F88) folds to ᾀ (U+1F80) by its S line", `{"ᾀ":1,"ᾈ":2}`),
		av(t, "params-without-arguments", "a request's params without an arguments member: the input is empty, so the digest of {} (never no digest)", "", fromParams(`{"name":"book_flight","_meta":{"progressToken":1}}`)),
		av(t, "params-arguments-empty-object", "a request's params whose arguments is {}: the same digest as without arguments", "", fromParams(`{"name":"book_flight","arguments":{}}`)),
		av(t, "params-arguments-null", "a request's params whose arguments is null: the empty object too", "", fromParams(`{"name":"book_flight","arguments":null}`)),
		av(t, "params-arguments-whitespace-not-counted", "the input is the arguments value from its first byte to its last: the whitespace around it in the request is not part of it, so its 10 bytes are within a 10-byte bound", "", fromParams("{\"arguments\": \n {\"a\":\"12\"}\t ,\"name\":\"t\"}"), bounds(10, 64)),
	}
}

// fromParams makes the vector's input the arguments of a request's
// params, given as text.
func fromParams(params string) func(*argsVector) {
	return func(v *argsVector) { v.Input, v.Params = nil, &params }
}
