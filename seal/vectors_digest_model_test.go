package seal

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/stateseal/stateseal/internal/canonjson"
	"github.com/stateseal/stateseal/internal/testkit"
)

// digestModel canonicalizes arguments the way docs/FORMAT.md ("Argument
// digest") says, written from the document with the standard library,
// not from internal/canonjson: it parses into a tree, checks rules 5 to 8
// on the tree, removes the protocol members and serializes. Given a
// mutation (a deliberately wrong reading of one rule) it applies that
// reading instead. It returns the canonical text, or ok false if the
// input is refused; which rule refuses is not part of the format.
func digestModel(in []byte, maxBytes, maxDepth int, mut string) (canonical string, ok bool) {
	maxBytes, maxDepth, ok = modelBounds(maxBytes, maxDepth, mut)
	if !ok {
		return "", false
	}
	switch {
	case mut == "zero-bound-unlimited" && maxDepth == 0:
		maxDepth = MaxArgsDepthLimit
	case mut == "zero-bound-zero":
	case maxDepth == 0:
		maxDepth = DefaultMaxArgsDepth
	}
	if maxBytes == 0 {
		maxBytes = DefaultMaxArgsBytes
	}
	d := &dmodel{mut: mut, maxDepth: maxDepth}
	if d.m("null-before-size") {
		if s := bytes.Trim(in, " \t\r\n"); len(s) == 0 || string(s) == "null" {
			return "{}", true
		}
	}
	if d.m("object-before-trim") && (len(in) == 0 || in[0] != '{') {
		return "", false
	}
	// 1. Size, in bytes as received.
	n := len(in)
	if d.m("size-in-characters") {
		n = utf8.RuneCount(in)
	}
	if n > maxBytes && !d.m("no-size-limit") && !d.m("size-after-trim") {
		return "", false
	}
	// 2. JSON whitespace; empty and null are {}.
	s := bytes.Trim(in, " \t\r\n")
	if d.m("trim-unicode-space") {
		s = bytes.TrimSpace(in)
	}
	if d.m("size-after-trim") && len(s) > maxBytes {
		return "", false
	}
	if len(s) == 0 || string(s) == "null" && !d.m("null-refused") {
		return "{}", true
	}
	// 3. An object.
	if s[0] != '{' && !d.m("any-value") {
		return "", false
	}
	// 4. Valid JSON, once.
	p := &jparser{d: d, s: s}
	v, ok := p.value()
	if !ok || p.i != len(s) {
		return "", false
	}
	// 5 to 8, on the whole tree.
	if !d.check(v, 1, false) {
		return "", false
	}
	// 9 and 10.
	var out strings.Builder
	d.write(&out, v, 1)
	return out.String(), true
}

// modelBounds reports whether the bounds are accepted when configured, and
// the bounds then in force: outside their ranges they are a configuration
// error, never clamped, decided before and whatever the input.
func modelBounds(maxBytes, maxDepth int, mut string) (int, int, bool) {
	switch {
	case mut == "bounds-checked-by-input":
		// A reader that never refuses its bounds, only inputs past them.
		return maxBytes, maxDepth, true
	case mut == "depth-bound-clamped" && maxDepth > MaxArgsDepthLimit:
		maxDepth = MaxArgsDepthLimit
	case mut == "negative-bound-as-default" && maxDepth < 0:
		maxDepth = 0
	}
	if mut == "negative-bound-as-default" && maxBytes < 0 {
		maxBytes = 0
	}
	return maxBytes, maxDepth, maxBytes >= 0 && maxDepth >= 0 && maxDepth <= MaxArgsDepthLimit
}

