package canonjson

import (
	"bytes"
	"strconv"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// number refuses a JSON number whose text does not denote exactly the
// decimal that RFC 8785 writes for it (the shortest one that rounds to the
// same double). Two accepted texts with one digest therefore have one
// value: 9007199254740993 (2^53+1) and 0.10000000000000001 are refused,
// 1.0, 1e2 and -0 are accepted as 1, 100 and 0.
func (w *walker) number(text []byte) error {
	if isShortDecimal(text) {
		// Up to 15 significant digits, no exponent: in a double's normal
		// range, every such decimal is the shortest that rounds to its
		// double (DBL_DIG is 15), so RFC 8785 writes the same value.
		return nil
	}
	// The string aliases text only for the call; ParseFloat keeps it in
	// its error, which is dropped.
	f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(text), len(text)), 64)
	if err != nil {
		return ErrNumber // out of range of a double
	}
	w.num[2] = strconv.AppendFloat(w.num[2][:0], f, 'e', -1, 64)
	var e1, e2 int64
	w.num[0], e1 = appendDecimal(w.num[0][:0], text)
	w.num[1], e2 = appendDecimal(w.num[1][:0], w.num[2])
	if len(w.num[0]) == 0 && len(w.num[1]) == 0 {
		return nil // zero, of either sign
	}
	if e1 != e2 || !bytes.Equal(w.num[0], w.num[1]) || (text[0] == '-') != (f < 0) {
		return ErrNumber
	}
	return nil
}

func isShortDecimal(text []byte) bool {
	digits := text
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 40 {
		return false
	}
	sig := 0
	for _, c := range digits {
		switch {
		case c == '.':
		case c < '0' || c > '9':
			return false // an exponent
		case sig > 0 || c != '0':
			sig++
		}
	}
	return sig <= 15
}

// appendDecimal appends the significant digits of a JSON number (no
// leading or trailing zeros) and returns the exponent e such that the
// number's magnitude is 0.DIGITS × 10^e. Zero has no digits.
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
			if exp < 1<<40 { // saturate: the value is a finite double anyway
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

// appendFolded appends name folded the way encoding/json matches member
// names to struct fields: two names fold to the same bytes exactly when
// bytes.EqualFold reports them equal.
func appendFolded(dst, name []byte) []byte {
	for i := 0; i < len(name); {
		c := name[i]
		if c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(name[i:])
		dst = utf8.AppendRune(dst, foldRune(r))
		i += n
	}
	return dst
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
