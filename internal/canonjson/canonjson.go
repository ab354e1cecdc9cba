// Package canonjson writes the canonical form (RFC 8785) of a request's
// arguments object, refusing input that two Go readers could understand
// differently. docs/FORMAT.md ("Argument digest") is its specification.
//
// RFC 8785 alone is not enough for a digest that a Go handler relies on:
// encoding/json matches member names case-insensitively and keeps the last
// of two that fold together, and decoders into integer types keep digits a
// double drops. Append therefore refuses, at every depth, member names that
// are equal under encoding/json's case folding (Unicode 15.0.0's simple
// folding, that of Go's unicode tables), and numbers whose text does not
// denote exactly the value RFC 8785 writes for them.
//
// Append reads the input once: it validates, checks the rules and writes
// the canonical text in the same pass, reordering each object's members
// when the object closes.
package canonjson

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/stateseal/stateseal/internal/jsonscan"
)

// Errors. Each is returned wrapped, with where the problem is. Which one a
// refused input gets is not part of the format: an input can break several
// rules, and Append reports the first problem it meets in the text.
var (
	ErrTooLarge  = errors.New("arguments exceed the size limit")
	ErrTooDeep   = errors.New("arguments exceed the nesting limit")
	ErrSyntax    = errors.New("arguments are not valid JSON")
	ErrDuplicate = errors.New("arguments have a member name twice in one object")
	ErrNotObject = errors.New("arguments are not a JSON object")
	ErrFolded    = errors.New("arguments have member names equal under case folding")
	ErrNumber    = errors.New("arguments have a number a double cannot hold exactly")
)

// MaxDepthLimit is the largest nesting bound Limits may set.
const MaxDepthLimit = 10_000

// Limits bound the input. MaxBytes must be positive and MaxDepth between 1
// and MaxDepthLimit.
type Limits struct {
	MaxBytes int // length of the input, whitespace included
	MaxDepth int // nesting of objects and arrays; the arguments object is 1
}

// Append appends the canonical form of the arguments object args to dst,
// leaving out the top-level members named in exclude. Input that is empty,
// JSON whitespace only, or null is the empty object. Every rule applies to
// the excluded members' values too.
func Append(dst, args []byte, lim Limits, exclude []string) ([]byte, error) {
	if lim.MaxBytes <= 0 || lim.MaxDepth < 1 || lim.MaxDepth > MaxDepthLimit {
		return dst, fmt.Errorf("canonjson: limits %+v out of range", lim)
	}
	if len(args) > lim.MaxBytes {
		return dst, fmt.Errorf("%w: %d bytes, over %d", ErrTooLarge, len(args), lim.MaxBytes)
	}
	// Only JSON's own whitespace: bytes.TrimSpace would also take \v, \f
	// and Unicode spaces, and vouch for input no JSON parser accepts.
	args = bytes.Trim(args, " \t\r\n")
	if len(args) == 0 || string(args) == "null" {
		return append(dst, "{}"...), nil
	}
	if args[0] != '{' {
		return dst, ErrNotObject
	}
	c := canons.Get().(*canon)
	c.in, c.out, c.maxDepth, c.exclude = args, dst, lim.MaxDepth, exclude
	err := c.object(1)
	if err == nil && c.i != len(c.in) {
		err = c.syntax("data after the arguments object")
	}
	out := c.out
	c.in, c.out, c.exclude, c.i = nil, nil, nil, 0
	c.members, c.names, c.hashes = c.members[:0], c.names[:0], c.hashes[:0]
	canons.Put(c)
	if err != nil {
		return dst, err
	}
	return out, nil
}

var canons = sync.Pool{New: func() any { return new(canon) }}

// A canon holds the state of one Append, and scratch space reused across
// calls so that a call allocates nothing whatever the input.
type canon struct {
	in       []byte
	i        int // next byte of in
	out      []byte
	maxDepth int
	exclude  []string

	members []member   // members of the open objects, innermost last
	names   []byte     // their names, unescaped
	hashes  []hashedAt // fold hashes of one object, for large objects
	tmp     []byte     // an object's members while they are reordered
	order   []int32    // the order they are written in
	num     [3][]byte  // digits of a number, a short text of it, its double's digits
}

// A member is one member of an open object: its name in c.names and its
// text ("name":value) in c.out.
type member struct {
	name       [2]int // c.names[name[0]:name[1]]
	start, end int    // c.out[start:end]
	key        uint64 // an ASCII name's first 8 bytes, big-endian, for sorting
	ascii      bool   // the name is ASCII
	skip       bool   // a top-level member the digest leaves out
}

type hashedAt struct {
	h uint64
	i int
}

func (c *canon) syntax(what string) error {
	return fmt.Errorf("%w: %s at byte %d", ErrSyntax, what, c.i)
}

func (c *canon) ws() { c.i = jsonscan.SkipSpace(c.in, c.i) }