// modelInput is the vector's input: its text or bytes, or the value of
// the arguments member of its params as written there, from its first
// byte to its last (empty when params has none).
func modelInput(t *testing.T, v argsVector, mut string) (in []byte, ok bool) {
	if v.Params == nil {
		return v.input(t), true
	}
	var p struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal([]byte(*v.Params), &p); err != nil {
		t.Fatal(err)
	}
	switch {
	case p.Arguments == nil && mut == "absent-arguments-not-digested":
		return nil, false
	case p.Arguments != nil && mut == "arguments-whitespace-counted":
		// The member's value with the whitespace around it, up to the
		// next ',' or '}'.
		text := *v.Params
		i := strings.Index(text, string(p.Arguments))
		j := i + len(p.Arguments)
		for i > 0 && strings.IndexByte(" \t\r\n", text[i-1]) >= 0 {
			i--
		}
		for j < len(text) && strings.IndexByte(" \t\r\n", text[j]) >= 0 {
			j++
		}
		return []byte(text[i:j]), true
	}
	return p.Arguments, true
}

type dmodel struct {
	mut      string
	maxDepth int
}

func (d *dmodel) m(name string) bool { return d.mut == name }

// A jvalue is a parsed JSON value.
type jvalue struct {
	kind    byte   // '{', '[', '"', '0' (a number), 't', 'f', 'n'
	text    string // a string's value, or a number's text
	members []jmember
	elems   []*jvalue
}

type jmember struct {
	name, raw string // unescaped, and as written between the quotes
	value     *jvalue
}

type jparser struct {
	d     *dmodel
	s     []byte
	i     int
	depth int // of the object or array being read
}

func (p *jparser) ws() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *jparser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *jparser) value() (*jvalue, bool) {
	switch c := p.peek(); {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, _, ok := p.str()
		return &jvalue{kind: '"', text: s}, ok
	case c == '-' || c == '+' || '0' <= c && c <= '9':
		return p.number()
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(p.s[p.i:], []byte(lit)) {
			p.i += len(lit)
			return &jvalue{kind: lit[0]}, true
		}
	}
	return nil, false
}

func (p *jparser) object() (*jvalue, bool) {
	v := &jvalue{kind: '{'}
	p.depth++
	defer func() { p.depth-- }()
	p.i++
	p.ws()
	if p.peek() == '}' {
		p.i++
		return v, true
	}
	for {
		if p.peek() != '"' {
			return nil, false
		}
		name, raw, ok := p.str()
		if !ok {
			return nil, false
		}
		p.ws()
		if p.peek() != ':' {
			return nil, false
		}
		p.i++
		p.ws()
		var val *jvalue
		if p.depth == 1 && p.d.m("protocol-values-syntax-unchecked") && slices.Contains(protocolMembers, name) {
			val, ok = p.skip()
		} else {
			val, ok = p.value()
		}
		if !ok {
			return nil, false
		}
		v.members = append(v.members, jmember{name, raw, val})
		p.ws()
		switch p.peek() {
		case '}':
			p.i++
			return v, true
		case ',':
			p.i++
			p.ws()
			if p.peek() == '}' && p.d.m("trailing-commas") {
				p.i++
				return v, true
			}
		default:
			return nil, false
		}
	}
}

// skip passes over a value without reading it, as a reader that skips
// the protocol members' values would: brackets balanced outside strings,
// anything else accepted. It returns null.
func (p *jparser) skip() (*jvalue, bool) {
	level, inString := 0, false
	for ; p.i < len(p.s); p.i++ {
		c := p.s[p.i]
		switch {
		case inString && c == '\\':
			p.i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			level++
		case c == '}' || c == ']':
			if level == 0 {
				return &jvalue{kind: 'n'}, true
			}
			level--
		case c == ',' && level == 0:
			return &jvalue{kind: 'n'}, true
		}
	}
	return nil, false
}

