package keyset_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
)

// TestAttackKEKFieldTricks: a store writer (no KEK) rewrites the
// document's "kek" member into every spelling of the trusted identity it
// can think of, or the trusted identity plus transport settings of its
// own. The document can only pick among the configured KEKs, by the
// exact identity string: every variant is refused as untrusted, before
// any KMS call, and neither the attacker's endpoint nor the configured
// one receives a connection.
func TestAttackKEKFieldTricks(t *testing.T) {
	legit, legitHits := listener(t)
	evil, evilHits := listener(t)
	f := newFixture(t, keyring.DefaultPolicy())
	good := testkit.Must(os.ReadFile(f.path))
	// The instance trusts an AWS KMS key through a configured endpoint.
	const id = "awskms://alias/k?region=eu-west-1"
	configured := "awskms://alias/k?endpoint=http://" + legit + "&region=eu-west-1"
	if got := testkit.Must(backends.Identity(configured)); got != id {
		t.Fatalf("identity %s", got)
	}
	variants := []string{
		"AWSKMS://alias/k?region=eu-west-1",
		"awskms://ALIAS/k?region=eu-west-1",
		"awskms://alias/K?region=eu-west-1",
		"awskms://alias/k/?region=eu-west-1",
		"awskms://alias//k?region=eu-west-1",
		"awskms://alias/./k?region=eu-west-1",
		"awskms://alias/x/../k?region=eu-west-1",
		"awskms://alias/%6B?region=eu-west-1",
		"awskms://alias%2Fk?region=eu-west-1",
		"awskms://alias/k?region=eu%2Dwest-1",
		"awskms://alias/k?Region=eu-west-1",
		"awskms://alias/k?region=eu-west-1&region=us-east-1",
		"awskms://alias/k?region=us-east-1&region=eu-west-1",
		"awskms://alias/k?region=eu-west-1&",
		"awskms://alias/k?&region=eu-west-1",
		"awskms://alias/k?region=eu-west-1#",
		"awskms://alias/k?region=eu-west-1#x",
		"awskms://u:p@alias/k?region=eu-west-1",
		"awskms://@alias/k?region=eu-west-1",
		"awskms://alias:443/k?region=eu-west-1",
		"awskms://alias/k?region=eu-west-1&endpoint=http://" + evil,
		"awskms://alias/k?endpoint=http://" + evil + "&region=eu-west-1",
		"awskms://alias/k?region=eu-west-1&Endpoint=http://" + evil,
		"awskms://alias/k?region=eu-west-1&%65ndpoint=http://" + evil,
		"awskms://alias/k?region=eu-west-1;endpoint=http://" + evil,
		"awskms://alias/k?region=eu-west-1%26endpoint=http://" + evil,
		"awskms://alias/k?region=eu-west-1&insecure=1",
		"awskms://alias/k?region=eu-west-1&x=1",
		" awskms://alias/k?region=eu-west-1",
		"awskms://alias/k?region=eu-west-1 ",
		"awskms://alias/k?region=eu-west-1\t",
		"awskms://alias/k?region=eu-west-1\u0000",
		"awskms://аlias/k?region=eu-west-1", // Cyrillic a
		"awskms://alias/k?region=eu-west-1\u200b",
		"awskms:alias/k?region=eu-west-1",
		"awskms:///alias/k?region=eu-west-1",
		"awskms://alias/k",
		"awskms://alias/k?",
	}
	running := quietLoader(f, keyset.LoadOptions{})
	ring, err := running.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer running.Close()
	for _, v := range variants {
		doc := strings.Replace(string(good), `"kek": "local:stateseal.kek"`, `"kek": `+jsonString(v), 1)
		f.write(t, []byte(doc))
		_, _, err := keyset.Load(ctx, f.path, &keyset.LoadOptions{KEK: configured, Now: running.Options.Now})
		if !errors.Is(err, keyset.ErrUntrustedKEK) {
			t.Errorf("fresh instance trusting %s, document naming %q: %v, want ErrUntrustedKEK", id, v, err)
		}
	}
	if n := evilHits.Load(); n != 0 {
		t.Errorf("the attacker's endpoint received %d connections", n)
	}
	if n := legitHits.Load(); n != 0 {
		t.Errorf("the configured endpoint received %d connections for documents naming another identity", n)
	}
	if ring.Current().Version() != 1 {
		t.Fatal("the running ring changed")
	}
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// TestAttackLocalKEKPaths: a keyset file under the default KEK
// (local:stateseal.kek beside it). The document names the key file by
// other paths: up a directory, absolute, through "./", an environment
// variable, a file the attacker made. Each is refused as untrusted;
// none is read (the attacker's key file would open and authenticate).
func TestAttackLocalKEKPaths(t *testing.T) {
	f := newFixture(t, keyring.DefaultPolicy())
	good := testkit.Must(os.ReadFile(f.path))
	// The attacker writes the keyset anew under a KEK file of their own
	// and names it in every way that might reach it.
	adir := t.TempDir()
	akek := filepath.Join(adir, "stateseal.kek")
	if err := backends.GenerateLocal(akek); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(f.dir, "sub")
	testkit.Check(os.Mkdir(sub, 0o700))
	if err := backends.GenerateLocal(filepath.Join(sub, "stateseal.kek")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ATTACKER_KEK", mustLocalKey())
	rel := testkit.Must(filepath.Rel(f.dir, akek))
	for _, name := range []string{
		"local:" + akek,
		"local://" + akek,
		"local:" + rel,
		"local:./stateseal.kek",
		"local:sub/../stateseal.kek",
		"local:sub/stateseal.kek",
		"local:stateseal.kek/",
		"local:stateseal.kek/.",
		"local:" + f.dir + "/stateseal.kek",
		"local:STATESEAL.KEK",
		"local:stateseal%2Ekek",
		"LOCAL:stateseal.kek",
		"local://env/ATTACKER_KEK",
		"local:%73tateseal.kek",
	} {
		ks, err := keyset.Parse(good)
		if err != nil {
			t.Fatal(err)
		}
		ks.KEK = name
		if ks.Validate() != nil {
			continue
		}
		// Forged under the attacker's key: if the loader opened what the
		// document names, it would authenticate.
		kek, err := backends.Open(ctx, name, &backends.OpenOptions{Dir: f.dir})
		if err != nil {
			// A name the local backend does not open cannot be the
			// attacker's way in either; still check it is refused.
			kek = f.kek
		}
		zero := testkit.Must(keyring.ImportKey(ks.Keys[0].ID, keyring.AEAD, keyring.Active, t0, t0, make([]byte, keyring.KeySize)))
		sk, err := ks.Wrap(ctx, kek, zero)
		if err != nil {
			t.Fatal(err)
		}
		ks.Keys[0] = sk
		if err := ks.Authenticate(ctx, kek); err != nil {
			t.Fatal(err)
		}
		doc, err := ks.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		f.write(t, doc)
		_, _, err = keyset.Load(ctx, f.path, &keyset.LoadOptions{Now: quietLoader(f, keyset.LoadOptions{}).Options.Now})
		if !errors.Is(err, keyset.ErrUntrustedKEK) {
			t.Errorf("document naming %q (default KEK local:stateseal.kek): %v, want ErrUntrustedKEK", name, err)
		}
	}
}

// TestAttackSymlinkedKeyset: the store writer replaces keyset.json by a
// link to a directory of theirs holding a keyset and a stateseal.kek they
// made. With a KEK configured by absolute path, the document does not
// authenticate. With the default (relative) KEK, the link moves "beside
// the keyset" too: docs/KEYSET.md concedes that whoever can replace the
// file can usually replace the key beside it; logged, not asserted.
func TestAttackSymlinkedKeyset(t *testing.T) {
	f := newFixture(t, keyring.DefaultPolicy())
	adir := t.TempDir()
	if err := backends.GenerateLocal(filepath.Join(adir, "stateseal.kek")); err != nil {
		t.Fatal(err)
	}
	akek := testkit.Must(backends.Open(ctx, "local:stateseal.kek", &backends.OpenOptions{Dir: adir}))
	ks := &keyset.Keyset{ID: f.ks.ID, Version: 99, KEK: "local:stateseal.kek", Policy: keyring.DefaultPolicy(),
		History: []keyset.Link{{Version: 98, Tag: make([]byte, 32)}}}
	k := testkit.Must(keyring.NewKey(keyring.AEAD, t0, t0, nil))
	sk := testkit.Must(ks.Wrap(ctx, akek, k))
	ks.Keys = []keyset.StoredKey{sk}
	ks.Refresh(t0)
	if err := ks.Authenticate(ctx, akek); err != nil {
		t.Fatal(err)
	}
	doc := testkit.Must(ks.Marshal())
	testkit.Check(os.WriteFile(filepath.Join(adir, "keyset.json"), doc, 0o600))

	abs := "local:" + filepath.Join(f.dir, "stateseal.kek")
	// A running loader configured with the absolute KEK.
	absID := testkit.Must(backends.Identity(abs))
	f.ks.KEK = absID
	f.write(t, f.addKey(t))
	running := quietLoader(f, keyset.LoadOptions{KEK: abs})
	if _, err := running.Load(ctx); err != nil {
		t.Fatal(err)
	}
	defer running.Close()
	os.Remove(f.path)
	if err := os.Symlink(filepath.Join(adir, "keyset.json"), f.path); err != nil {
		t.Fatal(err)
	}
	// The attacker's document names local:stateseal.kek, not the absolute
	// path: untrusted. Rename it to the absolute identity: it then fails
	// to authenticate under the real key.
	if _, _, err := keyset.Load(ctx, f.path, &keyset.LoadOptions{KEK: abs, Now: running.Options.Now}); !errors.Is(err, keyset.ErrUntrustedKEK) {
		t.Errorf("fresh instance, absolute KEK, linked attacker keyset: %v", err)
	}
	if err := running.Reload(ctx); err == nil {
		t.Errorf("running instance installed the linked attacker keyset")
	}
	// Default KEK, fresh instance: the concession.
	if _, fks, err := keyset.Load(ctx, f.path, &keyset.LoadOptions{Now: running.Options.Now}); err == nil {
		t.Logf("documented concession: a writer of the keyset's directory who links keyset.json elsewhere is trusted under the default relative KEK (loaded %s v%d)", fks.ID, fks.Version)
	}
}

// TestAttackKEKErrorsHideCredentials: an attacker makes instances log
// ErrUntrustedKEK (a document naming another KEK). The message names the
// trusted KEK: never with the configuration's credentials.
func TestAttackKEKErrorsHideCredentials(t *testing.T) {
	f := newFixture(t, keyring.DefaultPolicy())
	good := testkit.Must(os.ReadFile(f.path))
	doc := strings.Replace(string(good), `"kek": "local:stateseal.kek"`, `"kek": "vault://transit/keys/x?token=evil"`, 1)
	f.write(t, []byte(doc))
	for _, configured := range []string{
		"awskms://AKIAEXAMPLE:hunter2secret@alias/k?region=eu-west-1&endpoint=http://user:hunter3secret@127.0.0.1:1",
		"gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k?endpoint=127.0.0.1:1&insecure=1&access_token=hunter4secret",
		"vault://transit/keys/k?X-Vault-Token=hunter5secret",
		"local://env/" + "KEKVAR",
	} {
		_, _, err := keyset.Load(ctx, f.path, &keyset.LoadOptions{KEK: configured, PreviousKEK: "awskms://k?region=r&sig=hunter6secret"})
		if err == nil {
			t.Fatal("loaded")
		}
		for _, s := range []string{"hunter2", "hunter3", "hunter4", "hunter5", "hunter6"} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("error shows a credential %s: %v", s, err)
			}
		}
	}
}
