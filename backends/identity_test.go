package backends

import (
	"github.com/stateseal/stateseal/internal/testkit"
	"strings"
	"testing"
)

// TestIdentity: every scheme's URL loses its transport settings and
// credentials, keeps what names the key, and sorts its query; a key value
// is refused without being repeated.
func TestIdentity(t *testing.T) {
	for in, want := range map[string]string{
		// local: a file or a variable is its own identity.
		"local:stateseal.kek":        "local:stateseal.kek",
		"local:/etc/stateseal/k.kek": "local:/etc/stateseal/k.kek",
		"local:///etc/stateseal/k":   "local:///etc/stateseal/k",
		"local://env/STATESEAL_KEK":  "local://env/STATESEAL_KEK",
		// awskms: region picks the key, endpoint only reaches it.
		"awskms://alias/stateseal?region=eu-west-1":                                        "awskms://alias/stateseal?region=eu-west-1",
		"awskms://alias/stateseal?endpoint=http%3A%2F%2F127.0.0.1%3A4566&region=eu-west-1": "awskms://alias/stateseal?region=eu-west-1",
		"awskms://1234abcd-12ab-34cd-56ef-1234567890ab?endpoint=https://vpce.example":      "awskms://1234abcd-12ab-34cd-56ef-1234567890ab",
		"awskms:///arn:aws:kms:eu-west-1:111122223333:key/1234abcd":                        "awskms:///arn:aws:kms:eu-west-1:111122223333:key/1234abcd",
		// gcpkms: endpoint and insecure are both transport.
		"gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k?insecure=1&endpoint=127.0.0.1:9999": "gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k",
		"gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k":                                    "gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k",
		// vault: the server comes from VAULT_ADDR; credentials never stay.
		"vault://transit/keys/stateseal": "vault://transit/keys/stateseal",
		// Sorted query, whatever order it came in; unknown schemes too.
		"other://k?z=1&a=2&endpoint=x": "other://k?a=2&z=1",
		// The query's rules, as docs/KEYSET-FORMAT.md spells them: empty
		// pieces skipped, split at the first '=', decoded then escaped
		// again in upper-case hex, a space as '+', sorted by name (one
		// name's values in their order), a bare or emptied '?' dropped.
		"x://k?b=1&&a=2&":                 "x://k?a=2&b=1",
		"x://k?a=b=c":                     "x://k?a=b%3Dc",
		"x://k?":                          "x://k",
		"x://k?endpoint=e":                "x://k",
		"x://k?r=eu%2dwest%2D1&s=%c3%a9":  "x://k?r=eu-west-1&s=%C3%A9",
		"x://k?a=x+y&b=x%20y&c=%2B":       "x://k?a=x+y&b=x+y&c=%2B",
		"x://k?z=1&a=2&a=1":               "x://k?a=2&a=1&z=1",
		"x://k?flag&=v":                   "x://k?=v&flag=",
		"awskms:///arn:aws:kms:r:1:key/k": "awskms:///arn:aws:kms:r:1:key/k",
	} {
		got, err := Identity(in)
		if err != nil || got != want {
			t.Errorf("Identity(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	// Identity is idempotent.
	for _, in := range []string{"awskms://k?region=r&endpoint=e", "gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k?endpoint=e&insecure=1"} {
		once := testkit.Must(Identity(in))
		if twice, err := Identity(once); err != nil || twice != once {
			t.Errorf("Identity(Identity(%q)) = %q, %v; want %q", in, twice, err, once)
		}
	}
	key := NewLocalKey()
	secret := key[strings.Index(key, ":")+1:]
	for _, bad := range []string{key, "local:" + key, "local:" + secret, "local://env/" + key, "vault://transit/keys/k?x=" + key,
		"%zz", "no-scheme/path", "",
		// Not plain: what other URL libraries would spell otherwise.
		"vault://user:hunter2@transit/keys/stateseal", "vault://transit/keys/stateseal#frag", "AWSKMS://alias/k",
		" local:stateseal.kek", "local:stateseal.kek\n", "local:st%61teseal.kek", "vault://transit/keys/a!b",
		"local:café.kek", "x://k?a=1;b=2", "x://k?a=%zz", "x://k?a=%4", "x://k?a=b c"} {
		got, err := Identity(bad)
		if err == nil {
			t.Errorf("Identity(%q) = %q, want an error", bad, got)
			continue
		}
		if strings.Contains(err.Error(), secret[:16]) {
			t.Errorf("Identity's error repeats the key: %v", err)
		}
	}
}