func (p *jparser) array() (*jvalue, bool) {
	v := &jvalue{kind: '['}
	p.i++
	p.ws()
	if p.peek() == ']' {
		p.i++
		return v, true
	}
	for {
		e, ok := p.value()
		if !ok {
			return nil, false
		}
		v.elems = append(v.elems, e)
		p.ws()
		switch p.peek() {
		case ']':
			p.i++
			return v, true
		case ',':
			p.i++
			p.ws()
			if p.peek() == ']' && p.d.m("trailing-commas") {
				p.i++
				return v, true
			}
		default:
			return nil, false
		}
	}
}

// str reads a string: valid UTF-8, no raw control character, only JSON's
// escapes, and escapes that decode to Unicode scalar values.
func (p *jparser) str() (val, raw string, ok bool) {
	p.i++
	start := p.i
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			raw = string(p.s[start:p.i])
			p.i++
			return b.String(), raw, true
		case c == '\\':
			r, n := p.escape()
			if n == 0 || p.d.m("noncharacters-refused") && nonchar(r) {
				return "", "", false
			}
			b.WriteRune(r)
			p.i += n
		case c < 0x20 && !p.d.m("raw-control-characters"):
			return "", "", false
		case p.d.m("encoded-surrogates-accepted") && c == 0xED && p.i+2 < len(p.s) && p.s[p.i+1] >= 0xA0:
			b.WriteRune(unicode.ReplacementChar)
			p.i += 3
		default:
			r, n := utf8.DecodeRune(p.s[p.i:])
			if r == utf8.RuneError && n == 1 {
				return "", "", false
			}
			if p.d.m("noncharacters-refused") && nonchar(r) || p.d.m("raw-del-and-c1-refused") && 0x7F <= r && r <= 0x9F {
				return "", "", false
			}
			b.WriteRune(r)
			p.i += n
		}
	}
	return "", "", false
}

func nonchar(r rune) bool { return 0xFDD0 <= r && r <= 0xFDEF || r&0xFFFE == 0xFFFE }

func (p *jparser) escape() (rune, int) {
	e := p.s[p.i:]
	if len(e) < 2 {
		return 0, 0
	}
	if i := strings.IndexByte(`"\/bfnrt`, e[1]); i >= 0 {
		return rune("\"\\/\b\f\n\r\t"[i]), 2
	}
	hex4 := func(h []byte) (rune, bool) {
		if len(h) < 4 {
			return 0, false
		}
		n, err := strconv.ParseUint(string(h[:4]), 16, 16)
		if p.d.m("upper-hex-input-refused") && bytes.ContainsAny(h[:4], "ABCDEF") {
			return 0, false
		}
		return rune(n), err == nil && !bytes.ContainsAny(h[:4], "+-_")
	}
	if e[1] != 'u' {
		if p.d.m("invalid-escapes") { // \x read as x
			return rune(e[1]), 2
		}
		return 0, 0
	}
	r, ok := hex4(e[2:])
	if !ok {
		return 0, 0
	}
	if !utf16.IsSurrogate(r) {
		return r, 6
	}
	if len(e) >= 12 && e[6] == '\\' && e[7] == 'u' {
		if lo, ok := hex4(e[8:]); ok {
			if pair := utf16.DecodeRune(r, lo); pair != unicode.ReplacementChar {
				return pair, 12
			}
		}
	}
	if p.d.m("lone-surrogates") {
		return unicode.ReplacementChar, 6
	}
	return 0, 0
}

