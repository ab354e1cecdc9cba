package scan

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// A Step is what a scan would do for one check of one target.
type Step struct {
	Tool  string
	Check string
	// Sends describes the requests, or why the check would skip.
	Sends string
	// Requests is the most requests the check sends.
	Requests int
}

// Plan lists what Run would send for c, without sending anything: each
// target's first request (credentials by name only) and each check with
// its requests, the baseline's rounds counted as two (a target that asks
// more rounds costs one more request per round and check).
func Plan(c *Config) ([]string, []Step, error) {
	if err := c.validate(); err != nil {
		return nil, nil, err
	}
	var lines []string
	var steps []Step
	for _, t := range c.Targets {
		m := t.Method
		if m == "" {
			m = ToolsCall
		}
		args := "no arguments"
		if t.Arguments != nil {
			args = "arguments " + string(t.Arguments)
		}
		lines = append(lines, fmt.Sprintf("POST %s: %s %s, %s, headers %s; then the retries of each check below (executes %s)", c.URL, m, t.Name, args, HeaderNames(c.Header), t.Name))
		for _, ch := range Checks {
			if len(c.Checks) > 0 && ch.ID != "baseline" && !contains(c.Checks, ch.ID) {
				continue
			}
			s := Step{Tool: t.Name, Check: ch.ID, Sends: ch.Sends, Requests: 2}
			switch ch.ID {
			case "baseline":
			case "weak-key":
				s.Requests = 2
			case "readable-state", "secret-in-state", "distinct-errors":
				s.Requests = 0
			case "unasked-answers":
				s.Requests = 1
			case "short-tag":
				s.Requests = 1 + 8 // up to 4 cuts of a tag, with and without forged content
			case "forge-plaintext":
				s.Requests = 1 + maxForgeries
			case "tamper":
				s.Requests = 1 + 6
			case "truncate", "extend":
				s.Requests = 1 + 2
			case "encoding":
				s.Requests = 3 + 6 // up to three flows for a state with another spelling
			case "other-tool":
				if t.MoveTo == "" {
					s.Sends, s.Requests = "skip: no -move-to", 0
				} else {
					s.Sends = "its own flow, a random state, then the state, sent to " + t.MoveTo + " (executes " + t.MoveTo + ")"
					s.Requests = 1 + 4
				}
			case "other-method":
				if len(t.OtherMethods) == 0 {
					s.Sends, s.Requests = "skip: no -move-to of another method", 0
				} else {
					var names []string
					for _, m := range t.OtherMethods {
						names = append(names, m.Method+" "+m.Name)
					}
					s.Sends = "its own flow, a random state, then the state, sent to " + strings.Join(names, ", then ") + " (executes them)"
					s.Requests = 1 + 4*len(t.OtherMethods)
				}
			case "other-server":
				if c.OtherURL == "" {
					s.Sends, s.Requests = "skip: no -other-url", 0
				} else {
					s.Sends = "POST " + c.OtherURL + ": first its own flow, then the state issued at " + c.URL
					s.Requests = 4
				}
			case "other-args":
				changes := changeArgs(t.Arguments)
				if len(changes) == 0 {
					s.Sends, s.Requests = "skip: no arguments", 0
				} else {
					var whats []string
					for _, c := range changes {
						whats = append(whats, c.what)
					}
					s.Sends = "the state sent with " + strings.Join(whats, ", then ")
					s.Requests = 1 + len(changes)
				}
			case "other-principal":
				if len(c.OtherHeader) == 0 {
					s.Sends, s.Requests = "skip: no second principal", 0
				} else {
					s.Sends += ", headers " + HeaderNames(c.OtherHeader) + "; first that principal's own flow"
					s.Requests = 4
				}
			case "no-credential":
				if len(c.Header) == 0 {
					s.Sends, s.Requests = "skip: no credential", 0
				}
			case "expired":
				if c.ExpiryWait == 0 {
					s.Sends, s.Requests = "skip: no -expiry-wait", 0
				} else {
					s.Sends += fmt.Sprintf(" (waits %s)", c.ExpiryWait)
				}
			case "replay-single-use":
				if !t.SingleUse {
					s.Sends, s.Requests = "skip: not -single-use", 0
				} else {
					s.Requests = 2 + 1 + 6
				}
			case "replay-race":
				if !t.SingleUse {
					s.Sends, s.Requests = "skip: not -single-use", 0
				} else {
					s.Requests = 1 + raceN
				}
			}
			steps = append(steps, s)
		}
	}
	return lines, steps, nil
}

// HeaderNames names h's headers with their values hidden.
func HeaderNames(h http.Header) string {
	if len(h) == 0 {
		return "(none)"
	}
	var names []string
	for k, vs := range h {
		n := 0
		for _, v := range vs {
			n += len(v)
		}
		names = append(names, fmt.Sprintf("%s: <%d chars hidden>", k, n))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}
