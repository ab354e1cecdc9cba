// Command statescan scans the requestState an MCP server (2026-07-28,
// SEP-2322 multi round-trip requests) hands its clients: whether a client
// can forge, move, replay or read it. It runs each tool it is given
// several times (a scan executes them): point it at staging.
//
//	statescan -url http://127.0.0.1:8080/mcp -tool 'pay={"account":"A1","amount":5}' \
//	    -H 'Authorization: Bearer ALICE' -other-header 'Authorization: Bearer BOB' \
//	    -single-use pay -move-to 'refund={"account":"A1","amount":5}' -expiry-wait 11m
//
// Exit status: 0 nothing failed, 1 a check failed, 2 a usage error, an
// unreachable server, no target whose honest flow completed, or a check
// skipped because the request budget was spent (-budget); with
// -json or -sarif FILE a report is written in every case but a flag it
// cannot read, with the reason when nothing was judged.
// docs/SCAN.md describes every check.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stateseal/stateseal/scan"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// list is a repeatable flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("statescan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		tools, prompts, resources, headers, others, singles, answers, moves list
		url                                                                 = fs.String("url", "", "the server's Streamable HTTP endpoint, http(s)://host/path (or an argument, before or after the flags)")
		otherURL                                                            = fs.String("other-url", "", "a second deployment of the same server that may share its keys: other-server")
		sarifFile                                                           = fs.String("sarif", "", "also write the report as SARIF 2.1.0 to this file (GitHub code scanning)")
		sarifLoc                                                            = fs.String("sarif-location", "", "the repository path SARIF results point at (default: the URL's host and path, e.g. 127.0.0.1_8080/mcp)")
		expiry                                                              = fs.Duration("expiry-wait", 0, "wait this long before the expired check's retry: longer than the server's state lifetime (0: skip expired)")
		checks                                                              = fs.String("checks", "", "comma-separated check ids to run (default: all)")
		budget                                                              = fs.Int("budget", 100, "most requests per target (a check it stops is skipped, and the scan exits 2)")
		rate                                                                = fs.Float64("rate", 50, "most requests per second per target")
		timeout                                                             = fs.Duration("timeout", 10*time.Second, "timeout of each request")
		asJSON                                                              = fs.Bool("json", false, "print the report as JSON")
		dry                                                                 = fs.Bool("dry-run", false, "send nothing: print each target's first request and, for each check, what it sends and at most how many requests")
		listChecks                                                          = fs.Bool("list", false, "list the checks: id, severity, what each sends, the spec sentence it tests")
		showVersion                                                         = fs.Bool("version", false, "print statescan's version (as in the SARIF driver) and exit")
	)
	fs.Var(&tools, "tool", "a tool to scan, NAME or NAME={json arguments} (repeatable)")
	fs.Var(&prompts, "prompt", "a prompt to scan, NAME or NAME={json arguments} (repeatable)")
	fs.Var(&resources, "resource", "a resource URI to scan (repeatable)")
	fs.Var(&headers, "H", "a header sent with every request, 'Name: value': the credential (repeatable)")
	fs.Var(&others, "other-header", "a second principal's header, 'Name: value', replacing -H's of that name: other-principal (repeatable)")
	fs.Var(&singles, "single-use", "a target whose states must open once: replay-single-use (repeatable, or comma-separated)")
	fs.Var(&answers, "answer", "the answer to an input request, KEY={json response object} (repeatable)")
	fs.Var(&moves, "move-to", "another target to move states to: NAME[={json}] of the same method (other-tool), or tool:NAME[={json}], prompt:NAME[={json}], resource:URI of another (other-method) (repeatable)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: statescan -url URL -tool NAME[={args}] [flags]\n\nA scan executes each target several times. docs/SCAN.md describes every check.\n\n")
		fs.PrintDefaults()
	}
	// Go's flag parsing stops at the first argument: parse on after
	// it, so that "statescan URL -tool pay" reads its flags too.
	var positional []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if *showVersion {
		fmt.Fprintln(stdout, "statescan", version())
		return 0
	}
	if *listChecks {
		for _, c := range scan.Checks {
			fmt.Fprintf(stdout, "%s (%s)\n  sends: %s\n  spec:  %s\n", c.ID, c.Severity, c.Sends, c.Spec)
		}
		return 0
	}
	switch {
	case len(positional) > 1 || (*url != "" && len(positional) == 1):
		return usage(stderr, "unexpected argument %q: give one URL, with -url or as an argument", positional[len(positional)-1])
	case len(positional) == 1:
		*url = positional[0]
	case *url == "":
		return usage(stderr, "no -url")
	}
	// From here on a report is written even when nothing is judged, so
	// that CI keeps an artifact that says why.
	out := &outputs{json: *asJSON, sarif: *sarifFile, location: *sarifLoc, stdout: stdout, stderr: stderr}
	c := &scan.Config{URL: *url, OtherURL: *otherURL, ExpiryWait: *expiry, Budget: *budget, Rate: *rate, Timeout: *timeout}
	c.Progress = func(msg string) { fmt.Fprintln(stderr, "statescan:", msg) }
	usage := func(w io.Writer, format string, a ...any) int {
		out.fail(c.URL, fmt.Sprintf(format, a...))
		return usage(w, format, a...)
	}
	var err error
	if c.Header, err = parseHeaders(headers, nil); err != nil {
		return usage(stderr, "-H: %v", err)
	}
	if len(others) > 0 {
		if c.OtherHeader, err = parseHeaders(others, c.Header); err != nil {
			return usage(stderr, "-other-header: %v", err)
		}
	}
	single := map[string]bool{}
	for _, s := range singles {
		for _, n := range strings.Split(s, ",") {
			single[n] = true
		}
	}
	for _, group := range []struct {
		method string
		specs  list
	}{{scan.ToolsCall, tools}, {scan.PromptsGet, prompts}, {scan.ResourcesRead, resources}} {
		for _, spec := range group.specs {
			name, a, err := nameArgs(spec, group.method != scan.ResourcesRead)
			if err != nil {
				return usage(stderr, "%v", err)
			}
			t := scan.Target{Method: group.method, Name: name, Arguments: a, SingleUse: single[name]}
			for _, mv := range moves {
				m, same, err := parseMove(mv)
				if err != nil {
					return usage(stderr, "-move-to %s: %v", mv, err)
				}
				switch {
				case same && group.method == scan.ResourcesRead:
					// A bare name is a tool's or a prompt's.
				case same || m.Method == group.method:
					if m.Name == name {
						continue
					}
					if t.MoveTo != "" {
						return usage(stderr, "-move-to %s: a second target of the method %s (other-tool takes one)", mv, group.method)
					}
					t.MoveTo, t.MoveArguments = m.Name, m.Arguments
				default:
					t.OtherMethods = append(t.OtherMethods, m)
				}
			}
			c.Targets = append(c.Targets, t)
			delete(single, name)
		}
	}
	for n := range single {
		if n != "" {
			return usage(stderr, "-single-use %s: not a target given with -tool, -prompt or -resource", n)
		}
	}
	if len(c.Targets) == 0 {
		return usage(stderr, "no -tool, -prompt or -resource to scan")
	}
	for _, a := range answers {
		k, v, ok := strings.Cut(a, "=")
		if !ok || !json.Valid([]byte(v)) {
			return usage(stderr, "-answer %q: want KEY={json}", a)
		}
		if c.Answers == nil {
			c.Answers = map[string]json.RawMessage{}
		}
		c.Answers[k] = json.RawMessage(v)
	}
	if *checks != "" {
		c.Checks = strings.Split(*checks, ",")
	}
	if *dry {
		lines, steps, err := scan.Plan(c)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		for _, l := range lines {
			fmt.Fprintln(stdout, l)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOOL\tCHECK\tAT MOST\tSENDS")
		total := 0
		per := map[string]int{}
		var order []string
		for _, s := range steps {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", s.Tool, s.Check, s.Requests, s.Sends)
			total += s.Requests
			if _, ok := per[s.Tool]; !ok {
				order = append(order, s.Tool)
			}
			per[s.Tool] += s.Requests
		}
		tw.Flush()
		b := *budget
		if b == 0 {
			b = 100 // scan's default
		}
		for _, tool := range order {
			if per[tool] > b {
				fmt.Fprintf(stdout, "%s: at most %d requests, over -budget %d: checks may skip for want of requests, and the scan then exits 2\n", tool, per[tool], b)
			}
		}
		fmt.Fprintf(stdout, "at most %d requests with two-round flows (budget %d per target); nothing sent\n", total, b)
		return 0
	}
	rep, err := scan.Run(ctx, c)
	if err != nil {
		// A bad configuration, an unreachable server, an interrupt: no
		// table (it would be all skips), but the reports CI keeps.
		fmt.Fprintln(stderr, "statescan:", err)
		if rep == nil {
			rep = &scan.Report{Target: c.URL, Reason: err.Error()}
		}
		out.write(rep, false)
		return 2
	}
	if !out.write(rep, true) {
		return 2
	}
	if rep.OverBudget() > 0 {
		fmt.Fprintln(stderr, "statescan:", overBudget(rep))
	}
	switch {
	case rep.Failed():
		return 1
	case !rep.Judged():
		fmt.Fprintln(stderr, "statescan: no target's honest flow completed: nothing was judged")
		return 2
	case rep.OverBudget() > 0:
		// A check that ran out of requests tested nothing: exit 0
		// would read as a clean bill for checks that never ran.
		return 2
	}
	return 0
}

