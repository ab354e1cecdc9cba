package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/internal/testkit"
)

// TestVerifyUnverifiedCopy: the operator's record saw version 2 (after
// the rewrap to NEW); the store writer puts back version 1 (under OLD)
// with its version raised or its id changed, neither authenticated until
// a KEK opens it, so the record's floor does not name a rollback. verify
// warns against trusting the old KEK again before anything else: the KEK
// error alone advised --kek OLD (found by a review holding the store).
func TestVerifyUnverifiedCopy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keyset.json")
	rec := filepath.Join(dir, "seen.json")
	oldK, newK := "local:"+filepath.Join(dir, "old.kek"), "local:"+filepath.Join(dir, "new.kek")
	sc := sealctlAs(t, path)
	sc(rec, 0, "--kek", oldK, "init")
	v1 := testkit.Must(os.ReadFile(path))
	sc(rec, 0, "--kek", oldK, "rewrap", "--to", newK)
	sc(rec, 0, "--kek", newK, "verify")
	edit := func(kv map[string]any) []byte {
		d := json.NewDecoder(bytes.NewReader(v1))
		d.UseNumber()
		var m map[string]any
		testkit.Check(d.Decode(&m))
		for k, v := range kv {
			m[k] = v
		}
		return testkit.Must(json.Marshal(m))
	}
	hist := []any{map[string]any{"version": 1, "tag": strings.Repeat("A", 43)}}
	for name, doc := range map[string][]byte{
		"version raised to 3": edit(map[string]any{"version": json.Number("3"), "history": hist}),
		"id changed":          edit(map[string]any{"id": "ks-0000000000000001"}),
	} {
		testkit.Check(os.WriteFile(path, doc, 0o600))
		out := strings.ToLower(sc(rec, 1, "--kek", newK, "verify"))
		warn, steer := strings.Index(out, "do not trust the old kek again"), strings.Index(out, "--kek")
		if warn < 0 || steer < warn || !strings.Contains(out, "nor its id is authenticated") {
			t.Errorf("%s: verify: %s", name, out)
		}
	}
}
