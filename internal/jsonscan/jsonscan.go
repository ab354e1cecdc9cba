// Package jsonscan holds the byte-level steps of reading JSON that more
// than one strict reader in this module takes: skipping JSON's
// whitespace and decoding a string's escapes. internal/canonjson (the
// argument digest) and the gateway's validator both read with them, so
// that the two cannot come to read a blank or an escape differently.
package jsonscan

// SkipSpace returns the index of the first byte of b at or after i that
// is not JSON's whitespace (RFC 8259: space, tab, CR, LF; not \v, \f or
// Unicode spaces), or len(b).
func SkipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// Unescape decodes the escape at the start of s (a backslash) and
// returns the character and the bytes it took, or 0 bytes if it is not
// a valid escape: an unknown letter, short hex, or a surrogate that is
// not part of a pair (a high one followed by a \u escape of a low one).
func Unescape(s []byte) (rune, int) {
	if len(s) < 2 {
		return 0, 0
	}
	switch s[1] {
	case '"', '\\', '/':
		return rune(s[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r, ok := hex4(s[2:])
		switch {
		case !ok:
			return 0, 0
		case r < 0xD800 || r >= 0xE000:
			return r, 6
		case r >= 0xDC00: // a low surrogate first
			return 0, 0
		}
		if len(s) < 12 || s[6] != '\\' || s[7] != 'u' {
			return 0, 0
		}
		lo, ok := hex4(s[8:])
		if !ok || lo < 0xDC00 || lo >= 0xE000 {
			return 0, 0
		}
		return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12
	}
	return 0, 0
}

func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, b := range s[:4] {
		switch {
		case '0' <= b && b <= '9':
			b -= '0'
		case 'a' <= b && b <= 'f':
			b -= 'a' - 10
		case 'A' <= b && b <= 'F':
			b -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(b)
	}
	return r, true
}
