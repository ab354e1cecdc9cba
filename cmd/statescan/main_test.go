package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/scan"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"statescan": func() { os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the scripts in testdata: each calls the real
// statescan binary built from this package, against real servers the
// holeserver command starts.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:  "testdata",
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){"holeserver": holeServer(t)},
	})
}

var mcpURL = regexp.MustCompile(`MCP server at (http://\S+)`)

// holeserver HOLE [ARGS...] starts scan/internal/holeserver with that
// hole until the script ends, and sets $URL to its MCP endpoint.
func holeServer(t *testing.T) func(ts *testscript.TestScript, neg bool, args []string) {
	return func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) == 0 {
			ts.Fatalf("usage: holeserver HOLE [ARGS...]")
		}
		bin := testkit.Build(t, "github.com/stateseal/stateseal/scan/internal/holeserver")
		cmd := exec.Command(bin, append([]string{"-hole", args[0], "-addr", "127.0.0.1:0"}, args[1:]...)...)
		var out testkit.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		ts.Check(cmd.Start())
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		ts.Defer(func() { cmd.Process.Kill(); <-exited })
		deadline := time.Now().Add(10 * time.Second)
		for {
			if m := mcpURL.FindStringSubmatch(out.String()); m != nil {
				ts.Setenv("URL", m[1])
				return
			}
			select {
			case <-exited:
				ts.Fatalf("holeserver exited: %s", out.String())
			default:
			}
			if time.Now().After(deadline) {
				ts.Fatalf("holeserver did not listen: %s", out.String())
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// startHole starts scan/internal/holeserver with one hole until the test
// ends and returns its MCP endpoint.
func startHole(t *testing.T, hole string) string {
	t.Helper()
	bin := testkit.Build(t, "github.com/stateseal/stateseal/scan/internal/holeserver")
	cmd := exec.Command(bin, "-hole", hole, "-addr", "127.0.0.1:0")
	var out testkit.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	var url string
	testkit.WaitFor(t, "holeserver to listen", func() bool {
		if m := mcpURL.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		}
		return url != ""
	})
	return url
}

// sarifSchema compiles the SARIF 2.1.0 JSON schema (OASIS, committed in
// testdata from oasis-tcs/sarif-spec, sarif-2.1/schema), formats
// asserted.
func sarifSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "sarif-schema-2.1.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	const id = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(id, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// validSARIF validates file against the schema and returns it decoded.
func validSARIF(t *testing.T, s *jsonschema.Schema, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(inst); err != nil {
		t.Fatalf("%s is not SARIF 2.1.0: %v\n%s", file, err, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// The schema refuses what is not SARIF: a test that can fail.
func TestSARIFSchemaRefuses(t *testing.T) {
	s := sarifSchema(t)
	for _, bad := range []string{
		`{"version":"2.1.0"}`,
		`{"version":"2.0.0","runs":[]}`,
		`{"version":"2.1.0","runs":[{"tool":{"driver":{"name":"statescan"}},"results":[{"ruleId":"x","level":"high","message":{"text":"t"}}]}]}`,
		`{"version":"2.1.0","runs":[{"tool":{"driver":{}}}]}`,
	} {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		if s.Validate(inst) == nil {
			t.Errorf("the schema took %s", bad)
		}
	}
}

// TestSARIF: a scan that finds a hole writes SARIF 2.1.0 (valid under
// the OASIS schema) with one result, its rule (id, level, spec) and a
// repository path; the JSON report has its version and summary.
func TestSARIF(t *testing.T) {
	url := startHole(t, "no-args-binding")
	file := filepath.Join(t.TempDir(), "statescan.sarif")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-json", "-sarif", file, "-url", url, "-tool", `pay={"account":"A1","amount":5}`,
		"-H", "X-User: alice", "-checks", "other-args,tamper"}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, stderr.String())
	}
	m := validSARIF(t, sarifSchema(t), file)
	run0 := m["runs"].([]any)[0].(map[string]any)
	rules := run0["tool"].(map[string]any)["driver"].(map[string]any)["rules"].([]any)
	if len(rules) != len(scan.Checks)-1 {
		t.Errorf("%d rules, want one per check but baseline (%d)", len(rules), len(scan.Checks)-1)
	}
	results := run0["results"].([]any)
	if len(results) != 1 {
		t.Fatalf("%d results, want 1 (other-args): %v", len(results), results)
	}
	r := results[0].(map[string]any)
	rule := rules[int(r["ruleIndex"].(float64))].(map[string]any)
	loc := r["locations"].([]any)[0].(map[string]any)["physicalLocation"].(map[string]any)["artifactLocation"].(map[string]any)["uri"].(string)
	if r["ruleId"] != "other-args" || rule["id"] != "other-args" || r["level"] != "error" ||
		!strings.Contains(rule["fullDescription"].(map[string]any)["text"].(string), "a digest of its salient parameters") ||
		!regexp.MustCompile(`^127\.0\.0\.1_[0-9]+/mcp$`).MatchString(loc) {
		t.Errorf("result %v, rule %v, location %q", r, rule, loc)
	}
	var rep struct {
		Version int
		Judged  bool
		Summary struct{ Requests, Pass, Fail, Skip, Info int }
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Version != 2 || !rep.Judged || rep.Summary.Fail != 1 || rep.Summary.Pass != 2 || rep.Summary.Requests < 4 {
		t.Errorf("report %+v:\n%s", rep, stdout.String())
	}
}

// TestUnjudgedReport: when nothing can be judged (exit 2) the JSON
// report and the SARIF are written all the same, with the reason.
func TestUnjudgedReport(t *testing.T) {
	s := sarifSchema(t)
	for _, tc := range []struct {
		name   string
		args   []string
		reason string
	}{
		{"unreachable", []string{"-url", "http://127.0.0.1:1/mcp", "-tool", "pay", "-timeout", "2s"}, "did not answer"},
		{"usage", []string{"http://127.0.0.1:1/mcp", "-tool", "pay", "-checks", "nosuch"}, `unknown check "nosuch"`},
		{"no baseline", []string{"-url", startHole(t, "none"), "-tool", "nosuchtool"}, "no target's honest flow completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "statescan.sarif")
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), append([]string{"-json", "-sarif", file}, tc.args...), &stdout, &stderr); code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, stderr.String())
			}
			var rep struct {
				Version int
				Judged  *bool
				Reason  string
			}
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
				t.Fatalf("%v: %s", err, stdout.String())
			}
			if rep.Version != 2 || rep.Judged == nil || *rep.Judged || !strings.Contains(rep.Reason, tc.reason) {
				t.Errorf("report %s, want judged false and a reason with %q", stdout.String(), tc.reason)
			}
			m := validSARIF(t, s, file)
			inv := m["runs"].([]any)[0].(map[string]any)["invocations"].([]any)[0].(map[string]any)
			note := inv["toolExecutionNotifications"].([]any)[0].(map[string]any)["message"].(map[string]any)["text"].(string)
			if inv["executionSuccessful"] != false || !strings.Contains(note, tc.reason) {
				t.Errorf("invocation %v, want executionSuccessful false and the reason", inv)
			}
		})
	}
}

