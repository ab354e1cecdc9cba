package keyset_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	_ "github.com/stateseal/stateseal/backends/awskms"
	_ "github.com/stateseal/stateseal/backends/gcpkms"
	_ "github.com/stateseal/stateseal/backends/vault"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
)

var (
	ctx = context.Background()
	t0  = testkit.T0
)

// counting is a local KEK that counts the calls made to it, standing in
// for a KMS whose calls cost money and reveal what the instance does.
type counting struct {
	backends.KEK
	unwraps *atomic.Int64
}

func (c counting) Unwrap(ctx context.Context, w, ad []byte) ([]byte, error) {
	c.unwraps.Add(1)
	return c.KEK.Unwrap(ctx, w, ad)
}

type closingKEK struct {
	counting
	closed *atomic.Int64
}

func (c closingKEK) Close() error { c.closed.Add(1); return nil }

// kms is a registry whose local KEK counts opens, unwraps and closes.
type kms struct {
	reg                    *backends.Registry
	opens, unwraps, closes atomic.Int64
}

func newKMS() *kms {
	k := &kms{reg: new(backends.Registry)}
	k.reg.Register("local", func(ctx context.Context, u *url.URL, o *backends.OpenOptions) (backends.KEK, error) {
		k.opens.Add(1)
		inner, err := backends.Open(ctx, u.String(), o)
		if err != nil {
			return nil, err
		}
		return closingKEK{counting{inner, &k.unwraps}, &k.closes}, nil
	})
	return k
}

// fixture is a keyset file under a local KEK, and versions of it.
type fixture struct {
	dir, path string
	kek       backends.KEK
	ks        *keyset.Keyset
}