// number reads a number in JSON's grammar and keeps its text.
func (p *jparser) number() (*jvalue, bool) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.s) && '0' <= p.s[p.i] && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	switch c := p.peek(); {
	case c == '-':
		p.i++
	case c == '+' && p.d.m("plus-sign"):
		p.i++
	}
	if p.peek() == '0' && !p.d.m("leading-zeros") {
		p.i++
	} else if digits() == 0 {
		return nil, false
	}
	if p.peek() == '.' {
		p.i++
		if digits() == 0 {
			return nil, false
		}
	}
	if c := p.peek(); c == 'e' || c == 'E' {
		p.i++
		if c := p.peek(); c == '+' || c == '-' {
			p.i++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	return &jvalue{kind: '0', text: strings.TrimPrefix(string(p.s[start:p.i]), "+")}, true
}

var protocolMembers = []string{"_meta", "inputResponses", "requestState"}

// protocol reports whether a top-level member is one rule 9 removes.
func (d *dmodel) protocol(m jmember) bool {
	name := m.name
	if d.m("exclude-raw-name") {
		name = m.raw
	}
	for _, p := range protocolMembers {
		if name == p || d.m("exclude-ignoring-case") && strings.EqualFold(name, p) {
			return true
		}
	}
	return false
}

// check applies rules 5 to 8 to v, at depth, inside the value of a
// top-level protocol member or not.
func (d *dmodel) check(v *jvalue, depth int, inProtocol bool) bool {
	unchecked := func(rule string) bool { return inProtocol && d.m("protocol-values-"+rule+"-unchecked") }
	switch v.kind {
	case '{', '[':
		limit := d.maxDepth
		switch {
		case d.m("depth-from-zero"):
			limit++
		case d.m("depth-hard-cap-1000"):
			limit = min(limit, 1000)
		}
		empty := len(v.members) == 0 && len(v.elems) == 0
		if depth > limit && !d.m("no-depth-limit") && !unchecked("depth") && !(empty && d.m("empty-containers-no-level")) {
			return false
		}
	case '0':
		if d.m("no-number-check") || unchecked("number") ||
			d.m("integer-number-check") && strings.ContainsAny(v.text, ".eE") {
			return true
		}
		_, ok := d.double(v.text)
		return ok
	}
	for _, e := range v.elems {
		if !d.check(e, depth+1, inProtocol) {
			return false
		}
	}
	for i, a := range v.members {
		for _, b := range v.members[i+1:] {
			if a.name == b.name && !d.m("no-duplicate-check") && !unchecked("duplicate") {
				return false
			}
			if depth == 1 && d.m("fold-kept-only") && (d.protocol(a) || d.protocol(b)) {
				continue
			}
			if a.name != b.name && d.foldEqual(a.name, b.name) && !unchecked("fold") {
				return false
			}
		}
		if !d.check(a.value, depth+1, inProtocol || depth == 1 && d.protocol(a)) {
			return false
		}
	}
	return true
}

// unicode14Pairs are case pairs that Unicode 14.0 added, and
// unicode16Pairs some that Unicode 16.0 added: the folding of 15.0.0
// folds the first together and not the second.
var (
	unicode14Pairs = map[rune]rune{0xA7C0: 0xA7C1, 0xA7C1: 0xA7C0}
	unicode16Pairs = map[rune]rune{0xA7CB: 0x0264, 0x1C89: 0x1C8A}
)

// foldEqual reports whether two different names are equal under rule 7's
// folding: each character by Unicode 15.0.0's simple case folding.
func (d *dmodel) foldEqual(a, b string) bool {
	switch {
	case d.m("no-fold-check"):
		return false
	case d.m("ascii-fold"):
		return asciiUpper(a) == asciiUpper(b)
	case d.m("lower-fold"):
		//lint:ignore SA6005 lower-casing both is the wrong reading this models
		return strings.ToLower(a) == strings.ToLower(b)
	}
	ra, rb := []rune(a), []rune(b)
	if len(ra) != len(rb) {
		return false
	}
	for i := range ra {
		x, y := ra[i], rb[i]
		switch {
		case d.m("upper-lower-fold"):
			if unicode.ToLower(unicode.ToUpper(x)) != unicode.ToLower(unicode.ToUpper(y)) {
				return false
			}
		case d.m("unicode-13-fold") && (unicode14Pairs[x] != 0 || unicode14Pairs[y] != 0):
			if x != y {
				return false
			}
		case d.m("unicode-16-fold") && (unicode16Pairs[x] == y || unicode16Pairs[y] == x):
		case d.m("fold-c-only") && (foldSLines[x] || foldSLines[y]):
			// Without the S lines, such a code point folds to itself.
			if x != y {
				return false
			}
		case !strings.EqualFold(string(x), string(y)):
			return false
		}
	}
	return true
}

// foldSLines are the code points whose simple folding is an S line of
// CaseFolding.txt 15.0.0 (their full folding, an F line, is longer):
// folded by the C lines alone, they stay themselves.
var foldSLines = func() map[rune]bool {
	m := map[rune]bool{0x1E9E: true, 0x1FBC: true, 0x1FCC: true, 0x1FD3: true, 0x1FE3: true, 0x1FFC: true, 0xFB05: true}
	for _, base := range []rune{0x1F88, 0x1F98, 0x1FA8} {
		for r := base; r < base+8; r++ {
			m[r] = true
		}
	}
	return m
}()

func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
	}
	return string(b)
}

