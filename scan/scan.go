// Package scan is statescan: a black-box scanner of the requestState an
// MCP server (revision 2026-07-28, SEP-2322 multi round-trip requests)
// hands its clients. It is an MCP client and nothing more. It knows the
// protocol, never a token format, so it judges any server the same way.
//
// Start at Run: give it a Config naming the server's URL and the Targets
// (tools, prompts or resources, with their arguments) to scan. For each
// target Run drives the honest flow first (the first round, the answers
// to the inputRequests, the retry with the requestState echoed) and
// requires that it completes: without that baseline every check of the
// target is Skip, with the reason. Then each check starts a fresh flow
// and sends one retry changed in one way; a completed result is an
// acceptance (whatever the HTTP status), every other answer a refusal (a
// JSON-RPC error, an isError result, a fresh input_required, an HTTP
// error or page without a JSON-RPC response), and no answer at all a
// Skip. Checks lists every check with the spec sentence it tests.
//
// A scan executes the targets it is given, as a client would, several
// times each: point it at staging, and at tools whose effects you can
// afford. It sends only POSTs of tools/call, prompts/get and
// resources/read to those targets: no initialize, no session, no tool
// discovery (docs/SCAN.md, "What your server must serve"). It sends nothing
// anywhere but Config.URL and Config.OtherURL (redirects are refused),
// and keeps within a request budget and rate per target (replay-race's
// copies of one retry go at once, in one slot of the rate). A report
// names a state only by its first characters and length, and never
// quotes a credential's value or a state a server echoes.
//
// ExampleRun is a complete scan of an in-process server; Plan is the dry
// run; cmd/statescan is the command, and docs/SCAN.md describes every
// check, what it proves and what it cannot see.
package scan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Errors Run returns; a finding is never an error, it is a Fail in the
// Report.
var (
	// ErrConfig is a Config Run cannot scan with.
	ErrConfig = errors.New("scan: bad configuration")
	// ErrUnreachable is a server that gave no answer at all to the first
	// request of any target.
	ErrUnreachable = errors.New("scan: server unreachable")
)

// Methods that may answer input_required.
const (
	ToolsCall     = "tools/call"
	PromptsGet    = "prompts/get"
	ResourcesRead = "resources/read"
)

// A Target is one tool, prompt or resource to scan.
type Target struct {
	// Method is ToolsCall (the default), PromptsGet or ResourcesRead.
	Method string
	// Name is the tool or prompt name, or the resource URI.
	Name string
	// Arguments is a JSON object sent as params.arguments, or nil.
	// other-args changes one of its values: without arguments it skips.
	Arguments json.RawMessage
	// SingleUse says that each state must open once (a tool that pays,
	// books, deletes): replay-single-use sends a used state again.
	SingleUse bool
	// MoveTo names a second target of the same method to which other-tool
	// moves this target's states (with MoveArguments, or Arguments when
	// nil). Pick one that uses its state. Empty: other-tool skips.
	MoveTo        string
	MoveArguments json.RawMessage
	// OtherMethods are targets of the same server reached by another
	// method (a prompt or a resource for a tool, a tool for a prompt)
	// to which other-method sends this target's states, each in turn.
	// Pick ones that use their state. Empty: other-method skips.
	OtherMethods []Move
}

// A Move is a target of another method that other-method sends a state
// to.
type Move struct {
	// Method is ToolsCall, PromptsGet or ResourcesRead.
	Method string
	// Name is the tool or prompt name, or the resource URI.
	Name string
	// Arguments is a JSON object sent as params.arguments, or nil.
	Arguments json.RawMessage
}

