package backends

import (
	"errors"
	"net/url"
	"strings"
)

// errKeyValue answers a KEK "URL" that is a key: the contents of a key
// file pasted into --kek or STATESEAL_KEK, say. The value is not repeated.
var errKeyValue = errors.New("backends: the KEK URL is a key value, not a URL (not shown); " +
	"put the key in an environment variable and pass local://env/NAME, or pass the key file as local:PATH")

// looksLikeKey reports a string that holds a key rather than naming one: a
// local key file's contents, or a long run of base64 with no URL shape.
func looksLikeKey(s string) bool {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "stateseal-kek-") {
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

// secretParams are query parameters whose values are credentials.
var secretParams = []string{"token", "secret", "password", "passwd", "credential", "auth", "signature", "sig"}

// Redact returns rawURL as it may appear in an error or a log: a key value
// is replaced by a note, a string that does not parse as a URL is not shown,
// a password in the user information and the values of credential-like
// query parameters are replaced by "xxxxx".
func Redact(rawURL string) string {
	if looksLikeKey(rawURL) {
		return "[a key value, not a URL; not shown]"
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "[an unparsable URL; not shown]"
	}
	if u.Opaque != "" && u.Scheme != "local" {
		// An opaque part is not a path stateseal knows: it may be a secret.
		return u.Scheme + ":[opaque; not shown]"
	}
	q := u.Query()
	changed := false
	for name := range q {
		lower := strings.ToLower(name)
		for _, p := range secretParams {
			if strings.Contains(lower, p) {
				q.Set(name, "xxxxx")
				changed = true
			}
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
