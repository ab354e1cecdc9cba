package main

import (
	"strings"
	"testing"

	"github.com/stateseal/stateseal/replay/redisguard"
)

// TestGuardURL: -replay takes guard_timeout and the client's parameters,
// and refuses what it does not know. No Redis is needed: a guard whose
// Redis is not there is made all the same, and refuses single use.
func TestGuardURL(t *testing.T) {
	g, err := guard("redis://127.0.0.1:1/0?guard_timeout=300ms&read_timeout=200ms&max_retries=-1&dialer_retries=1")
	if err != nil {
		t.Fatal(err)
	}
	g.(*redisguard.Guard).Close()
	for _, bad := range []string{"guard_timeout=soon", "guard_timeout=0s", "guardtimeout=1s"} {
		if _, err := guard("redis://127.0.0.1:1/0?" + bad); err == nil {
			t.Errorf("%s accepted", bad)
		} else if !strings.Contains(err.Error(), strings.SplitN(bad, "=", 2)[0]) {
			t.Errorf("%s: the error does not name it: %v", bad, err)
		}
	}
}
