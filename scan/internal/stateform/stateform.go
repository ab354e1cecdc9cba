// Package stateform reads the outward shape of a requestState, without
// knowing any server's token format: is it base64 (in which alphabet,
// padded or not), segments joined by dots (as JWTs and the TypeScript
// SDK's codec write them), or plain text; what its bytes decode to; and
// writes changed copies of it in the same spelling.
//
// Every change is made to the decoded bytes and re-encoded canonically in
// the state's own alphabet and padding, so a server that decodes strictly
// sees exactly the change made, never a spelling it may refuse for
// another reason (base64's spare bits are never the change).
package stateform

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"sort"
	"strings"
	"unicode/utf8"
)

// An Encoding is one of base64's four common spellings.
type Encoding struct {
	URL    bool // the URL-safe alphabet (- and _)
	Padded bool // with = padding
}

func (e Encoding) enc() *base64.Encoding {
	switch {
	case e.URL && e.Padded:
		return base64.URLEncoding
	case e.URL:
		return base64.RawURLEncoding
	case e.Padded:
		return base64.StdEncoding
	default:
		return base64.RawStdEncoding
	}
}

func (e Encoding) String() string {
	s := "base64"
	if e.URL {
		s += "url"
	}
	if !e.Padded {
		s += " unpadded"
	}
	return s
}

// A Segment is one part of a state: base64 text with its bytes, or a
// literal (a version prefix, plain text).
type Segment struct {
	Text  string
	Bytes []byte    // decoded, when Enc is not nil
	Enc   *Encoding // nil: a literal
}

// A Form is a state taken apart.
type Form struct {
	Segs []Segment
}

// minSegment is the shortest text read as base64: shorter ones are
// literals ("v1").
const minSegment = 4

// Parse takes s apart: the whole string as base64 if it is canonical
// base64 in one of the four spellings, else its dot-separated segments,
// each base64 or a literal.
func Parse(s string) Form {
	if seg, ok := decode(s); ok {
		return Form{Segs: []Segment{seg}}
	}
	var f Form
	for _, part := range strings.Split(s, ".") {
		if seg, ok := decode(part); ok {
			f.Segs = append(f.Segs, seg)
		} else {
			f.Segs = append(f.Segs, Segment{Text: part})
		}
	}
	return f
}

// decode reads t as canonical base64 in the first spelling that encodes
// its bytes back to exactly t.
func decode(t string) (Segment, bool) {
	if len(t) < minSegment {
		return Segment{}, false
	}
	hasURL := strings.ContainsAny(t, "-_")
	hasStd := strings.ContainsAny(t, "+/")
	if hasURL && hasStd {
		return Segment{}, false
	}
	padded := strings.HasSuffix(t, "=")
	for _, url := range []bool{true, false} {
		if (url && hasStd) || (!url && hasURL) {
			continue
		}
		e := Encoding{URL: url, Padded: padded}
		b, err := e.enc().Strict().DecodeString(t)
		if err != nil || e.enc().EncodeToString(b) != t {
			continue
		}
		return Segment{Text: t, Bytes: b, Enc: &e}, true
	}
	return Segment{}, false
}

// String joins the segments back.
func (f Form) String() string {
	parts := make([]string, len(f.Segs))
	for i, s := range f.Segs {
		parts[i] = s.Text
	}
	return strings.Join(parts, ".")
}

// Decoded reports whether some segment is base64.
func (f Form) Decoded() bool {
	for _, s := range f.Segs {
		if s.Enc != nil {
			return true
		}
	}
	return false
}

// with returns f with segment i's bytes replaced and re-encoded in its
// own spelling.
func (f Form) with(i int, b []byte) string {
	g := Form{Segs: append([]Segment(nil), f.Segs...)}
	g.Segs[i].Bytes = b
	g.Segs[i].Text = g.Segs[i].Enc.enc().EncodeToString(b)
	return g.String()
}

// Replace returns f with segment i's bytes replaced by b, re-encoded in
// its own spelling; i must be a base64 segment.
func (f Form) Replace(i int, b []byte) string { return f.with(i, b) }

// withText returns f with segment i's text replaced.
func (f Form) withText(i int, t string) string {
	g := Form{Segs: append([]Segment(nil), f.Segs...)}
	g.Segs[i].Text = t
	return g.String()
}

// A Variant is a changed copy of a state and what was changed.
type Variant struct {
	State string
	What  string
}

