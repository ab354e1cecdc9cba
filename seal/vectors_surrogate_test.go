package seal

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stateseal/stateseal/internal/jsonscan"
	"github.com/stateseal/stateseal/keyring"
)

// A binding string of a vector may hold a lone surrogate, which JSON
// carries as an escape ("\ud800") and which has no UTF-8 (FORMAT.md,
// "Binding"). encoding/json would read it as U+FFFD, the very collision
// the rule is about, so vectorBind reads its strings with the strict
// reader of Go's gateway (jsonscan.Unescape), keeps such a string as
// written, in lone, and leaves the field empty. Go strings are bytes and
// hold no lone surrogate: a Go program meets one only in JSON, where its
// strict reader refuses it.

var bindStrings = []string{"method", "target", "principal", "audience", "session"}

func (b *vectorBind) field(name string) *string {
	return map[string]*string{"method": &b.Method, "target": &b.Target, "principal": &b.Principal,
		"audience": &b.Audience, "session": &b.Session}[name]
}

func (b vectorBind) MarshalJSON() ([]byte, error) {
	type plain vectorBind
	out, err := json.Marshal(plain(b))
	if err != nil {
		return nil, err
	}
	for _, name := range bindStrings {
		if raw, ok := b.lone[name]; ok {
			out = bytes.Replace(out, []byte(`"`+name+`":""`), []byte(`"`+name+`":"`+raw+`"`), 1)
		}
	}
	return out, nil
}

func (b *vectorBind) UnmarshalJSON(data []byte) error {
	type plain vectorBind
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode((*plain)(b)); err != nil {
		return err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	for _, name := range bindStrings {
		r, ok := raw[name]
		if !ok {
			continue
		}
		s, lone, err := strictString(r)
		switch {
		case err != nil:
			return fmt.Errorf("binding %s: %w", name, err)
		case lone:
			if b.lone == nil {
				b.lone = map[string]string{}
			}
			b.lone[name] = string(r[1 : len(r)-1])
			*b.field(name) = ""
		default:
			*b.field(name) = s
		}
	}
	return nil
}

// strictString reads a JSON string with Go's strict reader, and reports
// lone if it holds a \u escape of a surrogate that is not part of a pair.
func strictString(r []byte) (s string, lone bool, err error) {
	if len(r) < 2 || r[0] != '"' || r[len(r)-1] != '"' {
		return "", false, errors.New("not a string")
	}
	in := r[1 : len(r)-1]
	var out []byte
	for i := 0; i < len(in); {
		if in[i] != '\\' {
			out = append(out, in[i])
			i++
			continue
		}
		c, n := jsonscan.Unescape(in[i:])
		if n == 0 {
			if i+6 <= len(in) && in[i+1] == 'u' {
				if v, err := strconv.ParseUint(string(in[i+2:i+6]), 16, 16); err == nil && 0xD800 <= v && v < 0xE000 {
					return "", true, nil
				}
			}
			return "", false, fmt.Errorf("bad escape at %d", i)
		}
		out = utf8.AppendRune(out, c)
		i += n
	}
	if !utf8.Valid(out) {
		return "", false, errors.New("not UTF-8")
	}
	return string(out), false, nil
}

// surrogateVectors are the vectors of a binding string holding a lone
// surrogate: a sealer refuses it, and an opener reports invalid at step
// 6, whatever bytes another reader would put in its place (U+FFFD, the
// replacement of JavaScript's TextEncoder and Python's errors="replace";
// ED A0 80, Python's "surrogatepass" and WTF-8), after steps 1 to 5.
func (g *gen) surrogateVectors(macKey keyring.Key, tool Binding) {
	t := g.t
	lone := func(v *vector) {
		v.Binding.Principal, v.Binding.PrincipalHex = "", ""
		v.Binding.lone = map[string]string{"principal": `user-\ud800`}
	}
	vs := sealAt(300_000)
	vs.Keys = []vectorKey{keyJSON(macKey)}
	sealV := vector{Name: "seal-binding-lone-surrogate", Comment: "the principal is user- and a lone U+D800 (a string of UTF-16 code units or code points): it has no UTF-8, so the sealer refuses, never binding U+FFFD or ED A0 80 in its place",
		Binding: bindJSON(tool), Payload: hex.EncodeToString([]byte("s")), Seal: &vs, Expect: "not_sealed"}
	lone(&sealV)
	g.vs = append(g.vs, sealV)
	for _, sub := range []struct{ name, bytes, what string }{
		{"replaced", "\uFFFD", "U+FFFD (EF BF BD), what TextEncoder and errors=\"replace\" write"},
		{"wtf8", "\xed\xa0\x80", "ED A0 80, what surrogatepass and WTF-8 write"},
	} {
		b := tool
		b.Principal = "user-" + sub.bytes
		base := makeVector(t, "", "", []keyring.Key{macKey}, b, []byte("s"), sealAt(300_000), g.check)
		g.bad(base, "open-binding-lone-surrogate-"+sub.name, "invalid", "sealed under the principal user- and "+sub.what+"; opened under user- and a lone U+D800: invalid at step 6, since the binding has no UTF-8, never encoded some other way to try the tag", lone)
	}
	base := makeVector(t, "", "", []keyring.Key{macKey}, tool, []byte("s"), sealAt(300_000), g.check)
	g.bad(base, "open-binding-lone-surrogate-unknown-key", "unknown_key", "a key id the opener does not hold, opened under the principal user- and a lone U+D800: steps 1 to 5 report what they find first, the binding is only refused at step 6", func(v *vector) {
		lone(v)
		v.Token = editRaw(t, v.Token, func(r []byte) []byte { r[1] ^= 0xff; return r })
	})
}

// checkLone holds Go to a vector whose binding holds a lone surrogate:
// Go's strict reader refused the string, so no Go binding holds it and
// nothing is sealed or opened under it. Steps 1 to 5 read no binding: Go
// reports their error whatever bytes stand for the string.
func (v *vector) checkLone(t *testing.T) {
	switch v.Expect {
	case "not_sealed":
		return
	case "invalid":
		return // step 6: the binding cannot be encoded
	}
	want := expectErr[v.Expect]
	for _, sub := range []string{"\uFFFD", "\xed\xa0\x80", ""} {
		w := *v
		w.Binding.lone = nil
		for name, raw := range v.Binding.lone {
			*w.Binding.field(name) = strings.ReplaceAll(raw, `\ud800`, sub)
		}
		s, b := w.opener(t)
		if _, err := s.Open(b, v.Token); !errors.Is(err, want) {
			t.Fatalf("with %q for the lone surrogate: %v, want %v", sub, err, want)
		}
	}
}
