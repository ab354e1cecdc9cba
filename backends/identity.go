package backends

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/stateseal/stateseal/internal/localkek"
	"github.com/stateseal/stateseal/internal/redact"
)

// transportParams are the query parameters that say how to reach a KEK's
// service, not which key it is: awskms's and gcpkms's endpoint, gcpkms's
// insecure. The same key reached through a VPC endpoint, a proxy or a
// loopback test server is the same key.
var transportParams = []string{"endpoint", "insecure"}

// Identity returns the KEK rawURL names, without how to reach it: the URL
// with no transport settings (the query parameters endpoint and insecure),
// no user information (credentials) and no fragment, its query sorted, so
// that two URLs of one key give one string. What remains names the key:
// the scheme, the key's name or path, and parameters such as awskms's
// region that pick a different key.
//
// A keyset document stores only the identity; transport settings come
// from the configuration of whoever opens it, never from the document, so
// that whoever can write the store cannot point an instance at an endpoint
// of theirs. Identity refuses a key value (a local KEK's text pasted in
// the URL) without repeating it, and a URL that does not parse or has no
// scheme. It does not ask a backend: a URL with an unknown scheme has an
// identity too.
//
// It refuses a URL that is not plain (docs/KEYSET-FORMAT.md, "KEK URLs and
// identity"): one whose identity other languages' URL libraries would
// spell otherwise than net/url, so that every implementation computes the
// same identity from the same configuration.
func Identity(rawURL string) (string, error) {
	if redact.LooksLikeKey(rawURL) {
		return "", redact.ErrKeyValue
	}
	if err := plain(rawURL); err != nil {
		return "", err
	}
	// One pass can leave what a second pass would change (a fragment
	// removed from "A: #" leaves "a: ", whose space the next pass trims):
	// the identity is the fixpoint, so that it is the identity of itself.
	id, err := identity(rawURL)
	for range 4 {
		if err != nil {
			return "", err
		}
		next, nerr := identity(id)
		if nerr != nil || next == id {
			return id, nerr
		}
		id, err = next, nerr
	}
	return "", fmt.Errorf("backends: KEK URL %s has no stable form", redact.URL(rawURL))
}

func identity(rawURL string) (string, error) {
	if redact.LooksLikeKey(rawURL) {
		return "", redact.ErrKeyValue
	}
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		return "", fmt.Errorf("backends: KEK URL %s does not parse", redact.URL(rawURL))
	}
	if u.Scheme == "" {
		return "", fmt.Errorf("backends: KEK URL %s has no scheme", redact.URL(rawURL))
	}
	if u.Scheme == "local" {
		if _, _, err := localkek.Source(u, ""); err != nil {
			return "", err
		}
	}
	u.User = nil
	u.Fragment, u.RawFragment = "", ""
	u.RawPath = "" // the canonical escaping of Path
	q := u.Query()
	for _, p := range transportParams {
		q.Del(p)
	}
	u.RawQuery, u.ForceQuery = q.Encode(), false
	return u.String(), nil
}

// plain reports whether raw is a plain KEK URL: a lower-case scheme; only
// printable ASCII, no space; no fragment; before the query only
// A-Z a-z 0-9 and - . _ ~ / : $ & + , ; = (so no user information, no
// percent-escape and nothing net/url would escape again); in the query no
// ';' and only well-formed percent-escapes.
func plain(raw string) error {
	// The URL is not repeated: a query may hold credentials that
	// redact.URL does not recognise (an endpoint's user information).
	bad := func(why string) error {
		return fmt.Errorf("backends: a KEK URL is not plain (docs/KEYSET-FORMAT.md, \"KEK URLs and identity\"): %s", why)
	}
	scheme, _, ok := strings.Cut(raw, ":")
	if !ok || scheme == "" || scheme[0] < 'a' || scheme[0] > 'z' {
		return bad("it does not start with a lower-case scheme and ':'")
	}
	for _, c := range []byte(scheme) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.') {
			return bad("the scheme has a character other than a-z 0-9 + - .")
		}
	}
	base, query, _ := strings.Cut(raw, "?")
	for _, c := range []byte(base) {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-._~/:$&+,;=", c) >= 0) {
			return bad("before its query it has a character other than A-Z a-z 0-9 - . _ ~ / : $ & + , ; =")
		}
	}
	for i := 0; i < len(query); i++ {
		switch c := query[i]; {
		case c <= ' ' || c >= 0x7f || c == '#' || c == ';':
			return bad("its query has a space, a control or non-ASCII character, '#' or ';'")
		case c == '%' && (i+2 >= len(query) || !ishex(query[i+1]) || !ishex(query[i+2])):
			return bad("its query has a '%' not followed by two hex digits")
		}
	}
	return nil
}

func ishex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }
