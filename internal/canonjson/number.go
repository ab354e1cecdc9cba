package canonjson

import (
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// number reads the number at c.i, refuses it unless its text denotes
// exactly the decimal that RFC 8785 writes for it (the shortest one that
// rounds to the same double), and writes that decimal in ECMAScript's
// form. Two accepted texts with one canonical form therefore have one
// value: 9007199254740993 (2^53+1) and 0.10000000000000001 are refused;
// 1.0, 1e2 and -0 are accepted as 1, 100 and 0.
//
// The exactness check never hands the input's text to a float parser,
// which may misround texts of hundreds of digits: it reduces the text to
// its significant digits and exponent first.
func (c *canon) number() error {
	in := c.in
	start, i := c.i, c.i
	if in[i] == '-' {
		i++
	}
	intStart := i
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case i < len(in) && '1' <= in[i] && in[i] <= '9':
		for i < len(in) && '0' <= in[i] && in[i] <= '9' {
			i++
		}
	default:
		c.i = i
		return c.syntax("invalid number")
	}
	plain := i-intStart <= 15 // an integer of up to 15 digits is its own form
	if i < len(in) && in[i] == '.' {
		i++
		if i >= len(in) || in[i] < '0' || in[i] > '9' {
			c.i = i
			return c.syntax("invalid number")
		}
		for i < len(in) && '0' <= in[i] && in[i] <= '9' {
			i++
		}
		plain = false
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if i >= len(in) || in[i] < '0' || in[i] > '9' {
			c.i = i
			return c.syntax("invalid number")
		}
		for i < len(in) && '0' <= in[i] && in[i] <= '9' {
			i++
		}
		plain = false
	}
	c.i = i
	text := in[start:i]
	if plain {
		if string(text) == "-0" {
			text = text[1:]
		}
		c.out = append(c.out, text...)
		return nil
	}
	digits, exp := appendDecimal(c.num[0][:0], text)
	c.num[0] = digits
	if len(digits) == 0 {
		c.out = append(c.out, '0') // zero, of either sign
		return nil
	}
	if !c.exact(digits, exp) {
		return fmt.Errorf("%w: %s at byte %d", ErrNumber, text, start)
	}
	if text[0] == '-' {
		c.out = append(c.out, '-')
	}
	c.out = appendES(c.out, digits, exp)
	return nil
}

// exact reports whether the decimal 0.digits × 10^exp (digits without
// leading or trailing zeros) is the shortest decimal that rounds to its
// double.
func (c *canon) exact(digits []byte, exp int64) bool {
	switch {
	case len(digits) > 17:
		return false // the shortest decimal of a double has at most 17 digits
	case len(digits) <= 15 && -306 <= exp && exp <= 308:
		// Between 1e-307 and 1e308, inside the doubles' normal range, a
		// decimal of up to 15 significant digits is the only one of so
		// few digits that rounds to its double (DBL_DIG is 15), so it is
		// the shortest.
		return true
	case exp < -323 || exp > 309:
		return false // below the smallest double or above the largest
	}
	// A short text of at most 17 digits, which strconv reads exactly.
	t := append(c.num[1][:0], "0."...)
	t = append(t, digits...)
	t = append(t, 'e')
	t = strconv.AppendInt(t, exp, 10)
	f, err := strconv.ParseFloat(string(t), 64)
	c.num[1] = t
	if err != nil || f == 0 {
		return false // overflow, or underflow to zero
	}
	t = strconv.AppendFloat(t[:0], f, 'e', -1, 64)
	c.num[1] = t
	short, e := appendDecimal(c.num[2][:0], t)
	c.num[2] = short
	return e == exp && string(short) == string(digits)
}

// appendES appends the decimal 0.digits × 10^exp (digits without leading
// or trailing zeros) in ECMAScript's Number::toString form, which RFC 8785
// uses: plain from 1e-6 up to 1e21, exponential outside.
func appendES(dst, digits []byte, exp int64) []byte {
	k, n := int64(len(digits)), exp
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, n-1, 10)
	}
	return dst
}

// appendDecimal appends the significant digits of a JSON number (no
// leading or trailing zeros) and returns the exponent e such that the
// number's magnitude is 0.DIGITS × 10^e. Zero has no digits. The
// exponent saturates far beyond any double's.
func appendDecimal(dst, text []byte) ([]byte, int64) {
	i := 0
	if i < len(text) && text[i] == '-' {
		i++
	}
	var point int64 // digits before the decimal point, leading zeros excluded
	seen, frac := false, false
	start := len(dst)
	for ; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '.':
			frac = true
			continue
		case c == 'e' || c == 'E':
		case c >= '0' && c <= '9':
			if !seen && c == '0' {
				if frac {
					point--
				}
				continue
			}
			seen = true
			dst = append(dst, c)
			if !frac {
				point++
			}
			continue
		}
		break
	}
	var exp int64
	if i < len(text) { // the exponent
		i++
		neg := false
		if i < len(text) && (text[i] == '+' || text[i] == '-') {
			neg = text[i] == '-'
			i++
		}
		for ; i < len(text); i++ {
			if exp < 1<<40 { // saturate: far outside a double's range
				exp = exp*10 + int64(text[i]-'0')
			}
		}
		if neg {
			exp = -exp
		}
	}
	for len(dst) > start && dst[len(dst)-1] == '0' {
		dst = dst[:len(dst)-1]
	}
	if len(dst) == start {
		return dst, 0
	}
	return dst, point + exp
}

// foldHash hashes name folded the way encoding/json matches member names
// to struct fields: names that bytes.EqualFold reports equal hash equal.
// Each character is replaced by the smallest of its simple case-folding
// orbit (ASCII letters by their upper case).
func foldHash(name []byte) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); {
		b := name[i]
		if b < utf8.RuneSelf {
			if 'a' <= b && b <= 'z' {
				b -= 'a' - 'A'
			}
			h = (h ^ uint64(b)) * prime
			i++
			continue
		}
		r, n := utf8.DecodeRune(name[i:])
		h = (h ^ uint64(foldRune(r))) * prime
		i += n
	}
	return h
}

// foldRune returns the smallest rune of r's case-folding orbit.
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}