// value reads the value at c.i, which lies at the given depth (the depth
// of a container it opens).
func (c *canon) value(depth int) error {
	if c.i >= len(c.in) {
		return c.syntax("unexpected end")
	}
	switch b := c.in[c.i]; {
	case b == '{':
		return c.object(depth)
	case b == '[':
		return c.array(depth)
	case b == '"':
		return c.string(false)
	case b == '-' || '0' <= b && b <= '9':
		return c.number()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	}
	return c.syntax("invalid character")
}

func (c *canon) literal(lit string) error {
	if !bytes.HasPrefix(c.in[c.i:], []byte(lit)) {
		return c.syntax("invalid literal")
	}
	c.out = append(c.out, lit...)
	c.i += len(lit)
	return nil
}

func (c *canon) array(depth int) error {
	if depth > c.maxDepth {
		return fmt.Errorf("%w: deeper than %d at byte %d", ErrTooDeep, c.maxDepth, c.i)
	}
	c.i++
	c.out = append(c.out, '[')
	c.ws()
	if c.i < len(c.in) && c.in[c.i] == ']' {
		c.i++
		c.out = append(c.out, ']')
		return nil
	}
	for {
		if err := c.value(depth + 1); err != nil {
			return err
		}
		c.ws()
		if c.i >= len(c.in) {
			return c.syntax("unterminated array")
		}
		switch c.in[c.i] {
		case ',':
			c.i++
			c.out = append(c.out, ',')
			c.ws()
		case ']':
			c.i++
			c.out = append(c.out, ']')
			return nil
		default:
			return c.syntax("expected , or ] in array")
		}
	}
}

func (c *canon) object(depth int) error {
	if depth > c.maxDepth {
		return fmt.Errorf("%w: deeper than %d at byte %d", ErrTooDeep, c.maxDepth, c.i)
	}
	c.i++
	open := len(c.out)
	c.out = append(c.out, '{')
	first, names := len(c.members), len(c.names)
	c.ws()
	if c.i < len(c.in) && c.in[c.i] == '}' {
		c.i++
		c.out = append(c.out, '}')
		return nil
	}
	for {
		if c.i >= len(c.in) || c.in[c.i] != '"' {
			return c.syntax("expected a member name")
		}
		m := member{start: len(c.out)}
		m.name[0] = len(c.names)
		if err := c.string(true); err != nil {
			return err
		}
		m.name[1] = len(c.names)
		name := c.names[m.name[0]:m.name[1]]
		m.ascii = isASCII(name)
		if m.ascii {
			var k [8]byte
			copy(k[:], name)
			m.key = binary.BigEndian.Uint64(k[:])
		}
		m.skip = depth == 1 && slices.Contains(c.exclude, string(name))
		c.ws()
		if c.i >= len(c.in) || c.in[c.i] != ':' {
			return c.syntax("expected :")
		}
		c.i++
		c.out = append(c.out, ':')
		c.ws()
		if err := c.value(depth + 1); err != nil {
			return err
		}
		m.end = len(c.out)
		c.members = append(c.members, m)
		c.ws()
		if c.i >= len(c.in) {
			return c.syntax("unterminated object")
		}
		if c.in[c.i] == '}' {
			c.i++
			break
		}
		if c.in[c.i] != ',' {
			return c.syntax("expected , or } in object")
		}
		c.i++
		c.out = append(c.out, ',')
		c.ws()
	}
	err := c.close(open, c.members[first:])
	c.members, c.names = c.members[:first], c.names[:names]
	return err
}

// close checks the names of the object whose text starts at c.out[open]
// and whose members are ms, then writes them sorted, without the skipped
// ones, and the closing brace.
func (c *canon) close(open int, ms []member) error {
	if err := c.checkNames(ms); err != nil {
		return err
	}
	sorted, skip := true, false
	for i := range ms {
		skip = skip || ms[i].skip
		if i > 0 && sorted && c.cmp(&ms[i-1], &ms[i]) > 0 {
			sorted = false
		}
	}
	if sorted && !skip {
		c.out = append(c.out, '}')
		return nil
	}
	// Sort the members' indexes, by insertion: objects are mostly small,
	// and their members are mostly close to sorted.
	order := c.order[:0]
	for i := range ms {
		j := len(order)
		order = append(order, int32(i))
		if sorted {
			continue
		}
		for ; j > 0 && c.cmp(&ms[order[j-1]], &ms[i]) > 0; j-- {
			order[j] = order[j-1]
		}
		order[j] = int32(i)
	}
	c.order = order
	body := open + 1
	c.tmp = append(c.tmp[:0], c.out[body:]...)
	c.out = c.out[:body]
	comma := false
	for _, i := range order {
		m := &ms[i]
		if m.skip {
			continue
		}
		if comma {
			c.out = append(c.out, ',')
		}
		comma = true
		c.out = append(c.out, c.tmp[m.start-body:m.end-body]...)
	}
	c.out = append(c.out, '}')
	return nil
}

func (c *canon) name(m *member) []byte { return c.names[m.name[0]:m.name[1]] }

