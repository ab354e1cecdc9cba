package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/seal"
	"github.com/stateseal/stateseal/stores"
)

// TestLeakedKeyProcedureRedis runs docs/ROTATION.md's "A leaked key", in
// its local-KEK form, with sealctl's own commands, on a keyset in a real
// Redis: rotate --now, retire --force, prune, rewrap --to a new KEK, the
// old KEK destroyed and dropped from every instance's configuration.
// Along the way the store's writer puts every earlier document back and
// the fleet's honest editors (a bare rotation.Rotate, the running
// instance's scheduler) are set on it: the leaked key's token never opens
// on the running instance again from the retirement on, and after the
// procedure no copy loads on a fresh instance or is edited by anyone.
func TestLeakedKeyProcedureRedis(t *testing.T) {
	ctx := context.Background()
	r := testservers.StartRedis(t)
	dir := t.TempDir()
	t.Setenv("STATESEAL_STATE", filepath.Join(dir, "seen.json"))
	loc := r.URL() + "?key=stateseal:leak"
	oldKEK, newKEK := "local:"+filepath.Join(dir, "old.kek"), "local:"+filepath.Join(dir, "new.kek")
	sc := func(want int, args ...string) string {
		t.Helper()
		code, out := sealctlT(t, append([]string{"--keyset", loc}, args...)...)
		if code != want {
			t.Fatalf("sealctl %s: exit %d, want %d: %s", strings.Join(args, " "), code, want, out)
		}
		return out
	}
	sc(0, "--kek", oldKEK, "init")
	s, err := stores.Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	defer stores.Close(s)
	var docs [][]byte
	keep := func() { d, _ := testkit.Must2(s.Read(ctx)); docs = append(docs, d) }
	keep()
	first := testkit.Must(keyset.Parse(docs[0]))
	leaked := first.Keys[0].ID

	// The running instance trusts the new KEK already, and the old one
	// while the move lasts (docs/ROTATION.md, "Moving to a new KEK").
	running := &keyset.Loader{Path: loc, Options: keyset.LoadOptions{KEK: newKEK, PreviousKEK: oldKEK}, Logger: quiet}
	ring, err := running.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer running.Close()
	sealer := testkit.Must(seal.New(ring, nil))
	b := seal.Binding{Method: "tools/call", Target: "transfer", Principal: "mallory"}
	token, err := sealer.Seal(b, []byte("forged with the leaked key"), 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	closed := func(when string) {
		t.Helper()
		if _, err := sealer.Open(b, token); !errors.Is(err, seal.ErrUnknownKey) {
			t.Fatalf("%s: the leaked key's token on the running instance: %v", when, err)
		}
	}
	// Every earlier document put back, and honest editors set on it: the
	// running instance refuses, and whatever the editors write too.
	attack := func(when string, editor *rotation.Options, writes bool) {
		t.Helper()
		cur, _ := testkit.Must2(s.Read(ctx))
		for i, d := range docs[:len(docs)-1] {
			_, rev := testkit.Must2(s.Read(ctx))
			if _, err := s.Write(ctx, d, rev); err != nil {
				t.Fatal(err)
			}
			// A CronJob: before the rewrap it can edit the copy (a fork),
			// after it it cannot authenticate it.
			if _, err := rotation.Rotate(ctx, loc, nil, editor); (err == nil) != writes {
				t.Fatalf("%s: a bare editor on document %d put back: %v", when, i+1, err)
			}
			sch := &rotation.Scheduler{Path: loc, Options: rotation.Options{KEK: newKEK, PreviousKEK: oldKEK, Logger: quiet, Loader: running}}
			if _, err := sch.Tick(ctx); err == nil {
				t.Fatalf("%s: the running instance's scheduler edited document %d put back", when, i+1)
			}
			if err := running.Reload(ctx); err == nil {
				t.Fatalf("%s: the running instance installed document %d put back (or a bare editor's edit of it)", when, i+1)
			}
			closed(when)
		}
		_, rev := testkit.Must2(s.Read(ctx))
		if _, err := s.Write(ctx, cur, rev); err != nil { // the operator restores the newest
			t.Fatal(err)
		}
		if err := running.Reload(ctx); err != nil {
			t.Fatalf("%s: the running instance, the newest document back: %v", when, err)
		}
	}

	sc(0, "--kek", oldKEK, "rotate", "--now")
	keep()
	if out := sc(0, "--kek", oldKEK, "retire", "--force", keyring.FormatID(leaked)); !strings.Contains(out, "A leaked key") {
		t.Fatalf("retire --force did not point at the procedure: %s", out)
	}
	keep()
	if err := running.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	closed("after the retirement")
	attack("retired", &rotation.Options{KEK: oldKEK, Logger: quiet}, true)
	sc(0, "--kek", oldKEK, "prune")
	keep()
	sc(0, "kek", "--out", filepath.Join(dir, "new.kek"))
	sc(0, "--kek", oldKEK, "rewrap", "--to", newKEK)
	keep()
	sc(0, "--kek", newKEK, "verify")
	if err := running.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	// The old KEK is destroyed and leaves every configuration.
	if err := os.Remove(filepath.Join(dir, "old.kek")); err != nil {
		t.Fatal(err)
	}
	attack("after the procedure", &rotation.Options{KEK: newKEK, Logger: quiet}, false)
	for i, d := range docs[:len(docs)-1] {
		_, rev := testkit.Must2(s.Read(ctx))
		if _, err := s.Write(ctx, d, rev); err != nil {
			t.Fatal(err)
		}
		if _, _, err := keyset.Load(ctx, loc, &keyset.LoadOptions{KEK: newKEK}); err == nil {
			t.Fatalf("a fresh instance loaded document %d after the procedure", i+1)
		}
		sc(1, "--kek", newKEK, "verify")
	}
}
