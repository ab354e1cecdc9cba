package keyset_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyset"
)

// editMember rewrites one top-level member of a keyset document, as a
// store writer without the KEK can.
func editMember(t *testing.T, doc []byte, name string, value any) []byte {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var m map[string]any
	testkit.Check(d.Decode(&m))
	m[name] = value
	return testkit.Must(json.Marshal(m))
}

// TestUnverifiedKEKWarnsFirst: a store writer puts back a copy from
// before the KEK change with its version (not authenticated until the
// KEK opens it) raised to the fleet's or above, or its id changed, so
// that no floor names it a rollback. The running instance that installed
// version 2 and a fresh one with a minimum version warn against trusting
// the old KEK again before anything else, and say the version is not
// authenticated (or name the rollback, where the claim is below the
// floor); the KEK error alone steered to -previous-kek (found by a review
// holding the store).
func TestUnverifiedKEKWarnsFirst(t *testing.T) {
	ctx := context.Background()
	path, _, newKEK, v1 := rewrapped(t)

	running := &keyset.Loader{Path: path, Options: keyset.LoadOptions{KEK: newKEK}, Logger: slog.New(slog.DiscardHandler)}
	testkit.Must(running.Load(ctx))
	defer running.Close()
	warnsFirst := func(who, edit string, err error) {
		t.Helper()
		msg := strings.ToLower(err.Error())
		warn, steer := strings.Index(msg, "do not trust the old kek again"), strings.Index(msg, "-previous-kek")
		named := errors.Is(err, keyset.ErrRollback) || strings.Contains(msg, "nor its id is authenticated")
		if !errors.Is(err, keyset.ErrUntrustedKEK) || warn < 0 || steer < warn || !named {
			t.Errorf("%s, %s: untrusted=%v warn=%d steer=%d named=%v: %v", who, edit, errors.Is(err, keyset.ErrUntrustedKEK), warn, steer, named, err)
		}
	}
	// A history made up to pass the check that a version names the one
	// it follows.
	hist := []any{map[string]any{"version": 1, "tag": strings.Repeat("A", 43)}}
	for _, c := range []struct {
		name string
		doc  []byte
	}{
		{"version 1 raised to 99", editMember(t, editMember(t, v1, "version", json.Number("99")), "history", hist)},
		{"version 1 raised to 2", editMember(t, editMember(t, v1, "version", json.Number("2")), "history", hist)},
		{"id changed", editMember(t, v1, "id", "ks_"+strings.Repeat("a", 26))},
	} {
		testkit.Check(os.WriteFile(path, c.doc, 0o600))
		warnsFirst("the running instance", c.name, running.Reload(ctx))
		_, _, err := keyset.Load(ctx, path, &keyset.LoadOptions{KEK: newKEK, MinVersion: 2})
		warnsFirst("a fresh instance with -min-version 2", c.name, err)
		// A fresh instance with no floor cannot tell, and says only the
		// KEK error.
		if _, _, err := keyset.Load(ctx, path, &keyset.LoadOptions{KEK: newKEK}); !errors.Is(err, keyset.ErrUntrustedKEK) || strings.Contains(err.Error(), "not authenticated") {
			t.Errorf("a fresh instance, %s: %v", c.name, err)
		}
	}
}
