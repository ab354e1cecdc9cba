package vault

import (
	"context"
	"net/http"
	"net/url"

	"github.com/stateseal/stateseal/backends"
)

// OpenerHTTP is Opener(nil) whose session sends requests through hc, so
// that tests can count them (logins among them).
func OpenerHTTP(hc *http.Client) backends.Opener {
	return func(ctx context.Context, u *url.URL, _ *backends.OpenOptions) (backends.KEK, error) {
		mount, name, err := parse(u)
		if err != nil {
			return nil, err
		}
		return open(ctx, u, mount, name, hc)
	}
}
