package seal

import (
	"errors"
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
// about 194 days).
const MaxTTLLimit = envelope.MaxLifetime * time.Second

// An Option configures a Sealer.
type Option func(*config) error

type config struct {
	defaultTTL, maxTTL, skew time.Duration
	maxTTLSet, skewSet       bool // given as options, not defaults
	maxLen                   int
	now                      func() time.Time
}

// WithDefaultTTL sets the lifetime of tokens sealed with a TTL of 0.
func WithDefaultTTL(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Second {
			return fmt.Errorf("stateseal: default TTL %v is under one second", d)
		}
		c.defaultTTL = d
		return nil
	}
}

// WithMaxTTL sets the longest lifetime Seal gives a token and Open accepts.
// Seal caps longer TTLs at it; Open rejects an authentic token that claims a
// longer lifetime as invalid. It is counted in whole seconds, rounded down.
// A keyset loaded from a file carries its own maximum; this option can only
// lower it.
func WithMaxTTL(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Second || d > MaxTTLLimit {
			return fmt.Errorf("stateseal: maximum TTL %v is outside [1s, %v]", d, MaxTTLLimit)
		}
		c.maxTTL, c.maxTTLSet = d.Truncate(time.Second), true
		return nil
	}
}

// WithSkew sets how far the clocks of the instances that seal and open may
// disagree. Open accepts a token issued up to skew in the future and up to
// skew after its expiry. It is counted in whole seconds, rounded down.
// A keyset loaded from a file carries its own skew; this option can only
// lower it.
func WithSkew(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 || d > 10*time.Minute {
			return fmt.Errorf("stateseal: clock skew %v is outside [0, 10m]", d)
		}
		c.skew, c.skewSet = d.Truncate(time.Second), true
		return nil
	}
}

// WithMaxTokenLen bounds the length of a token in bytes (a token is
// ASCII; any other byte makes it malformed). Open rejects longer input
// before decoding it, and Seal refuses payloads that would exceed it.
func WithMaxTokenLen(n int) Option {
	return func(c *config) error {
		if n < envelope.EncodedLen(envelope.Overhead(envelope.VersionAEAD)) {
			return fmt.Errorf("stateseal: maximum token length %d cannot hold an empty token", n)
		}
		c.maxLen = n
		return nil
	}
}

// WithClock replaces time.Now, for tests.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("stateseal: nil clock")
		}
		c.now = now
		return nil
	}
}

func newConfig(opts []Option) (config, error) {
	c := config{
		defaultTTL: DefaultTTL,
		maxTTL:     DefaultMaxTTL,
		skew:       DefaultSkew,
		maxLen:     DefaultMaxTokenLen,
		now:        new(wallClock).now,
	}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return config{}, err
		}
	}
	if c.defaultTTL > c.maxTTL {
		return config{}, fmt.Errorf("stateseal: default TTL %v exceeds maximum TTL %v", c.defaultTTL, c.maxTTL)
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
