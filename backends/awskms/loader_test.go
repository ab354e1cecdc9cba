package awskms_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/backends/awskms"
	"github.com/stateseal/stateseal/internal/redact"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/rotation"
	"github.com/stateseal/stateseal/seal"
)

// transport counts the requests that reach local-kms, and can cut them
// off (a network partition) or slow them down.
type transport struct {
	calls atomic.Int64
	down  atomic.Bool
	delay atomic.Int64 // nanoseconds
}

var errPartition = errors.New("network partition (test)")

func (tr *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	tr.calls.Add(1)
	time.Sleep(time.Duration(tr.delay.Load()))
	if tr.down.Load() {
		return nil, errPartition
	}
	return http.DefaultTransport.RoundTrip(r)
}

// fixture is a keyset under an AWS KMS key in local-kms, opened through a
// registry whose KEKs use a client the test made, which counts its
// requests.
type fixture struct {
	path string
	kek  string // the KEK URL every loader is configured with
	tr   *transport
	reg  *backends.Registry
	ro   *rotation.Options
}

func newFixture(t *testing.T) *fixture {
	l := testservers.StartLocalKMS(t, "")
	url := fmt.Sprintf("awskms://%s?region=%s", createKey(context.Background(), t, l), l.Region)
	f := &fixture{path: filepath.Join(t.TempDir(), "keyset.json"), kek: url, tr: &transport{}, reg: new(backends.Registry)}
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(l.Region))
	if err != nil {
		t.Fatal(err)
	}
	c := kms.NewFromConfig(cfg, func(o *kms.Options) {
		o.BaseEndpoint, o.HTTPClient = aws.String(l.Endpoint()), &http.Client{Transport: f.tr}
	})
	f.reg.Register(awskms.Scheme, awskms.Opener(c))
	f.ro = &rotation.Options{KEK: url, Backends: f.reg, Logger: slog.New(slog.DiscardHandler)}
	if _, err := rotation.Init(context.Background(), f.path, url, keyring.AEAD, keyring.DefaultPolicy(), f.ro); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestKMSCalls counts the KMS calls of a load, of seals and opens, and of
// reloads. The numbers are in docs/BACKENDS.md.
func TestKMSCalls(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if _, err := rotation.Rotate(ctx, f.path, &rotation.RotateOptions{Immediate: true}, f.ro); err != nil {
		t.Fatal(err)
	}
	f.tr.calls.Store(0)
	l := &keyset.Loader{Path: f.path, Options: keyset.LoadOptions{KEK: f.kek, Backends: f.reg}, Logger: slog.New(slog.DiscardHandler)}
	ring, err := l.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The authentication key and the two data keys: three Decrypts.
	if n := f.tr.calls.Load(); n != 3 {
		t.Errorf("a load of a keyset with 2 keys made %d KMS calls, want 3", n)
	}
	t.Logf("load, 2 keys: %d calls", f.tr.calls.Load())

	f.tr.calls.Store(0)
	s := testkit.Must(seal.New(ring, nil))
	b := seal.Binding{Method: "tools/call", Target: "t", Principal: "p", Audience: "a"}
	for range 10_000 {
		tok, err := s.Seal(b, []byte("state"), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Open(b, tok); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Reload(ctx); err != nil { // the same bytes, forced
		t.Fatal(err)
	}
	if n := f.tr.calls.Load(); n != 0 {
		t.Errorf("10,000 seals, 10,000 opens and a reload of an unchanged keyset made %d KMS calls, want 0", n)
	}

	// A rotation costs the reload one Decrypt for the new key and one for
	// the new authentication key; the other keys stay cached.
	if _, err := rotation.Rotate(ctx, f.path, nil, f.ro); err != nil {
		t.Fatal(err)
	}
	f.tr.calls.Store(0)
	if err := l.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.tr.calls.Load(); n != 2 {
		t.Errorf("a reload after a rotation made %d KMS calls, want 2", n)
	}
}

// TestConcurrentLoadsShareCalls: loads of one keyset at once, in one
// process, make each KMS call once between them.
func TestConcurrentLoadsShareCalls(t *testing.T) {
	f := newFixture(t)
	f.tr.calls.Store(0)
	f.tr.delay.Store(int64(300 * time.Millisecond)) // so that the loads overlap
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, _, err := keyset.Load(context.Background(), f.path, &keyset.LoadOptions{KEK: f.kek, Backends: f.reg}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := f.tr.calls.Load(); n != 2 {
		t.Errorf("8 concurrent loads of a 1-key keyset made %d KMS calls, want 2 (shared)", n)
	}
}

// TestKMSUnreachable: at start, a clear error naming the KMS; during a
// reload, the last good keys keep serving, the failure is reported once,
// and the new keyset is installed when the KMS is back.
func TestKMSUnreachable(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	ks := testkit.Must(keyset.ReadFile(context.Background(), f.path))
	f.tr.down.Store(true)
	_, _, err := keyset.Load(ctx, f.path, &keyset.LoadOptions{KEK: f.kek, Backends: f.reg})
	if err == nil || !strings.Contains(err.Error(), redact.URL(ks.KEK)) || !errors.Is(err, errPartition) {
		t.Fatalf("load with the KMS unreachable: %v", err)
	}
	f.tr.down.Store(false)

	var mu sync.Mutex
	var reports []error
	l := &keyset.Loader{Path: f.path, Options: keyset.LoadOptions{KEK: f.kek, Backends: f.reg}, Logger: slog.New(slog.DiscardHandler),
		OnError: func(err error) { mu.Lock(); reports = append(reports, err); mu.Unlock() }}
	ring, err := l.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	good := ring.Current()
	s := testkit.Must(seal.New(ring, nil))
	b := seal.Binding{Method: "tools/call", Target: "t", Principal: "p", Audience: "a"}
	if _, err := rotation.Rotate(ctx, f.path, &rotation.RotateOptions{Immediate: true}, f.ro); err != nil {
		t.Fatal(err)
	}
	f.tr.down.Store(true)
	c, cancel := context.WithCancel(ctx)
	defer cancel()
	go l.Run(c, 10*time.Millisecond)
	// Twenty polls against a KMS that does not answer.
	testkit.WaitFor(t, "twenty polls", func() bool { return l.Health().Polls >= 20 })
	mu.Lock()
	n := len(reports)
	mu.Unlock()
	if n != 1 {
		t.Errorf("%d reports while the KMS was unreachable, want 1", n)
	}
	if ring.Current() != good {
		t.Fatal("the ring changed while the KMS was unreachable")
	}
	if tok, err := s.Seal(b, []byte("x"), time.Minute); err != nil {
		t.Fatalf("sealing with the last good keys: %v", err)
	} else if _, err := s.Open(b, tok); err != nil {
		t.Fatalf("opening with the last good keys: %v", err)
	}
	f.tr.down.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for ring.Current().Version() != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the loader did not install version 2 once the KMS was back")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