// Tampered returns copies of f with one bit flipped in the decoded bytes
// of each base64 segment at its start, middle and end (one character
// changed at those places of plain text when nothing decodes), at most
// max of them, each different from f.
func (f Form) Tampered(max int) []Variant {
	var out []Variant
	orig := f.String()
	add := func(s, what string) {
		if s != orig && len(out) < max {
			out = append(out, Variant{s, what})
		}
	}
	for i, s := range f.Segs {
		if s.Enc == nil || len(s.Bytes) == 0 {
			continue
		}
		for _, p := range positions(len(s.Bytes)) {
			b := bytes.Clone(s.Bytes)
			b[p.at] ^= 0x01
			add(f.with(i, b), "segment "+itoa(i+1)+": bit 0 of decoded byte "+itoa(p.at)+" ("+p.name+") flipped")
		}
	}
	if f.Decoded() {
		return out
	}
	// Plain text: the first, middle and last letter or digit, so that a
	// text ending in punctuation ("}") still gets its three changes.
	for i, s := range f.Segs {
		var at []int
		for j := 0; j < len(s.Text); j++ {
			if alnum(s.Text[j]) {
				at = append(at, j)
			}
		}
		for _, p := range positions(len(at)) {
			if t, ok := changeChar(s.Text, at[p.at]); ok {
				add(f.withText(i, t), "character "+itoa(at[p.at])+" ("+p.name+" letter or digit) changed")
			}
		}
	}
	return out
}

func alnum(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// minTag is the shortest segment read as a tag: 16 characters (12
// bytes of base64, 8 of hex), shorter than any MAC worth the name.
const minTag = 16

// Tags lists the segments of f that look like a tag: in a state of two
// or more segments, one of at least minTag characters of the base64 or
// hex alphabets whose bytes do not read as text.
func (f Form) Tags() []int {
	if len(f.Segs) < 2 {
		return nil
	}
	var out []int
	for i, s := range f.Segs {
		if len(s.Text) < minTag || strings.Trim(s.Text, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_=") != "" {
			continue
		}
		if s.Enc != nil && printable(s.Bytes) {
			continue
		}
		out = append(out, i)
	}
	return out
}

// TagCuts returns copies of f with each tag (Tags) shortened as text,
// never re-encoded: emptied, dropped with its separator, cut by one
// character (padding aside) and cut to half its characters; then, when
// f has readable content, the same with that content forged. A server
// that checks a tag over the length the client sent (a prefix
// comparison) takes them; a strict one refuses every one.
func (f Form) TagCuts() []Variant {
	orig := f.String()
	var out []Variant
	seen := map[string]bool{orig: true}
	add := func(s, what string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, Variant{s, what})
		}
	}
	forms := []struct {
		f    Form
		what string
	}{{f, ""}}
	if v, ok := f.Forged(); ok {
		if g := Parse(v.State); len(g.Segs) == len(f.Segs) {
			forms = append(forms, struct {
				f    Form
				what string
			}{g, v.What + ", and "})
		}
	}
	for _, fm := range forms {
		g := fm.f
		for _, i := range f.Tags() {
			t := g.Segs[i].Text
			bare := strings.TrimRight(t, "=")
			n := itoa(i + 1)
			add(g.withText(i, ""), fm.what+"segment "+n+" (a tag) emptied")
			add(g.without(i), fm.what+"segment "+n+" (a tag) dropped with its separator")
			add(g.withText(i, bare[:len(bare)-1]), fm.what+"segment "+n+" (a tag) cut by one character")
			add(g.withText(i, bare[:len(bare)/2]), fm.what+"segment "+n+" (a tag) cut to half its characters")
		}
	}
	return out
}

// without returns f with segment i and its separator left out.
func (f Form) without(i int) string {
	g := Form{Segs: append(append([]Segment(nil), f.Segs[:i]...), f.Segs[i+1:]...)}
	return g.String()
}

type position struct {
	at   int
	name string
}

func positions(n int) []position {
	if n == 0 {
		return nil
	}
	ps := []position{{0, "start"}}
	if n > 2 {
		ps = append(ps, position{n / 2, "middle"})
	}
	if n > 1 {
		ps = append(ps, position{n - 1, "end"})
	}
	return ps
}

