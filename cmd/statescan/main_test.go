package main

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/stateseal/stateseal/internal/testkit"
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
