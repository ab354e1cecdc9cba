package canonjson

import (
	"bytes"
	"slices"
)

// appendFlat is a fast path for the common arguments object: one level of
// members whose names and string values are printable ASCII without
// escapes, and whose other values are short integers, true, false or
// null. For such input the canonical form is the members sorted by name
// (byte order is UTF-16 order for ASCII) with the whitespace removed, and
// case folding is ASCII's, so it needs no JSON parser. It reports ok false
// for anything else, which the full path then reads; a fuzz test holds
// the two to the same output for every input.
func appendFlat(dst, args []byte, exclude []string) (out []byte, ok bool) {
	type member struct{ name, value []byte }
	var buf [16]member
	ms := buf[:0]
	i := skipWS(args, 1) // after '{'
	if i < len(args) && args[i] == '}' {
		if skipWS(args, i+1) != len(args) {
			return dst, false
		}
		return append(dst, "{}"...), true
	}
	for {
		name, j, ok := plainString(args, i)
		if !ok {
			return dst, false
		}
		j = skipWS(args, j)
		if j >= len(args) || args[j] != ':' {
			return dst, false
		}
		j = skipWS(args, j+1)
		var value []byte
		if value, j, ok = scalar(args, j); !ok {
			return dst, false
		}
		if len(ms) == cap(ms) {
			return dst, false // many members: the full path
		}
		ms = append(ms, member{name, value})
		j = skipWS(args, j)
		if j >= len(args) {
			return dst, false
		}
		if args[j] == '}' {
			if skipWS(args, j+1) != len(args) {
				return dst, false
			}
			break
		}
		if args[j] != ',' {
			return dst, false
		}
		i = skipWS(args, j+1)
	}
	// Names equal, or equal but for ASCII case: the full path says which.
	for a := range ms {
		for b := a + 1; b < len(ms); b++ {
			if bytes.EqualFold(ms[a].name, ms[b].name) {
				return dst, false
			}
		}
	}
	slices.SortFunc(ms, func(a, b member) int { return bytes.Compare(a.name, b.name) })
	out = append(dst, '{')
	first := true
	for _, m := range ms {
		if excluded(m.name, exclude) {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, '"')
		out = append(out, m.name...)
		out = append(out, '"', ':')
		out = append(out, m.value...)
	}
	return append(out, '}'), true
}

func excluded(name []byte, exclude []string) bool {
	for _, e := range exclude {
		if string(name) == e {
			return true
		}
	}
	return false
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// plainString reads a string at i of printable ASCII with no escape and
// returns its contents and the index after it.
func plainString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, i, false
		}
	}
	return nil, i, false
}

// scalar reads a value at i that is its own canonical form: a plain
// string (with its quotes), a short integer in JSON's grammar other than
// -0, true, false or null.
func scalar(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) {
		return nil, i, false
	}
	switch c := b[i]; {
	case c == '"':
		_, j, ok := plainString(b, i)
		return b[i:j], j, ok
	case c == 't' && bytes.HasPrefix(b[i:], []byte("true")):
		return b[i : i+4], i + 4, true
	case c == 'f' && bytes.HasPrefix(b[i:], []byte("false")):
		return b[i : i+5], i + 5, true
	case c == 'n' && bytes.HasPrefix(b[i:], []byte("null")):
		return b[i : i+4], i + 4, true
	case c == '-' || c >= '0' && c <= '9':
		j := i
		if b[j] == '-' {
			j++
		}
		start := j
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		n := j - start
		switch {
		case n == 0 || n > 15:
			return nil, i, false
		case b[start] == '0' && (n > 1 || start > i): // 01, or -0
			return nil, i, false
		case j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E'):
			return nil, i, false
		}
		return b[i:j], j, true
	}
	return nil, i, false
}
