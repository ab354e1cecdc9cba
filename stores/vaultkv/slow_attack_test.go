package vaultkv_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/stores"
)

// TestAttackSlowAnswer: the network between an instance and Vault (or a
// Vault proxy) answers at a byte a second, forever. Read and Revision
// return by the caller's deadline, or without one by the Vault client's
// timeout: a poll, an edit or sealctl never hangs.
func TestAttackSlowAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		io.WriteString(w, `{"data":{"data":{"keyset":"`)
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Second):
				if _, err := io.WriteString(w, "x"); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}
	}))
	defer srv.Close()
	defer srv.CloseClientConnections()
	t.Setenv("VAULT_ADDR", srv.URL)
	t.Setenv("VAULT_TOKEN", "t")
	t.Setenv("VAULT_CLIENT_TIMEOUT", "2s")
	ctx := context.Background()
	s, err := stores.Open(ctx, "vault-kv://secret/stateseal/slow")
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(context.Context) error{
		"Read":     func(c context.Context) error { _, _, err := s.Read(c); return err },
		"Revision": func(c context.Context) error { _, err := s.(stores.Revisioner).Revision(c); return err },
	} {
		for _, d := range []time.Duration{time.Second, 0} {
			c, cancel := ctx, context.CancelFunc(func() {})
			if d > 0 {
				c, cancel = context.WithTimeout(ctx, d)
			}
			start := time.Now()
			err := f(c)
			cancel()
			took := time.Since(start)
			if err == nil || took > 4*time.Second {
				t.Errorf("%s (deadline %v) of a dripping answer: %v after %v", name, d, err, took)
			}
			if strings.Contains(err.Error(), "VAULT_TOKEN") {
				t.Errorf("error: %v", err)
			}
		}
	}
}
