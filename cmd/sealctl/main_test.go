package main

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"sealctl": func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the scripts in testdata: each calls the real sealctl
// binary built from this package, in a temporary directory.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:  "testdata",
		Cmds: withInstances(map[string]func(ts *testscript.TestScript, neg bool, args []string){"keyids": keyIDs}),
		Setup: func(e *testscript.Env) error {
			// Each script keeps its own record of the keysets it saw.
			e.Setenv("STATESEAL_STATE", e.WorkDir+"/seen.json")
			setupInstances(e)
			return nil
		},
	})
}

// keyids [FILE] sets $K0, $K1, ... to the key ids of a keyset file
// (default keyset.json), in file order, since key ids are random.
func keyIDs(ts *testscript.TestScript, neg bool, args []string) {
	path := "keyset.json"
	if len(args) > 0 {
		path = args[0]
	}
	ks, err := keyset.ReadFile(context.Background(), ts.MkAbs(path))
	ts.Check(err)
	for i, k := range ks.Keys {
		ts.Setenv(fmt.Sprintf("K%d", i), keyring.FormatID(k.ID))
	}
}
