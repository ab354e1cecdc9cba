package backends

import (
	"bytes"
	"context"
	"errors"
	"github.com/stateseal/stateseal/internal/testkit"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var ctx = context.Background()

func TestLocalFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kek")
	if err := GenerateLocal(path); err != nil {
		t.Fatal(err)
	}
	fi := testkit.Must(os.Stat(path))
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("KEK file mode %v, want 0600", fi.Mode().Perm())
	}
	if err := GenerateLocal(path); err == nil {
		t.Fatal("GenerateLocal overwrote an existing KEK")
	}
	// The same file by relative, absolute and triple-slash URLs.
	var keks []KEK
	for _, u := range []string{"local:kek", "local:" + path, "local://" + path} {
		k, err := Open(ctx, u, &OpenOptions{Dir: dir})
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		keks = append(keks, k)
	}
	w, err := keks[0].Wrap(ctx, []byte("data key"), []byte("ad"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keks {
		if got, err := k.Unwrap(ctx, w, []byte("ad")); err != nil || string(got) != "data key" {
			t.Fatalf("Unwrap = %q, %v", got, err)
		}
	}
}

func TestLocalEnv(t *testing.T) {
	t.Setenv("STATESEAL_TEST_KEK", NewLocalKey())
	k, err := Open(ctx, "local://env/STATESEAL_TEST_KEK", nil)
	if err != nil {
		t.Fatal(err)
	}
	w := testkit.Must(k.Wrap(ctx, []byte("x"), nil))
	if _, err := k.Unwrap(ctx, w, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, "local://env/STATESEAL_TEST_UNSET", nil); err == nil || !strings.Contains(err.Error(), "not set") {
		t.Fatalf("unset variable: %v", err)
	}
}

func TestLocalUnwrapRejects(t *testing.T) {
	t.Setenv("K1", NewLocalKey())
	t.Setenv("K2", NewLocalKey())
	k1 := testkit.Must(Open(ctx, "local://env/K1", nil))
	k2 := testkit.Must(Open(ctx, "local://env/K2", nil))
	w := testkit.Must(k1.Wrap(ctx, bytes.Repeat([]byte{7}, 32), []byte("keyset-a\x00key-1")))
	cases := map[string]func() ([]byte, error){
		"other associated data": func() ([]byte, error) { return k1.Unwrap(ctx, w, []byte("keyset-a\x00key-2")) },
		"other KEK":             func() ([]byte, error) { return k2.Unwrap(ctx, w, []byte("keyset-a\x00key-1")) },
		"flipped bit": func() ([]byte, error) {
			m := bytes.Clone(w)
			m[len(m)/2] ^= 1
			return k1.Unwrap(ctx, m, []byte("keyset-a\x00key-1"))
		},
		"truncated": func() ([]byte, error) { return k1.Unwrap(ctx, w[:20], []byte("keyset-a\x00key-1")) },
		"unknown version": func() ([]byte, error) {
			m := bytes.Clone(w)
			m[0] = 9
			return k1.Unwrap(ctx, m, []byte("keyset-a\x00key-1"))
		},
		"empty": func() ([]byte, error) { return k1.Unwrap(ctx, nil, nil) },
	}
	for name, f := range cases {
		if got, err := f(); !errors.Is(err, ErrUnwrap) || got != nil {
			t.Errorf("%s: %x, %v; want ErrUnwrap", name, got, err)
		}
	}
}

func TestLocalBadSources(t *testing.T) {
	dir := t.TempDir()
	testkit.Check(os.WriteFile(filepath.Join(dir, "junk"), []byte("not a key\n"), 0o600))
	testkit.Check(os.WriteFile(filepath.Join(dir, "short"), []byte("stateseal-kek-v1:AAAA\n"), 0o600))
	for _, u := range []string{
		"local:junk", "local:short", "local:missing",
		"local://host/x", "local:", "local:x?y=1", "local:x#frag", "local://user@env/X",
		"local://env/", "local://env/A/B",
	} {
		if _, err := Open(ctx, u, &OpenOptions{Dir: dir}); err == nil {
			t.Errorf("%s: opened", u)
		}
	}
}

func TestRegistry(t *testing.T) {
	for _, u := range []string{"", "nokek", "awskms://alias/x", "::"} {
		if _, err := Open(ctx, u, nil); err == nil {
			t.Errorf("%q: opened", u)
		}
	}
	var r Registry
	r.Register("test", func(context.Context, *url.URL, *OpenOptions) (KEK, error) { return nil, errors.New("test opener") })
	if _, err := r.Open(ctx, "test:x", nil); err == nil || err.Error() != "test opener" {
		t.Fatalf("custom scheme: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering a scheme twice did not panic")
		}
	}()
	r.Register("test", nil)
}
