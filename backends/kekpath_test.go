package backends

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/internal/redact"
)

// keyShapedNames are directory names that are 43 base64url characters
// decoding to 32 bytes, as a bare key is: the temporary directory that
// made issue 26's test fail (the test's name and a 9-digit suffix ending
// in 0, 4 or 8), a SHA-256 in base64url, and a random id.
func keyShapedNames(t *testing.T) []string {
	t.Helper()
	random := make([]byte, 32)
	for i := range random {
		random[i] = byte(i*37 + 11)
	}
	names := []string{
		"TestAttackUpgradeRevivesRetiredKey123456780",
		"47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU", // SHA-256 of "", base64url
		base64.RawURLEncoding.EncodeToString(random),
	}
	for _, n := range names {
		if !redact.IsBareKey(n) {
			t.Fatalf("%s is not shaped like a bare key: the test would prove nothing", n)
		}
	}
	return names
}

// TestKEKPathShapedLikeKey (issue 26): a local KEK in a directory whose
// name is shaped like a bare key opens, wraps and unwraps, as an absolute
// path and relative to OpenOptions.Dir; a missing one is an error that
// wraps fs.ErrNotExist and does not show the name; the same run as the
// whole name is refused as a pasted key.
func TestKEKPathShapedLikeKey(t *testing.T) {
	ctx := context.Background()
	for _, name := range keyShapedNames(t) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name, "kek")
		if err := GenerateLocal(path); err != nil {
			t.Fatal(err)
		}
		for _, raw := range []string{"local:" + path, "local:" + name + "/kek"} {
			kek, err := Open(ctx, raw, &OpenOptions{Dir: dir})
			if err != nil {
				t.Fatalf("Open(%s): %v", raw, err)
			}
			w, err := kek.Wrap(ctx, []byte("data key"), []byte("ad"))
			if err != nil {
				t.Fatal(err)
			}
			if p, err := kek.Unwrap(ctx, w, []byte("ad")); err != nil || !bytes.Equal(p, []byte("data key")) {
				t.Fatalf("Unwrap = %q, %v", p, err)
			}
			if _, err := Identity(raw); err != nil {
				t.Errorf("Identity(%s): %v", raw, err)
			}
		}
		_, err := Open(ctx, "local:"+filepath.Join(dir, name, "missing"), nil)
		if !errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), name[:12]) {
			t.Errorf("a missing KEK: %v; want fs.ErrNotExist without the key-shaped name", err)
		}
		for _, raw := range []string{"local:" + name, "local:///" + name, "local://env/" + name} {
			if _, err := Open(ctx, raw, &OpenOptions{Dir: dir}); !errors.Is(err, redact.ErrKeyValue) {
				t.Errorf("Open(%s) = %v, want ErrKeyValue", raw, err)
			}
		}
	}
}
