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
func Identity(rawURL string) (string, error) {
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
