package seal

import (
	"errors"
	"fmt"
)

var (
	// ErrMalformed: not a token. Bad base64url, wrong length, unknown
	// version.
	ErrMalformed = errors.New("seal: malformed token")
	// ErrTooLarge: the token, or the token a payload would make, is longer
	// than the configured maximum.
	ErrTooLarge = errors.New("seal: token too large")
	// ErrUnknownKey: no key of the ring with this id may open tokens. The
	// key was never in the keyset, was pruned, or is retired.
	ErrUnknownKey = errors.New("seal: unknown key")
	// ErrInvalid: authentication failed. The token was forged or changed,
	// or is opened under another binding or by a key of the other kind.
	ErrInvalid = errors.New("seal: invalid token")
	// ErrExpired: an authentic token whose expiry, plus the allowed clock
	// skew, has passed.
	ErrExpired = errors.New("seal: token expired")
	// ErrNotYetValid: an authentic token issued after now plus the allowed
	// clock skew.
	ErrNotYetValid = errors.New("seal: token not yet valid")
)

// errLifetime is returned for an authentic token that claims a longer life
// than this Sealer allows; it matches ErrInvalid.
var errLifetime = fmt.Errorf("%w: lifetime exceeds the maximum TTL", ErrInvalid)

// Reason reduces an error from Open to the word a client may be shown:
// "expired" for ErrExpired, "invalid" for everything else. It never reveals
// which check failed, so a client cannot probe key ids or bindings.
// mrtr.Reason adds the reasons of a single-use guard's refusals.
func Reason(err error) string {
	if errors.Is(err, ErrExpired) {
		return "expired"
	}
	return "invalid"
}
