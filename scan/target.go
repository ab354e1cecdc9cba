package scan

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stateseal/stateseal/scan/internal/stateform"
	"github.com/stateseal/stateseal/scan/internal/wire"
)

// maxRounds bounds the honest flow: a target still asking after this
// many rounds has no baseline.
const maxRounds = 8

var errBudget = errors.New("request budget spent")

// targetScan scans one target.
type targetScan struct {
	c        *Config
	t        *Target
	method   string
	client   *wire.Client
	other    *wire.Client // OtherURL's, or nil
	findings []Finding
	results  map[string]Result

	budget int
	sent   int
	// starved is set when a request was not sent for want of budget,
	// since the check began: a Skip then is OverBudget.
	starved  bool
	answered bool
	interval time.Duration
	last     time.Time

	// rounds is the number of requests of the honest flow, the last
	// being the retry that completes.
	rounds int
	// state is the baseline's last state; asks and responses its last
	// round's input requests and answers; done the text of its
	// completion.
	state     string
	asks      map[string]json.RawMessage
	responses map[string]json.RawMessage
	done      string
	refusals  map[string]string
	// hidden are the states sent and received and the credentials'
	// values: a detail never quotes them, even where a server echoes one.
	hidden map[string]bool
}

// last is the round whose honest retry completes the flow.
type lastRound struct {
	state     string
	hasState  bool
	asks      map[string]json.RawMessage
	responses map[string]json.RawMessage
}

func newTargetScan(c *Config, t *Target) (*targetScan, error) {
	client, err := wire.NewClient(c.URL, c.HTTPClient)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	x := &targetScan{c: c, t: t, method: t.Method, client: client, budget: c.Budget, refusals: map[string]string{}, hidden: map[string]bool{}, results: map[string]Result{}}
	if c.OtherURL != "" {
		if x.other, err = wire.NewClient(c.OtherURL, c.HTTPClient); err != nil {
			return nil, fmt.Errorf("%w: other URL: %v", ErrConfig, err)
		}
	}
	for _, h := range []http.Header{c.Header, c.OtherHeader} {
		for _, vs := range h {
			for _, v := range vs {
				x.hide(v)
				if _, tok, ok := strings.Cut(v, " "); ok {
					x.hide(tok) // the token of "Bearer TOKEN"
				}
			}
		}
	}
	if x.method == "" {
		x.method = ToolsCall
	}
	if x.budget == 0 {
		x.budget = 100
	}
	rate := c.Rate
	if rate == 0 {
		rate = 50
	}
	x.interval = time.Duration(float64(time.Second) / rate)
	return x, nil
}

func (x *targetScan) enabled(id string) bool {
	if len(x.c.Checks) == 0 {
		return true
	}
	for _, c := range x.c.Checks {
		if c == id {
			return true
		}
	}
	return false
}

func (x *targetScan) add(id string, r Result, detail string, requests int) {
	c := checkByID[id]
	sev := c.Severity
	if r != Fail {
		sev = None
	}
	if id == "encoding" && r == Fail && x.t.SingleUse {
		sev = Medium
	}
	x.results[id] = r
	x.findings = append(x.findings, Finding{ID: id, Tool: x.t.Name, Result: r, Severity: sev, Detail: x.scrub(detail), Spec: c.Spec, Requests: requests,
		// A check skipped after a request was refused for want of
		// budget, or every check of a baseline that ran out of it.
		OverBudget: r == Skip && x.starved})
}

// hide keeps s out of every detail.
func (x *targetScan) hide(s string) {
	if len(s) >= 4 {
		x.hidden[s] = true
	}
}

// scrub replaces every hidden string in d, the longest first.
func (x *targetScan) scrub(d string) string {
	var hs []string
	for h := range x.hidden {
		if strings.Contains(d, h) {
			hs = append(hs, h)
		}
	}
	sort.Slice(hs, func(i, j int) bool { return len(hs[i]) > len(hs[j]) })
	for _, h := range hs {
		d = strings.ReplaceAll(d, h, "<hidden>")
	}
	return d
}