// overBudget says why a scan whose checks ran out of requests is
// incomplete, and what to do.
func overBudget(rep *scan.Report) string {
	return fmt.Sprintf("incomplete: %d checks skipped because the request budget (-budget) was spent, so they tested nothing; raise -budget or narrow -checks", rep.OverBudget())
}

// outputs are where reports go: JSON on stdout (-json), SARIF to a file
// (-sarif), the table on stdout otherwise.
type outputs struct {
	json           bool
	sarif          string
	location       string
	stdout, stderr io.Writer
}

// fail writes the reports of a scan that could not start.
func (o *outputs) fail(target, reason string) {
	o.write(&scan.Report{Target: target, Reason: reason}, false)
}

// write writes rep where it goes, the table only when table is true; it
// reports whether every report was written.
func (o *outputs) write(rep *scan.Report, table bool) bool {
	ok := true
	if o.sarif != "" {
		if err := writeSARIF(o.sarif, rep, o.location); err != nil {
			fmt.Fprintln(o.stderr, "statescan: -sarif:", err)
			ok = false
		}
	}
	switch {
	case o.json:
		enc := json.NewEncoder(o.stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	case table:
		printTable(o.stdout, rep)
	}
	return ok
}

// parseMove reads a -move-to: NAME[={json}] (same is true: the
// target's own method), or tool:, prompt: or resource: before it.
func parseMove(s string) (m scan.Move, same bool, err error) {
	for _, p := range []struct{ prefix, method string }{{"tool:", scan.ToolsCall}, {"prompt:", scan.PromptsGet}, {"resource:", scan.ResourcesRead}} {
		if rest, ok := strings.CutPrefix(s, p.prefix); ok {
			m.Method = p.method
			m.Name, m.Arguments, err = nameArgs(rest, p.method != scan.ResourcesRead)
			return m, false, err
		}
	}
	m.Name, m.Arguments, err = nameArgs(s, true)
	return m, true, err
}

func usage(w io.Writer, format string, a ...any) int {
	fmt.Fprintf(w, "statescan: "+format+"\n", a...)
	return 2
}

// nameArgs reads NAME or NAME={json}.
func nameArgs(s string, withArgs bool) (string, json.RawMessage, error) {
	i := strings.Index(s, "={")
	if i < 0 || !withArgs {
		if s == "" {
			return "", nil, errors.New("an empty target name")
		}
		return s, nil, nil
	}
	a := json.RawMessage(s[i+1:])
	var m map[string]any
	if json.Unmarshal(a, &m) != nil {
		return "", nil, fmt.Errorf("%s: the arguments are not a JSON object", s[:i])
	}
	return s[:i], a, nil
}

// parseHeaders reads 'Name: value' lines over a copy of base.
func parseHeaders(lines []string, base http.Header) (http.Header, error) {
	h := base.Clone()
	if h == nil {
		h = http.Header{}
	}
	set := map[string]bool{}
	for _, l := range lines {
		k, v, ok := strings.Cut(l, ":")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("want 'Name: value', got a header of %d chars", len(l))
		}
		if !set[k] {
			h.Del(k)
			set[k] = true
		}
		h.Add(k, strings.TrimSpace(v))
	}
	return h, nil
}

