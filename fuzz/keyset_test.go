package fuzz

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/localkek"
	"github.com/stateseal/stateseal/internal/redact"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyset"
)

const seedKeyset = `{
  "format": "stateseal-keyset-v1",
  "id": "ks-84b822435e7154d5",
  "version": 2,
  "kek": "local:stateseal.kek",
  "policy": {"propagation_delay_seconds": 600, "max_ttl_seconds": 3600, "skew_seconds": 30, "rotation_interval_seconds": 2592000},
  "keys": [
    {"id": "44992b65", "algorithm": "aead", "state": "active", "created": "2026-11-30T03:10:22Z",
     "activation": "2026-11-30T03:10:22Z", "wrapped": "AdTzTbZVSyM_m_iEq3fkW3kbjc8Qci3dnUJMXCszXFD7FhPVhj0KZlrU"},
    {"id": "ff56c220", "algorithm": "mac", "state": "decrypt-only", "created": "2026-11-30T03:10:22Z",
     "activation": "2026-11-30T03:20:22Z", "wrapped": "AT2raNlcnCzMf7mKJXM3qW9Tz7z3_u1PMYmFz_B9I"}
  ]
}`

// FuzzParseKeyset: parsing any bytes never panics, and whatever parses
// survives a write and a read unchanged.
func FuzzParseKeyset(f *testing.F) {
	f.Add([]byte(seedKeyset))
	f.Add([]byte(strings.Replace(seedKeyset, `"state": "active"`, `"state": "retired", "state": "active"`, 1)))
	f.Add([]byte(`{"format":"stateseal-keyset-v2"}`))
	f.Add([]byte(`{}`))
	// Every document of the keyset vectors, format 4 with history and
	// retired keys among them.
	if b, err := os.ReadFile("../testdata/keyset-vectors.json"); err == nil {
		var vf struct {
			Vectors []struct {
				Document string `json:"document"`
			} `json:"vectors"`
		}
		testkit.Check(json.Unmarshal(b, &vf))
		for _, v := range vf.Vectors {
			f.Add([]byte(v.Document))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ks, err := keyset.Parse(data)
		if err != nil {
			return
		}
		out, err := ks.Marshal()
		if err != nil {
			t.Fatalf("a parsed keyset does not marshal: %v", err)
		}
		again, err := keyset.Parse(out)
		if err != nil {
			t.Fatalf("a marshalled keyset does not parse: %v\n%s", err, out)
		}
		out2 := testkit.Must(again.Marshal())
		if !bytes.Equal(out, out2) {
			t.Fatalf("keyset changed through a write and a read:\n%s\n%s", out, out2)
		}
	})
}

// FuzzKEKURL: opening any KEK URL never panics, and a local file URL
// always resolves to an absolute path (relative ones against the keyset's
// directory), never to one relative to wherever the process happens to run.
func FuzzKEKURL(f *testing.F) {
	for _, s := range []string{"local:stateseal.kek", "local:/etc/kek", "local:///etc/kek", "local://env/KEK",
		"local://env/", "local:../up.kek", "awskms://alias/x", "local:%zz", "", "local:?x", "vault://transit/keys/k"} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, raw string) {
		backends.Open(context.Background(), raw, &backends.OpenOptions{Dir: dir}) // must not panic
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "local" {
			return
		}
		path, env, err := localkek.Source(u, dir)
		if err != nil || env != "" {
			return
		}
		if !filepath.IsAbs(path) {
			t.Fatalf("%q resolved to the relative path %q", raw, path)
		}
	})
}

// FuzzRedactKey: a local KEK's value ("stateseal-kek-v1:...") anywhere in
// a string, between any two strings without percent-escapes (which could
// spell the key anew), never survives redact.URL, nor reaches Open's or
// Identity's error; nor does the bare key as a local URL's file name.
func FuzzRedactKey(f *testing.F) {
	key := backends.NewLocalKey()
	secret := key[strings.Index(key, ":")+1:]
	for _, s := range [][2]string{{"local:", ""}, {"", ""}, {"vault://transit/keys/k?x=", "&y=1"},
		{"redis://", "@host:6379/0"}, {"local:/dir/", "\n"}, {"awskms://alias/a#", ""}, {"x:", "y"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, prefix, suffix string) {
		if strings.Contains(prefix+suffix, "%") {
			return
		}
		for _, in := range []string{prefix + key + suffix, prefix + secret + suffix} {
			bare := strings.HasPrefix(prefix, "local:") && (prefix == "local:" || strings.HasSuffix(prefix, "/")) && strings.TrimSpace(suffix) == ""
			if !strings.Contains(in, key) && !bare {
				continue // the bare key is recognised as a local file name only
			}
			if r := redact.URL(in); strings.Contains(r, secret) {
				t.Fatalf("Redact(%q) = %q shows the key", in, r)
			}
			if _, err := backends.Open(context.Background(), in, nil); err != nil && strings.Contains(err.Error(), secret) {
				t.Fatalf("Open's error shows the key: %v", err)
			}
			if _, err := backends.Identity(in); err != nil && strings.Contains(err.Error(), secret) {
				t.Fatalf("Identity's error shows the key: %v", err)
			}
		}
	})
}

// FuzzIdentity: Identity never panics; what it returns is its own
// identity, and has no transport parameter and no credentials.
func FuzzIdentity(f *testing.F) {
	for _, s := range []string{"awskms://alias/x?region=r&endpoint=http://e", "gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k?endpoint=h:1&insecure=1",
		"vault://u:p@transit/keys/k#f", "local:stateseal.kek", "local://env/K", "x://h/p?b=1&a=2", "local:%zz", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		id, err := backends.Identity(raw)
		if err != nil {
			return
		}
		again, err := backends.Identity(id)
		if err != nil || again != id {
			t.Fatalf("Identity(%q) = %q, but Identity(%q) = %q, %v", raw, id, id, again, err)
		}
		u, err := url.Parse(id)
		if err != nil {
			t.Fatalf("Identity(%q) = %q does not parse: %v", raw, id, err)
		}
		q := u.Query()
		if u.User != nil || q.Has("endpoint") || q.Has("insecure") {
			t.Fatalf("Identity(%q) = %q keeps credentials or transport", raw, id)
		}
	})
}
