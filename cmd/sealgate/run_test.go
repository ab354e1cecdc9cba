package main

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
)

// A running is the gateway's main loop (run) serving in the test, as the
// binary would with the same flags.
type running struct {
	t            *testing.T
	proxy, admin string
	logs         *testkit.Buffer
	stop         func()
}

// startRun runs the gateway with args (and listeners on free ports) until
// the test ends.
func startRun(t *testing.T, args ...string) *running {
	t.Helper()
	return startRunWith(t, nil, args...)
}

// startRunWith is startRun with edit applied to the configuration the
// flags make (a clock no flag sets).
func startRunWith(t *testing.T, edit func(*Config), args ...string) *running {
	t.Helper()
	args = append([]string{"-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-audience", "https://gw.test", "-poll", "200ms"}, args...)
	c, err := parseConfig(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(c)
	}
	logs := &testkit.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, c, logs) }()
	r := &running{t: t, logs: logs}
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Error(err)
				}
			case <-time.After(30 * time.Second):
				t.Error("the gateway did not shut down")
			}
		})
	}
	t.Cleanup(r.stop)
	waitFor(t, "the listeners", func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("run ended before listening: %v\n%s", err, logs.String())
		default:
		}
		r.admin, r.proxy = logAddr(logs.String(), "sealgate: admin endpoints"), logAddr(logs.String(), "sealgate: proxying")
		return r.admin != "" && r.proxy != ""
	})
	return r
}

// get asks the admin listener for path.
func (r *running) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(r.admin + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, string(testkit.Must(io.ReadAll(resp.Body)))
}
