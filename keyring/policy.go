package keyring

import (
	"errors"
	"fmt"
	"time"

	"github.com/stateseal/stateseal/internal/envelope"
)

// Policy holds the timing every instance and the CLI must agree on, so it
// lives in the keyset.
type Policy struct {
	// PropagationDelay is how long a new key waits before it seals: longer
	// than any instance takes to reload the keyset.
	PropagationDelay time.Duration
	// MaxTTL is the longest token lifetime; seal caps TTLs at it.
	MaxTTL time.Duration
	// Skew is the clock disagreement tolerated between instances.
	Skew time.Duration
	// RotationInterval is how often the scheduler rotates.
	RotationInterval time.Duration
	// Freshness bounds how old a keyset may be and still load: every write
	// sets Keyset.Expires to its time plus Freshness, and the scheduler
	// refreshes the keyset when less than half of it is left. It is the
	// bound on a rollback of the store that a fresh instance accepts.
	// Zero turns it off (docs/KEYSET.md says what that costs).
	Freshness time.Duration
}

// DefaultPolicy returns the policy of a new keyset.
func DefaultPolicy() Policy {
	return Policy{
		PropagationDelay: 10 * time.Minute,
		MaxTTL:           time.Hour,
		Skew:             30 * time.Second,
		RotationInterval: 30 * 24 * time.Hour,
		Freshness:        7 * 24 * time.Hour,
	}
}

// MaxTTLLimit is the longest token lifetime the token format can carry
// (2^24-1 seconds, about 194 days).
const MaxTTLLimit = envelope.MaxLifetime * time.Second

// MaxSkew is the largest clock skew a keyset or a sealer tolerates: the
// bound that single-use guards (replay.Margin) and retirement count on.
const MaxSkew = 10 * time.Minute

// Freshness bounds: shorter windows make every missed refresh an outage,
// and longer ones a weaker rollback bound than the rotation interval.
const (
	MinFreshness = time.Hour
	MaxFreshness = 366 * 24 * time.Hour
)

// Validate checks the policy's values.
func (p Policy) Validate() error {
	switch {
	case p.PropagationDelay < 0:
		return errors.New("keyring: negative propagation delay")
	case p.MaxTTL < time.Second || p.MaxTTL > MaxTTLLimit:
		return fmt.Errorf("keyring: maximum TTL %v is outside [1s, %v]", p.MaxTTL, MaxTTLLimit)
	case p.Skew < 0 || p.Skew > MaxSkew:
		return fmt.Errorf("keyring: clock skew %v is outside [0, %v]", p.Skew, MaxSkew)
	case p.RotationInterval < 0:
		return errors.New("keyring: negative rotation interval")
	case p.RotationInterval > 0 && p.RotationInterval <= p.PropagationDelay:
		return fmt.Errorf("keyring: rotation interval %v must exceed the propagation delay %v", p.RotationInterval, p.PropagationDelay)
	case p.Freshness != 0 && (p.Freshness < MinFreshness || p.Freshness > MaxFreshness):
		return fmt.Errorf("keyring: freshness %v is outside [%v, %v] (or 0: off)", p.Freshness, MinFreshness, MaxFreshness)
	}
	for _, d := range []time.Duration{p.PropagationDelay, p.MaxTTL, p.Skew, p.RotationInterval, p.Freshness} {
		if d%time.Second != 0 {
			return fmt.Errorf("keyring: policy duration %v is not whole seconds", d)
		}
	}
	return nil
}
