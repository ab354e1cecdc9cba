package redis

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stateseal/stateseal/internal/testkit"
)

// TestOptions: timeouts and pool settings come from the URL; unknown
// parameters are refused.
func TestOptions(t *testing.T) {
	u := testkit.Must(url.Parse("redis://u:p@127.0.0.1:6379/2?key=k&dial_timeout=100ms&read_timeout=300ms&write_timeout=200ms" +
		"&pool_size=7&pool_timeout=1s&max_retries=-1&min_idle_conns=1&conn_max_idle_time=30s&client_name=guard" +
		"&dialer_retries=1&dialer_retry_timeout=10ms&addr=127.0.0.1:6380"))
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
		u := testkit.Must(url.Parse("redis://127.0.0.1:6379/0?key=k&" + bad))
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

// TestClusterAndWriteOptions: the Cluster client's parameters reach it,
// are refused on a URL that makes no Cluster, and the write parameters
// are checked.
func TestClusterAndWriteOptions(t *testing.T) {
	u := testkit.Must(url.Parse("redis://127.0.0.1:7000/0?addr=127.0.0.1:7001&cluster_state_reload_interval=500ms&max_redirects=2&route_by_latency=true"))
	c, err := newClient(u)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc, ok := c.(*goredis.ClusterClient)
	if !ok {
		t.Fatalf("a %T, want a Cluster client", c)
	}
	if o := cc.Options(); o.ClusterStateReloadInterval != 500*time.Millisecond || o.MaxRedirects != 2 || !o.RouteByLatency {
		t.Fatalf("cluster options %+v", o)
	}
	// Without the parameter, the map is reloaded every second, not
	// go-redis's 60 s: no blind minute after a master dies.
	d, err := newClient(testkit.Must(url.Parse("redis://127.0.0.1:7000/0?addr=127.0.0.1:7001")))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := d.(*goredis.ClusterClient).Options().ClusterStateReloadInterval; got != DefaultClusterStateReloadInterval {
		t.Fatalf("default cluster_state_reload_interval %v, want %v", got, DefaultClusterStateReloadInterval)
	}
	for _, bad := range []string{
		"redis://127.0.0.1:7000/0?max_redirects=2",
		"redis://127.0.0.1:26379/0?master=m&addr=127.0.0.1:26380&cluster_state_reload_interval=1s",
		"redis://127.0.0.1:7000/0?addr=127.0.0.1:7001&cluster_state_reload_interval=0s",
		"redis://127.0.0.1:7000/0?addr=127.0.0.1:7001&route_randomly=maybe",
		"redis://127.0.0.1:6379/0?sentinel_password=p",
	} {
		u := testkit.Must(url.Parse(bad))
		if c, err := newClient(u); err == nil {
			c.Close()
			t.Errorf("%s accepted", bad)
		}
	}
	for _, bad := range []string{"min_replicas=-1", "min_replicas=two", "wait_timeout=0s", "wait_timeout=soon"} {
		u := testkit.Must(url.Parse("redis://127.0.0.1:6379/0?key=k&" + bad))
		if s, err := open(u, nil); err == nil {
			s.Close()
			t.Errorf("%s accepted", bad)
		}
	}
	u = testkit.Must(url.Parse("redis://127.0.0.1:6379/0?key=k&min_replicas=2&wait_timeout=250ms"))
	s, err := open(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.minReplicas != 2 || s.waitTimeout != 250*time.Millisecond {
		t.Fatalf("min_replicas %d, wait_timeout %v", s.minReplicas, s.waitTimeout)
	}
}

// TestSharedClient: stores on one Redis URL share a client, which the
// last Close closes; another URL gets its own.
func TestSharedClient(t *testing.T) {
	u1 := testkit.Must(url.Parse("redis://127.0.0.1:6379/0?key=a"))
	u2 := testkit.Must(url.Parse("redis://127.0.0.1:6379/0?key=b&wait_timeout=1s"))
	u3 := testkit.Must(url.Parse("redis://127.0.0.1:6379/1?key=a"))
	a := testkit.Must(open(u1, nil))
	b := testkit.Must(open(u2, nil))
	c := testkit.Must(open(u3, nil))
	if a.client != b.client || a.client == c.client {
		t.Fatal("stores on one URL do not share a client, or other URLs do")
	}
	a.Close()
	a.Close() // a second Close does not release b's use
	if err := b.client.Ping(context.Background()).Err(); err != nil && strings.Contains(err.Error(), "closed") {
		t.Fatal("closing one store closed the client another uses")
	}
	b.Close()
	if err := b.client.Ping(context.Background()).Err(); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("the last Close left the client open: %v", err)
	}
	c.Close()
}
