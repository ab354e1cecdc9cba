//go:build unix

package keyset

import (
	"github.com/stateseal/stateseal/internal/testkit"
	"os"
	"syscall"
	"testing"
)

// TestWriteKeepsModeAndOwner: an edit keeps the file's mode, owner and
// group, so a server running as another user keeps reading it.
func TestWriteKeepsModeAndOwner(t *testing.T) {
	path, ks, kek := newKeysetFile(t, 1)
	if fi := testkit.Must(os.Stat(path)); fi.Mode().Perm() != 0o600 {
		t.Fatalf("new keyset mode %v, want 0600", fi.Mode().Perm())
	}
	testkit.Check(os.Chmod(path, 0o640))
	uid, gid := os.Getuid(), os.Getgid()
	if os.Getuid() == 0 {
		uid, gid = 4242, 4343 // root can give the file away; check both are kept
		if err := os.Chown(path, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	next := ks.Clone()
	next.Follow(ks)
	if err := writeAuth(t, path, next, kek); err != nil {
		t.Fatal(err)
	}
	fi := testkit.Must(os.Stat(path))
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o640 || int(st.Uid) != uid || int(st.Gid) != gid {
		t.Fatalf("after an edit: mode %v uid %d gid %d; want 0640 %d %d", fi.Mode().Perm(), st.Uid, st.Gid, uid, gid)
	}
}