// changeChar changes the character at i, or the nearest letter or digit
// after it, to another of its kind.
func changeChar(s string, i int) (string, bool) {
	b := []byte(s)
	for j := i; j < len(b); j++ {
		c := b[j]
		switch {
		case c >= '0' && c <= '8', c >= 'a' && c <= 'y', c >= 'A' && c <= 'Y':
			b[j] = c + 1
		case c == '9':
			b[j] = '0'
		case c == 'z':
			b[j] = 'a'
		case c == 'Z':
			b[j] = 'A'
		default:
			continue
		}
		return string(b), true
	}
	return "", false
}

// Truncated returns shorter copies of f: the last decoded byte dropped
// (re-encoded canonically), and the text cut in half.
func (f Form) Truncated() []Variant {
	orig := f.String()
	var out []Variant
	for i := len(f.Segs) - 1; i >= 0; i-- {
		s := f.Segs[i]
		if s.Enc != nil && len(s.Bytes) > 1 {
			out = append(out, Variant{f.with(i, s.Bytes[:len(s.Bytes)-1]), "segment " + itoa(i+1) + ": last decoded byte dropped"})
			break
		}
	}
	if len(out) == 0 && len(orig) > 1 {
		out = append(out, Variant{orig[:len(orig)-1], "last character dropped"})
	}
	if len(orig) > 1 {
		out = append(out, Variant{orig[:len(orig)/2], "cut to its first half"})
	}
	return out
}

// Extended returns longer copies of f: one zero byte appended to the
// decoded bytes of its last base64 segment, and n of them (re-encoded
// canonically); for plain text, "x" and n of them appended.
func (f Form) Extended(n int) []Variant {
	for i := len(f.Segs) - 1; i >= 0; i-- {
		s := f.Segs[i]
		if s.Enc != nil {
			return []Variant{
				{f.with(i, append(bytes.Clone(s.Bytes), 0)), "segment " + itoa(i+1) + ": a zero byte appended to its decoded bytes"},
				{f.with(i, append(bytes.Clone(s.Bytes), make([]byte, n)...)), "segment " + itoa(i+1) + ": " + itoa(n) + " zero bytes appended to its decoded bytes"},
			}
		}
	}
	s := f.String()
	return []Variant{{s + "x", "\"x\" appended"}, {s + strings.Repeat("x", n), itoa(n) + " bytes appended"}}
}

// Respelled returns copies of f with the same decoded bytes spelled
// otherwise: the other alphabet, padding added or removed, a spare bit
// set. A strict decoder refuses each; a lenient one reads the same
// bytes, so a replay guard keyed by the string sees a new state.
func (f Form) Respelled() []Variant {
	orig := f.String()
	var out []Variant
	add := func(i int, t, what string) {
		if s := f.withText(i, t); s != orig {
			out = append(out, Variant{s, "segment " + itoa(i+1) + ": " + what})
		}
	}
	for i, s := range f.Segs {
		if s.Enc == nil {
			continue
		}
		t := s.Text
		if s.Enc.URL && strings.ContainsAny(t, "-_") {
			add(i, strings.NewReplacer("-", "+", "_", "/").Replace(t), "standard alphabet")
		} else if !s.Enc.URL && strings.ContainsAny(t, "+/") {
			add(i, strings.NewReplacer("+", "-", "/", "_").Replace(t), "URL-safe alphabet")
		}
		bare := strings.TrimRight(t, "=")
		if s.Enc.Padded {
			add(i, bare, "padding removed")
		} else if len(bare)%4 != 0 {
			add(i, bare+strings.Repeat("=", 4-len(bare)%4), "padding added")
		}
		if len(bare)%4 != 0 {
			alpha := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
			if s.Enc.URL {
				alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
			}
			last := strings.IndexByte(alpha, bare[len(bare)-1])
			if last >= 0 {
				add(i, bare[:len(bare)-1]+string(alpha[last|1])+t[len(bare):], "a spare bit set")
			}
		}
	}
	return out
}

// Text is the readable text of f: the whole state if it is printable and
// nothing decodes, else each decoded segment that is printable text, else
// runs of JSON-like characters inside the decoded bytes (minRun).
func (f Form) Text() []string {
	var out []string
	if !f.Decoded() {
		if s := f.String(); printable([]byte(s)) {
			return []string{s}
		}
		return nil
	}
	for _, s := range f.Segs {
		if s.Enc == nil {
			continue
		}
		if printable(s.Bytes) {
			out = append(out, string(s.Bytes))
			continue
		}
		out = append(out, runs(s.Bytes)...)
	}
	return out
}

