package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/seal"
)

// TestSplitViewTag makes issue 38's split view: the store writer serves
// one instance another branch (a second store holding the copy of
// version 1, from before the leaked key's retirement, carried forward by
// a memoryless CronJob's rotations) while the fleet follows the leaked-key
// procedure. Both reach version 3: the versions agree, and the victim
// still opens the leaked key's token. The tag shown by /healthz
// (keyset.Health) and by sealctl verify and list is what tells them apart:
// two instances on one document show one tag, the branch another.
func TestSplitViewTag(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fleet, branch := filepath.Join(dir, "fleet.json"), filepath.Join(dir, "branch.json")
	record := filepath.Join(dir, "seen.json")
	sc := sealctlAs(t, fleet)
	sc(record, 0, "init")
	v1 := testkit.Must(os.ReadFile(fleet))
	leaked := testkit.Must(keyset.Parse(v1)).Keys[0].ID
	testkit.Check(os.WriteFile(branch, v1, 0o600)) // the second store, served to one instance

	load := func(path string) (*keyset.Loader, *keyring.Ring) {
		t.Helper()
		l := &keyset.Loader{Path: path, Logger: quiet}
		ring, err := l.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { testkit.Check(l.Close()) })
		return l, ring
	}
	good, _ := load(fleet)
	victim, victimRing := load(branch)
	b := seal.Binding{Method: "tools/call", Target: "transfer", Principal: "mallory"}
	token := testkit.Must(testkit.Must(seal.New(victimRing, nil)).Seal(b, []byte("sealed with the leaked key"), time.Hour))

	sc(record, 0, "rotate", "--now")
	sc(record, 0, "retire", "--force", keyring.FormatID(leaked))
	for range 2 { // a CronJob with no record of what it saw
		testkit.Must(rotation.Rotate(ctx, branch, nil, &rotation.Options{Logger: quiet}))
	}
	testkit.Check(good.Reload(ctx))
	testkit.Check(victim.Reload(ctx))
	other, _ := load(fleet) // a second instance on the fleet's document

	g, v, o := good.Health(), victim.Health(), other.Health()
	if g.Version != 3 || v.Version != 3 || g.Keyset != v.Keyset || !g.Ready || !v.Ready {
		t.Fatalf("the split view: fleet %+v, victim %+v; want both ready at version 3 of one keyset", g, v)
	}
	if _, err := testkit.Must(seal.New(victimRing, nil)).Open(b, token); err != nil {
		t.Fatalf("the victim no longer opens the leaked key's token, so this is no split view: %v", err)
	}
	tagRE := regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)
	if !tagRE.MatchString(g.Tag) || g.Tag == v.Tag || o.Tag != g.Tag {
		t.Fatalf("tags: fleet %q, victim %q, second fleet instance %q; want the fleet's equal and the victim's different", g.Tag, v.Tag, o.Tag)
	}

	// What the operator's sealctl shows of each store: the same tags.
	shown := regexp.MustCompile(`(?m)^keyset \S+ version 3 tag (\S+): all \d+ keys unwrap$`)
	for _, c := range []struct {
		path, want string
	}{{fleet, g.Tag}, {branch, v.Tag}} {
		state := filepath.Join(t.TempDir(), "seen.json") // a fresh machine: no record to catch the branch
		out := sealctlAs(t, c.path)(state, 0, "verify")
		if m := shown.FindStringSubmatch(out); m == nil || m[1] != c.want {
			t.Fatalf("verify of %s shows %q, want tag %s: %s", c.path, m, c.want, out)
		}
		var l listOutput
		testkit.Check(json.Unmarshal([]byte(sealctlAs(t, c.path)(state, 0, "list", "--json")), &l))
		if l.Version != 3 || l.Tag != c.want {
			t.Fatalf("list --json of %s: version %d tag %q, want 3 and %s", c.path, l.Version, l.Tag, c.want)
		}
	}
}
