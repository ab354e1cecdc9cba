package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/keyset"
)

// The operator's record of the keysets sealctl has seen, like ssh's
// known_hosts: the highest version of each keyset id and the digest of
// that version's document, and its tag (format 4). A store rolled back
// below it, or holding a document that does not descend from it (a fork,
// at any version), is reported and not edited; a keyset that descends
// from it is one this operator can vouch for, and edits renew its expiry.
// It lives in $STATESEAL_STATE, else $XDG_STATE_HOME/stateseal/seen.json,
// else ~/.local/state/stateseal/seen.json.
type seenRecord map[string]seenEntry

type seenEntry struct {
	Version uint64   `json:"version"`
	Digest  string   `json:"sha256"`
	Tag     string   `json:"tag,omitempty"`
	Retired []uint32 `json:"retired,omitempty"`
	// Since is when this machine first saw that version: what it knows of
	// the keyset is current as of then, and no later.
	Since time.Time `json:"since,omitzero"`
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

// descends reports whether ks is the recorded document or descends from
// it. A record from before format 4 has no tag: only the same document
// at the same version is known.
func (v seenEntry) descends(ks *keyset.Keyset) bool {
	if tag, err := hex.DecodeString(v.Tag); err == nil && len(tag) == 32 {
		return ks.Extends(v.Version, tag)
	}
	return ks.Version == v.Version && digest(ks) == v.Digest
}

// seenLink returns the recorded version of keyset id, for a restore to
// link to (rotation.ImportOptions.Seen).
func seenLink(id string) (keyset.Link, []uint32, bool) {
	v, ok := readSeen()[id]
	tag, err := hex.DecodeString(v.Tag)
	if !ok || err != nil || len(tag) != 32 {
		return keyset.Link{}, nil, false
	}
	return keyset.Link{Version: v.Version, Tag: tag}, v.Retired, true
}

// vouchSeen reports whether the record names a version ks descends from,
// first seen less than half a freshness window ago: the operator saw this
// keyset's history recently, so an edit of it may renew its expiry
// (rotation.Options.Vouch). An older record is behind by as much: the
// keyset may have moved on since, and been rolled back to what it
// recorded, which it cannot tell from a keyset nobody edited (a scheduler
// would have refreshed it within half a window).
func vouchSeen(ks *keyset.Keyset) bool {
	v, ok := readSeen()[ks.ID]
	return ok && v.descends(ks) && recent(v, ks)
}

func recent(v seenEntry, ks *keyset.Keyset) bool {
	return !v.Since.IsZero() && time.Since(v.Since) < ks.Policy.Freshness/2
}

// checkSeen refuses a keyset below the version recorded for its id, or
// one that does not descend from the recorded document.
func checkSeen(ks *keyset.Keyset) error {
	v, ok := readSeen()[ks.ID]
	switch {
	case !ok:
	case ks.Version < v.Version:
		return fmt.Errorf("%w: keyset %s is at version %d, but version %d was seen (%s): the store was rolled back; restore the newest copy (docs/ROTATION.md, \"A rolled-back store\"); remove the record only if that version never reached an instance",
			keyset.ErrRollback, ks.ID, ks.Version, v.Version, seenPath())
	case ks.Version == v.Version && digest(ks) != v.Digest:
		return fmt.Errorf("%w: keyset %s version %d is not the document seen at that version (%s): two writers forked it; find the lost write, then write the keyset that should win at a higher version",
			keyset.ErrFork, ks.ID, ks.Version, seenPath())
	case v.Tag != "" && !v.descends(ks):
		return fmt.Errorf("%w: keyset %s version %d does not descend from version %d, seen before (%s): it was edited from another copy (a rollback or a lost write, extended); restore the newest copy (docs/ROTATION.md, \"Forks\"); remove the record only if that version never reached an instance",
			keyset.ErrFork, ks.ID, ks.Version, v.Version, seenPath())
	}
	return nil
}

// rollbackFirst names a rollback first when the configured KEK does not
// open ks (kekRefused) and the record saw a newer version of it: a copy
// from before a KEK change was put back, and the KEK error alone would
// steer the operator to trust the old KEK again (keyset.RollbackKEKError).
func rollbackFirst(ks *keyset.Keyset, err error) error {
	if !kekRefused(err) {
		return err
	}
	return seenRollback(ks, err)
}

// seenRollback names a rollback first for any failure err to verify ks
// (a KMS that refuses a disabled key version too: that is not an unwrap
// failure, since it may be enabled again) when the record saw a newer
// version: that version is a rollback, which checkSeen would report had
// ks authenticated.
func seenRollback(ks *keyset.Keyset, err error) error {
	if ks == nil || errors.Is(err, keyset.ErrRollback) {
		return err
	}
	r := readSeen()
	if v, ok := r[ks.ID]; ok && ks.Version < v.Version {
		return keyset.RollbackKEKError(ks, v.Version, "which this operator saw: "+seenPath(), err)
	}
	if len(r) > 0 && kekRefused(err) {
		// The version and id the copy claims are not authenticated: a
		// copy from before a KEK change, its version raised or its id
		// changed, passes the test above.
		return keyset.UnverifiedKEKError(ks, err)
	}
	return err
}

// kekRefused reports an error of the configured KEK not opening a keyset
// (not trusted, its authentication or a key does not unwrap, or the KMS
// refuses the key version it is under as disabled) that does
// not name a rollback already.
func kekRefused(err error) bool {
	return !errors.Is(err, keyset.ErrRollback) &&
		(errors.Is(err, keyset.ErrUntrustedKEK) || errors.Is(err, keyset.ErrUnauthenticated) || errors.Is(err, backends.ErrUnwrap) || errors.Is(err, backends.ErrKeyDisabled))
}

// rollbackFirst is the package's rollbackFirst for an error of a command
// that read the keyset itself: the document (data, else the keyset at
// --keyset) is read again only when the KEK refused it.
func (p *paths) rollbackFirst(ctx context.Context, err error, data []byte) error {
	if !kekRefused(err) {
		return err
	}
	var ks *keyset.Keyset
	if data != nil {
		ks, _ = keyset.Parse(data)
	} else {
		ks, _ = p.readKeyset(ctx)
	}
	return rollbackFirst(ks, err)
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
	since := time.Now().UTC().Truncate(time.Second)
	if v, ok := r[ks.ID]; ok && v.Version == ks.Version && v.Digest == digest(ks) {
		since = v.Since // seen again: not news
	}
	r[ks.ID] = seenEntry{ks.Version, digest(ks), hex.EncodeToString(ks.Auth.Tag), ks.RetiredKeys, since}
	b, _ := json.MarshalIndent(r, "", "  ")
	if os.MkdirAll(filepath.Dir(path), 0o700) != nil {
		return
	}
	tmp := path + ".tmp"
	if os.WriteFile(tmp, append(b, '\n'), 0o600) == nil {
		os.Rename(tmp, path)
	}
}
