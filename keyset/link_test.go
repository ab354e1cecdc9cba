package keyset

import (
	"github.com/stateseal/stateseal/internal/testkit"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteThroughSymlink: a keyset mounted through symbolic links, as
// Kubernetes mounts secrets (keyset.json -> ..data/keyset.json, ..data ->
// a timestamped directory), is edited in place: the link stays, the file
// it names gets the new version, the lock and temporary file go beside
// that file, and a relative KEK resolves against its directory.
func TestWriteThroughSymlink(t *testing.T) {
	path, ks, kek := newKeysetFile(t, 1) // dir/keyset.json, KEK dir/kek
	dir := filepath.Dir(path)
	real := filepath.Join(dir, "..2026_11_30")
	testkit.Check(os.Mkdir(real, 0o755))
	for _, f := range []string{"keyset.json", "kek"} {
		if err := os.Rename(filepath.Join(dir, f), filepath.Join(real, f)); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Check(os.Symlink("..2026_11_30", filepath.Join(dir, "..data")))
	mount := t.TempDir() // the link lives elsewhere, so "local:kek" beside it would not resolve
	link := filepath.Join(mount, "keyset.json")
	if err := os.Symlink(filepath.Join(dir, "..data", "keyset.json"), link); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(ctx, link, &LoadOptions{KEK: "local:kek"}); err != nil {
		t.Fatalf("load through the link: %v", err)
	}
	next := ks.Clone()
	next.Follow(ks)
	if err := writeAuth(t, link, next, kek); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", fi.Mode(), err)
	}
	got, err := ReadFile(ctx, filepath.Join(real, "keyset.json"))
	if err != nil || got.Version != 2 {
		t.Fatalf("the real file: %v, version %d", err, got.Version)
	}
	if _, err := os.Stat(filepath.Join(real, "keyset.json.lock")); err != nil {
		t.Errorf("no lock beside the real file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(mount, "keyset.json.lock")); err == nil {
		t.Error("a lock beside the link")
	}
	if _, _, err := Load(ctx, link, &LoadOptions{KEK: "local:kek"}); err != nil {
		t.Fatalf("load through the link after the edit: %v", err)
	}
}
