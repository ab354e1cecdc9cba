package keyset

import (
	"errors"
	"time"
)

// Health is what a Loader knows of its keyset and its sources, for a
// liveness or readiness probe and for dashboards. Its JSON form is what
// examples/mcpserver serves at /healthz.
type Health struct {
	// Ready is true once a keyset is installed: the instance can seal and
	// open. It stays true through store and KMS outages, when the last
	// good keyset keeps serving, until the installed keyset expires.
	Ready bool `json:"ready"`
	// Stale is true once the installed keyset's freshness window has
	// passed (Expires) with nothing newer loading: the keyset keeps
	// serving, but Ready is false and Error reports ErrStale. Nothing
	// refreshed the keyset, or a store writer froze or rolled back the
	// store (docs/KEYSET.md, "Trust": a freeze).
	Stale bool `json:"stale,omitempty"`
	// Keyset and Version name the keyset installed.
	Keyset  string `json:"keyset,omitempty"`
	Version uint64 `json:"version,omitempty"`
	// Tag is the installed document's tag (Keyset.TagText): instances
	// that installed the same document show the same Tag, and one served
	// another branch at the same version (a split view) shows another,
	// where Version alone agrees. docs/ROTATION.md's checks compare it.
	Tag string `json:"tag,omitempty"`
	// Installed is when that version was installed; Expires is when it
	// stops loading on a fresh instance unless rewritten (zero: no
	// freshness window).
	Installed time.Time `json:"installed,omitzero"`
	Expires   time.Time `json:"expires,omitzero"`
	// Polls counts the polls and reloads since Load, answered or not: a
	// probe that sees it grow knows the loader is alive.
	Polls uint64 `json:"polls"`
	// LastCheck is the last poll or reload that confirmed the installed
	// keyset is current (the store answered and nothing new failed).
	LastCheck time.Time `json:"last_check,omitzero"`
	// StoreSeen and KMSSeen are the last times the store answered a read
	// or a revision check, and a KMS call succeeded. A KMS is called only
	// when wrapped bytes change, so an old KMSSeen alone means nothing.
	StoreSeen time.Time `json:"store_seen,omitzero"`
	KMSSeen   time.Time `json:"kms_seen,omitzero"`
	// Error is the failure of the last poll or reload ("" if it
	// succeeded); Outage is true when it is the store or the KMS not
	// answering rather than a keyset that does not load.
	Error  string `json:"error,omitempty"`
	Outage bool   `json:"outage,omitempty"`
}

// Health returns the loader's state. It is safe to call at any time,
// also while Run polls.
func (l *Loader) Health() Health {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := Health{
		Polls: l.polls, LastCheck: l.lastCheck, StoreSeen: l.storeSeen, KMSSeen: l.kmsSeen,
		Installed: l.installed,
	}
	if l.ring != nil && l.current != nil {
		h.Ready, h.Keyset, h.Version, h.Tag, h.Expires = true, l.current.ID, l.current.Version, l.current.TagText(), l.current.Expires
		if err := l.stale(); err != nil {
			h.Ready, h.Stale = false, true
			if l.lastErr == nil {
				h.Error = err.Error()
			}
		}
	}
	if l.lastErr != nil {
		h.Error = l.lastErr.Error()
		var te transientError
		h.Outage = errors.As(l.lastErr, &te)
	}
	return h
}
