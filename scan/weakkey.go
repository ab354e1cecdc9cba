package scan

import (
	"crypto/hmac"
	"crypto/sha256"
	"strings"

	"github.com/stateseal/stateseal/scan/internal/stateform"
)

// commonKeys are HMAC keys found in examples, tutorials and defaults.
var commonKeys = []string{
	"", "secret", "Secret", "SECRET", "changeme", "change-me", "change_me", "password", "key", "hmac", "mysecret",
	"my-secret", "my_secret", "supersecret", "super-secret", "secret-key", "secret_key", "secretkey", "hmac-secret",
	"hmac_secret", "jwt-secret", "jwt_secret", "jwtsecret", "test", "testing", "dev", "development", "default",
	"mcp", "mcp-secret", "server-secret", "state-secret", "requestState", "request-state", "request_state",
	"your-256-bit-secret", "your-secret-key", "replace-me", "0123456789abcdef0123456789abcdef",
	"12345678901234567890123456789012", "00000000000000000000000000000000", string(make([]byte, 32)),
}

// weakKey looks for a tag of the state that is HMAC-SHA256 under a
// common key: over the text before it (JWT, the TypeScript SDK's codec)
// or over the segment before it. It returns the state with its readable
// content forged and the tag made again under that key.
func weakKey(f stateform.Form) (forged, what string, ok bool) {
	last := len(f.Segs) - 1
	if last < 1 || f.Segs[last].Enc == nil || len(f.Segs[last].Bytes) != sha256.Size {
		return "", "", false
	}
	full := f.String()
	prefix := func(g stateform.Form) []byte { s := g.String(); return []byte(s[:strings.LastIndexByte(s, '.')]) }
	segment := func(g stateform.Form) []byte { return g.Segs[last-1].Bytes }
	inputs := []struct {
		name string
		of   func(stateform.Form) []byte
	}{{"the text before it", prefix}}
	if f.Segs[last-1].Enc != nil {
		inputs = append(inputs, struct {
			name string
			of   func(stateform.Form) []byte
		}{"the decoded segment before it", segment})
	}
	for ki, k := range commonKeys {
		for _, in := range inputs {
			m := hmac.New(sha256.New, []byte(k))
			m.Write(in.of(f))
			if !hmac.Equal(m.Sum(nil), f.Segs[last].Bytes) {
				continue
			}
			v, ok := sameContent(f, last-1)
			if !ok {
				if v, ok = f.Forged(); !ok {
					return "", "", false
				}
			}
			g := stateform.Parse(v.State)
			if len(g.Segs) != len(f.Segs) || g.String() == full {
				return "", "", false
			}
			m = hmac.New(sha256.New, []byte(k))
			m.Write(in.of(g))
			what = "its HMAC-SHA256 tag over " + in.name + " is made with a common key (number " + itoa(ki+1) + " of commonKeys in scan/weakkey.go, " + itoa(len(k)) + " bytes); " + v.What + ", tagged again"
			return g.Replace(last, m.Sum(nil)), what, true
		}
	}
	return "", "", false
}

// sameContent respells the JSON object of segment i with a space after
// its brace: the same content in other bytes, so that a server that
// accepts it with a tag statescan made accepts states anyone can mint,
// whatever it checks inside them.
func sameContent(f stateform.Form, i int) (stateform.Variant, bool) {
	s := f.Segs[i]
	if s.Enc == nil || len(s.Bytes) < 2 || s.Bytes[0] != '{' {
		return stateform.Variant{}, false
	}
	b := append([]byte("{ "), s.Bytes[1:]...)
	return stateform.Variant{State: f.Replace(i, b), What: "its JSON respelled with the same content"}, true
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
