package gcpkms_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/backends"
	_ "github.com/stateseal/stateseal/backends/gcpkms"
	"github.com/stateseal/stateseal/backends/kektest"
	"github.com/stateseal/stateseal/internal/testservers"
)

type harness struct{ kms *testservers.GCPKMS }

func (h *harness) Registry() *backends.Registry { return backends.Default }

func keyURL(addr, name string) string {
	return fmt.Sprintf("gcpkms://%s?endpoint=%s&insecure=1", name, addr)
}

func id() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "k-" + hex.EncodeToString(b)
}

func (h *harness) NewKey(ctx context.Context, t *testing.T) string {
	return keyURL(h.kms.Addr, h.kms.NewKey("ring", id()))
}

func (h *harness) RotatableKey(ctx context.Context, t *testing.T) (string, func(), bool) {
	name := h.kms.NewKey("ring", id())
	return keyURL(h.kms.Addr, name), func() { h.kms.Rotate(name) }, true
}

func (h *harness) StoppedURL(ctx context.Context, t *testing.T) string {
	g := testservers.StartGCPKMS(t)
	name := g.NewKey("ring", "stopped")
	g.Stop()
	return keyURL(g.Addr, name)
}

func TestConformance(t *testing.T) {
	kektest.Run(t, &harness{kms: testservers.StartGCPKMS(t)})
}

// TestChecksums: a response corrupted on the way is caught by its CRC32C
// and never becomes a wrapped or unwrapped key.
func TestChecksums(t *testing.T) {
	g := testservers.StartGCPKMS(t)
	ctx := context.Background()
	k, err := backends.Open(ctx, keyURL(g.Addr, g.NewKey("ring", "crc")), nil)
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("0123456789abcdef0123456789abcdef")
	w, err := k.Wrap(ctx, secret, []byte("ad"))
	if err != nil {
		t.Fatal(err)
	}
	g.CorruptResponses.Store(true)
	if _, err := k.Wrap(ctx, secret, []byte("ad")); err == nil || !strings.Contains(err.Error(), "corrupted") {
		t.Errorf("a corrupted Encrypt response: %v", err)
	}
	if _, err := k.Unwrap(ctx, w, []byte("ad")); err == nil || !strings.Contains(err.Error(), "corrupted") {
		t.Errorf("a corrupted Decrypt response: %v", err)
	}
}

func TestURLs(t *testing.T) {
	for _, bad := range []string{
		"gcpkms://projects/p/locations/l/keyRings/r",
		"gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k?colour=red",
		"gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k?endpoint=kms.example.com:443&insecure=1",
	} {
		if _, err := backends.Open(context.Background(), bad, nil); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
}
