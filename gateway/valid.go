package gateway

import (
	"bytes"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/stateseal/stateseal/internal/jsonscan"
)

// validJSON reports whether b is one JSON value as jsontext.Value.IsValid
// reads it with its defaults (RFC 7493): RFC 8259's grammar, valid UTF-8
// with every \u escape of a surrogate paired, no name twice in an object
// at any depth (names compared unescaped), at most 10,000 nested arrays
// and objects, blanks around it. It is the gateway's strict reading of
// every body and message, written out so that a request's path runs
// this small loop rather than the general decoder: under load the
// gateway's own work runs with cold caches, and jsontext's validation
// was the largest part of it (docs/BENCHMARKS.md). FuzzGatewayParsers
// and TestValidJSON hold it to jsontext's answer.
func validJSON(b []byte) bool {
	// The containers open at i: for an object, where its names start in
	// names, and a set of them once there are many.
	type frame struct {
		object bool
		start  int // of its names in names
		size   int // their bytes
		set    map[string]struct{}
	}
	var frameBuf [16]frame
	var nameBuf [manyNames][]byte
	stack, names := frameBuf[:0], nameBuf[:0]
	i := jsonscan.SkipSpace(b, 0)
value:
	if i >= len(b) {
		return false
	}
	switch c := b[i]; {
	case c == '{' || c == '[':
		if len(stack) == maxDepth {
			return false
		}
		stack = append(stack, frame{object: c == '{', start: len(names)})
		i = jsonscan.SkipSpace(b, i+1)
		if i < len(b) && b[i] == closing(c) {
			stack = stack[:len(stack)-1]
			i++
			goto after
		}
		if c == '[' {
			goto value
		}
		goto name
	case c == '"':
		end, _, ok := scanString(b, i)
		if !ok {
			return false
		}
		i = end
	case c == 't':
		if !bytes.HasPrefix(b[i:], []byte("true")) {
			return false
		}
		i += 4
	case c == 'f':
		if !bytes.HasPrefix(b[i:], []byte("false")) {
			return false
		}
		i += 5
	case c == 'n':
		if !bytes.HasPrefix(b[i:], []byte("null")) {
			return false
		}
		i += 4
	default:
		end, ok := scanNumber(b, i)
		if !ok {
			return false
		}
		i = end
	}
after:
	i = jsonscan.SkipSpace(b, i)
	if len(stack) == 0 {
		return i == len(b)
	}
	if i >= len(b) {
		return false
	}
	switch object := stack[len(stack)-1].object; b[i] {
	case ',':
		i = jsonscan.SkipSpace(b, i+1)
		if object {
			goto name
		}
		goto value
	case '}', ']':
		if (b[i] == '}') != object {
			return false
		}
		names = names[:stack[len(stack)-1].start]
		stack = stack[:len(stack)-1]
		i++
		goto after
	}
	return false
name:
	{
		if i >= len(b) || b[i] != '"' {
			return false
		}
		end, escaped, ok := scanString(b, i)
		if !ok {
			return false
		}
		n := b[i+1 : end-1]
		if escaped {
			u, err := jsontext.AppendUnquote(nil, b[i:end])
			if err != nil {
				return false
			}
			n = u
		}
		top := &stack[len(stack)-1]
		if top.set != nil {
			if _, dup := top.set[string(n)]; dup {
				return false
			}
			top.set[string(n)] = struct{}{}
		} else {
			for _, m := range names[top.start:] {
				if bytes.Equal(m, n) {
					return false
				}
			}
			names = append(names, n)
			top.size += len(n)
			if count := len(names) - top.start; count > manyNames || top.size > manyNameBytes {
				// A set from here on, as jsontext switches: a linear search
				// per name would make an object of many members cost their
				// square.
				top.set = make(map[string]struct{}, count)
				for _, m := range names[top.start:] {
					top.set[string(m)] = struct{}{}
				}
				names = names[:top.start]
			}
		}
		i = jsonscan.SkipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = jsonscan.SkipSpace(b, i+1)
		goto value
	}
}

const (
	// maxDepth is jsontext's bound on nested arrays and objects.
	maxDepth = 10000
	// manyNames and manyNameBytes are the count and the size past which
	// an object's names go in a set: jsontext's.
	manyNames, manyNameBytes = 64, 1024
)

func closing(open byte) byte {
	if open == '{' {
		return '}'
	}
	return ']'
}

// scanString checks the string that starts at b[i] (a quote) and returns
// the index past its closing quote, and whether it has an escape.
func scanString(b []byte, i int) (end int, escaped, ok bool) {
	i++
	for i < len(b) {
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, true
		case c == '\\':
			escaped = true
			_, n := jsonscan.Unescape(b[i:])
			if n == 0 {
				return 0, false, false
			}
			i += n
		case c < ' ':
			return 0, false, false
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return 0, false, false
			}
			i += n
		}
	}
	return 0, false, false
}

// scanNumber checks the number that starts at b[i], RFC 8259's grammar,
// and returns the index past it.
func scanNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