// send sends one request to the target's URL.
func (x *targetScan) send(ctx context.Context, r *wire.Request) (*wire.Reply, error) {
	return x.sendVia(ctx, x.client, r)
}

// pace waits for the rate's next slot and takes n requests from the
// budget.
func (x *targetScan) pace(ctx context.Context, n int) error {
	if x.sent+n > x.budget {
		x.starved = true
		return errBudget
	}
	if wait := time.Until(x.last.Add(x.interval)); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	x.last = time.Now()
	x.sent += n
	return nil
}

func (x *targetScan) timeout() time.Duration {
	if x.c.Timeout == 0 {
		return 10 * time.Second
	}
	return x.c.Timeout
}

// sendVia sends one request with c within the budget, the rate and the
// timeout.
func (x *targetScan) sendVia(ctx context.Context, c *wire.Client, r *wire.Request) (*wire.Reply, error) {
	if err := x.pace(ctx, 1); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, x.timeout())
	defer cancel()
	if r.HasState {
		x.hide(r.State)
	}
	rep, err := c.Do(cctx, r)
	x.took(rep, err)
	return rep, err
}

// took notes an answer: the server answered, and its state is hidden.
func (x *targetScan) took(rep *wire.Reply, err error) {
	if err == nil {
		x.answered = true
		if rep.Result != nil && rep.Result.RequestState != nil {
			x.hide(*rep.Result.RequestState)
		}
	}
}

// burst sends r n times at once: n goroutines, each with its request
// built, released together. The n requests take one slot of the rate
// (a burst is the point) and n of the budget.
func (x *targetScan) burst(ctx context.Context, r *wire.Request, n int) ([]*wire.Reply, []error, error) {
	if err := x.pace(ctx, n); err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, x.timeout())
	defer cancel()
	if r.HasState {
		x.hide(r.State)
	}
	reps, errs := make([]*wire.Reply, n), make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			reps[i], errs[i] = x.client.Do(cctx, r)
		}()
	}
	close(start)
	wg.Wait()
	for i := range reps {
		x.took(reps[i], errs[i])
	}
	return reps, errs, nil
}

// request is the target's request with h's credential.
func (x *targetScan) request(h http.Header) *wire.Request {
	return &wire.Request{Method: x.method, Name: x.t.Name, Arguments: x.t.Arguments, Header: h}
}

// retry is the honest retry of l.
func (x *targetScan) retry(l *lastRound) *wire.Request {
	r := x.request(x.c.Header)
	r.State, r.HasState, r.Responses = l.state, l.hasState, l.responses
	return r
}

// outcome classifies a reply: accepted is a completed result. What it
// quotes of the server's answer is scrubbed before it is clipped.
func (x *targetScan) outcome(rep *wire.Reply) (accepted bool, desc string) {
	switch {
	case rep.Error != nil:
		return false, fmt.Sprintf("JSON-RPC error %d %q (HTTP %d)", rep.Error.Code, clip(x.scrub(rep.Error.Message), 80), rep.Status)
	case rep.Result == nil:
		return false, clip(x.scrub(rep.Text), 160)
	case rep.Result.InputRequired():
		return false, "a fresh input_required"
	case rep.Result.IsError:
		return false, "an isError result: " + clip(x.scrub(resultText(rep.Result)), 80)
	}
	return true, "completed: " + clip(x.scrub(resultText(rep.Result)), 60)
}

