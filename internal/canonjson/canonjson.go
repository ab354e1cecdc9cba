// Package canonjson writes the canonical form (RFC 8785) of a request's
// arguments object, refusing input that two Go readers could understand
// differently. docs/FORMAT.md ("Argument digest") is its specification.
//
// RFC 8785 alone is not enough for a digest that a Go handler relies on:
// encoding/json matches member names case-insensitively and keeps the last
// of two that fold together, and decoders into integer types keep digits a
// double drops. Append therefore refuses, at every depth, member names that
// are equal under encoding/json's case folding, and numbers whose text does
// not denote exactly the value RFC 8785 writes for them.
package canonjson

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// Errors. Each is returned wrapped, with where the problem is.
var (
	ErrTooLarge  = errors.New("arguments exceed the size limit")
	ErrTooDeep   = errors.New("arguments exceed the nesting limit")
	ErrSyntax    = errors.New("arguments are not valid JSON")
	ErrDuplicate = errors.New("arguments have a member name twice in one object")
	ErrNotObject = errors.New("arguments are not a JSON object")
	ErrFolded    = errors.New("arguments have member names equal under case folding")
	ErrNumber    = errors.New("arguments have a number a double cannot hold exactly")
)

// Limits bound the input. Both must be positive.
type Limits struct {
	MaxBytes int // length of the input, whitespace included
	MaxDepth int // nesting of objects and arrays; the arguments object is 1
}

// canonical are the options of jsontext's Value.Canonicalize, kept in a
// variable so that passing them allocates nothing.
var canonical = []jsontext.Options{
	jsontext.CanonicalizeRawInts(true),
	jsontext.CanonicalizeRawFloats(true),
	jsontext.ReorderRawObjects(true),
}

// canonicalChecked is canonical for input the walker has checked: names
// and UTF-8 need no second check.
var canonicalChecked = append([]jsontext.Options{
	jsontext.AllowDuplicateNames(true),
	jsontext.AllowInvalidUTF8(true),
}, canonical...)

// Append appends the canonical form of the arguments object args to dst,
// leaving out the top-level members named in exclude. Input that is empty,
// JSON whitespace only, or null is the empty object.
func Append(dst, args []byte, lim Limits, exclude []string) ([]byte, error) {
	if len(args) > lim.MaxBytes {
		return dst, fmt.Errorf("%w: %d bytes, over %d", ErrTooLarge, len(args), lim.MaxBytes)
	}
	// Only JSON's own whitespace: bytes.TrimSpace would also take \v, \f
	// and Unicode spaces, and vouch for input no JSON parser accepts.
	args = bytes.Trim(args, " \t\r\n")
	if len(args) == 0 || string(args) == "null" {
		return append(dst, "{}"...), nil
	}
	return appendObject(dst, args, lim, exclude)
}

