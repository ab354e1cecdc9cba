package backends

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/internal/localkek"
	"github.com/stateseal/stateseal/internal/redact"
)

// TestOpenNeverEchoesKey: a KEK value where a URL belongs (the contents of
// a key file in STATESEAL_KEK or LoadOptions.KEK) does not reach the error,
// which reaches logs.
func TestOpenNeverEchoesKey(t *testing.T) {
	key := NewLocalKey()
	secret := key[strings.Index(key, ":")+1:]
	for _, raw := range []string{key, key + "\n", secret, "bogus:" + secret, "%zz" + secret} {
		_, err := Open(context.Background(), raw, nil)
		if err == nil {
			t.Fatalf("Open(%q) succeeded", raw)
		}
		if strings.Contains(err.Error(), secret[:16]) {
			t.Errorf("the error repeats the key: %v", err)
		}
	}
	_, err := Open(context.Background(), key, nil)
	if err == nil || !strings.Contains(err.Error(), "local://env/NAME") {
		t.Errorf("the error does not say how to pass a key: %v", err)
	}
}

// TestLocalKeyValueRefused (finding 7): the value `sealctl kek` prints,
// given after "local:" (rewrap --to "local:$(cat stateseal.kek)"), is
// refused by Open and localkek.Source, whose errors never repeat it, and
// redact.URL hides it wherever it appears in a URL.
func TestLocalKeyValueRefused(t *testing.T) {
	key := NewLocalKey() // what `sealctl kek` prints
	secret := key[strings.Index(key, ":")+1:]
	dir := t.TempDir()
	for _, raw := range []string{"local:" + key, "local:" + key + "\n", "local:" + secret, "local:///" + secret, "local://" + secret,
		"local:" + strings.Replace(key, ":", "%3A", 1), "local://env/" + key, "local:///" + key} {
		if _, err := Open(context.Background(), raw, &OpenOptions{Dir: dir}); err == nil {
			t.Errorf("Open(%s) succeeded", redact.URL(raw))
		} else if strings.Contains(err.Error(), secret[:16]) {
			t.Errorf("Open's error repeats the key: %v", err)
		}
		if u, err := url.Parse(strings.TrimSpace(raw)); err == nil {
			if p, env, err := localkek.Source(u, dir); err == nil {
				t.Errorf("localkek.Source(%s) = %q, %q", redact.URL(raw), p, env)
			} else if strings.Contains(err.Error(), secret[:16]) || !errors.Is(err, redact.ErrKeyValue) {
				t.Errorf("localkek.Source's error: %v", err)
			}
		}
		if r := redact.URL(raw); strings.Contains(r, secret[:16]) {
			t.Errorf("redact.URL(local key value) = %q", r)
		}
	}
	for _, raw := range []string{
		"vault://transit/keys/k?note=" + key,
		"awskms://alias/x?region=r&endpoint=" + url.QueryEscape(key),
		"redis://" + key + "@host:6379/0",
		"gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k#" + key,
	} {
		if r := redact.URL(raw); strings.Contains(r, secret[:16]) {
			t.Errorf("redact.URL(%q...) = %q: the key shows", raw[:20], r)
		}
	}
	for in, want := range map[string]string{
		"local:" + key:                    "local:[a key value; not shown]",
		"local:" + secret:                 "local:[a key value; not shown]",
		"vault://transit/keys/k?x=" + key: "vault://transit/keys/k?x=[a key value; not shown]",
		// A file whose name starts like a key's text is only a file.
		"local:stateseal-kek-prod.kek": "local:stateseal-kek-prod.kek",
	} {
		if got := redact.URL(in); got != want {
			t.Errorf("Redact = %q, want %q", got, want)
		}
	}
	if _, err := Open(context.Background(), "local:stateseal-kek-prod.kek", &OpenOptions{Dir: dir}); err == nil || errors.Is(err, redact.ErrKeyValue) {
		t.Errorf("a file named stateseal-kek-prod.kek: %v, want file not found", err)
	}
}
