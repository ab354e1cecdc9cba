package seal

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/gowebpki/jcs"
)

// A Binding names the request a token belongs to. It is never stored in the
// token: Seal and Open both feed it, length-prefixed, into the MAC or the
// AEAD associated data, so Open succeeds only under the binding Seal used.
// Empty fields are bound as empty; a field set at Seal must be set the same
// at Open.
type Binding struct {
	// Method is the request method, such as "tools/call".
	Method string
	// Target is the tool name, prompt name or resource URI.
	Target string
	// Principal is the authenticated caller. Bind it whenever requests are
	// authenticated, so one user's token cannot be replayed by another.
	Principal string
	// Audience names this server or deployment, so a token cannot move to
	// another service that shares the keyset.
	Audience string
	// Session is an optional application session or conversation id.
	Session string
	// ArgsDigest is the digest of the request arguments, from ArgsDigest.
	ArgsDigest []byte
	// Context is optional caller-defined context, bound as opaque bytes.
	Context []byte
}

// Members of the arguments object that the digest leaves out: they carry
// protocol metadata and the input-required round itself, which differ
// between the request that sealed a token and the retry that opens it.
var excludedArgs = []string{"_meta", "inputResponses", "requestState"}

// ArgsDigest returns the SHA-256 digest of a JSON arguments object in the
// canonical form of RFC 8785 (JSON Canonicalization Scheme), leaving out
// the top-level members "_meta", "inputResponses" and "requestState". Key
// order and insignificant whitespace do not change the digest; any change
// of a value does. Empty input and null digest as {}.
//
// Invalid JSON, a value other than an object, duplicate member names and
// invalid UTF-8 are errors: such input could be read differently by
// different parsers, so it must not be vouched for. Numbers are compared as
// IEEE 754 doubles, as RFC 8785 requires: integers beyond 2^53 that round to
// the same double share a digest.
func ArgsDigest(args []byte) ([]byte, error) {
	canon, err := canonicalArgs(args)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(canon)
	return sum[:], nil
}

var errArgsNotObject = errors.New("stateseal: arguments are not a JSON object")

// mentionsExcluded reports whether an excluded name appears anywhere in the
// canonical form, as a quoted string. RFC 8785 writes these ASCII names
// unescaped, so their absence here means no member to leave out.
func mentionsExcluded(canon []byte) bool {
	for _, name := range excludedArgs {
		if bytes.Contains(canon, []byte(`"`+name+`"`)) {
			return true
		}
	}
	return false
}

func canonicalArgs(args []byte) ([]byte, error) {
	// Only JSON's own whitespace: bytes.TrimSpace would also take \v, \f
	// and Unicode spaces, and vouch for input no JSON parser accepts.
	args = bytes.Trim(args, " \t\r\n")
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		return []byte("{}"), nil
	}
	// The first pass validates: jcs rejects duplicate names, invalid UTF-8
	// and trailing data, which encoding/json would accept silently.
	canon, err := jcs.Transform(args)
	if err != nil {
		return nil, fmt.Errorf("stateseal: arguments: %w", err)
	}
	if canon[0] != '{' {
		return nil, errArgsNotObject
	}
	if !mentionsExcluded(canon) {
		return canon, nil // the common case: nothing to leave out
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(canon, &members); err != nil {
		return nil, fmt.Errorf("stateseal: arguments: %w", err)
	}
	n := len(members)
	for _, name := range excludedArgs {
		delete(members, name)
	}
	if len(members) == n {
		return canon, nil
	}
	// Rebuild without the excluded members and canonicalize again, which
	// restores the RFC 8785 escaping of names that encoding/json changed.
	names := make([]string, 0, len(members))
	for name := range members {
		names = append(names, name)
	}
	slices.Sort(names)
	var b bytes.Buffer
	b.WriteByte('{')
	for i, name := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		quoted, err := json.Marshal(name)
		if err != nil {
			return nil, err
		}
		b.Write(quoted)
		b.WriteByte(':')
		b.Write(members[name])
	}
	b.WriteByte('}')
	return jcs.Transform(b.Bytes())
}