func newFixture(t *testing.T, p keyring.Policy) *fixture {
	t.Helper()
	dir := t.TempDir()
	if err := backends.GenerateLocal(filepath.Join(dir, "stateseal.kek")); err != nil {
		t.Fatal(err)
	}
	kek, err := backends.Open(ctx, "local:stateseal.kek", &backends.OpenOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{dir: dir, path: filepath.Join(dir, "keyset.json"), kek: kek}
	f.ks = &keyset.Keyset{ID: keyset.NewID(), KEK: "local:stateseal.kek", Policy: p}
	f.addKey(t)
	if err := keyset.WriteFile(ctx, f.path, f.ks); err != nil {
		t.Fatal(err)
	}
	return f
}

// addKey adds a key and authenticates the next version, as an editor
// holding the KEK does, and returns the document; it writes nothing.
func (f *fixture) addKey(t *testing.T) []byte {
	t.Helper()
	var existing []keyring.Key
	for _, k := range f.ks.Keys {
		existing = append(existing, keyring.Key{ID: k.ID})
	}
	k, err := keyring.NewKey(keyring.AEAD, t0, t0, existing)
	if err != nil {
		t.Fatal(err)
	}
	sk, err := f.ks.Wrap(ctx, f.kek, k)
	if err != nil {
		t.Fatal(err)
	}
	f.ks.Keys = append(f.ks.Keys, sk)
	if f.ks.Version == 0 {
		f.ks.Version = 1
	} else {
		f.ks.Follow(f.ks.Clone())
	}
	f.ks.Refresh(t0)
	if err := f.ks.Authenticate(ctx, f.kek); err != nil {
		t.Fatal(err)
	}
	b, err := f.ks.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (f *fixture) write(t *testing.T, doc []byte) {
	t.Helper()
	// Atomic, as every writer of a keyset is: a poll never reads half.
	tmp := f.path + ".tmp"
	if err := os.WriteFile(tmp, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		t.Fatal(err)
	}
}

func quietLoader(f *fixture, o keyset.LoadOptions) *keyset.Loader {
	if o.Now == nil {
		o.Now = func() time.Time { return t0.Add(time.Minute) }
	}
	return &keyset.Loader{Path: f.path, Options: o, Logger: slog.New(slog.DiscardHandler)}
}

// listener counts the connections an attacker's KMS endpoint receives.
func listener(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().String(), accepted
}

// TestStoreWriterCannotChooseKEK: whoever can write the store, but not use
// the KEK, names a KEK of their own (a KMS endpoint they run, another
// account's key, another transit mount). No instance loads it, fresh or
// running, and none opens a connection to it: the server's credentials
// never reach the attacker's endpoint.
func TestStoreWriterCannotChooseKEK(t *testing.T) {
	f := newFixture(t, keyring.DefaultPolicy())
	good := testkit.Must(os.ReadFile(f.path))
	addr, accepted := listener(t)
	running := quietLoader(f, keyset.LoadOptions{})
	ring, err := running.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer running.Close()
	current := ring.Current()
	for _, evil := range []string{
		"awskms://alias/k?region=us-east-1&endpoint=http://" + addr,
		"awskms:///arn:aws:kms:us-east-1:999999999999:key/attacker",
		"gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k?endpoint=" + addr + "&insecure=1",
		"vault://transit/keys/attacker",
		"local:/tmp/attacker.kek",
		"local:stateseal.kek?endpoint=http://" + addr,
	} {
		doc := strings.Replace(string(good), `"kek": "local:stateseal.kek"`, `"kek": "`+evil+`"`, 1)
		if doc == string(good) {
			t.Fatal("the edit did nothing")
		}
		f.write(t, []byte(doc))
		_, _, err := keyset.Load(ctx, f.path, nil)
		if !errors.Is(err, keyset.ErrUntrustedKEK) {
			t.Errorf("fresh load of a keyset naming %s: %v, want ErrUntrustedKEK", evil, err)
		}
		if err := running.Reload(ctx); !errors.Is(err, keyset.ErrUntrustedKEK) || ring.Current() != current {
			t.Errorf("running loader, keyset naming %s: %v", evil, err)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the attacker's endpoint received %d connections", n)
	}
	// A store URL has no default KEK: the configuration must name it.
	if _, _, err := keyset.Load(ctx, "redis://127.0.0.1:1/0?key=k", nil); err == nil || !strings.Contains(err.Error(), "LoadOptions.KEK") {
		t.Fatalf("a store without a configured KEK: %v", err)
	}
}

// TestKEKIdentity: the document names a KEK without its transport
// settings; the configuration's endpoint reaches the same key.
func TestKEKIdentity(t *testing.T) {
	for in, want := range map[string]string{
		"awskms://alias/k?region=eu-west-1&endpoint=http://127.0.0.1:4599":                "awskms://alias/k?region=eu-west-1",
		"awskms://alias/k?endpoint=http://127.0.0.1:4599&region=eu-west-1":                "awskms://alias/k?region=eu-west-1",
		"gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k?endpoint=x:1&insecure=1": "gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k",
		"vault://transit/keys/k": "vault://transit/keys/k",
		"local:stateseal.kek":    "local:stateseal.kek",
	} {
		if got, err := backends.Identity(in); err != nil || got != want {
			t.Errorf("Identity(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
}

// TestRollbackRefused: an older authentic copy of the keyset (a Vault KV
// rollback, a restored backup) may hold a key retired since. A running
// loader never goes below the highest version it installed, whatever
// AllowKeysetChange says, and a configured minimum stops fresh loads.
func TestRollbackRefused(t *testing.T) {
	for _, allow := range []bool{false, true} {
		f := newFixture(t, keyring.DefaultPolicy())
		v1 := testkit.Must(os.ReadFile(f.path))
		f.write(t, f.addKey(t))
		f.write(t, f.addKey(t)) // version 3
		k := newKMS()
		l := quietLoader(f, keyset.LoadOptions{Backends: k.reg, AllowKeysetChange: allow})
		ring, err := l.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f.write(t, v1)
		before := k.unwraps.Load()
		if err := l.Reload(ctx); !errors.Is(err, keyset.ErrRollback) || ring.Current().Version() != 3 {
			t.Errorf("allow=%v: rollback to version 1: %v", allow, err)
		}
		if k.unwraps.Load() != before {
			t.Errorf("allow=%v: the refusal cost a KMS call", allow)
		}
		// A fresh instance with a floor in its configuration.
		_, _, err = keyset.Load(ctx, f.path, &keyset.LoadOptions{MinVersion: 3, Backends: k.reg, Now: l.Options.Now})
		if !errors.Is(err, keyset.ErrRollback) || k.unwraps.Load() != before {
			t.Errorf("allow=%v: fresh load below MinVersion: %v", allow, err)
		}
		l.Close()
	}
}

// TestRollbackAcrossKeysets: with AllowKeysetChange, keyset A at version
// 3, then keyset B, then A at version 1: the floor is per keyset, and
// switching away does not reset it.
func TestRollbackAcrossKeysets(t *testing.T) {
	a := newFixture(t, keyring.DefaultPolicy())
	aV1 := testkit.Must(os.ReadFile(a.path))
	a.write(t, a.addKey(t))
	a.write(t, a.addKey(t))
	l := quietLoader(a, keyset.LoadOptions{AllowKeysetChange: true})
	if _, err := l.Load(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b := &fixture{dir: a.dir, path: a.path, kek: a.kek}
	b.ks = &keyset.Keyset{ID: keyset.NewID(), Version: 0, KEK: "local:stateseal.kek", Policy: keyring.DefaultPolicy()}
	a.write(t, b.addKey(t))
	if err := l.Reload(ctx); err != nil {
		t.Fatalf("switching to keyset B: %v", err)
	}
	a.write(t, aV1)
	if err := l.Reload(ctx); !errors.Is(err, keyset.ErrRollback) {
		t.Fatalf("back to A at version 1 after A at 3: %v", err)
	}
	// Pinned by configuration, not even AllowKeysetChange moves it.
	p := quietLoader(a, keyset.LoadOptions{KeysetID: a.ks.ID, AllowKeysetChange: true})
	a.write(t, b.addKey(t))
	if _, err := p.Load(ctx); !errors.Is(err, keyset.ErrOtherKeyset) {
		t.Fatalf("a fresh loader pinned to A loaded B: %v", err)
	}
}

// TestFreshness: a version that nothing rewrote within the freshness
// window does not load on a fresh instance, and costs no KMS call; the
// window is the bound on a rollback that a fresh instance accepts.
func TestFreshness(t *testing.T) {
	p := keyring.DefaultPolicy()
	p.Freshness = 24 * time.Hour
	f := newFixture(t, p)
	k := newKMS()
	at := func(d time.Duration) *keyset.LoadOptions {
		return &keyset.LoadOptions{Backends: k.reg, Now: func() time.Time { return t0.Add(d) }}
	}
	if _, _, err := keyset.Load(ctx, f.path, at(23*time.Hour)); err != nil {
		t.Fatalf("inside the window: %v", err)
	}
	n := k.unwraps.Load()
	if _, _, err := keyset.Load(ctx, f.path, at(24*time.Hour)); !errors.Is(err, keyset.ErrStale) {
		t.Fatalf("at the expiry: %v", err)
	}
	if k.unwraps.Load() != n {
		t.Fatal("an expired keyset cost a KMS call")
	}
	// The expiry is authenticated: moving it is a forgery.
	doc := testkit.Must(os.ReadFile(f.path))
	f.write(t, []byte(strings.Replace(string(doc), `"expires": "2026-07-29T12:00:00Z"`, `"expires": "2026-07-29T14:00:00Z"`, 1)))
	if _, _, err := keyset.Load(ctx, f.path, at(25*time.Hour)); !errors.Is(err, keyset.ErrUnauthenticated) {
		t.Fatalf("expiry moved without the KEK: %v", err)
	}
}

// TestForkReported: two authentic documents with one id and version (two
// writers that each believed they were next) are reported, not ignored.
func TestForkReported(t *testing.T) {
	f := newFixture(t, keyring.DefaultPolicy())
	base := f.ks.Clone()
	mine := f.addKey(t)
	f.write(t, mine)
	var reported []error
	l := quietLoader(f, keyset.LoadOptions{})
	l.OnError = func(err error) { reported = append(reported, err) }
	ring, err := l.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f.ks = base // the other writer started from version 1 too
	theirs := f.addKey(t)
	f.write(t, theirs)
	if err := l.Run(runOnce(t, l), 5*time.Millisecond); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if len(reported) == 0 || !errors.Is(reported[0], keyset.ErrFork) {
		t.Fatalf("fork reported as %v", reported)
	}
	if ring.Current().Version() != 2 || ring.Current().Len() != 2 {
		t.Fatal("the other branch was installed")
	}
}

// runOnce returns a context for Run that ends once l has polled.
func runOnce(t *testing.T, l *keyset.Loader) context.Context {
	t.Helper()
	c, cancel := context.WithCancel(ctx)
	prev := l.OnError
	l.OnError = func(err error) {
		if prev != nil {
			prev(err)
		}
		cancel()
	}
	t.Cleanup(cancel)
	go func() { <-time.After(10 * time.Second); cancel() }()
	return c
}

// TestKEKOpenedOnce: a loader opens each KEK once, however many reloads,
// and Close closes it: a Cloud KMS client per reload leaked goroutines.
func TestKEKOpenedOnce(t *testing.T) {
	f := newFixture(t, keyring.DefaultPolicy())
	k := newKMS()
	l := quietLoader(f, keyset.LoadOptions{Backends: k.reg})
	if _, err := l.Load(ctx); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		f.write(t, f.addKey(t))
		if err := l.Reload(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := k.opens.Load(); n != 1 {
		t.Fatalf("%d opens for 51 loads", n)
	}
	if err := l.Close(); err != nil || k.closes.Load() != 1 {
		t.Fatalf("Close: %v, %d closes", err, k.closes.Load())
	}
	// LoadFile closes what it opened.
	if _, _, err := keyset.Load(ctx, f.path, &keyset.LoadOptions{Backends: k.reg, Now: l.Options.Now}); err != nil || k.closes.Load() != 2 {
		t.Fatalf("LoadFile: %v, %d closes", err, k.closes.Load())
	}
}
