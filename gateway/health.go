package gateway

import "time"

// JWKSState reports the JWKS's state for a health check: when it was
// last fetched (zero: never, and no token can be verified) and the
// error of the last attempt, if it failed.
func (j *JWTPrincipal) JWKSState() (fetched time.Time, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.fetchOK, j.lastErr
}

// UpstreamState is an upstream as a health check reports it.
type UpstreamState struct {
	URL    string `json:"url"` // without user information
	InTurn bool   `json:"in_turn"`
	// OutFor is how long it stays out of turn, at most: a refused
	// connection took it out, and it is back once this passes (or its
	// HealthPath answers).
	OutFor string `json:"out_for,omitempty"`
}

// UpstreamStates reports each upstream, in the order of Upstreams.
func (g *Gateway) UpstreamStates() []UpstreamState {
	g.init()
	now := time.Now()
	out := make([]UpstreamState, len(g.Upstreams))
	for k, u := range g.Upstreams {
		out[k] = UpstreamState{URL: u.Redacted(), InTurn: true}
		if until := time.Unix(0, g.ups[k].downUntil.Load()); until.After(now) {
			out[k].InTurn, out[k].OutFor = false, until.Sub(now).Round(time.Millisecond).String()
		}
	}
	return out
}
