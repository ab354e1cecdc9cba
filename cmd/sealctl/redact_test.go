package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/redact"
	"github.com/stateseal/stateseal/internal/testservers"
)

// TestNoPasswordInOutput (finding 5): a Redis password in --keyset,
// --keyset=, or $STATESEAL_KEYSET never reaches sealctl's output or
// errors, whether the password is right or wrong, the document is not a
// keyset (whose error names the location), or the server is down.
func TestNoPasswordInOutput(t *testing.T) {
	const password = "s3cret-Redis-pw"
	const wrong = "wr0ng-Redis-pw"
	r := testservers.StartRedisAuth(t, password)
	kek := filepath.Join(t.TempDir(), "kek")
	if err := backends.GenerateLocal(kek); err != nil {
		t.Fatal(err)
	}
	loc := r.URL() + "?key=stateseal:keyset"
	bad := r.URL() + "?key=stateseal:notakeyset"
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr(), Password: password})
	defer c.Close()
	if err := c.HSet(context.Background(), "stateseal:notakeyset", "doc", "{}", "rev", "1").Err(); err != nil {
		t.Fatal(err)
	}
	sealctl := func(want int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		code := run(args, strings.NewReader(""), &out, &errOut)
		all := out.String() + errOut.String()
		if code != want {
			t.Errorf("sealctl %s: exit %d, want %d:\n%s", redact.URL(strings.Join(args, " ")), code, want, all)
		}
		for _, pw := range []string{password, wrong} {
			if strings.Contains(all, pw) {
				t.Errorf("sealctl shows a password:\n%s", all)
			}
		}
		return all
	}
	out := sealctl(0, "--keyset", loc, "--kek", "local:"+kek, "init")
	if !strings.Contains(out, "redis://:xxxxx@") {
		t.Errorf("init does not name the store, redacted: %s", out)
	}
	sealctl(0, "--keyset="+loc, "list")
	sealctl(0, "--keyset", loc, "--kek", "local:"+kek, "rotate")
	sealctl(0, "--keyset", loc, "--kek", "local:"+kek, "verify")
	sealctl(1, "--keyset", loc, "verify") // no KEK configured
	sealctl(1, "--keyset", bad, "verify")
	sealctl(1, "--keyset", bad, "--kek", "local:"+kek, "rotate")
	// keyset.Load's errors name the location ("(in ...)").
	sealctl(1, "--keyset", bad, "--kek", "local:"+kek, "seal", "--target", "t", "--principal", "p")
	wrongLoc := strings.Replace(loc, password, wrong, 1)
	sealctl(1, "--keyset", wrongLoc, "list")
	sealctl(1, "--keyset="+wrongLoc, "rotate")
	t.Setenv("STATESEAL_KEYSET", wrongLoc)
	sealctl(1, "verify")
	t.Setenv("STATESEAL_KEYSET", loc)
	sealctl(0, "list")
	r.Stop()
	sealctl(1, "list")
	sealctl(1, "--keyset", loc, "verify")
}