func printTable(w io.Writer, rep *scan.Report) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESULT\tSEVERITY\tCHECK\tTOOL\tDETAIL")
	n := map[scan.Result]int{}
	for _, c := range rep.Checks {
		n[c.Result]++
		sev := string(c.Severity)
		if c.Result != scan.Fail {
			sev = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", strings.ToUpper(string(c.Result)), sev, c.ID, c.Tool, c.Detail)
	}
	tw.Flush()
	seen := map[string]bool{}
	for _, c := range rep.Checks {
		if c.Result == scan.Fail && !seen[c.ID] {
			if len(seen) == 0 {
				fmt.Fprintln(w, "\nwhat each failed check tests (MCP 2026-07-28, Multi Round-Trip Requests, server requirements):")
			}
			seen[c.ID] = true
			fmt.Fprintf(w, "  %s: %s\n", c.ID, c.Spec)
		}
	}
	starved := ""
	if k := rep.OverBudget(); k > 0 {
		starved = fmt.Sprintf(" (%d for want of budget)", k)
	}
	fmt.Fprintf(w, "%s: %d failed, %d passed, %d skipped%s, %d info; %d requests in %.1fs\n",
		rep.Target, n[scan.Fail], n[scan.Pass], n[scan.Skip], starved, n[scan.Info], rep.Requests, rep.Elapsed.Seconds())
}
