package keyset_test

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
)

// TestAttackJSONDifferentials: the store writer re-encodes the authentic
// document, or changes it, in ways JSON readers disagree on (duplicate
// members, case, escapes in member names, number spellings, BOM, nesting,
// size). Each variant is either refused, or loads with exactly the
// authentic meaning and reads the same to a lenient reader
// (encoding/json: case-insensitive, last duplicate wins), so no
// operator's tool sees another keyset than the instances.
func TestAttackJSONDifferentials(t *testing.T) {
	f := newFixture(t, keyring.DefaultPolicy())
	f.write(t, f.addKey(t)) // two keys, version 2
	good := testkit.Must(os.ReadFile(f.path))
	want := mustParse(t, good)
	st := `"state": "active"`
	if !bytes.Contains(good, []byte(st)) {
		t.Fatal("layout")
	}
	r := func(old, new string) []byte { return []byte(strings.Replace(string(good), old, new, 1)) }
	variants := map[string][]byte{
		"duplicate version":              r(`"version": 2,`, `"version": 2, "version": 9,`),
		"duplicate state, retired last":  r(st, st+`, "state": "retired"`),
		"duplicate state, retired first": r(st, `"state": "retired", `+st),
		"escaped duplicate state":        r(st, st+`, "\u0073tate": "retired"`),
		"escaped duplicate, other order": r(st, `"\u0073tate": "retired", `+st),
		"escaped member, same value":     r(st, `"\u0073tate": "active"`),
		"escaped member, other value":    r(st, `"\u0073tate": "retired"`),
		"upper-case member":              r(st, `"State": "retired"`),
		"upper-case duplicate":           r(st, st+`, "State": "retired"`),
		"kelvin sign k in keys":          r(`"keys":`, `"\u212Aeys":`),
		"long s in state":                r(st, `"\u017Ftate": "active"`),
		"escaped value":                  r(st, `"state": "\u0061ctive"`),
		"escaped format":                 r(`"stateseal-keyset-v4"`, `"stateseal-keyset-\u0076\u0034"`),
		"escaped slash in kek":           r(`"local:stateseal.kek"`, `"local:stateseal.kek\/"`),
		"version 2.0":                    r(`"version": 2,`, `"version": 2.0,`),
		"version 2e0":                    r(`"version": 2,`, `"version": 2e0,`),
		"version 02":                     r(`"version": 2,`, `"version": 02,`),
		"version string":                 r(`"version": 2,`, `"version": "2",`),
		"version 2^64+2":                 r(`"version": 2,`, `"version": 18446744073709551618,`),
		"version -0":                     r(`"version": 2,`, `"version": -0,`),
		"policy 600.0":                   r(`"propagation_delay_seconds": 600`, `"propagation_delay_seconds": 600.0`),
		"policy 6e2":                     r(`"propagation_delay_seconds": 600`, `"propagation_delay_seconds": 6e2`),
		"null keys":                      r(`"keys": [`, `"keys": null, "x": [`),
		"null auth":                      r(`"auth": {`, `"auth": null, "x": {`),
		"BOM":                            append([]byte("\ufeff"), good...),
		"trailing object":                append(append([]byte{}, good...), []byte(`{"format":"stateseal-keyset-v3"}`)...),
		"trailing garbage":               append(append([]byte{}, good...), 'x'),
		"trailing NUL":                   append(append([]byte{}, good...), 0),
		"comment":                        r(`"version"`, `/* c */ "version"`),
		"invalid UTF-8 in id":            r(want.ID, want.ID+"\xff"),
		"lone surrogate in member":       r(`"version"`, `"\ud800": 1, "version"`),
		"NUL escape in member":           r(`"version"`, `"version\u0000"`),
		"unknown member":                 r(`"version"`, `"x": 1, "version"`),
		"deep nesting":                   r(`"version"`, `"x": `+strings.Repeat("[", 200000)+strings.Repeat("]", 200000)+`, "version"`),
		"over 1 MiB":                     r(`"version"`, `"x": "`+strings.Repeat("a", 1<<20)+`", "version"`),
		"1 MiB of whitespace":            append(bytes.Repeat([]byte(" "), 1<<20-len(good)), good...),
	}
	at := &keyset.LoadOptions{Now: func() time.Time { return t0.Add(time.Minute) }}
	for name, doc := range variants {
		if bytes.Equal(doc, good) {
			t.Fatalf("%s: no change", name)
		}
		f.write(t, doc)
		start := time.Now()
		_, ks, err := keyset.Load(ctx, f.path, at)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: took %v", name, d)
		}
		if err != nil {
			if errors.Is(err, keyset.ErrUnauthenticated) {
				t.Logf("%s: parsed, then refused: not authentic", name)
			}
			continue
		}
		if !reflect.DeepEqual(ks, want) {
			t.Errorf("%s: loaded with another meaning", name)
		}
		// A lenient reader of the accepted variant sees the same states.
		var lenient struct {
			Version uint64
			Keys    []struct{ State string }
		}
		if err := stdjson.Unmarshal(bytes.TrimPrefix(doc, []byte("\ufeff")), &lenient); err == nil {
			if lenient.Version != want.Version || len(lenient.Keys) != len(want.Keys) {
				t.Errorf("%s: encoding/json reads version %d, %d keys", name, lenient.Version, len(lenient.Keys))
			}
			for i, k := range lenient.Keys {
				if i < len(want.Keys) && k.State != want.Keys[i].State.String() {
					t.Errorf("%s: encoding/json reads key %d as %s", name, i, k.State)
				}
			}
		}
		t.Logf("%s: accepted, same meaning", name)
	}
}
