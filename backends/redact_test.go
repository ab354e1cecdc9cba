package backends

import (
	"context"
	"strings"
	"testing"
)

// TestOpenNeverEchoesKey: a KEK value where a URL belongs (the contents of
// a key file in STATESEAL_KEK or LoadOptions.KEK) does not reach the error,
// which reaches logs.
func TestOpenNeverEchoesKey(t *testing.T) {
	key := NewLocalKey()
	secret := key[strings.Index(key, ":")+1:]
	for _, raw := range []string{key, key + "\n", secret, "bogus:" + secret, "%zz" + secret} {
		_, err := Open(context.Background(), raw)
		if err == nil {
			t.Fatalf("Open(%q) succeeded", raw)
		}
		if strings.Contains(err.Error(), secret[:16]) {
			t.Errorf("the error repeats the key: %v", err)
		}
	}
	_, err := Open(context.Background(), key)
	if err == nil || !strings.Contains(err.Error(), "local://env/NAME") {
		t.Errorf("the error does not say how to pass a key: %v", err)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"local:stateseal.kek":                         "local:stateseal.kek",
		"local://env/KEK":                             "local://env/KEK",
		"vault://transit/keys/k":                      "vault://transit/keys/k",
		"vault://user:hunter2@vault/keys/k":           "vault://user:xxxxx@vault/keys/k",
		"awskms://alias/k?region=eu-west-1&token=abc": "awskms://alias/k?region=eu-west-1&token=xxxxx",
		"redis://:pw@localhost:6379/0":                "redis://:xxxxx@localhost:6379/0",
		"x:" + strings.Repeat("A", 40):                "x:[opaque; not shown]",
		NewLocalKey():                                 "[a key value, not a URL; not shown]",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
