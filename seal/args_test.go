package seal

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/internal/canonjson"
)

func TestArgsDigestStable(t *testing.T) {
	base := `{"from":"BER","to":"LIS","when":{"day":3,"flex":[1,2.5,true,null]},"note":"caf\u00e9 <a>"}`
	same := []string{
		`{ "to" : "LIS", "from":"BER", "note":"café <a>",
		   "when": {"flex":[1, 2.50, true, null], "day": 3.0} }`,
		"{\"note\":\"caf\\u00e9 \\u003ca>\",\"when\":{\"day\":3e0,\"flex\":[1,25e-1,true,null]},\"to\":\"LIS\",\"from\":\"BER\"}",
		// Protocol members at the top level are left out.
		`{"from":"BER","to":"LIS","when":{"day":3,"flex":[1,2.5,true,null]},"note":"café <a>",
		  "_meta":{"progressToken":7},"inputResponses":{"who":{"action":"accept"}},"requestState":"abc"}`,
	}
	want := digest(t, base)
	for _, s := range same {
		if got := digest(t, s); !bytes.Equal(got, want) {
			t.Errorf("digest of %s differs", s)
		}
	}
}

func TestArgsDigestChanges(t *testing.T) {
	base := `{"from":"BER","to":"LIS","n":1,"list":[1,2],"flag":true,"o":{"k":"v"}}`
	want := digest(t, base)
	for _, s := range []string{
		`{"from":"BER","to":"OPO","n":1,"list":[1,2],"flag":true,"o":{"k":"v"}}`,
		`{"from":"BER","to":"LIS","n":2,"list":[1,2],"flag":true,"o":{"k":"v"}}`,
		`{"from":"BER","to":"LIS","n":1,"list":[2,1],"flag":true,"o":{"k":"v"}}`,
		`{"from":"BER","to":"LIS","n":1,"list":[1,2],"flag":false,"o":{"k":"v"}}`,
		`{"from":"BER","to":"LIS","n":1,"list":[1,2],"flag":true,"o":{"k":"w"}}`,
		`{"from":"BER","to":"LIS","n":"1","list":[1,2],"flag":true,"o":{"k":"v"}}`,
		`{"from":"BER","to":"LIS","n":1,"list":[1,2],"flag":true,"o":{"k":"v"},"extra":null}`,
		`{"from":"BER","to":"LIS","n":1,"list":[1,2],"flag":true}`,
		// _meta is left out only at the top level.
		`{"from":"BER","to":"LIS","n":1,"list":[1,2],"flag":true,"o":{"k":"v","_meta":1}}`,
	} {
		if got := digest(t, s); bytes.Equal(got, want) {
			t.Errorf("digest of %s did not change", s)
		}
	}
}

func TestArgsDigestEmpty(t *testing.T) {
	want := digest(t, `{}`)
	for _, s := range []string{``, `  `, `null`, `{"_meta":{}}`} {
		if got := digest(t, s); !bytes.Equal(got, want) {
			t.Errorf("digest of %q is not the digest of {}", s)
		}
	}
}

func TestArgsDigestRejects(t *testing.T) {
	for _, s := range []string{
		`{"a":1,"a":2}`, // duplicate names could be read two ways
		`{"a":1,"_meta":1,"_meta":2}`,
		`[1,2]`, `"str"`, `1`, `true`,
		`{"a":1} trailing`,
		`{"a":`,
		"{\"a\":\"\xff\"}",         // invalid UTF-8
		"\v{}", "{}\f", "\u00a0{}", // not JSON whitespace (found by FuzzArgsDigest)
	} {
		if _, err := ArgsDigest([]byte(s)); err == nil {
			t.Errorf("ArgsDigest(%q) accepted", s)
		}
	}
}

func digest(t *testing.T, s string) []byte {
	t.Helper()
	d, err := ArgsDigest([]byte(s))
	if err != nil {
		t.Fatalf("ArgsDigest(%s): %v", s, err)
	}
	if len(d) != 32 {
		t.Fatalf("digest is %d bytes", len(d))
	}
	return d
}

// TestArgsDepthBound: MaxDepth reaches MaxArgsDepthLimit, where the
// nesting is refused as too deep like under any other bound; a larger
// bound is a configuration error, not a refusal of the arguments.
func TestArgsDepthBound(t *testing.T) {
	nest := func(n int) []byte {
		return []byte(`{"a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`)
	}
	o := ArgsOptions{MaxDepth: MaxArgsDepthLimit}
	if _, err := o.Digest(nest(MaxArgsDepthLimit)); err != nil {
		t.Errorf("depth %d under its own bound: %v", MaxArgsDepthLimit, err)
	}
	if _, err := o.Digest(nest(MaxArgsDepthLimit + 1)); !errors.Is(err, canonjson.ErrTooDeep) {
		t.Errorf("depth %d: %v, want too deep", MaxArgsDepthLimit+1, err)
	}
	// Bounds outside their ranges are refused, never clamped.
	for _, bad := range []ArgsOptions{{MaxDepth: MaxArgsDepthLimit + 1}, {MaxDepth: -1}, {MaxBytes: -1}} {
		if _, err := bad.Digest([]byte(`{}`)); err == nil || errors.Is(err, ErrArguments) {
			t.Errorf("%+v: %v, want a configuration error", bad, err)
		}
	}
}