// resultText is the first text of a result (a tool's content, a
// prompt's messages, a resource's contents), or its JSON.
func resultText(r *wire.Result) string {
	var content []struct{ Type, Text string }
	if json.Unmarshal(r.Content, &content) == nil {
		for _, c := range content {
			if c.Type == "text" {
				return c.Text
			}
		}
	}
	var other struct {
		Messages []struct {
			Content struct{ Type, Text string }
		}
		Contents []struct{ Text *string }
	}
	if json.Unmarshal(r.Raw, &other) == nil {
		for _, m := range other.Messages {
			if m.Content.Type == "text" {
				return m.Content.Text
			}
		}
		for _, c := range other.Contents {
			if c.Text != nil {
				return *c.Text
			}
		}
	}
	return string(r.Raw)
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// redact names a state by its length and first characters only.
func redact(s string) string {
	if len(s) <= 8 {
		return fmt.Sprintf("%d chars", len(s))
	}
	return fmt.Sprintf("%q... (%d chars)", s[:6], len(s))
}

// run runs every check on the target.
func (x *targetScan) run(ctx context.Context) {
	reason := x.baseline(ctx)
	if reason != "" {
		for _, c := range Checks[1:] {
			if x.enabled(c.ID) {
				x.add(c.ID, Skip, "no baseline: "+reason, 0)
			}
		}
		return
	}
	for _, c := range Checks[1:] {
		if !x.enabled(c.ID) {
			continue
		}
		before := x.sent
		x.starved = false
		r, detail := x.check(ctx, c.ID)
		if ctx.Err() != nil {
			return
		}
		x.add(c.ID, r, detail, x.sent-before)
	}
}

// baseline drives the honest flow to its end and records its rounds; it
// returns why it could not.
func (x *targetScan) baseline(ctx context.Context) string {
	before := x.sent
	req := x.request(x.c.Header)
	hadState := false
	for round := 1; round <= maxRounds; round++ {
		rep, err := x.send(ctx, req)
		if err != nil {
			return x.noBaseline(fmt.Sprintf("round %d: %v", round, err), before)
		}
		if rep.Result != nil && rep.Result.InputRequired() {
			if round == maxRounds {
				break
			}
			st := rep.Result.RequestState
			req = x.request(x.c.Header)
			x.asks = rep.Result.InputRequests
			req.Responses = x.answers(rep.Result.InputRequests)
			if st != nil {
				req.State, req.HasState = *st, true
				hadState = true
				x.state = *st
			} else {
				x.state = ""
			}
			continue
		}
		ok, desc := x.outcome(rep)
		if !ok {
			return x.noBaseline(fmt.Sprintf("round %d refused: %s", round, desc), before)
		}
		if round == 1 {
			return x.noBaseline("the first round completed: the target never asked for input (give arguments that make it ask)", before)
		}
		if !req.HasState {
			if hadState {
				return x.noBaseline("the last round carried no requestState (only earlier rounds did): nothing to change on the retry that completes", before)
			}
			return x.noBaseline("the server sent no requestState: nothing to check", before)
		}
		x.rounds = round
		x.responses = req.Responses
		x.done = resultText(rep.Result)
		x.add("baseline", Pass, fmt.Sprintf("%s %s completed in %d rounds; last state %s", x.method, x.t.Name, round, redact(x.state)), x.sent-before)
		return ""
	}
	return x.noBaseline(fmt.Sprintf("still asking for input after %d rounds", maxRounds), before)
}

func (x *targetScan) noBaseline(reason string, before int) string {
	x.add("baseline", Skip, reason, x.sent-before)
	return reason
}

// flow runs a fresh honest flow as h up to the round whose retry
// completes it.
func (x *targetScan) flow(ctx context.Context, h http.Header) (*lastRound, error) {
	return x.flowVia(ctx, x.client, h)
}

// flowVia runs flow with c.
func (x *targetScan) flowVia(ctx context.Context, c *wire.Client, h http.Header) (*lastRound, error) {
	req := x.request(h)
	var l *lastRound
	for round := 1; round < x.rounds; round++ {
		rep, err := x.sendVia(ctx, c, req)
		if err != nil {
			return nil, err
		}
		if rep.Result == nil || !rep.Result.InputRequired() {
			_, desc := x.outcome(rep)
			return nil, fmt.Errorf("round %d of a fresh flow did not ask for input as the baseline did: %s", round, desc)
		}
		l = &lastRound{asks: rep.Result.InputRequests, responses: x.answers(rep.Result.InputRequests)}
		if st := rep.Result.RequestState; st != nil {
			l.state, l.hasState = *st, true
		}
		req = x.request(h)
		req.State, req.HasState, req.Responses = l.state, l.hasState, l.responses
	}
	if !l.hasState {
		return nil, errors.New("a fresh flow's last round carried no requestState")
	}
	return l, nil
}

// A variant is one change to a retry, sent to the target's URL or, when
// via is not nil, with via (OtherURL's client).
type variant struct {
	what  string
	apply func(*wire.Request)
	via   *wire.Client
}

// mutate sends l's retry changed by each variant in turn, until one is
// accepted. It returns Fail with the accepted variant, or Pass with the
// refusals.
func (x *targetScan) mutate(ctx context.Context, id string, l *lastRound, vs []variant) (Result, string) {
	var refused []string
	for _, v := range vs {
		r := x.retry(l)
		v.apply(r)
		c := v.via
		if c == nil {
			c = x.client
		}
		rep, err := x.sendVia(ctx, c, r)
		if err != nil {
			return Skip, fmt.Sprintf("%s: %v", v.what, err)
		}
		ok, desc := x.outcome(rep)
		if ok && (id == "declined" || id == "no-responses") && !sameResult(resultText(rep.Result), x.done) {
			// A completion unlike the honest one may be the server's
			// answer to a refusal ("Cancelled."), as fastmcp's docs
			// show; from outside it cannot be told from an action
			// that answers otherwise: info, never a finding.
			return Info, fmt.Sprintf("%s completed with a result unlike the honest flow's (%q, the honest one %q): most likely the server's answer to it, with nothing run; statescan cannot see side effects: check that nothing ran", v.what, clip(x.scrub(resultText(rep.Result)), 60), clip(x.scrub(x.done), 60))
		}
		if ok {
			return Fail, fmt.Sprintf("accepted %s: %s", v.what, desc)
		}
		if _, seen := x.refusals[id]; !seen && rep.Error != nil {
			x.refusals[id] = fmt.Sprintf("%d %q", rep.Error.Code, rep.Error.Message)
		} else if !seen {
			x.refusals[id] = desc
		}
		refused = append(refused, desc)
	}
	if id == "other-args" {
		// Name what was tried: a server that binds some arguments only
		// passes for those (a digest of them all is the fix).
		var names []string
		for _, v := range vs {
			names = append(names, strings.TrimPrefix(v.what, "the state with "))
		}
		return Pass, fmt.Sprintf("refused all %d: %s (%s)", len(vs), strings.Join(names, ", "), summarize(refused))
	}
	return Pass, fmt.Sprintf("refused all %d (%s)", len(vs), summarize(refused))
}

// summarize lists distinct refusals.
func summarize(ds []string) string {
	seen := map[string]int{}
	var order []string
	for _, d := range ds {
		if seen[d] == 0 {
			order = append(order, d)
		}
		seen[d]++
	}
	for i, d := range order {
		if n := seen[d]; n > 1 {
			order[i] = fmt.Sprintf("%s x%d", d, n)
		}
	}
	return strings.Join(order, "; ")
}

func stateVariants(vs []stateform.Variant) []variant {
	out := make([]variant, len(vs))
	for i, v := range vs {
		out[i] = variant{what: "the state with " + v.What, apply: func(r *wire.Request) { r.State = v.State }}
	}
	return out
}

// normal is a result's text with what varies between two runs of one
// action made alike: case, runs of digits, hex and base64-like ids.
var normal = regexp.MustCompile(`[0-9a-fA-F-]{8,}|[A-Za-z0-9_-]{20,}|[0-9]+`)

// sameResult reports whether two completions read as the same action:
// equal texts once their numbers and ids are made alike.
func sameResult(a, b string) bool {
	n := func(s string) string {
		return strings.ToLower(normal.ReplaceAllString(strings.Join(strings.Fields(s), " "), "#"))
	}
	return n(a) == n(b)
}

// randomState is a state the server never issued: n random base64url
// characters (at least 16).
func randomState(n int) string {
	b := make([]byte, max(n, 16))
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)[:max(n, 16)]
}

