package keyset

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/keymaterial"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
)

// The keyset vectors live in testdata/keyset-vectors.json at the top of the
// module, beside the token vectors; docs/KEYSET-FORMAT.md describes the
// fields. Regenerate with: go test ./keyset -run TestKeysetVectors -update
var updateKeysetVectors = flag.Bool("update", false, "rewrite ../testdata/keyset-vectors.json")

const kvPath = "../testdata/keyset-vectors.json"

type kvFile struct {
	Format  string     `json:"format"`
	Note    string     `json:"note"`
	KEKs    []kvKEK    `json:"keks"`
	Vectors []kvVector `json:"vectors"`
	// KEKFiles are local KEK files' texts and what they hold.
	KEKFiles []kvKEKFile `json:"kek_files"`
}

// kvKEK is a local KEK: its URL and its 32-byte value (hex). Its file holds
// "stateseal-kek-v1:" and the value in unpadded base64url.
type kvKEK struct {
	URL string `json:"url"`
	Key string `json:"key"`
}

type kvVector struct {
	Name    string `json:"name"`
	Comment string `json:"comment"`
	// Document is the keyset document as stored; DocumentHex holds it
	// instead when it is not valid UTF-8.
	Document    string `json:"document,omitempty"`
	DocumentHex string `json:"document_hex,omitempty"`
	// PadTo, if set, is the document's length once spaces are appended
	// to it: how a vector of a megabyte is stored in a few hundred bytes.
	PadTo  int       `json:"pad_to,omitempty"`
	Config kvConfig  `json:"config"`
	Expect string    `json:"expect"`
	Loaded *kvLoaded `json:"loaded,omitempty"`
}

// kvConfig is the loader's configuration: what it trusts, and its clock.
type kvConfig struct {
	KEKs       []string `json:"keks"` // LoadOptions.KEK, then PreviousKEK
	KeysetID   string   `json:"keyset_id,omitempty"`
	MinVersion uint64   `json:"min_version,omitempty"`
	NowMillis  int64    `json:"now_ms"`
	// After names the vectors whose documents the same loader installed
	// first, in this order.
	After []string `json:"after,omitempty"`
	// KEKFile, if set, is the text of the first configured KEK's file for
	// this loader, in place of the one KEKs gives.
	KEKFile *string `json:"kek_file,omitempty"`
}

// kvLoaded is what an ok vector loads to.
type kvLoaded struct {
	ID      string   `json:"id"`
	Version uint64   `json:"version"`
	KEK     string   `json:"kek"`
	Expires string   `json:"expires"` // "" without a freshness window
	Policy  kvPolicy `json:"policy"`
	Auth    kvAuth   `json:"auth"`
	Keys    []kvKey  `json:"keys"` // the keys that are not retired, in document order
	Primary string   `json:"primary"`
}

type kvPolicy struct {
	PropagationDelay int64 `json:"propagation_delay_seconds"`
	MaxTTL           int64 `json:"max_ttl_seconds"`
	Skew             int64 `json:"skew_seconds"`
	RotationInterval int64 `json:"rotation_interval_seconds"`
	Freshness        int64 `json:"freshness_seconds"`
}

type kvAuth struct {
	AD       string `json:"associated_data"` // hex
	Key      string `json:"key"`             // hex: the unwrapped authentication key
	TagInput string `json:"tag_input"`       // hex: the bytes the tag is the HMAC of
}

type kvKey struct {
	ID         string `json:"id"`
	Algorithm  string `json:"algorithm"`
	State      string `json:"state"`
	Created    string `json:"created"`
	Activation string `json:"activation"`
	AD         string `json:"associated_data"` // hex: what the data key is wrapped with
	Material   string `json:"material"`        // hex
}

// kvExpect maps each expectation to the error Go's loader reports.
var kvExpect = map[string]error{
	"ok": nil, "malformed": nil,
	"untrusted_kek": ErrUntrustedKEK, "other_keyset": ErrOtherKeyset, "rollback": ErrRollback,
	"stale": ErrStale, "unauthenticated": ErrUnauthenticated, "fork": ErrFork,
	"unwrap": backends.ErrUnwrap, "no_primary": keyring.ErrNoPrimary,
	"config": ErrConfig,
	// The configured KEK does not open: no refusal of the document, but a
	// transient failure, as a KMS that does not answer (checked apart).
	"kek_unavailable": nil,
}

// kvBeforeKMS are the refusals decided before any KEK is opened.
var kvBeforeKMS = []string{"config", "malformed", "untrusted_kek", "other_keyset", "rollback", "stale"}

