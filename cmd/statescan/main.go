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
// unreachable server, or no target whose honest flow completed.
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
		tools, prompts, resources, headers, others, singles, answers list
		url                                                          = fs.String("url", "", "the server's Streamable HTTP endpoint, http(s)://host/path (or an argument after every flag)")
		moveTo                                                       = fs.String("move-to", "", "a second tool (or prompt) to move states to, NAME or NAME={json arguments}: other-tool")
		expiry                                                       = fs.Duration("expiry-wait", 0, "wait this long before the expired check's retry: longer than the server's state lifetime (0: skip expired)")
		checks                                                       = fs.String("checks", "", "comma-separated check ids to run (default: all)")
		budget                                                       = fs.Int("budget", 100, "most requests per target")
		rate                                                         = fs.Float64("rate", 50, "most requests per second per target")
		timeout                                                      = fs.Duration("timeout", 10*time.Second, "timeout of each request")
		asJSON                                                       = fs.Bool("json", false, "print the report as JSON")
		dry                                                          = fs.Bool("dry-run", false, "list what would be sent, and send nothing")
		listChecks                                                   = fs.Bool("list", false, "list the checks: id, severity, what each sends, the spec sentence it tests")
	)
	fs.Var(&tools, "tool", "a tool to scan, NAME or NAME={json arguments} (repeatable)")
	fs.Var(&prompts, "prompt", "a prompt to scan, NAME or NAME={json arguments} (repeatable)")
	fs.Var(&resources, "resource", "a resource URI to scan (repeatable)")
	fs.Var(&headers, "H", "a header sent with every request, 'Name: value': the credential (repeatable)")
	fs.Var(&others, "other-header", "a second principal's header, 'Name: value', replacing -H's of that name: other-principal (repeatable)")
	fs.Var(&singles, "single-use", "a target whose states must open once: replay-single-use (repeatable, or comma-separated)")
	fs.Var(&answers, "answer", "the answer to an input request, KEY={json response object} (repeatable)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: statescan -url URL -tool NAME[={args}] [flags]\n\nA scan executes each target several times. docs/SCAN.md describes every check.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *listChecks {
		for _, c := range scan.Checks {
			fmt.Fprintf(stdout, "%s (%s)\n  sends: %s\n  spec:  %s\n", c.ID, c.Severity, c.Sends, c.Spec)
		}
		return 0
	}
	if *url == "" && fs.NArg() > 0 {
		*url = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return usage(stderr, "unexpected argument %q", fs.Arg(0))
	}
	if *url == "" {
		return usage(stderr, "no -url")
	}
	c := &scan.Config{URL: *url, ExpiryWait: *expiry, Budget: *budget, Rate: *rate, Timeout: *timeout}
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
			if *moveTo != "" && group.method != scan.ResourcesRead {
				mn, ma, err := nameArgs(*moveTo, true)
				if err != nil {
					return usage(stderr, "-move-to: %v", err)
				}
				if mn != name {
					t.MoveTo, t.MoveArguments = mn, ma
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
		for _, s := range steps {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", s.Tool, s.Check, s.Requests, s.Sends)
			total += s.Requests
		}
		tw.Flush()
		fmt.Fprintf(stdout, "at most %d requests with two-round flows (budget %d per target); nothing sent\n", total, *budget)
		return 0
	}
	rep, err := scan.Run(ctx, c)
	if err != nil {
		// A bad configuration, an unreachable server, an interrupt: the
		// report would be all skips.
		fmt.Fprintln(stderr, "statescan:", err)
		return 2
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		printTable(stdout, rep)
	}
	switch {
	case rep.Failed():
		return 1
	case !rep.Judged():
		fmt.Fprintln(stderr, "statescan: no target's honest flow completed: nothing was judged")
		return 2
	}
	return 0
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
	fmt.Fprintf(w, "%s: %d failed, %d passed, %d skipped, %d info; %d requests in %.1fs\n",
		rep.Target, n[scan.Fail], n[scan.Pass], n[scan.Skip], n[scan.Info], rep.Requests, rep.Elapsed.Seconds())
}
