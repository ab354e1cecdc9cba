package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoreStringsEscaped: a store writer sets the keyset's id (which
// nothing has authenticated when list prints it, or when verify reports
// it does not authenticate) to terminal escape sequences and a forged
// line. sealctl list and verify print it escaped, never raw.
func TestStoreStringsEscaped(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("STATESEAL_STATE", filepath.Join(dir, "seen.json"))
	path := filepath.Join(dir, "keyset.json")
	if code, out := sealctlT(t, "--keyset", path, "init"); code != 0 {
		t.Fatalf("init: %s", out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	const evil = "ks-1\x1b]0;owned\x07\x1b[2J\r\nkeyset ks-1 version 9: all 1 keys unwrap\u009b31m"
	doc["id"] = evil
	data, err = json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"list", "verify"} {
		_, out := sealctlT(t, "--keyset", path, cmd)
		if strings.ContainsAny(out, "\x1b\x07\r\u009b") || strings.Contains(out, "\nkeyset ks-1 version 9") {
			t.Errorf("sealctl %s printed the store's id raw: %q", cmd, out)
		}
		if !strings.Contains(out, `\x1b]0;owned\a`) {
			t.Errorf("sealctl %s does not show the id escaped: %q", cmd, out)
		}
	}
}