func readKeysetVectors(t testing.TB) kvFile {
	t.Helper()
	data, err := os.ReadFile(kvPath)
	if err != nil {
		t.Fatal(err)
	}
	var f kvFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatal(err)
	}
	return f
}

func (v *kvVector) document(t testing.TB) []byte {
	if v.DocumentHex != "" {
		b, err := hex.DecodeString(v.DocumentHex)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if v.PadTo > len(v.Document) {
		return append([]byte(v.Document), bytes.Repeat([]byte(" "), v.PadTo-len(v.Document))...)
	}
	return []byte(v.Document)
}

// TestKeysetVectors loads every vector with Go's loader, configured as the
// vector says, and checks the outcome: the keys, policy and primary it
// loads to, or the refusal; and that no KEK is opened for a refusal that
// the configuration decides.
func TestKeysetVectors(t *testing.T) {
	if *updateKeysetVectors {
		writeKeysetVectors(t)
	}
	f := readKeysetVectors(t)
	if len(f.Vectors) < 100 {
		t.Fatalf("%d vectors, want at least 100", len(f.Vectors))
	}
	byName := map[string]*kvVector{}
	seen := map[string]bool{}
	for i := range f.Vectors {
		v := &f.Vectors[i]
		if byName[v.Name] != nil {
			t.Fatalf("two vectors named %s", v.Name)
		}
		byName[v.Name] = v
		seen[v.Expect] = true
		if _, ok := kvExpect[v.Expect]; !ok {
			t.Fatalf("%s: unknown expectation %q", v.Name, v.Expect)
		}
	}
	for name := range kvReasons {
		if v := byName[name]; v == nil || v.Expect != "malformed" {
			t.Errorf("kvReasons names %s, which is not a malformed vector", name)
		}
	}
	for e := range kvExpect {
		if !seen[e] {
			t.Errorf("no vector expects %s", e)
		}
	}
	for _, v := range f.Vectors {
		t.Run(v.Name, func(t *testing.T) { kvCheckGo(t, f, byName, v) })
	}
}

// kvKMS is a KEK registry for the vectors: local KEKs count their calls;
// the cloud schemes are traps that count and fail, since no vector may
// reach them.
type kvKMS struct {
	reg          *backends.Registry
	opens, calls atomic.Int64
}

type kvCounting struct {
	backends.KEK
	calls *atomic.Int64
}

func (c kvCounting) Unwrap(ctx context.Context, w, ad []byte) ([]byte, error) {
	c.calls.Add(1)
	return c.KEK.Unwrap(ctx, w, ad)
}

func newKVKMS() *kvKMS {
	k := &kvKMS{reg: new(backends.Registry)}
	k.reg.Register("local", func(ctx context.Context, u *url.URL, o *backends.OpenOptions) (backends.KEK, error) {
		k.opens.Add(1)
		inner, err := backends.Open(ctx, u.String(), o)
		if err != nil {
			return nil, err
		}
		return kvCounting{inner, &k.calls}, nil
	})
	for _, s := range []string{"awskms", "gcpkms", "vault"} {
		k.reg.Register(s, func(context.Context, *url.URL, *backends.OpenOptions) (backends.KEK, error) {
			k.opens.Add(1)
			return nil, fmt.Errorf("the vectors reached the %s KMS", s)
		})
	}
	return k
}

func kvCheckGo(t *testing.T, f kvFile, byName map[string]*kvVector, v kvVector) {
	dir := t.TempDir()
	for _, k := range f.KEKs {
		key, err := hex.DecodeString(k.Key)
		if err != nil {
			t.Fatal(err)
		}
		u := testkit.Must(url.Parse(k.URL))
		if err := os.WriteFile(filepath.Join(dir, u.Opaque), []byte("stateseal-kek-v1:"+base64.RawURLEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if v.Config.KEKFile != nil {
		u := testkit.Must(url.Parse(v.Config.KEKs[0]))
		if err := os.WriteFile(filepath.Join(dir, u.Opaque), []byte(*v.Config.KEKFile), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "keyset.json")
	kms := newKVKMS()
	now := time.UnixMilli(v.Config.NowMillis)
	o := LoadOptions{KeysetID: v.Config.KeysetID, MinVersion: v.Config.MinVersion, Backends: kms.reg, Now: func() time.Time { return now }}
	if len(v.Config.KEKs) > 0 {
		o.KEK = v.Config.KEKs[0]
	}
	if len(v.Config.KEKs) > 1 {
		o.PreviousKEK = v.Config.KEKs[1]
	}
	write := func(doc []byte) {
		if err := os.WriteFile(path, doc, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var snap *keyring.Snapshot
	var err error
	opens, calls := int64(0), int64(0)
	if len(v.Config.After) == 0 {
		write(v.document(t))
		snap, _, err = Load(ctx, path, &o)
	} else {
		l := &Loader{Path: path, Options: o, Logger: slog.New(slog.DiscardHandler)}
		defer l.Close()
		var ring *keyring.Ring
		for i, name := range v.Config.After {
			first := byName[name]
			if first == nil || first.Expect != "ok" {
				t.Fatalf("after %q, which is not an ok vector", name)
			}
			write(first.document(t))
			var lerr error
			if i == 0 {
				ring, lerr = l.Load(ctx)
			} else {
				lerr = l.Reload(ctx)
			}
			if lerr != nil {
				t.Fatalf("installing %s first: %v", first.Name, lerr)
			}
		}
		opens, calls = kms.opens.Load(), kms.calls.Load()
		write(v.document(t))
		if err = l.Reload(ctx); err == nil {
			snap = ring.Current()
		}
	}
	if slices.Contains(kvBeforeKMS, v.Expect) && (kms.opens.Load() != opens || kms.calls.Load() != calls) {
		t.Errorf("a %s refusal opened a KEK or called one (%d opens, %d calls)", v.Expect, kms.opens.Load()-opens, kms.calls.Load()-calls)
	}
	if v.Expect == "kek_unavailable" {
		// Not a refusal of the document: none of the refusals' errors, and
		// a loader retries it as it does a KMS that does not answer.
		var te transientError
		for name, e := range kvExpect {
			if e != nil && errors.Is(err, e) {
				t.Fatalf("%v (%s); want the KEK unavailable, no refusal of the document", err, name)
			}
		}
		if err == nil || !errors.As(err, &te) {
			t.Fatalf("%v; want a transient failure to open the KEK", err)
		}
		return
	}
	if v.Expect != "ok" {
		want := kvExpect[v.Expect]
		switch {
		case err == nil:
			t.Fatalf("loaded; the vector says %s", v.Expect)
		case want != nil && !errors.Is(err, want):
			t.Fatalf("%v; want %v", err, want)
		case want == nil:
			for name, e := range kvExpect {
				if e != nil && errors.Is(err, e) {
					t.Fatalf("%v (%s); want a malformed document", err, name)
				}
			}
			if r, ok := kvReasons[v.Name]; ok && !strings.Contains(err.Error(), r) {
				t.Fatalf("%v; want it malformed for the reason the vector gives (%q)", err, r)
			}
		}
		return
	}
	if err != nil {
		t.Fatalf("%v; the vector loads", err)
	}
	kvCheckSnapshot(t, v, snap, now)
	if len(v.Config.After) == 0 {
		if n := kms.calls.Load(); n != int64(1+len(v.Loaded.Keys)) {
			t.Errorf("%d KEK calls, want %d: the authentication key and each key that is not retired", n, 1+len(v.Loaded.Keys))
		}
	}
}

func kvCheckSnapshot(t *testing.T, v kvVector, snap *keyring.Snapshot, now time.Time) {
	want := v.Loaded
	p, ok := snap.Policy()
	got := kvPolicy{int64(p.PropagationDelay / time.Second), int64(p.MaxTTL / time.Second), int64(p.Skew / time.Second),
		int64(p.RotationInterval / time.Second), int64(p.Freshness / time.Second)}
	if !ok || got != want.Policy || snap.Version() != want.Version {
		t.Errorf("policy %+v version %d, want %+v version %d", got, snap.Version(), want.Policy, want.Version)
	}
	keys := snap.Keys()
	if len(keys) != len(want.Keys) {
		t.Fatalf("%d keys, want %d", len(keys), len(want.Keys))
	}
	for _, wk := range want.Keys {
		i := slices.IndexFunc(keys, func(k keyring.Key) bool { return keyring.FormatID(k.ID) == wk.ID })
		if i < 0 {
			t.Fatalf("no key %s", wk.ID)
		}
		k := keys[i]
		if k.Algorithm.String() != wk.Algorithm || k.State.String() != wk.State || hex.EncodeToString(keymaterial.Of(&k)) != wk.Material ||
			k.Created.UTC().Format(time.RFC3339) != wk.Created || k.Activation.UTC().Format(time.RFC3339) != wk.Activation {
			t.Errorf("key %s: %v %v %s %s, want %+v", wk.ID, k.Algorithm, k.State, k.Created, k.Activation, wk)
		}
	}
	pk, err := snap.Primary(now)
	if err != nil || keyring.FormatID(pk.ID) != want.Primary {
		t.Errorf("primary %v, %v; want %s", pk, err, want.Primary)
	}
}