// A run of JSON-like characters inside binary bytes is text when it is
// at least minRun long and has a JSON member's `":`, or at least
// minBareRun long. Random bytes make a run of 10 about once in 3,800
// states of 120 bytes (72 of the 256 byte values are JSON-like): a
// random token would be reported readable. With the rule, about one in
// five million is (2 of 10,000,000 crypto/rand draws).
const (
	minRun     = 10
	minBareRun = 16
)

func runs(b []byte) []string {
	var out []string
	start := -1
	for i := 0; i <= len(b); i++ {
		if i < len(b) && runChar(b[i]) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 && (i-start >= minBareRun || i-start >= minRun && bytes.Contains(b[start:i], []byte(`":`))) {
			out = append(out, string(b[start:i]))
		}
		start = -1
	}
	return out
}

func runChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(` "{}:,._-@`, c) >= 0
}

func printable(b []byte) bool {
	if len(b) < 2 || !utf8.Valid(b) {
		return false
	}
	n := 0
	for _, r := range string(b) {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r == utf8.RuneError {
			return false
		}
		n++
	}
	return n >= 2
}

// Forged returns f with its readable content edited and re-encoded the
// way it was: the first leaf of a JSON object or array changed (a number
// incremented, a string altered, a boolean negated), or a digit or
// letter of plain text changed. ok is false when f has nothing readable.
func (f Form) Forged() (Variant, bool) {
	if !f.Decoded() {
		s := f.String()
		if !printable([]byte(s)) {
			return Variant{}, false
		}
		if t, what, ok := forgeJSON([]byte(s)); ok {
			return Variant{string(t), "JSON " + what}, true
		}
		if t, ok := changeChar(s, 0); ok {
			return Variant{t, "text edited"}, true
		}
		return Variant{}, false
	}
	for i, s := range f.Segs {
		if s.Enc == nil {
			continue
		}
		if t, what, ok := forgeJSON(s.Bytes); ok {
			return Variant{f.with(i, t), "segment " + itoa(i+1) + ": JSON " + what + ", re-encoded " + s.Enc.String()}, true
		}
		if printable(s.Bytes) {
			if t, ok := changeChar(string(s.Bytes), 0); ok {
				return Variant{f.with(i, []byte(t)), "segment " + itoa(i+1) + ": text edited, re-encoded " + s.Enc.String()}, true
			}
		}
	}
	return Variant{}, false
}

// forgeJSON changes the first leaf of a JSON object or array (keys in
// sorted order, depth first).
func forgeJSON(b []byte) ([]byte, string, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil || d.More() {
		return nil, "", false
	}
	switch v.(type) {
	case map[string]any, []any:
	default:
		return nil, "", false
	}
	what, ok := forgeLeaf(&v, "")
	if !ok {
		return nil, "", false
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, "", false
	}
	return out, what, true
}

func forgeLeaf(v *any, path string) (string, bool) {
	switch x := (*v).(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			e := x[k]
			if what, ok := forgeLeaf(&e, path+"."+k); ok {
				x[k] = e
				return what, true
			}
		}
	case []any:
		for i := range x {
			if what, ok := forgeLeaf(&x[i], path+"["+itoa(i)+"]"); ok {
				return what, true
			}
		}
	case json.Number:
		if n, err := x.Int64(); err == nil {
			*v = json.Number(itoa64(n + 1))
		} else if fl, err := x.Float64(); err == nil {
			*v = fl + 1
		} else {
			return "", false
		}
		return "number " + path + " incremented", true
	case string:
		if t, ok := changeChar(x, 0); ok {
			*v = t
		} else {
			*v = x + "x"
		}
		return "string " + path + " changed", true
	case bool:
		*v = !x
		return "boolean " + path + " negated", true
	}
	return "", false
}

func itoa(i int) string { return itoa64(int64(i)) }

func itoa64(i int64) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// A Forgery is the readable state with one JSON value edited. Consent is
// true when the value reads as an answer (a boolean, or a word such as
// pending, decline or no) and was set to an affirmative one (true,
// accept, yes): the state then says the user agreed.
type Forgery struct {
	Variant
	Consent bool
}

