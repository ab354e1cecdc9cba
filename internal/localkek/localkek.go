// Package localkek reads local KEK URLs (local:FILE, local:/abs/path,
// local://env/NAME) for the local backend and for sealctl, which creates
// the file a URL names.
package localkek

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/stateseal/stateseal/internal/redact"
)

// Source returns the file path or the environment variable a local
// URL names. A URL that holds a key value rather than naming one is
// refused without repeating it: the key's text form anywhere
// (local:stateseal-kek-v1:...), or a bare key as the whole of what the
// URL names (local:KEY, local:///KEY, local://KEY, local://env/KEY). A
// bare key's shape inside a longer path (local:/run/secrets/HASH/kek) is
// a directory name, not evidence of a paste: refusing it would refuse
// content-addressed paths at random.
func Source(u *url.URL, dir string) (path, env string, err error) {
	if redact.LooksLikeKey(u.String()) || namesBareKey(u) {
		return "", "", redact.ErrKeyValue
	}
	// No query, not even an empty one: local:stateseal.kek? would name
	// the file "stateseal.kek?" to a reader that does not split at '?'.
	if u.Scheme != "local" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", "", fmt.Errorf("backends: %s is not a local KEK URL (local:FILE or local://env/VARIABLE)", redact.URL(u.String()))
	}
	switch {
	case u.Host == "env":
		name := strings.TrimPrefix(u.Path, "/")
		if name == "" || strings.ContainsAny(name, "/=") {
			return "", "", fmt.Errorf("backends: local KEK URL %s: bad variable name", redact.URL(u.String()))
		}
		return "", name, nil
	case u.Host != "":
		return "", "", fmt.Errorf("backends: local KEK URL %s: unknown host %q (use local:FILE or local://env/VARIABLE)", redact.URL(u.String()), u.Host)
	case u.Opaque != "":
		path = u.Opaque
	default:
		path = u.Path
	}
	if path == "" {
		return "", "", fmt.Errorf("backends: local KEK URL %s names no file", redact.URL(u.String()))
	}
	if !filepath.IsAbs(path) && dir != "" {
		path = filepath.Join(dir, path)
	}
	return path, "", nil
}

// namesBareKey reports a local URL whose whole name (its opaque part, its
// path with the slashes around it trimmed, its host, or its variable) is a
// bare key.
func namesBareKey(u *url.URL) bool {
	if redact.IsBareKey(u.Opaque) || redact.IsBareKey(u.Host) || redact.IsBareKey(strings.Trim(u.Path, "/")) {
		return true
	}
	name, ok := strings.CutPrefix(u.Path, "/")
	return u.Host == "env" && ok && redact.IsBareKey(name)
}
