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
// A token's id is its authentication tag (seal.Header.Tag, from the
// Inspect method of the seal.Sealer that opened it), kept until the
// token's expiry plus [Margin]. Two tokens with one id are one token, so an id tells seals apart exactly when their tokens
// differ. An AEAD seal always differs (its nonce is random). A MAC token
// is a function of its payload, binding and second of issue, so two MAC
// seals of the same state for the same request in the same second are
// the same token, and a guard cannot tell the second one's first use from
// a replay of the first. Package mrtr therefore seals every single-use
// state with 16 random bytes after it (16 bytes more on the wire, under
// either kind of key): each of its seals is a new token with a new id, and
// a user who runs a single-use tool twice, with the same arguments, in one
// second, completes both. Callers that seal for a guard themselves must
// make their payloads differ the same way.
//
// A guard is consulted only after the token authenticated, so an attacker
// cannot fill it with garbage.
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
	// the token, once. Otherwise the caller must refuse the token, and
	// the error says what its client should do:
	//   - ErrReplayed: the id was used before and has not expired; the
	//     first use ran, or is running. Do not repeat on its own.
	//   - ErrUnvouched: the guard can never vouch for this token (it was
	//     issued before the guard lost its records, or sealed by another
	//     instance of a guard that remembers only its own uses); trying
	//     it again cannot help: start the flow again.
	//   - ErrUndetermined: the id was used before, by a call that was
	//     cut before it answered (Doubter): it may or may not have run.
	//     Check before repeating it.
	//   - ErrUnavailable: the guard cannot tell now (it is full, its
	//     server does not answer in time, another use of the id is still
	//     undecided); the token was not used: try it again later.
	Use(ctx context.Context, id []byte, issuedAt, keepUntil time.Time) error
}

// A Releaser is a Guard that can take back a use it recorded, for a
// caller that learns, after Use returned nil, that it provably did not
// act on the token (the gateway could not connect to any upstream, so
// the request never left it): the token is then usable again.
//
// Release must be called only by the caller whose Use of id returned
// nil, and only when nothing acted on the token. A concurrent use of the
// same token between the two calls was told ErrReplayed (the memory
// guard) or ErrUnavailable (Redis, while the use was unconfirmed) and
// did not run either; its client may then start the flow again or
// retry. Release with nothing recorded does nothing.
type Releaser interface {
	Guard
	Release(ctx context.Context, id []byte) error
}

// A Doubter is a Guard that can record that the use it granted had an
// outcome its caller never saw: the caller gave the token to a call that
// was cut before it answered (the gateway's upstream reset the
// connection or went silent mid-answer, a shutdown's deadline passed, the
// client went away while the handler ran), so the call may or may not
// have acted. A later Use of id then fails with ErrUndetermined, not
// ErrReplayed: neither "it ran" nor "start again" would be true.
//
// Doubt must be called only by the caller whose Use of id returned nil.
// Doubt with nothing recorded does nothing.
type Doubter interface {
	Guard
	Doubt(ctx context.Context, id []byte) error
}

// A Local guard remembers only the uses made through it, in this process
// (the Memory guard): a token sealed by another process, or by this one
// before the guard was made, may have been used where the guard cannot
// see. Package mrtr seals the Instance of a Local guard inside every
// single-use state, and refuses with ErrUnvouched a state that carries
// another: so no restart and no second instance can run a state twice.
// Callers that seal for a Local guard themselves must do the same.
type Local interface {
	Guard
	// Instance identifies this guard: random, different for every guard
	// made, in this process or any other.
	Instance() [InstanceSize]byte
}

// InstanceSize is the size of a Local guard's instance id.
const InstanceSize = 8

var (
	// ErrReplayed reports a token used before.
	ErrReplayed = errors.New("replay: token already used")
	// ErrUnavailable reports a guard that cannot record a use. Single-use
	// tokens are refused meanwhile: the guard fails closed.
	ErrUnavailable = errors.New("replay: single-use check unavailable")
	// ErrUnvouched reports a token the guard can never vouch for: it may
	// have been used where the guard cannot see (before a restart of
	// the guard or of its server, on another instance). It does not
	// match ErrUnavailable: a retry of the same token gets the same
	// answer, and the client must start the flow again.
	ErrUnvouched = errors.New("replay: single use cannot be vouched for; start the flow again")
	// ErrUndetermined reports a token whose first use was given to a
	// call that was cut before it answered (Doubter): it may or may not
	// have run. The token is refused for ever, as a replay is; the
	// client must check whether the action took place (a payment, a
	// booking) before it starts the flow again.
	ErrUndetermined = errors.New("replay: a use of this token may or may not have run; check before repeating it")
)

// Margin is how long past its expiry a guard keeps a token's id: the
// largest clock skew an opener may accept (seal.MaxSkew), so that no
// opener can still accept a token its guard has forgotten. It has the
// value of seal.MaxSkew and a name of its own because it is another
// quantity: a Guard's retention, which a Guard written outside this
// module keeps too (see the package doc).
const Margin = seal.MaxSkew
