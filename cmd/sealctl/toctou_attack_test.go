package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stateseal/stateseal/backends/kektest"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/stores"
)

// racer is a keyset file with a store writer watching it: on the read
// numbered at, it writes its own document into the file first (as an
// attacker does who watches reads: inotify on a shared volume, MONITOR on
// Redis) and the read returns it.
type racer struct {
	mu    sync.Mutex
	file  *stores.File
	reads int
	at    int
	doc   []byte
}

var racers sync.Map // name -> *racer

func init() {
	stores.Default.Register("attackrace", func(_ context.Context, u *url.URL) (stores.Store, error) {
		r, _ := racers.Load(u.Host)
		return r.(*racer), nil
	})
}

func (r *racer) Read(ctx context.Context) ([]byte, string, error) {
	r.mu.Lock()
	r.reads++
	if r.reads == r.at && r.doc != nil {
		testkit.Check(os.WriteFile(r.file.String(), r.doc, 0o600))
	}
	r.mu.Unlock()
	return r.file.Read(ctx)
}
func (r *racer) Write(ctx context.Context, d []byte, rev string) (string, error) {
	return r.file.Write(ctx, d, rev)
}
func (r *racer) String() string { return "attackrace store" }

// raceSetup makes a keyset file, edited by sealctl to version 3 (a key
// retired by force), with the operator's record at version 3. It
// returns the store URL, the racer, the version-1 document and the
// retired key.
func raceSetup(t *testing.T, name string) (loc string, r *racer, v1 []byte, kekURL string, leaked uint32) {
	dir := t.TempDir()
	t.Setenv("STATESEAL_STATE", filepath.Join(dir, "seen.json"))
	kekURL = kektest.LocalKEK(t, dir)
	r = &racer{file: stores.NewFile(filepath.Join(dir, "keyset.json"))}
	racers.Store(name, r)
	loc = "attackrace://" + name
	sc := func(args ...string) string {
		t.Helper()
		code, out := sealctlT(t, append([]string{"--keyset", loc, "--kek", kekURL}, args...)...)
		if code != 0 {
			t.Fatalf("sealctl %v: %s", args, out)
		}
		return out
	}
	sc("init")
	v1 = testkit.Must(os.ReadFile(r.file.String()))
	ks := testkit.Must(keyset.Parse(v1))
	leaked = ks.Keys[0].ID
	sc("rotate", "--now")
	sc("retire", "--force", keyring.FormatID(leaked))
	sc("verify")
	return loc, r, v1, kekURL, leaked
}

// TestAttackSealctlEditRace: sealctl checks the keyset against its
// record (rollback, fork) on one read, and the edit reads the store
// again. A store writer who puts an older authentic copy back between
// the two reads gets it edited: re-authenticated at a new version with a
// fresh expiry, the force-retired key active. The edit must refuse what
// the record refuses.
func TestAttackSealctlEditRace(t *testing.T) {
	loc, r, v1, kekURL, leaked := raceSetup(t, "edit")
	r.mu.Lock()
	// The edit is sealctl's only read now, and the one the swap must hit:
	// what it reads is checked against the record there.
	r.reads, r.at, r.doc = 0, 1, v1
	r.mu.Unlock()
	code, out := sealctlT(t, "--keyset", loc, "--kek", kekURL, "rotate")
	cur := testkit.Must(os.ReadFile(r.file.String()))
	ks := testkit.Must(keyset.Parse(cur))
	if code == 0 {
		t.Errorf("FINDING: sealctl rotate (record at version 3) edited the version-1 copy put back between its check and its edit: %s", strings.TrimSpace(out))
		if k, ok := ks.Key(leaked); ok && k.State == keyring.Active {
			t.Errorf("FINDING: the store now holds version %d, fresh until %s, with the force-retired key %s active",
				ks.Version, ks.Expires, keyring.FormatID(leaked))
		}
	}
}

// TestAttackSealctlPruneRecordsUnverified: sealctl prune with nothing to
// prune returns the keyset it read, unverified, and sealctl records it as
// seen. A store writer who answers that read with a forged document at a
// huge version poisons the record: every later verify and edit of the
// real keyset is refused as a rollback.
func TestAttackSealctlPruneRecordsUnverified(t *testing.T) {
	loc, r, _, kekURL, _ := raceSetup(t, "prune")
	sealctlT(t, "--keyset", loc, "--kek", kekURL, "prune") // removes the retired key: version 4
	good := testkit.Must(os.ReadFile(r.file.String()))
	forged := strings.Replace(string(good), `"version": 4,`, `"version": 18446744073709551615,`, 1)
	if forged == string(good) {
		t.Fatal("layout")
	}
	r.mu.Lock()
	// prune reads: before (1), verified (2), rotation.Prune (3).
	r.reads, r.at, r.doc = 0, 3, []byte(forged)
	r.mu.Unlock()
	code, out := sealctlT(t, "--keyset", loc, "--kek", kekURL, "prune")
	t.Logf("prune: exit %d: %s", code, strings.TrimSpace(out))
	b := testkit.Must(os.ReadFile(os.Getenv("STATESEAL_STATE")))
	var rec map[string]struct{ Version uint64 }
	testkit.Check(json.Unmarshal(b, &rec))
	for id, v := range rec {
		if v.Version > 4 {
			t.Errorf("FINDING: the operator's record holds keyset %s at version %d, from a document that never authenticated", id, v.Version)
		}
	}
	testkit.Check(os.WriteFile(r.file.String(), good, 0o600))
	r.mu.Lock()
	r.doc = nil
	r.mu.Unlock()
	if code, out := sealctlT(t, "--keyset", loc, "--kek", kekURL, "verify"); code != 0 {
		t.Errorf("FINDING: verify of the real keyset now fails: %s", strings.TrimSpace(out))
	}
}

// TestAttackSealctlRecordHolds: against sealctl's record without a race.
// A rollback and a fork (authentic documents) are refused by verify and
// by edits; the current document re-indented by the store writer is not
// a fork (the record digests the parsed keyset, not the bytes); a forged
// document never reaches the record.
func TestAttackSealctlRecordHolds(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("STATESEAL_STATE", filepath.Join(dir, "seen.json"))
	path := filepath.Join(dir, "keyset.json")
	sc := func(want int, args ...string) string {
		t.Helper()
		code, out := sealctlT(t, append([]string{"--keyset", path}, args...)...)
		if code != want {
			t.Fatalf("sealctl %v: exit %d, want %d: %s", args, code, want, out)
		}
		return out
	}
	sc(0, "init")
	v1 := testkit.Must(os.ReadFile(path))
	sc(0, "rotate")
	v2 := testkit.Must(os.ReadFile(path))
	sc(0, "verify")
	// Re-indented: same keyset.
	var compact bytes.Buffer
	testkit.Check(json.Compact(&compact, v2))
	testkit.Check(os.WriteFile(path, compact.Bytes(), 0o600))
	sc(0, "verify")
	// Rollback.
	testkit.Check(os.WriteFile(path, v1, 0o600))
	sc(1, "verify")
	sc(1, "rotate")
	sc(1, "refresh", "--stale")
	// Forged at a huge version: refused before the record, which stays.
	testkit.Check(os.WriteFile(path, bytes.Replace(v2, []byte(`"version": 2,`), []byte(`"version": 99,`), 1), 0o600))
	sc(1, "verify")
	sc(1, "prune")
	testkit.Check(os.WriteFile(path, v2, 0o600))
	sc(0, "verify")
}
