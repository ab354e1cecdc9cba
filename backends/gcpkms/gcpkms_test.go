package gcpkms_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	kms "cloud.google.com/go/kms/apiv1"
	"cloud.google.com/go/kms/apiv1/kmspb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/backends/gcpkms"
	"github.com/stateseal/stateseal/backends/kektest"
	"github.com/stateseal/stateseal/internal/testservers"
)

// harness opens gcpkms URLs with the backend's own clients
// (backends.Default), the test server's endpoint in each URL.
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

func (h *harness) Stop(*testing.T) bool { h.kms.Stop(); return true }
func (h *harness) Start(t *testing.T)   { h.kms.Start(t) }

// client is a Cloud KMS client of the test's own, for the test server.
func client(t *testing.T, g *testservers.GCPKMS) *kms.KeyManagementClient {
	c, err := kms.NewKeyManagementClient(context.Background(), option.WithEndpoint(g.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// clientHarness opens gcpkms URLs through one client the test made
// (gcpkms.Opener(client), which builds each KEK with gcpkms.New): the URLs
// are the keys' names alone.
type clientHarness struct {
	harness
	reg *backends.Registry
}

func (h *clientHarness) Registry() *backends.Registry { return h.reg }

func (h *clientHarness) NewKey(ctx context.Context, t *testing.T) string {
	return "gcpkms://" + h.kms.NewKey("ring", id())
}

func (h *clientHarness) RotatableKey(ctx context.Context, t *testing.T) (string, func(), bool) {
	name := h.kms.NewKey("ring", id())
	return "gcpkms://" + name, func() { h.kms.Rotate(name) }, true
}

func TestConformance(t *testing.T) {
	kektest.Run(t, &harness{kms: testservers.StartGCPKMS(t)})
}

// TestConformanceClient runs the suite on KEKs built from a client the
// test made; its CloseLeavesOthers checks that no KEK closes the client.
func TestConformanceClient(t *testing.T) {
	g := testservers.StartGCPKMS(t)
	h := &clientHarness{harness: harness{kms: g}, reg: new(backends.Registry)}
	h.reg.Register(gcpkms.Scheme, gcpkms.Opener(client(t, g)))
	kektest.Run(t, h)
}

// TestNew: a KEK built by New from a caller's client names the key in its
// errors, and its Close leaves the client open.
func TestNew(t *testing.T) {
	g := testservers.StartGCPKMS(t)
	ctx := context.Background()
	c := client(t, g)
	name := g.NewKey("ring", id())
	k := gcpkms.New(c, name, nil)
	w, err := k.Wrap(ctx, []byte("0123456789abcdef0123456789abcdef"), []byte("ad"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Unwrap(ctx, w, []byte("other")); !errors.Is(err, backends.ErrUnwrap) || !strings.Contains(err.Error(), "gcpkms://"+name) {
		t.Errorf("Unwrap under other associated data: %v", err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Decrypt(ctx, &kmspb.DecryptRequest{Name: name, Ciphertext: w, AdditionalAuthenticatedData: []byte("ad")}); err != nil {
		t.Fatalf("the caller's client after the KEK's Close: %v", err)
	}
	reg := new(backends.Registry)
	reg.Register(gcpkms.Scheme, gcpkms.Opener(c))
	if _, err := reg.Open(ctx, keyURL(g.Addr, name), nil); err == nil {
		t.Error("a URL with endpoint and insecure opened through a caller's client")
	}
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
