package gateway

import (
	"errors"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-jose/go-jose/v4/jwt"
)

// PrincipalReasons are the reasons a request has no principal, as
// Stats.PrincipalFailures counts them: a bounded set, whatever clients
// send.
var PrincipalReasons = []string{"missing", "malformed", "key", "signature", "expired", "not_yet_valid", "issuer", "audience", "claim", "header", "other"}

// PrincipalStats counts requests whose credentials the PrincipalSource
// refused, by reason.
type PrincipalStats struct {
	n      [11]atomic.Int64 // by index in PrincipalReasons
	logged everySecond      // the log line
}

// Failures returns the counts by reason.
func (s *PrincipalStats) Failures() map[string]int64 {
	m := make(map[string]int64, len(PrincipalReasons))
	for i, r := range PrincipalReasons {
		m[r] = s.n[i].Load()
	}
	return m
}

type reasonError struct {
	reason string
	err    error
}

func (e reasonError) Error() string { return e.err.Error() }
func (e reasonError) Unwrap() error { return e.err }

func because(reason string, err error) error { return reasonError{reason, err} }

// principalReason reduces a PrincipalSource's error to one of
// PrincipalReasons.
func principalReason(err error) string {
	var re reasonError
	switch {
	case errors.As(err, &re):
		return re.reason
	case errors.Is(err, jwt.ErrExpired):
		return "expired"
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return "not_yet_valid"
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return "issuer"
	case errors.Is(err, jwt.ErrInvalidAudience):
		return "audience"
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "no bearer token"), strings.Contains(msg, "no verified client certificate"):
		return "missing"
	case strings.Contains(msg, "the token has no"), strings.Contains(msg, "certificate has no"):
		return "claim"
	case strings.Contains(msg, "set by an untrusted address"), strings.Contains(msg, "spelled another way"), strings.Contains(msg, "want one "):
		return "header"
	}
	return "other"
}

// principalFailed counts a refused credential and logs it at info, at
// most one line a second (clients choose how often it happens).
func (g *Gateway) principalFailed(err error) {
	reason := principalReason(err)
	for i, r := range PrincipalReasons {
		if r == reason {
			g.Stats.Principal.n[i].Add(1)
		}
	}
	if g.Stats.Principal.logged.allow() {
		g.logger().Info("gateway: request without a principal: it reaches the upstream, but carries no state", "reason", reason, "err", err)
	}
}

// everySecond lets a log line through at most once a second: for lines
// whose rate a client or an upstream chooses.
type everySecond struct{ last atomic.Int64 } // UnixNano of the last line

func (e *everySecond) allow() bool {
	last := e.last.Load()
	now := time.Now().UnixNano()
	return now-last >= int64(time.Second) && e.last.CompareAndSwap(last, now)
}

// short is text from a client or an upstream as a log line or an error
// may hold it: at most 64 bytes (the rest cut, on a rune boundary).
func short(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
}
