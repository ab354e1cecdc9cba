package rotation

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
)

// TestExportImport: a document exported from one location imports into
// an empty one and over an older version of the same keyset, and nowhere
// else; --as-version writes an older copy above the location's version.
func TestExportImport(t *testing.T) {
	path, _, o := setup(t)
	v1, ks, err := Export(ctx, path, o)
	if err != nil || ks.Version != 1 {
		t.Fatalf("export: %v, %+v", err, ks)
	}
	raw := testkit.Must(os.ReadFile(path))
	if string(v1) != string(raw) {
		t.Fatal("export is not the document as stored")
	}
	if _, err := Rotate(ctx, path, nil, o); err != nil {
		t.Fatal(err)
	}
	v2, _ := testkit.Must2(Export(ctx, path, o))

	// Into an empty location, beside the same KEK file.
	dir := filepath.Dir(path)
	other := filepath.Join(dir, "copy.json")
	res, err := Import(ctx, other, v1, nil, o)
	if err != nil || res.Replaced != 0 || res.Keyset.Version != 1 {
		t.Fatalf("into an empty location: %+v, %v", res, err)
	}
	// Over an older version of the same keyset.
	if res, err = Import(ctx, other, v2, nil, o); err != nil || res.Replaced != 1 {
		t.Fatalf("over version 1: %+v, %v", res, err)
	}
	// Not over a newer version, nor another document at the same version.
	if _, err := Import(ctx, other, v1, nil, o); !errors.Is(err, keyset.ErrRollback) {
		t.Fatalf("older over newer: %v", err)
	}
	if _, err := Rotate(ctx, path, nil, o); err != nil {
		t.Fatal(err)
	}
	if _, err := Rotate(ctx, other, nil, o); err != nil {
		t.Fatal(err)
	}
	v3, _ := testkit.Must2(Export(ctx, path, o))
	if _, err := Import(ctx, other, v3, nil, o); !errors.Is(err, keyset.ErrFork) {
		t.Fatalf("a fork: %v", err)
	}
	// Not into another keyset's location.
	third := filepath.Join(dir, "third.json")
	if _, err := Init(ctx, third, "local:kek", keyring.AEAD, testPolicy(), o); err != nil {
		t.Fatal(err)
	}
	if _, err := Import(ctx, third, v3, nil, o); !errors.Is(err, keyset.ErrOtherKeyset) {
		t.Fatalf("over another keyset: %v", err)
	}

	// An older copy at a version above the location's, re-authenticated;
	// Check sees the keyset about to be written and can stop it.
	stop := errors.New("stop")
	if _, err := Import(ctx, other, v1, &ImportOptions{AsVersion: 9, Check: func(*keyset.Keyset) error { return stop }}, o); err != stop {
		t.Fatalf("Check: %v", err)
	}
	res, err = Import(ctx, other, v1, &ImportOptions{AsVersion: 9}, o)
	if err != nil || res.Keyset.Version != 9 || len(res.Keyset.Keys) != 1 || len(res.Warnings) != 1 {
		t.Fatalf("as version 9: %+v, %v", res, err)
	}
	if _, _, err := Export(ctx, other, o); err != nil {
		t.Fatalf("the re-authenticated copy: %v", err)
	}

	// A document changed without the KEK is not imported.
	bad := strings.Replace(string(v3), `"skew_seconds": 30`, `"skew_seconds": 600`, 1)
	if _, err := Import(ctx, filepath.Join(dir, "bad.json"), []byte(bad), nil, o); !errors.Is(err, keyset.ErrUnauthenticated) {
		t.Fatalf("a changed document: %v", err)
	}
}
