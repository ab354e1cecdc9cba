package awskms_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/backends/awskms"
	"github.com/stateseal/stateseal/backends/kektest"
	"github.com/stateseal/stateseal/internal/testservers"
)

// harness opens awskms URLs with the backend's own clients
// (backends.Default), the endpoint in each URL.
type harness struct {
	kms *testservers.LocalKMS
}

func (h *harness) Registry() *backends.Registry { return backends.Default }

func keyURL(l *testservers.LocalKMS, key string) string {
	return fmt.Sprintf("awskms://%s?region=%s&endpoint=%s", key, l.Region, url.QueryEscape(l.Endpoint()))
}

func client(t *testing.T, l *testservers.LocalKMS) *kms.Client {
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(l.Region))
	if err != nil {
		t.Fatal(err)
	}
	return kms.NewFromConfig(cfg, func(o *kms.Options) { o.BaseEndpoint = aws.String(l.Endpoint()) })
}

// createKey creates a key through the SDK, as an operator would, and
// returns its id.
func createKey(ctx context.Context, t *testing.T, l *testservers.LocalKMS) string {
	out, err := client(t, l).CreateKey(ctx, &kms.CreateKeyInput{Description: aws.String("stateseal test")})
	if err != nil {
		t.Fatal(err)
	}
	return *out.KeyMetadata.KeyId
}

func (h *harness) NewKey(ctx context.Context, t *testing.T) string {
	return keyURL(h.kms, createKey(ctx, t, h.kms))
}

// rotatingKMS starts a local-kms of its own, seeded with a key due to
// rotate in three seconds, and returns it with the key's id and the
// function that waits for the rotation: local-kms rotates a key's backing
// material when it is next used after that moment, as AWS KMS's automatic
// rotation does (it has no rotation on demand).
func rotatingKMS(t *testing.T) (*testservers.LocalKMS, string, func()) {
	due := time.Now().Add(3 * time.Second).UTC()
	const id = "0a1b2c3d-0000-4000-8000-000000000001"
	seed := fmt.Sprintf(`Keys:
  Symmetric:
    Aes:
      - Metadata:
          KeyId: %s
        BackingKeys:
          - %s
        NextKeyRotation: %s
`, id, strings.Repeat("5c", 32), due.Format(time.RFC3339Nano))
	l := testservers.StartLocalKMS(t, seed)
	return l, id, func() { time.Sleep(time.Until(due) + 500*time.Millisecond) }
}

func (h *harness) RotatableKey(ctx context.Context, t *testing.T) (string, func(), bool) {
	l, id, rotate := rotatingKMS(t)
	return keyURL(l, id), rotate, true
}

func (h *harness) Stop(*testing.T) bool { h.kms.Stop(); return true }
func (h *harness) Start(*testing.T)     { h.kms.Start() }

// clientHarness opens awskms URLs through one *kms.Client the test made
// (awskms.Opener(client), which builds each KEK with awskms.New): the URLs
// name the key and region only.
type clientHarness struct {
	harness
	reg *backends.Registry
}

func newClientHarness(t *testing.T, l *testservers.LocalKMS) *clientHarness {
	h := &clientHarness{harness: harness{kms: l}, reg: new(backends.Registry)}
	h.reg.Register(awskms.Scheme, awskms.Opener(client(t, l)))
	return h
}

func (h *clientHarness) Registry() *backends.Registry { return h.reg }

func (h *clientHarness) NewKey(ctx context.Context, t *testing.T) string {
	return fmt.Sprintf("awskms://%s?region=%s", createKey(ctx, t, h.kms), h.kms.Region)
}

// RotatableKey: the key that rotates lives in a local-kms of its own,
// which this harness's client does not reach (the URL harness covers it).
func (h *clientHarness) RotatableKey(context.Context, *testing.T) (string, func(), bool) {
	return "", nil, false
}

func TestConformance(t *testing.T) {
	kektest.Run(t, &harness{kms: testservers.StartLocalKMS(t, "")})
}

