package awskms_test

import (
	"context"
	"crypto/rand"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/keysetjson"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyset"
)

// TestAttackGarbageCiphertextIsNotAnOutage: the store writer replaces the
// wrapped authentication key with bytes KMS refuses (random, oversized,
// empty-looking). The document names the trusted KEK, so one Decrypt is
// due; KMS's refusal must count as "does not unwrap" (reported once,
// never retried), not as an outage retried with a KMS call at every poll
// of every instance, and reported as the KMS being down.
func TestAttackGarbageCiphertextIsNotAnOutage(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	good := testkit.Must(os.ReadFile(f.path))
	ks, err := keyset.Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 200, 6144, 6145, 20000} {
		blob := make([]byte, n)
		rand.Read(blob)
		bad := strings.Replace(string(good), keysetjson.FormatWrapped(ks.Auth.Wrapped), keysetjson.FormatWrapped(blob), 1)
		testkit.Check(os.WriteFile(f.path, []byte(good), 0o600))
		var reports atomic.Int64
		var last atomic.Value
		l := &keyset.Loader{Path: f.path, Options: keyset.LoadOptions{KEK: f.kek, Backends: f.reg}, Logger: slog.New(slog.DiscardHandler),
			OnError: func(err error) { reports.Add(1); last.Store(err.Error()) }}
		if _, err := l.Load(ctx); err != nil {
			t.Fatal(err)
		}
		testkit.Check(os.WriteFile(f.path, []byte(bad), 0o600))
		f.tr.calls.Store(0)
		c, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
		l.Run(c, 20*time.Millisecond)
		cancel()
		l.Close()
		msg, _ := last.Load().(string)
		t.Logf("%d-byte blob: %d KMS calls in ~30 polls, %d reports: %.160s", n, f.tr.calls.Load(), reports.Load(), msg)
		if f.tr.calls.Load() > 3 {
			t.Errorf("FINDING: a %d-byte garbage auth.wrapped costs a KMS call at every poll (%d calls): classified as a transient KMS failure: %s", n, f.tr.calls.Load(), msg)
		}
	}
}
