package keyset

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/keysetjson"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
)

// v3Document writes ks as a writer of format version 3 did: no history,
// no retired_keys, the tag and authAD of format 3.
func v3Document(t *testing.T, ks *Keyset, kek backends.KEK) []byte {
	t.Helper()
	key := make([]byte, 32)
	rand.Read(key)
	w, err := kek.Wrap(ctx, key, authAD(keysetjson.FormatV3, ks.ID))
	if err != nil {
		t.Fatal(err)
	}
	ks.History, ks.RetiredKeys = nil, nil
	ks.Auth = Auth{Wrapped: w}
	ks.Auth.Tag = ks.tag(keysetjson.FormatV3, key)
	d := ks.doc()
	d.Format = keysetjson.FormatV3
	b, err := keysetjson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUpgradeFromV3: a format-3 keyset does not load and says to
// upgrade; Upgrade keeps every wrapped key and the expiry, links to the
// old document, records its retired key for good, and the result loads.
// A format-4 document is not upgraded again, and a format-3 one changed
// without the KEK is not upgraded.
func TestUpgradeFromV3(t *testing.T) {
	dir := t.TempDir()
	if err := backends.GenerateLocal(filepath.Join(dir, "kek")); err != nil {
		t.Fatal(err)
	}
	kek := testkit.Must(backends.Open(ctx, "local:kek", &backends.OpenOptions{Dir: dir}))
	ks := newKeyset(t, kek, 3)
	ks.Version = 5
	ks.Policy = keyring.DefaultPolicy()
	ks.Keys[0].State = keyring.Retired
	now := time.Now().UTC().Truncate(time.Second)
	ks.Refresh(now.Add(-time.Hour))
	old := v3Document(t, ks, kek)
	path := filepath.Join(dir, "keyset.json")
	testkit.Check(os.WriteFile(path, old, 0o600))
	if _, _, err := Load(ctx, path, &LoadOptions{KEK: "local:kek"}); err == nil || !strings.Contains(err.Error(), "sealctl upgrade") {
		t.Fatalf("a format-3 keyset loads, or does not say to upgrade: %v", err)
	}
	up, err := Upgrade(ctx, old, kek, "local:kek", now)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case up.Version != 6 || len(up.History) != 1 || up.History[0].Version != 5 || !bytes.Equal(up.History[0].Tag, ks.Auth.Tag):
		t.Fatalf("upgraded: version %d, history %+v", up.Version, up.History)
	case !slices.Equal(up.RetiredKeys, []uint32{ks.Keys[0].ID}):
		t.Fatalf("retired keys %x, want the retired key's id", up.RetiredKeys)
	case !up.Expires.Equal(ks.Expires):
		t.Fatalf("the upgrade renewed the expiry (%s, was %s): it cannot tell whether the old document is the newest", up.Expires, ks.Expires)
	}
	for i := range ks.Keys {
		if !bytes.Equal(up.Keys[i].Wrapped, ks.Keys[i].Wrapped) {
			t.Fatalf("key %d rewrapped", i)
		}
	}
	doc, err := up.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	testkit.Check(os.WriteFile(path, doc, 0o600)) // as the store's write over the old document does
	if _, _, err := Load(ctx, path, &LoadOptions{KEK: "local:kek"}); err != nil {
		t.Fatalf("the upgraded keyset: %v", err)
	}
	cur := testkit.Must(os.ReadFile(path))
	if _, err := Upgrade(ctx, cur, kek, "local:kek", now); err == nil {
		t.Fatal("a format-4 keyset upgraded again")
	}
	tampered := bytes.Replace(old, []byte(`"state": "retired"`), []byte(`"state": "active"`), 1)
	if _, err := Upgrade(ctx, tampered, kek, "local:kek", now); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a format-3 keyset changed without the KEK: %v", err)
	}
}
