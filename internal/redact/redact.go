// Package redact shows KEK URLs and store locations as they may appear in
// errors, logs and output: without credentials, and without a local KEK's
// value wherever it was pasted. Package stores exports Redact for
// locations; KEK URLs are redacted by this module's own errors.
package redact

import (
	"encoding/base64"
	"errors"
	"net/url"
	"regexp"
	"strings"
)

// ErrKeyValue answers a KEK "URL" that is a key or holds one: the contents
// of a key file pasted into --kek or STATESEAL_KEK, or after "local:". The
// value is not repeated.
var ErrKeyValue = errors.New("backends: the KEK URL is a key value, not a URL (not shown); " +
	"put the key in an environment variable and pass local://env/NAME, or pass the key file as local:PATH")

// keyMarker starts every local KEK's text form ("stateseal-kek-v1:...").
const keyMarker = "stateseal-kek-"

// keyText matches a local KEK's text form wherever it appears, its colon
// plain or percent-encoded. A file name that merely starts with the
// marker (local:stateseal-kek-prod.key) does not match.
var keyText = regexp.MustCompile(`(?i)stateseal-kek-v[0-9]+(?::|%3a)[A-Za-z0-9_-]*`)

// LooksLikeKey reports a string that holds a key rather than naming one: a
// local key's text form anywhere in it, or a long run of base64 with no
// URL shape.
func LooksLikeKey(s string) bool {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(strings.ToLower(s), keyMarker) || keyText.MatchString(s) {
		return true
	}
	if strings.Contains(s, ":") || len(s) < 32 {
		return false
	}
	for _, c := range s {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return true
}

// isBareKey reports a local KEK's 32 bytes in unpadded base64url without
// the "stateseal-kek-v1:" prefix: what is left of a key value pasted after
// "local:" by hand.
func isBareKey(s string) bool {
	if len(s) != 43 {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	return err == nil && len(b) == 32
}

func isB64URL(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// IsBareKey reports whether s, with surrounding space trimmed, is exactly a
// local KEK's 32 bytes in unpadded base64url: a key value pasted by hand
// where a file or variable name belongs. Refusals use it on a whole name
// only; a path component inside a longer path may be such a run by
// chance (a content hash, a random id, a test's temporary directory).
func IsBareKey(s string) bool { return isBareKey(strings.TrimSpace(s)) }

// replaceBareKeys replaces every maximal run of base64url characters in s
// that is a bare key by with. It is for output only, where caution costs a
// readable path at worst: such a run is more often a pasted key than a
// name, but a name can be one (see IsBareKey), so nothing is refused on
// its evidence.
func replaceBareKeys(s, with string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && isB64URL(s[j]) {
			j++
		}
		if j == i {
			b.WriteByte(s[i])
			i++
			continue
		}
		if isBareKey(s[i:j]) {
			b.WriteString(with)
		} else {
			b.WriteString(s[i:j])
		}
		i = j
	}
	return b.String()
}

// isLocal reports a string that is, or starts like, a local URL.
func isLocal(s string) bool {
	return len(s) >= 6 && strings.EqualFold(s[:6], "local:")
}

// secretParams are substrings of query parameter names whose values are
// credentials.
var secretParams = []string{"token", "secret", "pass", "pwd", "credential", "auth", "signature", "sig", "apikey", "api_key", "api-key", "access_key", "accesskey", "private"}

// hidden stands for a key value in URL's output; keyPlaceholder holds
// its place, in characters every part of a URL keeps, while the rest is
// redacted.
const (
	hidden         = "[a key value; not shown]"
	keyPlaceholder = "STATESEALKEYVALUENOTSHOWN"
)

// Path returns a file path as it may appear in an error or a log: a local
// KEK's text form, or a run that is shaped like a bare key, is replaced by
// a note. The path itself is accepted elsewhere; only its display is
// cautious.
func Path(p string) string {
	return replaceBareKeys(keyText.ReplaceAllString(p, hidden), hidden)
}

// URL returns rawURL as it may appear in an error, a log or a keyset
// listing:
//   - a key value (a local KEK's text form, wherever it appears, or the
//     bare key after "local:") is replaced by a note;
//   - a string that does not parse as a URL is not shown;
//   - the user information shows the user name only if a password follows
//     it (a lone user name is often a token): the password, or the lone
//     name, becomes "xxxxx";
//   - the values of credential-like query parameters (token, secret,
//     password, ...) become "xxxxx".
func URL(rawURL string) string {
	s := strings.TrimSpace(rawURL)
	if LooksLikeKey(s) && (!strings.Contains(s, ":") || strings.HasPrefix(strings.ToLower(s), keyMarker)) {
		return "[a key value, not a URL; not shown]"
	}
	s = keyText.ReplaceAllString(s, keyPlaceholder)
	if isLocal(s) {
		s = replaceBareKeys(s, keyPlaceholder)
	}
	u, err := url.Parse(s)
	if err != nil {
		return "[an unparsable URL; not shown]"
	}
	if u.Opaque != "" && u.Scheme != "local" {
		// An opaque part is not a path stateseal knows: it may be a secret.
		return u.Scheme + ":[opaque; not shown]"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		} else {
			u.User = url.User("xxxxx")
		}
	}
	q := u.Query()
	changed := false
	for name := range q {
		lower := strings.ToLower(name)
		for _, p := range secretParams {
			if strings.Contains(lower, p) {
				q.Set(name, "xxxxx")
				changed = true
				break
			}
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return strings.ReplaceAll(u.String(), keyPlaceholder, hidden)
}