// negative are the answer-shaped words a forgery sets to yes, lower
// case, each with its affirmative (accept when it has none of its
// own). A value that already says yes is edited like any other.
var negative = map[string]string{"decline": "accept", "declined": "accepted", "deny": "allow", "denied": "allowed",
	"reject": "accept", "rejected": "accepted", "cancel": "accept", "cancelled": "accepted", "canceled": "accepted",
	"no": "yes", "n": "y", "false": "true", "pending": "accept", "none": "accept", "unconfirmed": "confirmed",
	"unanswered": "accept", "waiting": "accept", "asked": "accept"}

// ForgedLeaves returns copies of f, each with one value of its readable
// JSON edited and encoded back the way it was: first the answer-shaped
// values (booleans, words like pending or decline) in path order, set
// to yes where they say no; then every other value in path order (a
// number incremented, a string altered), at most max of them.
func (f Form) ForgedLeaves(max int) []Forgery {
	type leaf struct {
		seg     int // -1: the whole text
		path    string
		consent bool
	}
	var docs []struct {
		seg int
		b   []byte
	}
	if !f.Decoded() {
		docs = append(docs, struct {
			seg int
			b   []byte
		}{-1, []byte(f.String())})
	} else {
		for i, s := range f.Segs {
			if s.Enc != nil {
				docs = append(docs, struct {
					seg int
					b   []byte
				}{i, s.Bytes})
			}
		}
	}
	var consent, other []leaf
	for _, d := range docs {
		v, ok := parseJSON(d.b)
		if !ok {
			continue
		}
		walkLeaves(v, "", func(path string, x any) {
			l := leaf{seg: d.seg, path: path}
			switch x := x.(type) {
			case bool:
				l.consent = !x
			case string:
				_, l.consent = negative[strings.ToLower(x)]
			}
			if l.consent {
				consent = append(consent, l)
			} else {
				other = append(other, l)
			}
		})
	}
	var out []Forgery
	for _, l := range append(consent, other...) {
		if len(out) >= max {
			break
		}
		var src []byte
		if l.seg < 0 {
			src = []byte(f.String())
		} else {
			src = f.Segs[l.seg].Bytes
		}
		v, _ := parseJSON(src)
		what, ok := editAt(&v, "", l.path, l.consent)
		if !ok {
			continue
		}
		t, err := json.Marshal(v)
		if err != nil {
			continue
		}
		if l.seg < 0 {
			out = append(out, Forgery{Variant{string(t), "JSON " + what}, l.consent})
		} else {
			out = append(out, Forgery{Variant{f.with(l.seg, t), "segment " + itoa(l.seg+1) + ": JSON " + what + ", re-encoded " + f.Segs[l.seg].Enc.String()}, l.consent})
		}
	}
	return out
}

func parseJSON(b []byte) (any, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil || d.More() {
		return nil, false
	}
	switch v.(type) {
	case map[string]any, []any:
		return v, true
	}
	return nil, false
}

// walkLeaves calls fn for each leaf of v, keys in sorted order, depth
// first.
func walkLeaves(v any, path string, fn func(string, any)) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walkLeaves(x[k], path+"."+k, fn)
		}
	case []any:
		for i := range x {
			walkLeaves(x[i], path+"["+itoa(i)+"]", fn)
		}
	case nil:
	default:
		fn(path, x)
	}
}

// editAt edits the leaf at want: to yes when consent, else as
// forgeLeaf does.
func editAt(v *any, path, want string, consent bool) (string, bool) {
	switch x := (*v).(type) {
	case map[string]any:
		for k, e := range x {
			if p := path + "." + k; p == want || strings.HasPrefix(want, p+".") || strings.HasPrefix(want, p+"[") {
				what, ok := editAt(&e, p, want, consent)
				x[k] = e
				return what, ok
			}
		}
	case []any:
		for i := range x {
			if p := path + "[" + itoa(i) + "]"; p == want || strings.HasPrefix(want, p+".") || strings.HasPrefix(want, p+"[") {
				return editAt(&x[i], p, want, consent)
			}
		}
	default:
		if path != want {
			return "", false
		}
		if consent {
			switch x := x.(type) {
			case bool:
				*v = true
				return "boolean " + path + " set to true", true
			case string:
				yes := negative[strings.ToLower(x)]
				*v = yes
				return "string " + path + " set to " + strconvQuote(yes), true
			}
		}
		return forgeLeaf(v, path)
	}
	return "", false
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }
