package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/backends/kektest"
	"github.com/stateseal/stateseal/internal/keysetjson"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/seal"
)

// v2Doc writes what a writer of format version 2 wrote: an authentic
// document under kek, without freshness (docs/KEYSET.md, the tag of
// format 2). The attacker cannot make one; they replay one from the
// store's history (Vault KV keeps every version) or a backup.
func v2Doc(t *testing.T, kek backends.KEK, id string, version uint64, kekName string, keys []keyset.StoredKey) []byte {
	t.Helper()
	ctx := context.Background()
	p := keyring.DefaultPolicy()
	key := make([]byte, 32)
	rand.Read(key)
	aw, err := kek.Wrap(ctx, key, []byte(keysetjson.FormatV2+"\x00"+id+"\x00auth"))
	if err != nil {
		t.Fatal(err)
	}
	field := func(b, f []byte) []byte { return append(binary.BigEndian.AppendUint32(b, uint32(len(f))), f...) }
	b := field(nil, []byte(keysetjson.FormatV2+" auth"))
	b = field(b, []byte(id))
	b = binary.BigEndian.AppendUint64(b, version)
	b = field(b, []byte(kekName))
	for _, d := range []time.Duration{p.PropagationDelay, p.MaxTTL, p.Skew, p.RotationInterval} {
		b = binary.BigEndian.AppendUint64(b, uint64(d))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(keys)))
	d := &keysetjson.Doc{Format: keysetjson.FormatV2, ID: id, Version: version, KEK: kekName,
		Policy: keysetjson.Policy{PropagationDelay: int64(p.PropagationDelay / time.Second), MaxTTL: int64(p.MaxTTL / time.Second),
			Skew: int64(p.Skew / time.Second), RotationInterval: int64(p.RotationInterval / time.Second)}}
	for _, k := range keys {
		b = binary.BigEndian.AppendUint32(b, k.ID)
		b = field(b, []byte(k.Algorithm.String()))
		b = field(b, []byte(k.State.String()))
		b = binary.BigEndian.AppendUint64(b, uint64(k.Created.Unix()))
		b = binary.BigEndian.AppendUint64(b, uint64(k.Activation.Unix()))
		b = field(b, k.Wrapped)
		d.Keys = append(d.Keys, keysetjson.Key{ID: keyring.FormatID(k.ID), Algorithm: k.Algorithm.String(), State: k.State.String(),
			Created: keysetjson.FormatTime(k.Created), Activation: keysetjson.FormatTime(k.Activation), Wrapped: keysetjson.FormatWrapped(k.Wrapped)})
	}
	b = field(b, aw)
	m := hmac.New(sha256.New, key)
	m.Write(b)
	d.Auth = keysetjson.Auth{Wrapped: keysetjson.FormatWrapped(aw), Tag: keysetjson.FormatWrapped(m.Sum(nil))}
	out, err := keysetjson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sealctlT(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errOut)
	return code, out.String() + errOut.String()
}

// sealctlAs returns a sealctl on the keyset at path, run as the operator
// whose record is the file state, that fails the test unless it exits
// with want; it returns the output.
func sealctlAs(t *testing.T, path string) func(state string, want int, args ...string) string {
	return func(state string, want int, args ...string) string {
		t.Helper()
		t.Setenv("STATESEAL_STATE", state)
		code, out := sealctlT(t, append([]string{"--keyset", path}, args...)...)
		if code != want {
			t.Fatalf("sealctl %s: exit %d, want %d: %s", strings.Join(args, " "), code, want, out)
		}
		return out
	}
}

// TestAttackUpgradeRevivesRetiredKey: a keyset that began in format 2
// was upgraded, then a key leaked and was retired by force. The store
// writer puts the format-2 document back (vault kv rollback to a version
// from before the upgrade). Instances refuse it and tell the operator to
// "run 'sealctl upgrade' once". sealctl upgrade must refuse, as every
// edit does, a keyset below the operator's record, below --min-version,
// or not the --keyset-id one: instead it re-authenticates the old copy as
// format 3 with a fresh expiry, and fresh instances load the retired key.
func TestAttackUpgradeRevivesRetiredKey(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t.Setenv("STATESEAL_STATE", filepath.Join(dir, "seen.json"))
	kekURL := kektest.LocalKEK(t, dir)
	kek, err := backends.Open(ctx, kekURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "keyset.json")
	id := keyset.NewID()
	created := time.Now().UTC().Truncate(time.Second).Add(-24 * time.Hour)
	k, err := keyring.NewKey(keyring.AEAD, created, created, nil)
	if err != nil {
		t.Fatal(err)
	}
	ks := &keyset.Keyset{ID: id}
	sk, err := ks.Wrap(ctx, kek, k)
	if err != nil {
		t.Fatal(err)
	}
	old := v2Doc(t, kek, id, 5, kekURL, []keyset.StoredKey{sk})
	testkit.Check(os.WriteFile(path, old, 0o600))
	sc := func(want int, args ...string) string {
		t.Helper()
		code, out := sealctlT(t, append([]string{"--keyset", path, "--kek", kekURL}, args...)...)
		if code != want {
			t.Fatalf("sealctl %v: exit %d, want %d\n%s", args, code, want, out)
		}
		return out
	}
	// The operator's history: upgrade, then the leak.
	sc(0, "upgrade", "--current")
	sc(0, "rotate", "--now")
	sc(0, "retire", "--force", keyring.FormatID(k.ID))
	sc(0, "verify") // version 8, recorded
	// The attack: the format-2 copy back in the store.
	testkit.Check(os.WriteFile(path, old, 0o600))
	if _, _, err := keyset.Load(ctx, path, &keyset.LoadOptions{KEK: kekURL}); err == nil || !strings.Contains(err.Error(), "sealctl upgrade") {
		t.Fatalf("instances on the old copy: %v", err)
	}
	// The operator follows the advice, with every guard sealctl has.
	code, out := sealctlT(t, "--keyset", path, "--kek", kekURL, "--keyset-id", id, "--min-version", "8", "upgrade")
	if code == 0 {
		t.Errorf("FINDING: sealctl upgrade (record at version 8, --min-version 8) rewrote a format-2 copy of version 5: %s", strings.TrimSpace(out))
	}
	snap, cur, err := keyset.Load(ctx, path, &keyset.LoadOptions{KEK: kekURL, KeysetID: id})
	if err == nil {
		if _, ok := snap.Lookup(k.ID); ok {
			t.Errorf("FINDING: a fresh instance pinned to %s loads version %d (expires %s) with the force-retired key %s active",
				id, cur.Version, cur.Expires.Format(time.RFC3339), keyring.FormatID(k.ID))
			ring := testkit.Must(keyring.NewRing(snap))
			s := testkit.Must(seal.New(ring, nil))
			evil := testkit.Must(keyring.NewSnapshot([]keyring.Key{k}))
			er := testkit.Must(keyring.NewRing(evil))
			a := testkit.Must(seal.New(er, nil))
			bd := seal.Binding{Method: "tools/call", Target: "transfer", Principal: "mallory"}
			tok := testkit.Must(a.Seal(bd, []byte("forged"), time.Minute))
			if _, err := s.Open(bd, tok); err == nil {
				t.Errorf("FINDING: and it opens a token sealed with the leaked key")
			}
		}
	}

	// Another keyset's format-2 document (same KEK: a test keyset, another
	// tenant's) put in place: upgrade must refuse it under --keyset-id.
	other := keyset.NewID()
	ks2 := &keyset.Keyset{ID: other}
	sk2 := testkit.Must(ks2.Wrap(ctx, kek, k))
	testkit.Check(os.WriteFile(path, v2Doc(t, kek, other, 1, kekURL, []keyset.StoredKey{sk2}), 0o600))
	code, out = sealctlT(t, "--keyset", path, "--kek", kekURL, "--keyset-id", id, "upgrade")
	if code == 0 {
		t.Errorf("FINDING: sealctl --keyset-id %s upgrade rewrote keyset %s: %s", id, other, strings.TrimSpace(out))
	}
}