// maxForgeries bounds forge-plaintext's edits, one retry each.
const maxForgeries = 8

// raceN is how many copies of one retry replay-race sends at once.
const raceN = 8

// check runs one check after the baseline.
func (x *targetScan) check(ctx context.Context, id string) (Result, string) {
	form := stateform.Parse(x.state)
	switch id {
	case "readable-state":
		return readable(form)
	case "secret-in-state":
		return secrets(form)
	case "distinct-errors":
		return x.distinct()
	case "unasked-answers":
		return x.unasked(ctx)
	}
	// What each check needs before it starts a flow. The changes of the
	// state itself are made below from the fresh flow's own state; the
	// baseline's only says whether there can be any.
	var vs []variant
	switch id {
	case "tamper", "truncate", "extend":
		if x.state == "" {
			return Skip, "the state is empty: nothing to change"
		}
	case "short-tag":
		if len(form.Tags()) == 0 {
			return Skip, "no segment looks like a tag (a state of two or more dot-separated segments, one of 16 or more base64 or hex characters that do not read as text); a tag inside one segment's bytes is truncate's"
		}
	case "forge-plaintext":
		if _, ok := form.Forged(); !ok {
			return Skip, "nothing readable in the state to edit"
		}
	case "weak-key":
		if _, _, ok := weakKey(form); !ok {
			return Pass, "no HMAC-SHA256 tag under any of " + itoa(len(commonKeys)) + " common keys"
		}
	case "other-tool":
		if x.t.MoveTo == "" {
			return Skip, "no second target given (Target.MoveTo, -move-to)"
		}
		args := x.t.MoveArguments
		if args == nil {
			args = x.t.Arguments
		}
		vs = []variant{x.moved(Move{x.method, x.t.MoveTo, args})}
	case "other-method":
		if len(x.t.OtherMethods) == 0 {
			return Skip, "no target of another method given (Target.OtherMethods, -move-to prompt:NAME or resource:URI)"
		}
		for _, m := range x.t.OtherMethods {
			vs = append(vs, x.moved(m))
		}
	case "other-server":
		if x.other == nil {
			return Skip, "no second deployment given (Config.OtherURL, -other-url)"
		}
		// Its own flow must complete, so that a refusal is the
		// binding's and not a deployment that lacks the target.
		if why := x.completesVia(ctx, x.other, x.c.Header); why != "" {
			return Skip, "the second deployment's own flow did not complete: " + why
		}
		vs = []variant{{what: "the state sent to the second deployment (OtherURL)", apply: func(*wire.Request) {}, via: x.other}}
	case "other-args":
		changes := changeArgs(x.t.Arguments)
		if len(changes) == 0 {
			return Skip, "the target has no argument to change (give it arguments)"
		}
		for _, c := range changes {
			vs = append(vs, variant{what: "the state with " + c.what, apply: func(r *wire.Request) { r.Arguments = c.args }})
		}
	case "other-principal":
		if len(x.c.OtherHeader) == 0 {
			return Skip, "no second principal given (Config.OtherHeader, -other-header)"
		}
		// The second principal's own flow must complete, so that a
		// refusal is the binding's and not a bad credential's.
		if why := x.completes(ctx, x.c.OtherHeader); why != "" {
			return Skip, "the second principal's own flow did not complete: " + why
		}
		vs = []variant{{what: "the state sent with the second principal's credential", apply: func(r *wire.Request) { r.Header = x.c.OtherHeader }}}
	case "no-credential":
		if len(x.c.Header) == 0 {
			return Skip, "no credential given (Config.Header, -H): every request is already anonymous"
		}
		vs = []variant{{what: "the state sent without the credential", apply: func(r *wire.Request) { r.Header = nil }}}
	case "expired":
		if x.c.ExpiryWait == 0 {
			return Skip, "no expiry wait given (Config.ExpiryWait, -expiry-wait)"
		}
	case "replay-single-use":
		if !x.t.SingleUse {
			return Skip, "not declared single use (Target.SingleUse, -single-use)"
		}
	case "replay-race":
		if !x.t.SingleUse {
			return Skip, "not declared single use (Target.SingleUse, -single-use)"
		}
		if x.results["replay-single-use"] == Fail {
			return Skip, "replay-single-use failed: the state opens twice even one retry at a time"
		}
	case "no-responses":
		vs = []variant{{what: "the state sent without inputResponses", apply: func(r *wire.Request) { r.Responses = nil }}}
	case "declined":
	}
	l, err := x.flow(ctx, x.c.Header)
	if err != nil {
		return Skip, err.Error()
	}
	own := stateform.Parse(l.state)
	switch id {
	case "tamper":
		vs = stateVariants(own.Tampered(6))
	case "truncate":
		vs = stateVariants(own.Truncated())
	case "extend":
		vs = stateVariants(own.Extended(256 << 10))
	case "short-tag":
		vs = stateVariants(own.TagCuts())
		if len(vs) == 0 {
			return Skip, "this flow's state has no segment that looks like a tag"
		}
	case "encoding":
		if l, err = x.respellable(ctx, l); err != nil {
			return Skip, err.Error()
		}
		own = stateform.Parse(l.state)
		vs = stateVariants(own.Respelled())
		if len(vs) == 0 {
			if !own.Decoded() {
				return Skip, "the state is not base64 (plain text or JSON): statescan respells base64 only (alphabet, padding, spare bits), not JSON's spacing or key order"
			}
			return Skip, "the state has no other base64 spelling (no segment whose alphabet, padding or spare bits can differ), in three flows"
		}
	case "forge-plaintext":
		for _, f := range own.ForgedLeaves(maxForgeries) {
			v := variant{what: "the state with " + f.What, apply: func(r *wire.Request) { r.State = f.State }}
			if f.Consent {
				v.what += ", sent without inputResponses"
				v.apply = func(r *wire.Request) { r.State, r.Responses = f.State, nil }
			}
			vs = append(vs, v)
		}
		if len(vs) == 0 {
			f, ok := own.Forged()
			if !ok {
				return Skip, "nothing readable in this flow's state to edit"
			}
			vs = stateVariants([]stateform.Variant{f})
		}
	case "weak-key":
		forged, what, ok := weakKey(own)
		if !ok {
			return Skip, "this flow's state has no tag under the common key the baseline's had"
		}
		x.hide(forged)
		vs = []variant{{what: "the state forged: " + what, apply: func(r *wire.Request) { r.State = forged }}}
	case "other-tool", "other-method":
		// Each target the state moves to must complete its own flow
		// (else a refusal proves only that it is missing or broken)
		// and refuse a state it never issued (else it ignores its state
		// and moving one there proves nothing).
		var kept []variant
		var ignored []string
		for _, v := range vs {
			r := x.retry(l)
			v.apply(r)
			if why := x.honest(ctx, r.Method, r.Name, r.Arguments); why != "" {
				return Skip, fmt.Sprintf("%s %s: its own flow did not complete: %s", r.Method, r.Name, why)
			}
			r.State = randomState(len(l.state))
			rep, err := x.send(ctx, r)
			if err != nil {
				return Skip, fmt.Sprintf("a random state sent to %s: %v", r.Name, err)
			}
			if ok, _ := x.outcome(rep); ok {
				ignored = append(ignored, r.Name)
				continue
			}
			kept = append(kept, v)
		}
		if len(kept) == 0 {
			return Skip, strings.Join(ignored, ", ") + " completed with a random state: it ignores its state, so moving one there proves nothing (pick a target that uses its state)"
		}
		vs = kept
	case "expired":
		if x.c.Progress != nil {
			x.c.Progress(fmt.Sprintf("expired: %s: waiting %s for a state to outlive its lifetime (until %s)", x.t.Name, x.c.ExpiryWait, time.Now().Add(x.c.ExpiryWait).Format("15:04:05")))
		}
		t := time.NewTimer(x.c.ExpiryWait)
		select {
		case <-ctx.Done():
			t.Stop()
			return Skip, ctx.Err().Error()
		case <-t.C:
		}
		vs = []variant{{what: fmt.Sprintf("the state after %s", x.c.ExpiryWait), apply: func(*wire.Request) {}}}
	case "replay-single-use":
		if l, err = x.respellable(ctx, l); err != nil {
			return Skip, err.Error()
		}
		return x.replay(ctx, l)
	case "replay-race":
		return x.race(ctx, l)
	case "no-responses":
		if len(l.asks) == 0 {
			return Skip, "the last round asked nothing (inputRequests empty): no answer to leave out"
		}
	case "declined":
		declined, n := decline(l)
		if n == 0 {
			return Skip, "the last round asked no elicitation to decline"
		}
		vs = []variant{{what: fmt.Sprintf("the state with %d elicitation(s) declined", n), apply: func(r *wire.Request) { r.Responses = declined }}}
	}
	return x.mutate(ctx, id, l, vs)
}

