package awskms_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/internal/testservers"
)

// TestDisabledKey: a key wrapped under a KMS key that is then disabled
// (DisableKey, as the leaked-key procedure may) does not unwrap with
// backends.ErrKeyDisabled, which no retry changes, not an outage.
func TestDisabledKey(t *testing.T) {
	ctx := context.Background()
	l := testservers.StartLocalKMS(t, "")
	key := createKey(ctx, t, l)
	k := testkit.Must(backends.Open(ctx, keyURL(l, key), nil))
	wrapped := testkit.Must(k.Wrap(ctx, make([]byte, 32), []byte("ad")))
	testkit.Must(client(t, l).DisableKey(ctx, &kms.DisableKeyInput{KeyId: aws.String(key)}))
	if _, err := k.Unwrap(ctx, wrapped, []byte("ad")); !errors.Is(err, backends.ErrKeyDisabled) {
		t.Fatalf("unwrap under a disabled key: %v", err)
	}
}