// cmp orders two members by their names' UTF-16 code units.
func (c *canon) cmp(a, b *member) int {
	if a.ascii && b.ascii {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return bytes.Compare(c.name(a), c.name(b))
	}
	return cmpUTF16(c.name(a), c.name(b))
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// checkNames refuses two names of one object that are equal, or equal
// under case folding. A small object's names are compared pairwise (two
// ASCII names of different lengths never fold together); a larger one's
// are hashed under folding, and names with equal hashes compared.
func (c *canon) checkNames(ms []member) error {
	if len(ms) <= 16 {
		for i := range ms {
			a := &ms[i]
			for j := i + 1; j < len(ms); j++ {
				b := &ms[j]
				if a.ascii && b.ascii && a.name[1]-a.name[0] != b.name[1]-b.name[0] {
					continue
				}
				if err := c.sameName(a, b); err != nil {
					return err
				}
			}
		}
		return nil
	}
	hs := c.hashes[:0]
	for i := range ms {
		hs = append(hs, hashedAt{foldHash(c.name(&ms[i])), i})
	}
	c.hashes = hs
	slices.SortFunc(hs, func(a, b hashedAt) int {
		switch {
		case a.h < b.h:
			return -1
		case a.h > b.h:
			return 1
		}
		return a.i - b.i
	})
	for i := 0; i < len(hs); {
		j := i + 1
		for j < len(hs) && hs[j].h == hs[i].h {
			j++
		}
		for a := i; a < j; a++ {
			for b := a + 1; b < j; b++ {
				if err := c.sameName(&ms[hs[a].i], &ms[hs[b].i]); err != nil {
					return err
				}
			}
		}
		i = j
	}
	return nil
}

func (c *canon) sameName(a, b *member) error {
	x, y := c.name(a), c.name(b)
	switch {
	case bytes.Equal(x, y):
		return fmt.Errorf("%w: %q", ErrDuplicate, x)
	case bytes.EqualFold(x, y):
		return fmt.Errorf("%w: %q and %q", ErrFolded, x, y)
	}
	return nil
}

// cmpUTF16 compares two UTF-8 strings by their UTF-16 code units, the
// order RFC 8785 sorts member names in. It differs from byte order only
// where a character at or above U+10000 (a surrogate pair in UTF-16, lead
// byte F0-F4 in UTF-8) meets one in U+E000-U+FFFF (lead byte EE or EF).
func cmpUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		// The strings agree before i, so i starts a character in both or
		// in neither; only lead bytes can be F0-F4 or EE-EF.
		if x >= 0xEE && y >= 0xEE && (x >= 0xF0) != (y >= 0xF0) {
			if x >= 0xF0 {
				return -1
			}
			return 1
		}
		if x < y {
			return -1
		}
		return 1
	}
	return len(a) - len(b)
}

// safe marks the bytes a string holds as themselves in both the input and
// the canonical text: printable ASCII but the quote and the backslash.
var safe = func() (t [256]bool) {
	for b := 0x20; b < 0x80; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// safeRun returns how many of b's first bytes are safe, counted eight at
// a time: it stops at the first word holding a byte that is not, which
// the caller then reads one byte at a time.
func safeRun(b []byte) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		// A byte under 0x20, equal to '"' or '\\', or at or above 0x80.
		ctl, quote, backslash := x-lo*0x20, (x^(lo*'"'))-lo, (x^(lo*'\\'))-lo
		if (ctl|quote|backslash)&^x&hi|x&hi != 0 {
			break
		}
	}
	return i
}

// string reads the string at c.i and writes it with RFC 8785's escapes.
// A member name is also appended, unescaped, to c.names.
func (c *canon) string(isName bool) error {
	in := c.in
	i := c.i + 1
	c.out = append(c.out, '"')
	for {
		j := i + safeRun(in[i:])
		for j < len(in) && safe[in[j]] {
			j++
		}
		c.out = append(c.out, in[i:j]...)
		if isName {
			c.names = append(c.names, in[i:j]...)
		}
		if j >= len(in) {
			c.i = j
			return c.syntax("unterminated string")
		}
		switch b := in[j]; {
		case b == '"':
			c.out = append(c.out, '"')
			c.i = j + 1
			return nil
		case b == '\\':
			r, n := jsonscan.Unescape(in[j:])
			if n == 0 {
				c.i = j
				return c.syntax("invalid escape")
			}
			c.out = appendEscaped(c.out, r)
			if isName {
				c.names = utf8.AppendRune(c.names, r)
			}
			i = j + n
		case b < 0x20:
			c.i = j
			return c.syntax("control character in a string")
		default:
			r, n := utf8.DecodeRune(in[j:])
			if r == utf8.RuneError && n == 1 {
				c.i = j
				return c.syntax("invalid UTF-8")
			}
			c.out = append(c.out, in[j:j+n]...)
			if isName {
				c.names = append(c.names, in[j:j+n]...)
			}
			i = j + n
		}
	}
}

// appendEscaped appends r as RFC 8785 writes it inside a string.
func appendEscaped(dst []byte, r rune) []byte {
	switch r {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if r < 0x20 {
		const hex = "0123456789abcdef"
		return append(dst, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xF])
	}
	return utf8.AppendRune(dst, r)
}
