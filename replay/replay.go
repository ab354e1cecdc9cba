// Package replay makes sealed states single use: the first use of a token
// wins, and every later use is refused until the token expires.
//
// Sealing stops forgery, tampering and moving a state to another tool,
// user or audience, but a client can present the same valid state twice
// within its lifetime. Where consuming a state twice would do harm (a
// payment, a booking, a deletion), give the middleware a [Guard] and name
// the tools it guards (mrtr.Options.SingleUse). Use [NewMemory] for one
// process and the Redis guard (package replay/redisguard) for a fleet,
// where the retry of a round may reach another instance.
//
// A token's id is its authentication tag, which differs for every seal, so
// single use adds no byte on the wire; see [ID]. A guard is consulted only
// after the token authenticated, so an attacker cannot fill it with
// garbage.
package replay

import (
	"context"
	"errors"
	"time"

	"github.com/stateseal/stateseal/seal"
)

// A Guard records uses of tokens. Implementations are safe for concurrent
// use.
type Guard interface {
	// Use records the token id as used until keepUntil. issuedAt is when
	// the token was sealed (its header's issued-at, whole seconds): a
	// guard that lost its records at some time (a restart, a failover)
	// refuses tokens issued before then, which it can no longer vouch for.
	//
	// Use returns nil only for the first use: the caller may then act on
	// the token, once. It returns an error matching ErrReplayed if the id
	// was used before and has not expired, and one matching ErrUnavailable
	// if it cannot tell (the guard is full, its server does not answer in
	// time, another use of the id is still undecided, or the token was
	// issued before the guard lost its records); a caller must then refuse
	// the token.
	Use(ctx context.Context, id []byte, issuedAt, keepUntil time.Time) error
}

var (
	// ErrReplayed reports a token used before.
	ErrReplayed = errors.New("replay: token already used")
	// ErrUnavailable reports a guard that cannot record a use. Single-use
	// tokens are refused meanwhile: the guard fails closed.
	ErrUnavailable = errors.New("replay: single-use check unavailable")
)

// Margin is how long past its expiry a guard keeps a token's id: the
// largest clock skew an opener may accept (seal.WithSkew allows at most
// 10 minutes), so that no opener can still accept a token its guard has
// forgotten.
const Margin = 10 * time.Minute

// ID returns the id of a token, when it was issued, and until when a guard
// must keep it (its expiry plus Margin): what Guard.Use takes. It decodes
// the token's header and tag without any key: call it only on a token
// that Open accepted.
func ID(token string) (id []byte, issuedAt, keepUntil time.Time, err error) {
	h, err := seal.Inspect(token)
	if err != nil {
		return nil, time.Time{}, time.Time{}, err
	}
	return h.Tag, h.IssuedAt, h.Expiry.Add(Margin), nil
}