// TestWorkflow: the GitHub Actions workflow in docs/SCAN.md is YAML,
// its scan step's command line is one statescan reads (run with -dry-run
// after it, every flag must parse), it writes the SARIF file that the
// upload step sends, and the steps after the scan run when it fails.
func TestWorkflow(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "SCAN.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/SCAN.md has no ```yaml block")
	}
	var wf struct {
		On          any               `yaml:"on"`
		Permissions map[string]string `yaml:"permissions"`
		Jobs        map[string]struct {
			RunsOn string `yaml:"runs-on"`
			Steps  []struct {
				Name string            `yaml:"name"`
				Uses string            `yaml:"uses"`
				Run  string            `yaml:"run"`
				If   string            `yaml:"if"`
				Env  map[string]string `yaml:"env"`
				With map[string]string `yaml:"with"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(m[1], &wf); err != nil {
		t.Fatalf("the workflow is not YAML: %v", err)
	}
	if wf.On == nil || wf.Permissions["security-events"] != "write" || len(wf.Jobs) != 1 {
		t.Fatalf("workflow: on %v, permissions %v, %d jobs: want a trigger, security-events: write, one job", wf.On, wf.Permissions, len(wf.Jobs))
	}
	var scanned, uploaded string
	for _, job := range wf.Jobs {
		if job.RunsOn == "" {
			t.Error("a job without runs-on")
		}
		for _, st := range job.Steps {
			if i := strings.Index(st.Run, "statescan "); i >= 0 && strings.Contains(st.Run, "-sarif") {
				args, err := shellWords(st.Run[i+len("statescan "):], st.Env)
				if err != nil {
					t.Fatal(err)
				}
				var stdout, stderr bytes.Buffer
				if code := run(context.Background(), append(args, "-dry-run"), &stdout, &stderr); code != 0 {
					t.Errorf("statescan %q -dry-run: exit %d: %s", args, code, stderr.String())
				}
				for j, a := range args {
					if a == "-sarif" && j+1 < len(args) {
						scanned = args[j+1]
					}
				}
				continue
			}
			if strings.HasPrefix(st.Uses, "github/codeql-action/upload-sarif@") {
				uploaded = st.With["sarif_file"]
				if !strings.Contains(st.If, "always()") {
					t.Errorf("the upload step runs only when the scan passes (if: %q): a finding would never reach code scanning", st.If)
				}
			}
		}
	}
	if scanned == "" || scanned != uploaded {
		t.Errorf("the scan writes SARIF to %q, the upload step sends %q", scanned, uploaded)
	}
}

// shellWords splits a POSIX shell command line as sh would for the
// commands the workflow runs: quotes, backslash-newline, $VAR and
// ${VAR} from env, and it stops at a redirection or the line's end.
func shellWords(s string, env map[string]string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	expand := func(i int) int {
		j := i + 1
		brace := j < len(s) && s[j] == '{'
		if brace {
			j++
		}
		k := j
		for k < len(s) && (s[k] == '_' || s[k] >= 'A' && s[k] <= 'Z' || s[k] >= 'a' && s[k] <= 'z' || s[k] >= '0' && s[k] <= '9') {
			k++
		}
		name := s[j:k]
		if v, ok := env[name]; ok {
			w.WriteString(v)
		} else {
			w.WriteString("TEST-" + name) // a secret or a variable of the runner
		}
		if brace {
			k++
		}
		return k
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && s[i+1] == '\n':
			i += 2
		case c == '\n' || c == '>' || c == '|' || c == '#' && !inWord:
			i = len(s)
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
			i++
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unclosed ' in %q", s)
			}
			w.WriteString(s[i+1 : i+1+j])
			inWord, i = true, i+j+2
		case c == '"':
			inWord = true
			i++
			for i < len(s) && s[i] != '"' {
				if s[i] == '$' {
					i = expand(i)
					continue
				}
				w.WriteByte(s[i])
				i++
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unclosed \" in %q", s)
			}
			i++
		case c == '$':
			inWord = true
			i = expand(i)
		default:
			inWord = true
			w.WriteByte(c)
			i++
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// TestChecksAgree: each check's severity and spec sentence read the same
// in docs/SCAN.md's table, -list and the SARIF rule, so that a reader of
// any one of them is told what the others say. A check that never fails
// (an observation) is info everywhere and carries no security-severity.
func TestChecksAgree(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "SCAN.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "\n## The checks\n")
	table, _, _ = strings.Cut(table, "\n## ")
	rows := map[string][]string{}
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 5 {
			t.Fatalf("a row of %d cells, want 5: %s", len(cells), line)
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows[strings.Trim(cells[0], "`")] = cells
	}
	var list bytes.Buffer
	if code := run(context.Background(), []string{"-list"}, &list, io.Discard); code != 0 {
		t.Fatalf("-list: exit %d", code)
	}
	rules := map[string]sarifRule{}
	for _, r := range sarif(&scan.Report{}, "").Runs[0].Tool.Driver.Rules {
		rules[r.ID] = r
	}
	for _, c := range scan.Checks {
		row, ok := rows[c.ID]
		if !ok {
			t.Errorf("%s: no row in docs/SCAN.md's table", c.ID)
			continue
		}
		delete(rows, c.ID)
		if sev, _, _ := strings.Cut(row[1], " "); sev != string(c.Severity) {
			t.Errorf("%s: docs/SCAN.md says severity %q, scan.Checks %q", c.ID, row[1], c.Severity)
		}
		// The spec's source, up to its first colon: "req. 4",
		// "req. 5, warning", "Error Handling", "none".
		source, _, _ := strings.Cut(c.Spec, ":")
		if !strings.HasPrefix(row[4], source) {
			t.Errorf("%s: docs/SCAN.md's spec %q does not start with %q (scan.Checks: %s)", c.ID, row[4], source, c.Spec)
		}
		if want := fmt.Sprintf("%s (%s)\n  sends: %s\n  spec:  %s\n", c.ID, c.Severity, c.Sends, c.Spec); !strings.Contains(list.String(), want) {
			t.Errorf("-list lacks %q", want)
		}
		if c.ID == "baseline" {
			continue
		}
		r, ok := rules[c.ID]
		if !ok {
			t.Errorf("%s: no SARIF rule", c.ID)
			continue
		}
		_, scored := r.Properties["security-severity"]
		if r.DefaultConfiguration.Level != level(c.Severity) || r.Properties["severity"] != string(c.Severity) || scored != (c.Severity != scan.None) {
			t.Errorf("%s: SARIF rule level %q, properties %v; scan.Checks severity %q", c.ID, r.DefaultConfiguration.Level, r.Properties, c.Severity)
		}
		if source != "none" && !strings.Contains(r.FullDescription.Text, c.Spec) {
			t.Errorf("%s: SARIF rule description %q lacks the spec %q", c.ID, r.FullDescription.Text, c.Spec)
		}
	}
	for id := range rows {
		t.Errorf("docs/SCAN.md has a row for %s, which is no check", id)
	}
	// distinct-errors is an observation: info in every form.
	if c := rules["distinct-errors"]; c.DefaultConfiguration.Level != "none" || !strings.Contains(c.FullDescription.Text, "never a finding") {
		t.Errorf("distinct-errors' SARIF rule: level %q, %q", c.DefaultConfiguration.Level, c.FullDescription.Text)
	}
}

// TestVersion: the SARIF driver names statescan's own version, the one
// -version prints and the Go toolchain recorded in the binary, not the
// report's format version; the log stays valid SARIF 2.1.0.
func TestVersion(t *testing.T) {
	for _, tc := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{&debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0"},
		{&debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261206204504-f79c5a1abc12+dirty"}}, "v0.0.0-20261206204504-f79c5a1abc12+dirty"},
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "f79c5a1"}, {Key: "vcs.modified", Value: "true"}}}, "devel-f79c5a1+dirty"},
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{nil, "devel"},
	} {
		if got := versionOf(tc.bi); got != tc.want {
			t.Errorf("versionOf(%+v) = %q, want %q", tc.bi, got, tc.want)
		}
	}

	bin := testkit.Build(t, "github.com/stateseal/stateseal/cmd/statescan")
	out, err := exec.Command(bin, "-version").Output()
	if err != nil {
		t.Fatal(err)
	}
	printed, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "statescan ")
	if !ok || printed == "" {
		t.Fatalf("-version printed %q", out)
	}
	// What the toolchain recorded: the module's version, unless a
	// build in a checkout left it "(devel)".
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\tmod\t\S+\t(\S+)`).FindSubmatch(info)
	if m == nil {
		t.Fatalf("go version -m: no mod line:\n%s", info)
	}
	if recorded := string(m[1]); recorded != "(devel)" && printed != recorded {
		t.Errorf("-version says %q, the binary records %q", printed, recorded)
	}
	file := filepath.Join(t.TempDir(), "statescan.sarif")
	cmd := exec.Command(bin, "-sarif", file, "-url", "http://127.0.0.1:1/mcp", "-tool", "pay", "-timeout", "2s")
	if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 2 {
		t.Fatalf("an unreachable server: %v, want exit 2", err)
	}
	log := validSARIF(t, sarifSchema(t), file)
	driver := log["runs"].([]any)[0].(map[string]any)["tool"].(map[string]any)["driver"].(map[string]any)
	if driver["version"] != printed || driver["version"] == fmt.Sprint(scan.ReportVersion) {
		t.Errorf("SARIF driver version %v, want statescan's own, %q", driver["version"], printed)
	}
}

// TestOverBudget: a scan whose checks ran out of requests exits 2, not
// 0: the skipped checks tested nothing. The JSON says which (judged, its
// skips "request budget spent"), the SARIF run is not successful and
// says why; a finding still exits 1, and the same scan with the
// default budget exits 0.
func TestOverBudget(t *testing.T) {
	s := sarifSchema(t)
	pay := []string{"-tool", `pay={"account":"A1","amount":5}`, "-H", "X-User: alice"}
	for _, tc := range []struct {
		name     string
		hole     string
		args     []string
		code     int
		starved  bool
		complete bool
	}{
		{"starved", "none", []string{"-budget", "10"}, 2, true, false},
		{"default budget", "none", nil, 0, false, true},
		{"a finding first", "no-args-binding", []string{"-budget", "8", "-checks", "tamper,other-args,no-responses"}, 1, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "statescan.sarif")
			var stdout, stderr bytes.Buffer
			args := append(append([]string{"-json", "-sarif", file, "-url", startHole(t, tc.hole)}, pay...), tc.args...)
			if code := run(context.Background(), args, &stdout, &stderr); code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, stderr.String())
			}
			if got := strings.Contains(stderr.String(), "incomplete: "); got != tc.starved {
				t.Errorf("stderr %q: want the incomplete note %v", stderr.String(), tc.starved)
			}
			var rep struct {
				Judged bool
				Checks []struct{ Result, Detail string }
			}
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
				t.Fatal(err)
			}
			starved := 0
			for _, c := range rep.Checks {
				if c.Result == "skip" && strings.Contains(c.Detail, "request budget spent") {
					starved++
				}
			}
			if !rep.Judged || (starved > 0) != tc.starved {
				t.Errorf("judged %v, %d checks skipped for budget: %s", rep.Judged, starved, stdout.String())
			}
			inv := validSARIF(t, s, file)["runs"].([]any)[0].(map[string]any)["invocations"].([]any)[0].(map[string]any)
			if inv["executionSuccessful"] != tc.complete {
				t.Errorf("executionSuccessful %v, want %v", inv["executionSuccessful"], tc.complete)
			}
			if tc.starved {
				note := inv["toolExecutionNotifications"].([]any)[0].(map[string]any)["message"].(map[string]any)["text"].(string)
				if !strings.Contains(note, fmt.Sprintf("%d checks skipped because the request budget", starved)) {
					t.Errorf("notification %q, want the %d checks the budget skipped", note, starved)
				}
			}
		})
	}
}
