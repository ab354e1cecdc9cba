package awskms_test

import (
	"context"
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

// NewKey creates a key through the SDK, as an operator would.
func (h *harness) NewKey(ctx context.Context, t *testing.T) string {
	out, err := client(t, h.kms).CreateKey(ctx, &kms.CreateKeyInput{Description: aws.String("stateseal test")})
	if err != nil {
		t.Fatal(err)
	}
	return keyURL(h.kms, *out.KeyMetadata.KeyId)
}

// RotatableKey starts a local-kms of its own, seeded with a key due to
// rotate in three seconds: local-kms rotates a key's backing material when
// it is next used after that moment, as AWS KMS's automatic rotation does.
func (h *harness) RotatableKey(ctx context.Context, t *testing.T) (string, func(), bool) {
	due := time.Now().Add(3 * time.Second).UTC()
	seed := fmt.Sprintf(`Keys:
  Symmetric:
    Aes:
      - Metadata:
          KeyId: 0a1b2c3d-0000-4000-8000-000000000001
        BackingKeys:
          - %s
        NextKeyRotation: %s
`, strings.Repeat("5c", 32), due.Format(time.RFC3339Nano))
	l := testservers.StartLocalKMS(t, seed)
	return keyURL(l, "0a1b2c3d-0000-4000-8000-000000000001"), func() { time.Sleep(time.Until(due) + 500*time.Millisecond) }, true
}

func (h *harness) StoppedURL(ctx context.Context, t *testing.T) string {
	return fmt.Sprintf("awskms://alias/stopped?region=eu-west-1&endpoint=http://127.0.0.1:%d", testservers.FreePort(t))
}

// CloseCycles: each open loads the AWS configuration (and parses any
// AWS_CA_BUNDLE), about 30 ms under the race detector; 200 cycles show a
// leak as well as 1,000.
func (h *harness) CloseCycles() int { return 200 }

func TestConformance(t *testing.T) {
	kektest.Run(t, &harness{kms: testservers.StartLocalKMS(t, "")})
}

func TestAlias(t *testing.T) {
	l := testservers.StartLocalKMS(t, "")
	ctx := context.Background()
	h := &harness{kms: l}
	u, _ := url.Parse(h.NewKey(ctx, t))
	if _, err := client(t, l).CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String("alias/stateseal"), TargetKeyId: aws.String(u.Host)}); err != nil {
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
	_ = awskms.Scheme
}