// honest runs a whole honest flow of another target of the server, as
// the principal, and says why it did not complete.
func (x *targetScan) honest(ctx context.Context, method, name string, args json.RawMessage) string {
	req := &wire.Request{Method: method, Name: name, Arguments: args, Header: x.c.Header}
	for round := 1; round <= maxRounds; round++ {
		rep, err := x.send(ctx, req)
		if err != nil {
			return err.Error()
		}
		if rep.Result != nil && rep.Result.InputRequired() {
			next := &wire.Request{Method: method, Name: name, Arguments: args, Header: x.c.Header, Responses: x.answers(rep.Result.InputRequests)}
			if st := rep.Result.RequestState; st != nil {
				next.State, next.HasState = *st, true
			}
			req = next
			continue
		}
		if ok, desc := x.outcome(rep); !ok {
			return desc
		}
		return ""
	}
	return fmt.Sprintf("still asking for input after %d rounds", maxRounds)
}

// moved is the variant that sends the state to m.
func (x *targetScan) moved(m Move) variant {
	what := "the state sent to " + m.Name
	if m.Method != x.method {
		what += " (" + m.Method + ")"
	}
	return variant{what: what, apply: func(r *wire.Request) { r.Method, r.Name, r.Arguments = m.Method, m.Name, m.Arguments }}
}

