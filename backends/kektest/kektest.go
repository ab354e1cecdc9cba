// Package kektest is the conformance suite every KEK backend passes, the
// way gocloud.dev's drivertest is for its providers: one suite, run against
// each backend by a small harness in that backend's tests. It tests the
// backends.KEK contract only (wrap, unwrap, associated data, errors,
// contexts, outages, key versions, generated keys, Close); what keysets,
// loaders and rotation do with KEKs is tested in their own packages.
//
// A backend's tests call [Run] with a [Harness] twice: once opening URLs
// with the backend's own clients (backends.Default, or any registry with
// the backend's default opener), once opening them through a client the
// test made (a registry with the backend's Opener(client), which builds
// each KEK with the backend's New). The second run checks that a KEK built
// from a caller's client never closes it. storetest's Harness has the same
// shape for keyset stores.
package kektest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/redact"
)

// A Harness gives the suite keys of one backend and the registry that
// opens them. Every method is required.
type Harness interface {
	// Registry opens the URLs the harness returns: backends.Default, or a
	// registry whose opener uses a client the test made.
	Registry() *backends.Registry
	// NewKey creates a new key in the server and returns its KEK URL.
	NewKey(ctx context.Context, t *testing.T) string
	// RotatableKey returns a key and a function that makes a new version
	// of it inside the server, so that new wraps use it while old ones
	// still unwrap; ok is false if the backend has no key versions (or the
	// harness cannot reach one that rotates).
	RotatableKey(ctx context.Context, t *testing.T) (url string, rotate func(), ok bool)
	// Stop makes the server unreachable, and Start brings it back on the
	// same address with its keys; Stop returns false for a backend with
	// no server (local), and then Start is not called.
	Stop(t *testing.T) (ok bool)
	Start(t *testing.T)
}

// closeCycles is how many times CloseReleases opens, uses and closes a
// KEK: enough to show a leak of one goroutine per open many times over
// the slack, few enough for AWS, where each open loads the configuration.
const closeCycles = 200