func appendObject(dst, args []byte, lim Limits, exclude []string) ([]byte, error) {
	if args[0] != '{' {
		return dst, ErrNotObject
	}
	if !noFlat {
		if out, ok := appendFlat(dst, args, exclude); ok {
			return out, nil
		}
	}
	w := walkers.Get().(*walker)
	defer walkers.Put(w)
	kept, err := w.check(args, lim, exclude)
	if err != nil {
		return dst, err
	}
	src := args
	if kept != nil {
		src = kept
	}
	out, err := jsontext.AppendFormat(dst, src, canonicalChecked...)
	if err != nil {
		return dst, fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	return out, nil
}

// noFlat turns the fast path off, for the test that compares the two.
var noFlat bool

var walkers = sync.Pool{New: func() any { return new(walker) }}

// A walker holds the scratch space of one check, reused across calls so
// that a check allocates a constant number of times whatever the input.
type walker struct {
	rd     bytes.Buffer
	dec    jsontext.Decoder
	names  []byte  // folded names of the members of open objects
	ents   []entry // one per member of an open object
	frames []int   // per open container: the index of its first entry
	spans  []span  // top-level members kept, when some are excluded
	num    [3][]byte
	tmp    []byte
}

type entry struct {
	h      uint64
	off, n int
}

type span struct {
	start, end int64
	skip       bool // a member left out
}

var seed = maphash.MakeSeed()

// check walks args once, validating it and applying the rules RFC 8785
// leaves open. If a top-level member is excluded, it returns the object
// rebuilt without it; otherwise nil.
func (w *walker) check(args []byte, lim Limits, exclude []string) ([]byte, error) {
	w.rd = *bytes.NewBuffer(args)
	w.dec.Reset(&w.rd)
	defer func() { // keep no reference to args in the pool
		w.rd = bytes.Buffer{}
		w.dec.Reset(&w.rd)
	}()
	w.names, w.ents, w.frames, w.spans = w.names[:0], w.ents[:0], w.frames[:0], w.spans[:0]
	excluded := false
	d := &w.dec
	for {
		depth := d.StackDepth()
		k, n := d.StackIndex(depth)
		isName := k == '{' && n%2 == 0
		switch kind := d.PeekKind(); kind {
		case '{', '[':
			if _, err := d.ReadToken(); err != nil {
				return nil, w.syntax(err)
			}
			if d.StackDepth() > lim.MaxDepth {
				return nil, fmt.Errorf("%w: deeper than %d at %s", ErrTooDeep, lim.MaxDepth, d.StackPointer())
			}
			w.frames = append(w.frames, len(w.ents))
		case '}', ']':
			if _, err := d.ReadToken(); err != nil {
				return nil, w.syntax(err)
			}
			start := w.frames[len(w.frames)-1]
			w.frames = w.frames[:len(w.frames)-1]
			if kind == '}' {
				if err := w.closeObject(start); err != nil {
					return nil, err
				}
			}
		case '"':
			v, err := d.ReadValue()
			if err != nil {
				return nil, w.syntax(err)
			}
			if isName {
				skip, err := w.name(v, depth, exclude)
				if err != nil {
					return nil, err
				}
				if skip {
					// Left out of the digest, but its value is read
					// and checked like any other.
					excluded = true
					w.spans[len(w.spans)-1].skip = true
				}
				continue // a name completes no member
			}
		case '0':
			v, err := d.ReadValue()
			if err != nil {
				return nil, w.syntax(err)
			}
			if err := w.number(v); err != nil {
				return nil, fmt.Errorf("%w: %s at %s", err, v, d.StackPointer())
			}
		default: // literals, and the invalid kind, whose error ReadValue returns
			if _, err := d.ReadValue(); err != nil {
				return nil, w.syntax(err)
			}
		}
		switch d.StackDepth() {
		case 0:
			if _, err := d.ReadToken(); err != io.EOF {
				return nil, fmt.Errorf("%w: data after the arguments object", ErrSyntax)
			}
			if !excluded {
				return nil, nil
			}
			return w.rebuild(args), nil
		case 1:
			// A member of the arguments object just ended.
			if s := len(w.spans) - 1; s >= 0 && w.spans[s].end < 0 {
				w.spans[s].end = d.InputOffset()
			}
		}
	}
}

func (w *walker) syntax(err error) error {
	if errors.Is(err, jsontext.ErrDuplicateName) {
		return fmt.Errorf("%w: %v", ErrDuplicate, err)
	}
	return fmt.Errorf("%w: %v", ErrSyntax, err)
}

// name records a member name of the object at depth and reports whether
// it is a top-level member to leave out.
func (w *walker) name(quoted []byte, depth int, exclude []string) (skip bool, err error) {
	w.tmp, err = jsontext.AppendUnquote(w.tmp[:0], quoted)
	if err != nil {
		return false, w.syntax(err)
	}
	// Every name counts for the folding rule, those left out too: with
	// "_meta" and "_Meta" both present, a reader folding names would see
	// one member where the digest keeps the other.
	w.addName(w.tmp)
	if depth == 1 {
		end := w.dec.InputOffset()
		w.spans = append(w.spans, span{start: end - int64(len(quoted)), end: -1})
		if slices.Contains(exclude, string(w.tmp)) {
			return true, nil
		}
	}
	return false, nil
}

func (w *walker) addName(name []byte) {
	off := len(w.names)
	w.names = appendFolded(w.names, name)
	folded := w.names[off:]
	w.ents = append(w.ents, entry{h: maphash.Bytes(seed, folded), off: off, n: len(folded)})
}

// closeObject checks the names of the object whose entries start at start,
// then forgets them.
func (w *walker) closeObject(start int) error {
	seg := w.ents[start:]
	if len(seg) > 1 {
		slices.SortFunc(seg, func(a, b entry) int {
			switch {
			case a.h < b.h:
				return -1
			case a.h > b.h:
				return 1
			}
			return 0
		})
		for i := 1; i < len(seg); i++ {
			a, b := seg[i-1], seg[i]
			if a.h == b.h && bytes.Equal(w.names[a.off:a.off+a.n], w.names[b.off:b.off+b.n]) {
				return fmt.Errorf("%w: %q in the object at %s", ErrFolded, w.names[a.off:a.off+a.n], w.dec.StackPointer())
			}
		}
	}
	for _, e := range seg { // sorting moved the first name
		w.names = w.names[:min(len(w.names), e.off)]
	}
	w.ents = w.ents[:start]
	return nil
}

// rebuild returns the arguments object with only the kept members.
func (w *walker) rebuild(args []byte) []byte {
	out := append(w.tmp[:0], '{')
	for _, s := range w.spans {
		if s.skip {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, args[s.start:s.end]...)
	}
	out = append(out, '}')
	w.tmp = out
	return out
}