// unasked sends a first call, without a state, carrying the answers of
// the baseline's last round: a server that completes takes answers it
// never asked for, and the state's every binding (principal, request,
// expiry, single use) is bypassed.
func (x *targetScan) unasked(ctx context.Context) (Result, string) {
	if len(x.asks) == 0 {
		return Skip, "the last round asked nothing (inputRequests empty): no answer to send unasked"
	}
	r := x.request(x.c.Header)
	r.Responses = x.responses
	rep, err := x.send(ctx, r)
	if err != nil {
		return Skip, err.Error()
	}
	ok, desc := x.outcome(rep)
	if ok {
		return Fail, "accepted a first call without requestState carrying the last round's answers: " + desc
	}
	return Pass, "refused a first call carrying answers it had not asked for: " + desc
}

// race sends l's completing retry raceN times at once. A server whose
// single use is a check and a record in two steps lets more than one
// through; a strict one completes one at most.
func (x *targetScan) race(ctx context.Context, l *lastRound) (Result, string) {
	n := min(raceN, x.budget-x.sent)
	if n < 2 {
		x.starved = true
		return Skip, errBudget.Error()
	}
	reps, errs, err := x.burst(ctx, x.retry(l), n)
	if err != nil {
		return Skip, err.Error()
	}
	done := 0
	var refused []string
	for i := range reps {
		if errs[i] != nil {
			refused = append(refused, "no answer: "+clip(errs[i].Error(), 60))
			continue
		}
		ok, desc := x.outcome(reps[i])
		if ok {
			done++
		} else {
			refused = append(refused, desc)
		}
	}
	switch {
	case done > 1:
		return Fail, fmt.Sprintf("%d of %d copies of one completing retry, sent at once, completed: single use checked and recorded in two steps", done, n)
	case done == 0:
		return Skip, fmt.Sprintf("none of %d copies of the honest retry completed (%s)", n, summarize(refused))
	}
	return Pass, fmt.Sprintf("1 of %d copies sent at once completed; the others were refused (%s)", n, summarize(refused))
}

