package redact_test

import (
	"strings"
	"testing"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/redact"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"local:stateseal.kek":                         "local:stateseal.kek",
		"local://env/KEK":                             "local://env/KEK",
		"vault://transit/keys/k":                      "vault://transit/keys/k",
		"vault://user:hunter2@vault/keys/k":           "vault://user:xxxxx@vault/keys/k",
		"awskms://alias/k?region=eu-west-1&token=abc": "awskms://alias/k?region=eu-west-1&token=xxxxx",
		"redis://:pw@localhost:6379/0":                "redis://:xxxxx@localhost:6379/0",
		"redis://default:pw@localhost:6379/0":         "redis://default:xxxxx@localhost:6379/0",
		"redis://pw@localhost:6379/0":                 "redis://xxxxx@localhost:6379/0",
		"rediss://h:6380/0?key=k&password=pw":         "rediss://h:6380/0?key=k&password=xxxxx",
		"vault-kv://secret/x?X-Vault-Token=hvs.abc":   "vault-kv://secret/x?X-Vault-Token=xxxxx",
		"x:" + strings.Repeat("A", 40):                "x:[opaque; not shown]",
		backends.NewLocalKey():                        "[a key value, not a URL; not shown]",
	} {
		if got := redact.URL(in); got != want {
			t.Errorf("redact.URL(%q) = %q, want %q", in, got, want)
		}
	}
}
