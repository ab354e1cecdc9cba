package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stateseal/stateseal/keyset"
)

// The operator's record of the keysets sealctl has seen, like ssh's
// known_hosts: the highest version of each keyset id and the digest of
// that version's document. A store rolled back below it, or holding
// another document at that version (a fork), is reported and not edited.
// It lives in $STATESEAL_STATE, else $XDG_STATE_HOME/stateseal/seen.json,
// else ~/.local/state/stateseal/seen.json.
type seenRecord map[string]struct {
	Version uint64 `json:"version"`
	Digest  string `json:"sha256"`
}

func seenPath() string {
	if p := os.Getenv("STATESEAL_STATE"); p != "" {
		return p
	}
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "stateseal", "seen.json")
}

func readSeen() seenRecord {
	r := seenRecord{}
	if b, err := os.ReadFile(seenPath()); err == nil {
		json.Unmarshal(b, &r) // a broken record is replaced, not trusted
	}
	return r
}

func digest(ks *keyset.Keyset) string {
	b, err := ks.Marshal()
	if err != nil {
		return ""
	}
	d := sha256.Sum256(b)
	return hex.EncodeToString(d[:])
}

// checkSeen refuses a keyset below the version recorded for its id, or a
// different document at that version.
func checkSeen(ks *keyset.Keyset) error {
	v, ok := readSeen()[ks.ID]
	switch {
	case !ok:
	case ks.Version < v.Version:
		return fmt.Errorf("%w: keyset %s is at version %d, but version %d was seen (%s): the store was rolled back; restore the newest copy, or remove the record if this is deliberate",
			keyset.ErrRollback, ks.ID, ks.Version, v.Version, seenPath())
	case ks.Version == v.Version && digest(ks) != v.Digest:
		return fmt.Errorf("%w: keyset %s version %d is not the document seen at that version (%s): two writers forked it; find the lost write, then write the keyset that should win at a higher version",
			keyset.ErrFork, ks.ID, ks.Version, seenPath())
	}
	return nil
}

// recordSeen raises the record to ks if it is newer. Failing to write the
// record is not an error of the command: it only weakens the next check.
func recordSeen(ks *keyset.Keyset) {
	path := seenPath()
	if path == "" {
		return
	}
	r := readSeen()
	if v, ok := r[ks.ID]; ok && v.Version > ks.Version {
		return
	}
	r[ks.ID] = struct {
		Version uint64 `json:"version"`
		Digest  string `json:"sha256"`
	}{ks.Version, digest(ks)}
	b, _ := json.MarshalIndent(r, "", "  ")
	if os.MkdirAll(filepath.Dir(path), 0o700) != nil {
		return
	}
	tmp := path + ".tmp"
	if os.WriteFile(tmp, append(b, '\n'), 0o600) == nil {
		os.Rename(tmp, path)
	}
}