// completes runs a whole honest flow as h and says why it did not
// complete.
func (x *targetScan) completes(ctx context.Context, h http.Header) string {
	return x.completesVia(ctx, x.client, h)
}

// completesVia runs a whole honest flow as h with c.
func (x *targetScan) completesVia(ctx context.Context, c *wire.Client, h http.Header) string {
	l, err := x.flowVia(ctx, c, h)
	if err != nil {
		return err.Error()
	}
	r := x.retry(l)
	r.Header = h
	rep, err := x.sendVia(ctx, c, r)
	if err != nil {
		return err.Error()
	}
	if ok, desc := x.outcome(rep); !ok {
		return desc
	}
	return ""
}

// respellable returns l, or when l's state has no other spelling (about
// one state in twenty of a fixed length: no - or _, no padding, no spare
// bits), the last round of up to two more flows, so that a guard keyed by
// the state's text is not missed by chance.
func (x *targetScan) respellable(ctx context.Context, l *lastRound) (*lastRound, error) {
	for try := 0; len(stateform.Parse(l.state).Respelled()) == 0 && try < 2; try++ {
		var err error
		if l, err = x.flow(ctx, x.c.Header); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// replay completes l honestly, then sends the same retry again, as is
// and respelled.
func (x *targetScan) replay(ctx context.Context, l *lastRound) (Result, string) {
	rep, err := x.send(ctx, x.retry(l))
	if err != nil {
		return Skip, err.Error()
	}
	if ok, desc := x.outcome(rep); !ok {
		return Skip, "the honest retry did not complete: " + desc
	}
	vs := []variant{{what: "the used state again", apply: func(*wire.Request) {}}}
	for _, v := range stateform.Parse(l.state).Respelled() {
		vs = append(vs, variant{what: "the used state respelled (" + v.What + ")", apply: func(r *wire.Request) { r.State = v.State }})
	}
	return x.mutate(ctx, "replay-single-use", l, vs)
}

// distinct compares the refusals of the checks that change what the
// state is checked against: a server whose refusals differ tells an
// attacker which check a forgery failed.
func (x *targetScan) distinct() (Result, string) {
	var ids []string
	for id := range x.refusals {
		switch id {
		case "tamper", "truncate", "extend", "short-tag", "forge-plaintext", "other-tool", "other-method", "other-server", "other-args", "other-principal":
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	if len(ids) < 2 {
		return Skip, "fewer than two checks were refused"
	}
	kinds := map[string][]string{}
	for _, id := range ids {
		kinds[x.refusals[id]] = append(kinds[x.refusals[id]], id)
	}
	if len(kinds) == 1 {
		return Pass, fmt.Sprintf("one refusal for %s: %s", strings.Join(ids, ", "), clip(x.refusals[ids[0]], 100))
	}
	var parts []string
	for k, v := range kinds {
		parts = append(parts, strings.Join(v, ",")+" -> "+clip(k, 80))
	}
	sort.Strings(parts)
	return Info, "refusals differ: " + strings.Join(parts, "; ")
}

// maxArgChanges bounds the arguments other-args changes, one retry each.
const maxArgChanges = 8

// An argChange is the target's arguments with one value changed.
type argChange struct {
	args json.RawMessage
	what string
}

// changeArgs changes each top-level argument's value in turn, in sorted
// order, at most maxArgChanges of them: a server that binds some of its
// arguments and not the others is found by the one it leaves out.
func changeArgs(args json.RawMessage) []argChange {
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(string(args)))
	d.UseNumber()
	if args == nil || d.Decode(&m) != nil || len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []argChange
	for _, k := range keys[:min(len(keys), maxArgChanges)] {
		old := m[k]
		switch v := old.(type) {
		case json.Number:
			if n, err := v.Int64(); err == nil {
				m[k] = n + 1
			} else {
				f, _ := v.Float64()
				m[k] = f + 1
			}
		case string:
			m[k] = v + "x"
		case bool:
			m[k] = !v
		default:
			m[k] = "statescan"
		}
		b, err := json.Marshal(m)
		m[k] = old
		if err != nil {
			continue
		}
		out = append(out, argChange{b, fmt.Sprintf("argument %q changed", k)})
	}
	return out
}
