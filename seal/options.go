package seal

import (
	"fmt"
	"time"

	"github.com/stateseal/stateseal/internal/envelope"
	"github.com/stateseal/stateseal/keyring"
)

// Defaults. A request state lives while a user answers a prompt; ten
// minutes covers that, an hour bounds what a stolen token is worth.
const (
	DefaultTTL         = 10 * time.Minute
	DefaultMaxTTL      = time.Hour
	DefaultSkew        = 30 * time.Second
	DefaultMaxTokenLen = 64 << 10
)

// MaxTTLLimit is the longest lifetime the format can carry (2^24-1 seconds,
// about 194 days): the bound of Options.MaxTTL. It is keyring.MaxTTLLimit,
// the bound of a keyset's policy, named here beside the option it bounds.
const MaxTTLLimit = keyring.MaxTTLLimit

// Options configure a Sealer. A zero field means its default; nil Options
// mean every default.
type Options struct {
	// DefaultTTL is the lifetime of tokens sealed with a TTL of 0: at
	// least a second, at most the maximum TTL (MaxTTL as it is used,
	// rounded down to whole seconds, or DefaultMaxTTL if unset; a default
	// above it is refused, never capped, since the server asked for that
	// lifetime). 0 means DefaultTTL, or the maximum TTL if that is lower:
	// a server that only lowers its maximum is not refused for a default
	// it never set.
	DefaultTTL time.Duration
	// MaxTTL is the longest lifetime Seal gives a token and Open accepts.
	// Seal caps longer TTLs at it; Open rejects an authentic token that
	// claims a longer lifetime as invalid. Whole seconds, rounded down,
	// between a second and MaxTTLLimit. 0 means DefaultMaxTTL, or the
	// keyset's maximum; a keyset's maximum can only be lowered.
	MaxTTL time.Duration
	// Skew is how far the clocks of the instances that seal and open may
	// disagree: Open accepts a token issued up to Skew in the future and up
	// to Skew after its expiry. Whole seconds, rounded down, at most ten
	// minutes (MaxSkew). 0 means DefaultSkew, or the keyset's skew; NoSkew tolerates
	// none. A keyset's skew can only be lowered.
	Skew time.Duration
	// MaxTokenLen bounds a token's length in bytes (a token is ASCII; any
	// other byte makes it malformed). Open rejects longer input before
	// decoding it, and Seal refuses payloads that would exceed it. 0 means
	// DefaultMaxTokenLen.
	MaxTokenLen int
	// Now replaces time.Now, for tests. nil means time.Now.
	Now func() time.Time
}

// NoSkew, as Options.Skew, tolerates no clock disagreement at all.
const NoSkew time.Duration = -1

// MaxSkew is the largest Options.Skew, and the largest a keyset allows:
// it is keyring.MaxSkew, the bound of a keyset's policy, named here beside
// the option it bounds.
const MaxSkew = keyring.MaxSkew

type config struct {
	defaultTTL, maxTTL, skew time.Duration
	maxTTLSet, skewSet       bool // given as options, not defaults
	maxLen                   int
	now                      func() time.Time
}

func newConfig(o *Options) (config, error) {
	c := config{
		defaultTTL: DefaultTTL,
		maxTTL:     DefaultMaxTTL,
		skew:       DefaultSkew,
		maxLen:     DefaultMaxTokenLen,
		now:        new(wallClock).now,
	}
	if o == nil {
		o = &Options{}
	}
	defaultSet := o.DefaultTTL != 0
	if defaultSet {
		if o.DefaultTTL < time.Second {
			return config{}, fmt.Errorf("seal: default TTL %v is under one second", o.DefaultTTL)
		}
		c.defaultTTL = o.DefaultTTL
	}
	if o.MaxTTL != 0 {
		if o.MaxTTL < time.Second || o.MaxTTL > MaxTTLLimit {
			return config{}, fmt.Errorf("seal: maximum TTL %v is outside [1s, %v]", o.MaxTTL, MaxTTLLimit)
		}
		c.maxTTL, c.maxTTLSet = o.MaxTTL.Truncate(time.Second), true
	}
	switch {
	case o.Skew == NoSkew:
		c.skew, c.skewSet = 0, true
	case o.Skew < 0 || o.Skew > MaxSkew:
		return config{}, fmt.Errorf("seal: clock skew %v is outside [0, %v]", o.Skew, MaxSkew)
	case o.Skew != 0:
		c.skew, c.skewSet = o.Skew.Truncate(time.Second), true
	}
	if o.MaxTokenLen != 0 {
		if o.MaxTokenLen < envelope.EncodedLen(envelope.Overhead(envelope.VersionAEAD)) {
			return config{}, fmt.Errorf("seal: maximum token length %d cannot hold an empty token", o.MaxTokenLen)
		}
		c.maxLen = o.MaxTokenLen
	}
	if o.Now != nil {
		c.now = o.Now
	}
	// A default TTL is compared with the maximum as it is used, rounded
	// down: a default of 299.5 s seals for 300 s, which a maximum of
	// 299.9 s (299 s) would cap. An unset default follows the maximum
	// down.
	switch {
	case !defaultSet:
		c.defaultTTL = min(c.defaultTTL, c.maxTTL)
	case c.defaultTTL > c.maxTTL:
		return config{}, fmt.Errorf("seal: default TTL %v exceeds maximum TTL %v", c.defaultTTL, c.maxTTL)
	}
	return c, nil
}

// limits returns the bounds in force for snap. A keyset's policy holds
// for the whole fleet, and rotation's safety rules count on it, so an
// option may tighten it but never loosen it.
func (c *config) limits(snap *keyring.Snapshot) limits {
	maxTTL, skew := c.maxTTL, c.skew
	if p, ok := snap.Policy(); ok {
		maxTTL = tighten(c.maxTTLSet, c.maxTTL, p.MaxTTL)
		skew = tighten(c.skewSet, c.skew, p.Skew)
	}
	return limits{
		defaultTTL: min(c.defaultTTL, maxTTL),
		maxTTL:     maxTTL,
		maxTTLSec:  int64(maxTTL / time.Second),
		skewSec:    int64(skew / time.Second),
	}
}

func tighten(set bool, option, policy time.Duration) time.Duration {
	if set {
		return min(option, policy)
	}
	return policy
}