// double returns the double RFC 8785 writes for a number's text, and
// whether the text denotes exactly the decimal it writes (rule 8). The
// text's value is taken exactly, with math/big.
func (d *dmodel) double(text string) (float64, bool) {
	if d.m("parse-float-full-text") {
		// The reading the Go package had: strconv reads the whole text,
		// and misreads texts of more than 800 digits.
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return 0, false
		}
		short := strconv.FormatFloat(f, 'g', -1, 64)
		x, _ := new(big.Rat).SetString(text)
		y, _ := new(big.Rat).SetString(short)
		return f, x.Cmp(y) == 0
	}
	mant, exp, _ := strings.Cut(strings.ToLower(text), "e")
	if e, err := strconv.Atoi(exp); exp != "" && (err != nil || e > 1000 || e < -1000) {
		// Far outside any double: only a zero is exact.
		return 0, strings.Trim(mant, "-0.") == ""
	}
	x, ok := new(big.Rat).SetString(text)
	if !ok {
		return 0, false
	}
	f, _ := x.Float64() // the nearest double
	if math.IsInf(f, 0) || f == 0 && x.Sign() != 0 {
		return 0, false
	}
	y, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
	return f, x.Cmp(y) == 0
}

// write serializes v as rule 10 says, leaving out the top-level protocol
// members (rule 9).
func (d *dmodel) write(b *strings.Builder, v *jvalue, depth int) {
	switch v.kind {
	case '{':
		ms := slices.Clone(v.members)
		ms = slices.DeleteFunc(ms, func(m jmember) bool {
			return (depth == 1 || d.m("exclude-at-any-depth")) && d.protocol(m)
		})
		slices.SortStableFunc(ms, func(x, y jmember) int {
			if d.m("sort-utf8") {
				return strings.Compare(x.name, y.name)
			}
			return slices.Compare(utf16.Encode([]rune(x.name)), utf16.Encode([]rune(y.name)))
		})
		b.WriteByte('{')
		for i, m := range ms {
			if i > 0 {
				b.WriteByte(',')
			}
			d.writeString(b, m.name)
			b.WriteByte(':')
			d.write(b, m.value, depth+1)
		}
		b.WriteByte('}')
	case '[':
		b.WriteByte('[')
		for i, e := range v.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			d.write(b, e, depth+1)
		}
		b.WriteByte(']')
	case '"':
		d.writeString(b, v.text)
	case '0':
		f, _ := d.double(v.text)
		b.WriteString(d.ecmascript(f, v.text))
	case 't':
		b.WriteString("true")
	case 'f':
		b.WriteString("false")
	case 'n':
		b.WriteString("null")
	}
}

