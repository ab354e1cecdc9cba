package main

import (
	"context"
	"encoding/json"
	"flag"
	"regexp"
	"strings"
	"sync"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/seal"
	"github.com/stateseal/stateseal/stores"
)

// Instances for the runbook scripts (docs/ROTATION.md's procedures run as
// written): each is a keyset.Loader configured with the flags sealgate
// and the example server take, loaded as they load at start, reloaded
// when the script says a poll interval passed, and shown as /healthz
// shows it. A restart is a stop and a start with the new flags.
type instances struct {
	mu sync.Mutex
	m  map[string]*instance
}

type instance struct {
	l      *keyset.Loader
	sealer *seal.Sealer
}

const instancesKey = "instances"

func setupInstances(e *testscript.Env) {
	in := &instances{m: map[string]*instance{}}
	e.Values[instancesKey] = in
	e.Defer(func() {
		for _, i := range in.m {
			i.l.Close()
		}
	})
}

// withInstances adds instance, healthz and verified to a script's
// commands.
func withInstances(cmds map[string]func(ts *testscript.TestScript, neg bool, args []string)) map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	cmds["instance"], cmds["healthz"], cmds["verified"] = instanceCmd, healthzCmd, verifiedCmd
	return cmds
}

// instance start NAME [-keyset L] [-kek URL] [-previous-kek URL] [-min-version N] [-keyset-id ID]
// instance stop NAME | reload NAME | open NAME TOKEN-FILE
//
// start fails, as the binaries do at start, if the first load fails (its
// error on stderr); reload is one poll; open opens a token as a server
// would (sealctl seal's binding: --target book_flight --principal alice).
func instanceCmd(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: instance start|stop|reload|open NAME ...")
	}
	in := ts.Value(instancesKey).(*instances)
	in.mu.Lock()
	defer in.mu.Unlock()
	op, name := args[0], args[1]
	i := in.m[name]
	if op != "start" && i == nil {
		ts.Fatalf("no instance %s", name)
	}
	var err error
	switch op {
	case "start":
		if i != nil {
			ts.Fatalf("instance %s is running: stop it first", name)
		}
		fs := flag.NewFlagSet("instance", flag.ContinueOnError)
		loc := fs.String("keyset", ts.Getenv("STATESEAL_KEYSET"), "")
		var o keyset.LoadOptions
		fs.StringVar(&o.KEK, "kek", "", "")
		fs.StringVar(&o.PreviousKEK, "previous-kek", "", "")
		fs.Uint64Var(&o.MinVersion, "min-version", 0, "")
		fs.StringVar(&o.KeysetID, "keyset-id", "", "")
		ts.Check(fs.Parse(args[2:]))
		if *loc == "" {
			*loc = "keyset.json"
		}
		if !strings.Contains(*loc, "://") {
			*loc = ts.MkAbs(*loc)
		}
		l := &keyset.Loader{Path: *loc, Options: o, Logger: quiet}
		ring, lerr := l.Load(context.Background())
		if err = lerr; err == nil {
			s, serr := seal.New(ring, nil)
			ts.Check(serr)
			in.m[name] = &instance{l: l, sealer: s}
		} else {
			ts.Check(l.Close())
		}
	case "stop":
		delete(in.m, name)
		ts.Check(i.l.Close())
	case "reload":
		err = i.l.Reload(context.Background())
	case "open":
		if len(args) != 3 {
			ts.Fatalf("usage: instance open NAME TOKEN-FILE")
		}
		token := strings.TrimSpace(ts.ReadFile(args[2]))
		_, err = i.sealer.Open(seal.Binding{Method: "tools/call", Target: "book_flight", Principal: "alice"}, token)
	default:
		ts.Fatalf("unknown instance operation %q", op)
	}
	if err != nil {
		ts.Stderr().Write([]byte(err.Error() + "\n"))
	}
	if (err != nil) != neg {
		ts.Fatalf("instance %s %s: %v", op, name, err)
	}
}

// healthz NAME prints the instance's keyset.Health as /healthz serves it.
func healthzCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: healthz NAME")
	}
	in := ts.Value(instancesKey).(*instances)
	in.mu.Lock()
	i := in.m[args[0]]
	in.mu.Unlock()
	if i == nil {
		ts.Fatalf("no instance %s", args[0])
	}
	ts.Check(json.NewEncoder(ts.Stdout()).Encode(i.l.Health()))
}

// verified sets $VERSION, $TAG and $KEYSET_ID from the last command's
// stdout, a sealctl verify ("keyset ID version N tag T: all ... unwrap"):
// what the runbook tells the operator to note and compare.
func verifiedCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: verified")
	}
	m := verifiedLine.FindStringSubmatch(ts.ReadFile("stdout"))
	if m == nil {
		ts.Fatalf("no 'keyset ID version N tag T: all K keys unwrap' line in the last stdout")
	}
	ts.Setenv("KEYSET_ID", m[1])
	ts.Setenv("VERSION", m[2])
	ts.Setenv("TAG", m[3])
}

var verifiedLine = regexp.MustCompile(`(?m)^keyset (\S+) version (\d+) tag (\S+): all \d+ keys unwrap$`)

// putback FILE writes FILE's bytes into the keyset at $STATESEAL_KEYSET
// (else keyset.json), over whatever is there: a store writer putting an
// old copy back, in any store.
func putBack(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: putback FILE")
	}
	loc := ts.Getenv("STATESEAL_KEYSET")
	if loc == "" {
		loc = ts.MkAbs("keyset.json")
	}
	ctx := context.Background()
	s, err := keyset.OpenStore(ctx, loc, nil)
	ts.Check(err)
	defer stores.Close(s)
	_, rev, err := s.Read(ctx)
	ts.Check(err)
	_, err = s.Write(ctx, []byte(ts.ReadFile(args[0])), rev)
	ts.Check(err)
}