// TestConformanceClient runs the suite on KEKs built from a client the
// test made; its CloseLeavesOthers checks that no KEK closes the client.
func TestConformanceClient(t *testing.T) {
	l := testservers.StartLocalKMS(t, "")
	h := newClientHarness(t, l)
	kektest.Run(t, h)
}

// TestNew: a KEK built by New from a caller's client wraps and unwraps,
// names the key in its errors, and leaves the client working after Close.
func TestNew(t *testing.T) {
	l := testservers.StartLocalKMS(t, "")
	ctx := context.Background()
	c := client(t, l)
	id := createKey(ctx, t, l)
	k := awskms.New(c, id, nil)
	w, err := k.Wrap(ctx, []byte("0123456789abcdef0123456789abcdef"), []byte("ad"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Unwrap(ctx, w, []byte("other")); !errors.Is(err, backends.ErrUnwrap) || !strings.Contains(err.Error(), "awskms://"+id+"?region="+l.Region) {
		t.Errorf("Unwrap under other associated data: %v", err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListKeys(ctx, &kms.ListKeysInput{}); err != nil {
		t.Fatalf("the caller's client after the KEK's Close: %v", err)
	}
	if _, err := awskms.New(c, id, nil).Unwrap(ctx, w, []byte("ad")); err != nil {
		t.Fatalf("a new KEK on the client after Close: %v", err)
	}
}

// TestOpenerWithClient: a registry opening through a caller's client
// refuses URLs that say something the client decides otherwise.
func TestOpenerWithClient(t *testing.T) {
	l := testservers.StartLocalKMS(t, "")
	reg := new(backends.Registry)
	reg.Register(awskms.Scheme, awskms.Opener(client(t, l)))
	for _, bad := range []string{"awskms://k?region=us-east-1", "awskms://k?endpoint=http://127.0.0.1:1", "awskms://", "awskms://k?colour=red"} {
		if _, err := reg.Open(context.Background(), bad, nil); err == nil {
			t.Errorf("Open(%q) through a caller's client succeeded", bad)
		}
	}
}

func TestAlias(t *testing.T) {
	l := testservers.StartLocalKMS(t, "")
	ctx := context.Background()
	id := createKey(ctx, t, l)
	if _, err := client(t, l).CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String("alias/stateseal"), TargetKeyId: aws.String(id)}); err != nil {
		t.Fatal(err)
	}
	k, err := backends.Open(ctx, keyURL(l, "alias/stateseal"), nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := k.Wrap(ctx, []byte("0123456789abcdef0123456789abcdef"), []byte("ad"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := k.Unwrap(ctx, w, []byte("ad")); err != nil || string(got) != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("through an alias: %q %v", got, err)
	}
}

func TestURLs(t *testing.T) {
	for _, bad := range []string{"awskms://", "awskms://k?colour=red"} {
		if _, err := backends.Open(context.Background(), bad, nil); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
}

// TestPlainHTTPEndpoint: a plain-http endpoint is refused unless it is on
// loopback (local-kms), before any request: KMS answers Decrypt with the
// data key, which would cross the network in the clear (found by a
// network-attacker review, which read every data key off the wire).
func TestPlainHTTPEndpoint(t *testing.T) {
	ctx := context.Background()
	for _, e := range []string{"http://kms.internal:8080", "http://10.0.0.5", "http://127.0.0.1.nip.io:80", "ftp://127.0.0.1", "127.0.0.1:8080"} {
		_, err := backends.Open(ctx, "awskms://alias/k?region=eu-west-1&endpoint="+url.QueryEscape(e), nil)
		if err == nil || !strings.Contains(err.Error(), "https") {
			t.Errorf("endpoint %s: %v", e, err)
		}
	}
	for _, e := range []string{"http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8080", "https://kms.internal"} {
		k, err := backends.Open(ctx, "awskms://alias/k?region=eu-west-1&endpoint="+url.QueryEscape(e), nil)
		if err != nil {
			t.Errorf("endpoint %s: %v", e, err)
			continue
		}
		backends.Close(k)
	}
}