// A Config is a scan's whole configuration.
type Config struct {
	// URL is the server's Streamable HTTP endpoint (http://host/mcp). No
	// request goes anywhere else, but to OtherURL.
	URL string
	// OtherURL is a second deployment of the same server (another
	// region, staging) that may share its keys: other-server sends it
	// states issued at URL. Empty: other-server skips.
	OtherURL string
	// Targets are scanned in turn.
	Targets []Target
	// Header goes with every request: the credential of the principal
	// the flows run as (Authorization, a cookie, a proxy's user header).
	Header http.Header
	// OtherHeader is a second principal's credential, for
	// other-principal; nil skips it. no-credential sends Header's
	// requests without Header, and skips when Header is empty.
	OtherHeader http.Header
	// ExpiryWait is how long expired waits between a state's issue and
	// its retry: longer than the server's state lifetime. Zero skips
	// expired.
	ExpiryWait time.Duration
	// Answers overrides the answer to an input request, by its key in
	// inputRequests: the whole response object (an ElicitResult, a
	// CreateMessageResult, a ListRootsResult). Others are made from their
	// schemas.
	Answers map[string]json.RawMessage
	// Checks limits the scan to these check ids (nil: all).
	Checks []string
	// Budget bounds the requests per target (default 100). A check that
	// would exceed it is Skip, and counted in Report.OverBudget.
	Budget int
	// Rate bounds the requests per second per target (default 50).
	Rate float64
	// Timeout bounds each request (default 10 s).
	Timeout time.Duration
	// HTTPClient sends the requests (default http.DefaultClient's
	// settings); its CheckRedirect is replaced: redirects are refused.
	HTTPClient *http.Client
	// Progress, when not nil, is told what a long wait waits for (the
	// expired check's), so that a scan is not silent for minutes.
	Progress func(msg string)
}

// A Result is a check's verdict.
type Result string

// The verdicts.
const (
	Pass Result = "pass" // the server refused what it must refuse
	Fail Result = "fail" // it accepted it: a finding
	Skip Result = "skip" // not tested; Detail says why
	Info Result = "info" // an observation, not a failure
)

// A Severity ranks a Fail.
type Severity string

// The severities.
const (
	High   Severity = "high"
	Medium Severity = "medium"
	Low    Severity = "low"
	None   Severity = "info"
)

// A Finding is one check's result on one target.
type Finding struct {
	ID       string   `json:"id"`
	Tool     string   `json:"tool"`
	Result   Result   `json:"result"`
	Severity Severity `json:"severity"`
	Detail   string   `json:"detail"`
	// Spec is the spec sentence the check tests.
	Spec string `json:"-"`
	// Requests is how many requests the check sent.
	Requests int `json:"-"`
	// OverBudget marks a Skip for want of requests: Config.Budget was
	// spent before the check could run to its end (its Detail says
	// "request budget spent"). Such a check tested nothing.
	OverBudget bool `json:"-"`
}

// ReportVersion is the version of a Report's JSON form: 2 added the
// version, the summary and the reason. A reader should refuse a version
// it does not know.
const ReportVersion = 2

// A Report is a scan's outcome. Its JSON form is
//
//	{"version": 2, "target": URL, "judged": bool, "reason": "...",
//	 "summary": {"requests", "seconds", "pass", "fail", "skip", "info"},
//	 "checks": [{"id", "tool", "result", "severity", "detail"}]}
//
// with reason only when nothing was judged.
type Report struct {
	Target   string
	Checks   []Finding
	Requests int
	Elapsed  time.Duration
	// Reason says why the scan judged nothing (no target's baseline
	// completed, the server did not answer, the configuration was
	// refused, the scan was interrupted); empty when it judged.
	Reason string
}

// A Summary counts a Report's requests, time and results.
type Summary struct {
	Requests int     `json:"requests"`
	Seconds  float64 `json:"seconds"`
	Pass     int     `json:"pass"`
	Fail     int     `json:"fail"`
	Skip     int     `json:"skip"`
	Info     int     `json:"info"`
}

// Summary counts r's requests, time and results.
func (r *Report) Summary() Summary {
	s := Summary{Requests: r.Requests, Seconds: float64(r.Elapsed.Round(time.Millisecond)) / float64(time.Second)}
	for _, c := range r.Checks {
		switch c.Result {
		case Pass:
			s.Pass++
		case Fail:
			s.Fail++
		case Skip:
			s.Skip++
		case Info:
			s.Info++
		}
	}
	return s
}

// MarshalJSON writes the Report's JSON form (ReportVersion).
func (r Report) MarshalJSON() ([]byte, error) {
	checks := r.Checks
	if checks == nil {
		checks = []Finding{}
	}
	return json.Marshal(struct {
		Version int       `json:"version"`
		Target  string    `json:"target"`
		Judged  bool      `json:"judged"`
		Reason  string    `json:"reason,omitempty"`
		Summary Summary   `json:"summary"`
		Checks  []Finding `json:"checks"`
	}{ReportVersion, r.Target, r.Judged(), r.Reason, r.Summary(), checks})
}

