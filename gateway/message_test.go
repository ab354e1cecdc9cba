package gateway

import (
	"strings"
	"testing"
	"unicode"
)

// TestCheckName: every spelling of a name the gateway reads that
// encoding/json would match to it (each letter replaced by any other of
// its case-folding orbit, ſ and the Kelvin sign included) is refused, the
// name itself and other names are not.
func TestCheckName(t *testing.T) {
	for _, s := range significant {
		if err := checkName(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
		for i, r := range s {
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				name := s[:i] + string(f) + s[i+1:]
				if err := checkName(name); err == nil {
					t.Errorf("%q (for %s) accepted", name, s)
				}
			}
		}
		if err := checkName(strings.ToUpper(s)); err == nil {
			t.Errorf("%q accepted", strings.ToUpper(s))
		}
	}
	for _, name := range []string{"", "_meta", "inputResponses", "x", "names", "ids", "İd", "ıd", "requestStates", "Ä"} {
		if err := checkName(name); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
}
