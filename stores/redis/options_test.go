package redis

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestOptions: timeouts and pool settings come from the URL; unknown
// parameters are refused.
func TestOptions(t *testing.T) {
	u, _ := url.Parse("redis://u:p@127.0.0.1:6379/2?key=k&dial_timeout=100ms&read_timeout=300ms&write_timeout=200ms" +
		"&pool_size=7&pool_timeout=1s&max_retries=-1&min_idle_conns=1&conn_max_idle_time=30s&client_name=guard" +
		"&dialer_retries=1&dialer_retry_timeout=10ms&addr=127.0.0.1:6380")
	o, err := options(u)
	if err != nil {
		t.Fatal(err)
	}
	if o.DialTimeout != 100*time.Millisecond || o.ReadTimeout != 300*time.Millisecond || o.WriteTimeout != 200*time.Millisecond ||
		o.PoolSize != 7 || o.PoolTimeout != time.Second || o.MaxRetries != -1 || o.MinIdleConns != 1 ||
		o.ConnMaxIdleTime != 30*time.Second || o.ClientName != "guard" || o.DialerRetries != 1 ||
		o.DialerRetryTimeout != 10*time.Millisecond || !o.ContextTimeoutEnabled {
		t.Fatalf("options %+v", o)
	}
	if len(o.Addrs) != 2 || o.DB != 2 || o.Username != "u" || o.Password != "p" {
		t.Fatalf("addresses, database or credentials: %+v", o)
	}
	for _, bad := range []string{"timeout=1s", "read_timeout=soon", "dialer_retries=0", "dialer_retry_timeout=-1s"} {
		u, _ := url.Parse("redis://127.0.0.1:6379/0?key=k&" + bad)
		if _, err := options(u); err == nil {
			t.Errorf("%s accepted", bad)
		} else if strings.Contains(err.Error(), "p@") {
			t.Errorf("%s: error shows credentials: %v", bad, err)
		}
	}
	if _, err := NewClient("redis://127.0.0.1:6379/0?readtimeout=1s"); err == nil || !strings.Contains(err.Error(), "readtimeout") {
		t.Fatalf("a misspelt parameter: %v", err)
	}
}
