package rotation

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
)

// TestCorruptWrappedKey: an authentic keyset with one key whose wrapped
// bytes no longer unwrap (as when its KMS key version is destroyed). The
// load names that key; edits still work, since the keyset's authentication
// does not depend on it; and the operator removes it with retire --force
// and prune.
func TestCorruptWrappedKey(t *testing.T) {
	path, clk, o := setup(t)
	if _, err := Rotate(ctx, path, nil, o); err != nil {
		t.Fatal(err)
	}
	// Break the second key: wrapped for another keyset, so it does not
	// unwrap here, then re-authenticated with the right KEK.
	kek, err := backends.Open(ctx, "local:kek", &backends.OpenOptions{Dir: filepath.Dir(path)})
	if err != nil {
		t.Fatal(err)
	}
	ks := read(t, path)
	bad := ks.Keys[1].ID
	k := testkit.Must(keyring.NewKey(keyring.AEAD, t0, t0, nil))
	k.ID = bad
	elsewhere := testkit.Must((&keyset.Keyset{ID: "ks-elsewhere"}).Wrap(ctx, kek, k))
	ks.Keys[1].Wrapped = elsewhere.Wrapped
	ks.Follow(ks.Clone())
	if err := ks.Authenticate(ctx, kek); err != nil {
		t.Fatal(err)
	}
	if err := keyset.WriteFile(ctx, path, ks); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Hour)
	lo := &keyset.LoadOptions{KEK: "local:kek", Now: clk.now}
	_, _, err = keyset.Load(ctx, path, lo)
	if !errors.Is(err, backends.ErrUnwrap) || !strings.Contains(err.Error(), keyring.FormatID(bad)) {
		t.Fatalf("load names the key that fails: %v", err)
	}
	if _, err := Retire(ctx, path, bad, &RetireOptions{Force: true}, o); err != nil {
		t.Fatalf("retire --force of the broken key: %v", err)
	}
	if _, err := Prune(ctx, path, o); err != nil {
		t.Fatalf("prune: %v", err)
	}
	if _, ok := read(t, path).Key(bad); ok {
		t.Fatal("the broken key is still there")
	}
	if _, _, err := keyset.Load(ctx, path, lo); err != nil {
		t.Fatalf("load after removing it: %v", err)
	}
}