// Run runs the suite against h.
func Run(t *testing.T, h Harness) {
	ctx := context.Background()
	open := func(t *testing.T, url string) backends.KEK {
		t.Helper()
		k, err := h.Registry().Open(ctx, url, nil)
		if err != nil {
			t.Fatalf("Open(%s): %v", redact.URL(url), err)
		}
		t.Cleanup(func() { backends.Close(k) })
		return k
	}
	secret := bytes.Repeat([]byte{0x5e}, 32)
	ad := []byte("stateseal-keyset-v2\x00ks-0123456789abcdef\x000a1b2c3d")

	t.Run("RoundTrip", func(t *testing.T) {
		k := open(t, h.NewKey(ctx, t))
		w, err := k.Wrap(ctx, secret, ad)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(w, secret[:16]) {
			t.Fatal("the wrapped key holds the plaintext")
		}
		got, err := k.Unwrap(ctx, w, ad)
		if err != nil || !bytes.Equal(got, secret) {
			t.Fatalf("Unwrap = %x, %v", got, err)
		}
	})
	t.Run("OtherAssociatedData", func(t *testing.T) {
		k := open(t, h.NewKey(ctx, t))
		w, _ := k.Wrap(ctx, secret, ad)
		for _, other := range [][]byte{[]byte("stateseal-keyset-v2\x00ks-0123456789abcdef\x000a1b2c3e"), nil, append(bytes.Clone(ad), 0)} {
			if got, err := k.Unwrap(ctx, w, other); err == nil {
				t.Errorf("unwrapped under associated data %q: %x", other, got)
			} else if !errors.Is(err, backends.ErrUnwrap) {
				t.Errorf("other associated data: %v, want backends.ErrUnwrap", err)
			}
		}
	})
	t.Run("OtherKey", func(t *testing.T) {
		a, b := open(t, h.NewKey(ctx, t)), open(t, h.NewKey(ctx, t))
		w, _ := a.Wrap(ctx, secret, ad)
		if _, err := b.Unwrap(ctx, w, ad); !errors.Is(err, backends.ErrUnwrap) {
			t.Errorf("another key's ciphertext: %v, want backends.ErrUnwrap", err)
		}
	})
	t.Run("FlippedByte", func(t *testing.T) {
		k := open(t, h.NewKey(ctx, t))
		w, _ := k.Wrap(ctx, secret, ad)
		// Not the middle: local-kms does not authenticate the key ARN it
		// embeds in a ciphertext when Decrypt names the key, as the awskms
		// backend always does. The sealed part must be authenticated
		// everywhere.
		for _, i := range []int{0, len(w) - 20, len(w) - 1} {
			bad := bytes.Clone(w)
			bad[i] ^= 0x01
			if got, err := k.Unwrap(ctx, bad, ad); err == nil {
				t.Errorf("byte %d flipped: unwrapped to %x", i, got)
			}
		}
		if _, err := k.Unwrap(ctx, w[:len(w)-1], ad); err == nil {
			t.Error("truncated: unwrapped")
		}
	})
	t.Run("Cancelled", func(t *testing.T) {
		k := open(t, h.NewKey(ctx, t))
		w, err := k.Wrap(ctx, secret, ad)
		if err != nil {
			t.Fatal(err)
		}
		c, cancel := context.WithCancel(ctx)
		cancel()
		start := time.Now()
		if _, err := k.Wrap(c, secret, ad); !errors.Is(err, context.Canceled) {
			t.Errorf("Wrap with a cancelled context: %v, want context.Canceled", err)
		}
		if _, err := k.Unwrap(c, w, ad); !errors.Is(err, context.Canceled) {
			t.Errorf("Unwrap with a cancelled context: %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("cancelled calls took %v", d)
		}
	})
	t.Run("Outage", func(t *testing.T) { outage(t, h, secret, ad) })
	t.Run("ServerSideRotation", func(t *testing.T) {
		url, rotate, ok := h.RotatableKey(ctx, t)
		if !ok {
			t.Skip("the backend (or this harness) has no key versions")
		}
		k := open(t, url)
		old, err := k.Wrap(ctx, secret, ad)
		if err != nil {
			t.Fatal(err)
		}
		rotate()
		k = open(t, url)
		fresh, err := k.Wrap(ctx, secret, ad)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(old, fresh) {
			t.Error("a wrap after rotation equals one before")
		}
		for name, w := range map[string][]byte{"before": old, "after": fresh} {
			if got, err := k.Unwrap(ctx, w, ad); err != nil || !bytes.Equal(got, secret) {
				t.Errorf("wrapped %s the rotation: %x, %v", name, got, err)
			}
		}
	})
	t.Run("CloseLeavesOthers", func(t *testing.T) {
		// Two KEKs of one key, from one registry, share whatever the
		// backend shares (a Vault session, a caller's client): closing one
		// must leave the other, and the next one opened, working.
		url := h.NewKey(ctx, t)
		a, err := h.Registry().Open(ctx, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := open(t, url)
		w, err := a.Wrap(ctx, secret, ad)
		if err != nil {
			t.Fatal(err)
		}
		c, ok := a.(io.Closer)
		if !ok {
			t.Fatalf("%T is not an io.Closer", a)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if got, err := b.Unwrap(ctx, w, ad); err != nil || !bytes.Equal(got, secret) {
			t.Fatalf("another KEK of the key, after the first was closed: Unwrap = %x, %v", got, err)
		}
		if _, err := open(t, url).Wrap(ctx, secret, ad); err != nil {
			t.Fatalf("a KEK opened after another was closed: %v", err)
		}
	})
	t.Run("CloseReleases", func(t *testing.T) {
		closeReleases(t, h, h.NewKey(ctx, t), secret, ad)
	})
	t.Run("GenerateKey", func(t *testing.T) {
		k := open(t, h.NewKey(ctx, t))
		g, ok := k.(backends.Generator)
		if !ok {
			t.Skip("the backend does not generate keys")
		}
		plain, w, err := g.GenerateKey(ctx, 32, ad)
		if err != nil {
			t.Fatal(err)
		}
		if len(plain) != 32 || bytes.Equal(plain, make([]byte, 32)) {
			t.Fatalf("generated %x", plain)
		}
		got, err := k.Unwrap(ctx, w, ad)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("Unwrap of a generated key = %x, %v", got, err)
		}
		if _, err := k.Unwrap(ctx, w, []byte("other")); !errors.Is(err, backends.ErrUnwrap) {
			t.Errorf("a generated key under other associated data: %v", err)
		}
		again, _, _ := g.GenerateKey(ctx, 32, ad)
		if bytes.Equal(again, plain) {
			t.Error("two generated keys are equal")
		}
	})
}

// outage stops the server under an open KEK. Calls fail within seconds,
// naming the URL, without key material, and never as ErrUnwrap (an outage
// is not a bad ciphertext); a KEK opened meanwhile fails the same way.
// Once the server is back, the same KEK works again: a loader keeps its
// KEKs open across outages.
func outage(t *testing.T, h Harness, secret, ad []byte) {
	ctx := context.Background()
	url := h.NewKey(ctx, t)
	k, err := h.Registry().Open(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer backends.Close(k)
	w, err := k.Wrap(ctx, secret, ad)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Stop(t) {
		t.Skip("the backend has no server")
	}
	up := false
	defer func() {
		if !up {
			h.Start(t)
		}
	}()
	check := func(what string, err error, start time.Time) {
		t.Helper()
		switch {
		case err == nil:
			t.Errorf("%s with the server stopped succeeded", what)
		case errors.Is(err, backends.ErrUnwrap):
			t.Errorf("%s with the server stopped: %v, which says the ciphertext is bad", what, err)
		case !strings.Contains(err.Error(), redact.URL(url)):
			t.Errorf("%s: the error does not name the URL %s: %v", what, redact.URL(url), err)
		case bytes.Contains([]byte(err.Error()), secret[:8]):
			t.Errorf("%s: the error holds key material", what)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("%s with the server stopped took %v to fail", what, d)
		}
	}
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err = k.Wrap(c, secret, ad)
	check("Wrap", err, start)
	start = time.Now()
	_, err = k.Unwrap(c, w, ad)
	check("Unwrap", err, start)
	start = time.Now()
	if k2, err := h.Registry().Open(c, url, nil); err != nil {
		check("Open", err, start)
	} else {
		_, err = k2.Wrap(c, secret, ad)
		check("Wrap with a KEK opened while the server was stopped", err, start)
		backends.Close(k2)
	}

	h.Start(t)
	up = true
	// Clients reconnect with backoff: wait for the condition, not a time.
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := k.Unwrap(ctx, w, ad)
		if err == nil && bytes.Equal(got, secret) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the KEK did not work again within 30 s of the server's return: %x, %v", got, err)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// closeReleases opens a KEK, wraps and unwraps with it, and closes it, n
// times, and requires the goroutine count to come back to where it was
// (within slack) before a deadline: a KEK that keeps a client, a
// connection or a login per open leaks.
func closeReleases(t *testing.T, h Harness, url string, secret, ad []byte) {
	ctx := context.Background()
	cycle := func() {
		k, err := h.Registry().Open(ctx, url, nil)
		if err != nil {
			t.Fatalf("Open(%s): %v", redact.URL(url), err)
		}
		w, err := k.Wrap(ctx, secret, ad)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := k.Unwrap(ctx, w, ad); err != nil || !bytes.Equal(got, secret) {
			t.Fatalf("Unwrap = %x, %v", got, err)
		}
		c, ok := k.(io.Closer)
		if !ok {
			t.Fatalf("%T is not an io.Closer", k)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	// One cycle first: libraries start goroutines of their own once per
	// process (resolvers, pools), which are not a KEK's to release.
	cycle()
	before := runtime.NumGoroutine()
	start := time.Now()
	for range closeCycles {
		cycle()
	}
	took := time.Since(start)
	peak := runtime.NumGoroutine()
	// Closed connections' goroutines (the client's, and an in-process
	// server's) end a moment after Close returns.
	const slack = 5
	deadline := time.Now().Add(15 * time.Second)
	after := runtime.NumGoroutine()
	for after > before+slack && time.Now().Before(deadline) {
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond) // poll interval, not a wait for an event
		after = runtime.NumGoroutine()
	}
	t.Logf("%d open/wrap/unwrap/close cycles in %v: goroutines %d before, %d right after, %d settled",
		closeCycles, took.Round(time.Millisecond), before, peak, after)
	if after > before+slack {
		buf := make([]byte, 1<<16)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("goroutines went from %d to %d after %d cycles and did not come back within 15 s:\n%s", before, after, closeCycles, buf)
	}
}

// LocalKEK generates a local KEK in dir and returns its URL ("local:"
// and the file's path), for tests that need a key rather than a backend.
func LocalKEK(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "kek")
	if err := backends.GenerateLocal(path); err != nil {
		t.Fatal(err)
	}
	return "local:" + path
}