// Failed reports whether some check failed.
func (r *Report) Failed() bool {
	for _, c := range r.Checks {
		if c.Result == Fail {
			return true
		}
	}
	return false
}

// OverBudget counts the checks skipped because the request budget
// (Config.Budget) was spent: a scan with any is incomplete, however few
// it failed.
func (r *Report) OverBudget() int {
	n := 0
	for _, c := range r.Checks {
		if c.OverBudget {
			n++
		}
	}
	return n
}

// Judged reports whether some target's baseline completed, so that the
// report says something about the server.
func (r *Report) Judged() bool {
	for _, c := range r.Checks {
		if c.ID == "baseline" && c.Result == Pass {
			return true
		}
	}
	return false
}

// Run scans every target of c and returns the report. Its error is
// ErrConfig for a Config it cannot use, ErrUnreachable when no request
// of any target got an answer, or the context's error; a server's
// failures are in the Report. With ErrUnreachable or the context's
// error it still returns the Report so far, its Reason set, so that a
// CI job keeps a report of why nothing was judged.
func Run(ctx context.Context, c *Config) (*Report, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	rep := &Report{Target: c.URL}
	answered := false
	for i := range c.Targets {
		t, err := newTargetScan(c, &c.Targets[i])
		if err != nil {
			return nil, err
		}
		t.run(ctx)
		if err := ctx.Err(); err != nil {
			rep.Checks = append(rep.Checks, t.findings...)
			rep.Requests += t.sent
			rep.Elapsed = time.Since(start)
			rep.Reason = "interrupted: " + err.Error()
			return rep, err
		}
		rep.Checks = append(rep.Checks, t.findings...)
		rep.Requests += t.sent
		answered = answered || t.answered
	}
	rep.Elapsed = time.Since(start)
	if !answered {
		rep.Reason = "the server did not answer: " + firstDetail(rep)
		return rep, fmt.Errorf("%w: %s", ErrUnreachable, firstDetail(rep))
	}
	if !rep.Judged() {
		rep.Reason = "no target's honest flow completed: " + firstDetail(rep)
	}
	return rep, nil
}

func firstDetail(r *Report) string {
	for _, c := range r.Checks {
		if c.ID == "baseline" {
			return c.Detail
		}
	}
	return "no target"
}

func (c *Config) validate() error {
	if c == nil {
		return fmt.Errorf("%w: nil Config", ErrConfig)
	}
	if c.URL == "" {
		return fmt.Errorf("%w: no URL", ErrConfig)
	}
	if len(c.Targets) == 0 {
		return fmt.Errorf("%w: no target to scan", ErrConfig)
	}
	for _, t := range c.Targets {
		switch t.Method {
		case "", ToolsCall, PromptsGet, ResourcesRead:
		default:
			return fmt.Errorf("%w: method %q cannot answer input_required", ErrConfig, t.Method)
		}
		if t.Name == "" {
			return fmt.Errorf("%w: a target without a name", ErrConfig)
		}
		args := []json.RawMessage{t.Arguments, t.MoveArguments}
		for _, m := range t.OtherMethods {
			switch m.Method {
			case ToolsCall, PromptsGet, ResourcesRead:
			default:
				return fmt.Errorf("%w: %s: other method %q cannot answer input_required", ErrConfig, t.Name, m.Method)
			}
			if m.Name == "" {
				return fmt.Errorf("%w: %s: an other-method target without a name", ErrConfig, t.Name)
			}
			args = append(args, m.Arguments)
		}
		for _, a := range args {
			if a == nil {
				continue
			}
			var m map[string]any
			if json.Unmarshal(a, &m) != nil || m == nil {
				return fmt.Errorf("%w: %s: arguments must be a JSON object", ErrConfig, t.Name)
			}
		}
	}
	for _, id := range c.Checks {
		if _, ok := checkByID[id]; !ok {
			return fmt.Errorf("%w: unknown check %q", ErrConfig, id)
		}
	}
	if c.Budget < 0 || c.Rate < 0 || c.Timeout < 0 || c.ExpiryWait < 0 {
		return fmt.Errorf("%w: negative budget, rate, timeout or wait", ErrConfig)
	}
	return nil
}
