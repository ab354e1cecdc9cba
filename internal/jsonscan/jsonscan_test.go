package jsonscan

import (
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// TestUnescape holds Unescape to jsontext's reading of every escape of
// one character: the letters, every \u escape of a BMP code point, and
// surrogates paired, reversed, alone and cut short.
func TestUnescape(t *testing.T) {
	var cases []string
	for c := 0; c < 128; c++ {
		cases = append(cases, `\`+string(rune(c)))
	}
	for r := 0; r <= 0xFFFF; r += 7 {
		cases = append(cases, string([]byte{'\\', 'u', hex(r >> 12), hex(r >> 8), hex(r >> 4), hex(r)}))
	}
	cases = append(cases, `\ud83d\ude00`, `\uD83D\uDE00`, `\ude00\ud83d`, `\ud83d`, `\ud83dx`, `\ud83d\u0041`, `\ud83d\ude0`, `\u12`, `\u12g4`, `\`)
	for _, esc := range cases {
		want, err := jsontext.AppendUnquote(nil, []byte(`"`+esc+`"`))
		r, n := Unescape([]byte(esc))
		switch {
		case err != nil && n != 0:
			t.Errorf("Unescape(%q) took %d bytes; jsontext refuses it: %v", esc, n, err)
		case err == nil && (n != len(esc) || string(utf8.AppendRune(nil, r)) != string(want)):
			t.Errorf("Unescape(%q) = %q, %d bytes; jsontext reads %q", esc, r, n, want)
		}
	}
}

func hex(v int) byte { return "0123456789abcdef"[v&0xF] }

func TestSkipSpace(t *testing.T) {
	for _, tc := range []struct {
		in   string
		i    int
		want int
	}{{"", 0, 0}, {" \t\r\n{", 0, 4}, {"\v{", 0, 0}, {"\f", 0, 0}, {"\u00a0", 0, 0}, {"{  ", 1, 3}, {"{ x", 1, 2}} {
		if got := SkipSpace([]byte(tc.in), tc.i); got != tc.want {
			t.Errorf("SkipSpace(%q, %d) = %d, want %d", tc.in, tc.i, got, tc.want)
		}
	}
}