// ecmascript writes f as ECMAScript's Number::toString does.
func (d *dmodel) ecmascript(f float64, text string) string {
	if f == 0 {
		if d.m("minus-zero-kept") && strings.HasPrefix(text, "-") {
			return "-0"
		}
		return "0"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	// f = 0.digits × 10^n
	mant, exp, _ := strings.Cut(strconv.FormatFloat(f, 'e', -1, 64), "e")
	digits := strings.Replace(mant, ".", "", 1)
	e := testkit.Must(strconv.Atoi(exp))
	k, n := len(digits), e+1
	hi, lo := 21, -6
	if d.m("exponent-from-1e16") {
		hi = 16
	}
	if d.m("exponent-below-1e-4") {
		lo = -4
	}
	switch {
	case k <= n && n <= hi:
		return sign + digits + strings.Repeat("0", n-k)
	case 0 < n && n <= hi:
		return sign + digits[:n] + "." + digits[n:]
	case lo < n && n <= 0:
		return sign + "0." + strings.Repeat("0", -n) + digits
	}
	s := sign + digits[:1]
	if k > 1 {
		s += "." + digits[1:]
	}
	es := strconv.Itoa(n - 1)
	if n-1 >= 0 && !d.m("exponent-without-plus") {
		es = "+" + es
	}
	return s + "e" + es
}

func (d *dmodel) writeString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		short := map[rune]string{'"': `\"`, '\\': `\\`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}
		if d.m("long-control-escapes") && r < 0x20 {
			delete(short, r)
		}
		hex := "\\u%04x"
		if d.m("upper-hex-escapes") {
			hex = "\\u%04X"
		}
		switch e, ok := short[r]; {
		case ok:
			b.WriteString(e)
		case r < 0x20,
			d.m("escape-del-and-c1") && 0x7F <= r && r <= 0x9F,
			d.m("html-escapes") && strings.ContainsRune("<>&", r),
			d.m("escape-line-separators") && (r == 0x2028 || r == 0x2029),
			d.m("ascii-escapes") && r >= 0x80 && r < 0x10000:
			b.WriteString(sprintfHex(hex, r))
		case d.m("ascii-escapes") && r >= 0x10000:
			r1, r2 := utf16.EncodeRune(r)
			b.WriteString(sprintfHex(hex, r1) + sprintfHex(hex, r2))
		case d.m("escape-solidus") && r == '/':
			b.WriteString(`\/`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

func sprintfHex(format string, r rune) string {
	h := strconv.FormatInt(int64(r)+0x10000, 16)[1:] // four digits
	if strings.HasSuffix(format, "X") {
		h = strings.ToUpper(h)
	}
	return `\u` + h
}

// runArgsModel runs an argument vector through the model with a mutation
// and reports whether the result is the one the vector expects: refused,
// or the canonical text and its digest.
func runArgsModel(t *testing.T, v argsVector, mut string) bool {
	if v.Refused == "config" {
		// Refused when configured: there is no input to refuse.
		_, _, ok := modelBounds(v.MaxBytes, v.MaxDepth, mut)
		return !ok && !v.hasInput()
	}
	in, ok := modelInput(t, v, mut)
	if !ok {
		return false
	}
	canon, ok := digestModel(in, v.MaxBytes, v.MaxDepth, mut)
	if v.Refused != "" || !ok {
		return v.Refused != "" && !ok
	}
	sum := sha256.Sum256([]byte(canon))
	return v.Canonical != nil && canon == *v.Canonical && hex.EncodeToString(sum[:]) == v.Digest
}

// TestDigestMutations: the model agrees with every argument vector, and
// each wrong reading of a digest rule that FORMAT.md lists fails the
// vector it names there.
func TestDigestMutations(t *testing.T) {
	vf := readVectors(t)
	for _, v := range vf.ArgsVectors {
		if !runArgsModel(t, v, "") {
			in, _ := modelInput(t, v, "")
			got, ok := digestModel(in, v.MaxBytes, v.MaxDepth, "")
			t.Errorf("the model gives %s %q (accepted %v), the vector says canonical %v refused %q", v.Name, got, ok, deref(v.Canonical), v.Refused)
		}
	}
	table := mutationTable(t, "Digest rules and the vectors that pin them")
	for _, mut := range digestMutations {
		catcher, ok := table[mut]
		if !ok {
			t.Errorf("FORMAT.md does not list the wrong reading %q", mut)
			continue
		}
		var caught []string
		for _, v := range vf.ArgsVectors {
			if !runArgsModel(t, v, mut) {
				caught = append(caught, v.Name)
			}
		}
		if !slices.Contains(caught, catcher) {
			t.Errorf("%s: FORMAT.md names %s, but the vectors that fail are %v", mut, catcher, caught)
		}
	}
	for mut := range table {
		if !slices.Contains(digestMutations, mut) {
			t.Errorf("FORMAT.md lists %q, which the test does not try", mut)
		}
	}
	t.Logf("%d wrong readings of the digest rules tried, each caught by a vector", len(digestMutations))
}

var digestMutations = []string{
	"zero-bound-unlimited", "zero-bound-zero", "depth-bound-clamped", "negative-bound-as-default",
	"size-after-trim", "no-size-limit", "trim-unicode-space", "null-refused",
	"lone-surrogates", "no-depth-limit", "depth-from-zero", "no-duplicate-check",
	"no-fold-check", "ascii-fold", "lower-fold", "fold-kept-only",
	"no-number-check", "integer-number-check", "exclude-at-any-depth", "exclude-ignoring-case", "exclude-raw-name",
	"protocol-values-depth-unchecked", "protocol-values-duplicate-unchecked", "protocol-values-fold-unchecked", "protocol-values-number-unchecked",
	"parse-float-full-text", "size-in-characters", "any-value", "raw-control-characters", "invalid-escapes",
	"noncharacters-refused", "plus-sign", "leading-zeros", "trailing-commas", "upper-lower-fold",
	"unicode-13-fold", "unicode-16-fold", "sort-utf8", "long-control-escapes", "upper-hex-escapes",
	"escape-del-and-c1", "html-escapes", "escape-solidus", "escape-line-separators", "ascii-escapes",
	"exponent-from-1e16", "exponent-below-1e-4", "exponent-without-plus", "minus-zero-kept",
	"null-before-size", "object-before-trim",
	// Readings no vector caught before the vectors for issue 25.
	"protocol-values-syntax-unchecked", "encoded-surrogates-accepted", "raw-del-and-c1-refused",
	"upper-hex-input-refused", "empty-containers-no-level", "depth-hard-cap-1000",
	// Readings no vector caught before the vectors for issue 46.
	"bounds-checked-by-input", "fold-c-only", "absent-arguments-not-digested", "arguments-whitespace-counted",
}

// FuzzDigestModel: the package and the model agree on every input: both
// refuse it, or both write the same canonical text.
func FuzzDigestModel(f *testing.F) {
	for _, v := range readVectors(f).ArgsVectors {
		if v.Input != nil && len(*v.Input) < 200 {
			f.Add([]byte(*v.Input))
		}
	}
	for _, s := range []string{`{"a":[1.5e300,-2.5E-7,100e-2,0.000001,1e21,1e20,12345678901234567e-30,5e-324,2e-324]}`,
		`{"_meta":{"x":[{"k":1,"K":2}]},"a":{"b":{"c":{"d":{"e":{}}}}}}`, `{"\u00e9":"\u0000\u001f\ud83d\ude00","\ufb33":"<>&\/\u007f"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		const maxBytes, maxDepth = 1 << 16, 6
		want, wantOK := digestModel(in, maxBytes, maxDepth, "")
		got, err := canonjson.Append(nil, in, canonjson.Limits{MaxBytes: maxBytes, MaxDepth: maxDepth}, excludedArgs)
		if (err == nil) != wantOK || wantOK && string(got) != want {
			t.Fatalf("%q: package %s %v, model %s accepted %v", in, got, err, want, wantOK)
		}
	})
}
