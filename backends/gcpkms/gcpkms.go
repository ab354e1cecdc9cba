// Package gcpkms wraps data keys with Google Cloud KMS. Importing it
// registers the "gcpkms" scheme in backends.Default:
//
//	import _ "github.com/stateseal/stateseal/backends/gcpkms"
//
//	kek, err := backends.Open(ctx, "gcpkms://projects/P/locations/L/keyRings/R/cryptoKeys/K", nil)
//
// The URL is the crypto key's resource name after "gcpkms://". Encrypt
// uses the key's primary version; Decrypt finds the version in the
// ciphertext, so keys wrapped before a rotation keep unwrapping.
// Credentials are Application Default Credentials.
//
// Two query parameters exist for test servers and private endpoints:
// endpoint=HOST:PORT sends requests there, and insecure=1 (allowed only
// with a loopback endpoint) sends them without TLS or credentials.
//
// Wrap is Encrypt and Unwrap is Decrypt with the associated data as
// AdditionalAuthenticatedData. Both send CRC32C checksums of what they send
// and verify the ones KMS returns, so corruption on the way is caught, not
// stored. Calls honour the context; the client's retries cover transient
// errors. Errors name the URL, never key material.
//
// A KEK opened from a URL has its own client and gRPC connection: open one
// per URL, keep it, and Close it when done. New builds a KEK from a
// *kms.KeyManagementClient the caller made and keeps; its Close leaves
// the client open.
package gcpkms

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/url"
	"strings"
	"time"

	kms "cloud.google.com/go/kms/apiv1"
	"cloud.google.com/go/kms/apiv1/kmspb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/loopback"
	"github.com/stateseal/stateseal/internal/redact"
)

// Scheme is the URL scheme this package registers.
const Scheme = "gcpkms"

func init() { backends.Default.Register(Scheme, Opener(nil)) }

// Opener returns an opener for gcpkms URLs. With a nil client (what
// backends.Default has), each KEK makes a client of its own, and a gRPC
// connection, from the URL (endpoint, insecure) and Application Default
// Credentials, and its Close closes them. With a client the caller made,
// every URL goes through that client (built with New): only the key's name
// comes from the URL, endpoint and insecure are refused (the client says
// where requests go and how), and the KEKs' Close leaves the client open.
func Opener(client *kms.KeyManagementClient) backends.Opener {
	return func(ctx context.Context, u *url.URL, _ *backends.OpenOptions) (backends.KEK, error) {
		name, q, err := parse(u)
		if err != nil {
			return nil, err
		}
		if client == nil {
			return open(ctx, u, name, q)
		}
		if len(q) != 0 {
			return nil, fmt.Errorf("gcpkms: %s: endpoint and insecure are refused with a client given to gcpkms.Opener, which says where requests go", redact.URL(u.String()))
		}
		k := New(client, name, nil)
		k.url = redact.URL(u.String())
		return k, nil
	}
}

// A KEK is a Cloud KMS crypto key.
type KEK struct {
	client *kms.KeyManagementClient
	name   string // projects/P/locations/L/keyRings/R/cryptoKeys/K
	url    string // redacted, for errors
	own    bool   // the KEK made client: Close closes it
}

var (
	_ backends.KEK = (*KEK)(nil)
	_ io.Closer    = (*KEK)(nil)
)

// Options configure a KEK built by New. There are none yet; nil is the
// value to pass.
type Options struct{}

// New returns the KEK of the crypto key name
// (projects/P/locations/L/keyRings/R/cryptoKeys/K) through client, which
// the caller made and owns: its endpoint, credentials and connection
// apply, and the KEK's Close leaves it open. Each call retries transient
// errors at most twice, as a KEK opened from a URL does, whatever the
// client's own call options say. o may be nil. Errors name the key as a
// gcpkms URL.
func New(client *kms.KeyManagementClient, name string, o *Options) *KEK {
	return &KEK{client: client, name: name, url: redact.URL("gcpkms://" + name)}
}

// parse returns the crypto key's name a URL holds and its query, refusing
// other forms and unknown parameters.
func parse(u *url.URL) (string, url.Values, error) {
	name := strings.TrimPrefix(u.Host+u.Path, "/")
	redacted := redact.URL(u.String())
	parts := strings.Split(name, "/")
	if len(parts) != 8 || parts[0] != "projects" || parts[2] != "locations" || parts[4] != "keyRings" || parts[6] != "cryptoKeys" {
		return "", nil, fmt.Errorf("gcpkms: %s is not gcpkms://projects/P/locations/L/keyRings/R/cryptoKeys/K", redacted)
	}
	q := u.Query()
	for k := range q {
		if k != "endpoint" && k != "insecure" {
			return "", nil, fmt.Errorf("gcpkms: %s: unknown parameter %q (endpoint, insecure)", redacted, k)
		}
	}
	return name, q, nil
}

// open makes a KEK with a client of its own.
func open(ctx context.Context, u *url.URL, name string, q url.Values) (*KEK, error) {
	redacted := redact.URL(u.String())
	var opts []option.ClientOption
	if e := q.Get("endpoint"); e != "" {
		opts = append(opts, option.WithEndpoint(e))
	}
	if q.Get("insecure") != "" {
		if !loopback.Addr(q.Get("endpoint")) {
			return nil, fmt.Errorf("gcpkms: %s: insecure is allowed only with a loopback endpoint", redacted)
		}
		opts = append(opts, option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	}
	client, err := kms.NewKeyManagementClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("gcpkms %s: %w", redacted, err)
	}
	return &KEK{client: client, name: name, url: redacted, own: true}, nil
}

// retry is every call's retry policy, whoever made the client: the
// library retries Unavailable until the context's deadline, and a server
// that is down should fail in a second, not hold a reload.
var retry = gax.WithRetry(func() gax.Retryer { return &bounded{left: 2} })

// bounded retries transient errors at most left more times, backing off.
type bounded struct {
	left  int
	pause time.Duration
}

func (b *bounded) Retry(err error) (time.Duration, bool) {
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted, codes.Internal, codes.Aborted:
	default:
		return 0, false
	}
	if b.left == 0 {
		return 0, false
	}
	b.left--
	b.pause = max(2*b.pause, 100*time.Millisecond)
	return b.pause, true
}

// Close closes the client and gRPC connections the KEK made from a URL,
// whose goroutines stay until then. A KEK built from the caller's client
// (New, or Opener with a client) leaves it open: its owner closes it. The
// KEK is not used after Close.
func (k *KEK) Close() error {
	if k.own {
		return k.client.Close()
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) *wrapperspb.Int64Value {
	return wrapperspb.Int64(int64(crc32.Checksum(b, castagnoli)))
}

// Wrap encrypts plaintext under the key's primary version.
func (k *KEK) Wrap(ctx context.Context, plaintext, associatedData []byte) ([]byte, error) {
	resp, err := k.client.Encrypt(ctx, &kmspb.EncryptRequest{
		Name: k.name, Plaintext: plaintext, PlaintextCrc32C: crc(plaintext),
		AdditionalAuthenticatedData: associatedData, AdditionalAuthenticatedDataCrc32C: crc(associatedData),
	}, retry)
	if err != nil {
		return nil, k.fail("Encrypt", err)
	}
	switch {
	case !resp.VerifiedPlaintextCrc32C || !resp.VerifiedAdditionalAuthenticatedDataCrc32C:
		return nil, fmt.Errorf("gcpkms %s: Encrypt: the request was corrupted on the way to KMS", k.url)
	case resp.CiphertextCrc32C == nil || resp.CiphertextCrc32C.Value != crc(resp.Ciphertext).Value:
		return nil, fmt.Errorf("gcpkms %s: Encrypt: the response was corrupted on the way from KMS", k.url)
	}
	return resp.Ciphertext, nil
}

// Unwrap decrypts wrapped with the key version it names.
func (k *KEK) Unwrap(ctx context.Context, wrapped, associatedData []byte) ([]byte, error) {
	resp, err := k.client.Decrypt(ctx, &kmspb.DecryptRequest{
		Name: k.name, Ciphertext: wrapped, CiphertextCrc32C: crc(wrapped),
		AdditionalAuthenticatedData: associatedData, AdditionalAuthenticatedDataCrc32C: crc(associatedData),
	}, retry)
	if err != nil {
		return nil, k.fail("Decrypt", err)
	}
	if resp.PlaintextCrc32C == nil || resp.PlaintextCrc32C.Value != crc(resp.Plaintext).Value {
		return nil, fmt.Errorf("gcpkms %s: Decrypt: the response was corrupted on the way from KMS", k.url)
	}
	return resp.Plaintext, nil
}

// fail wraps err with the operation and the URL. KMS answers a ciphertext
// it cannot decrypt (changed, another key's, other AAD) with
// InvalidArgument: that is backends.ErrUnwrap; one under a disabled or
// destroyed key version with FailedPrecondition: backends.ErrKeyDisabled.
func (k *KEK) fail(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("gcpkms %s: %s: %w", k.url, op, err)
	}
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.InvalidArgument:
			if op == "Decrypt" {
				return fmt.Errorf("gcpkms %s: %s: %w (%s)", k.url, op, backends.ErrUnwrap, s.Message())
			}
		case codes.FailedPrecondition:
			// "cryptoKeyVersions/N is not enabled, current state is:
			// DISABLED" (or DESTROYED): the version the bytes are under.
			if op == "Decrypt" {
				return fmt.Errorf("gcpkms %s: %s: %w (%s)", k.url, op, backends.ErrKeyDisabled, s.Message())
			}
		case codes.Canceled:
			return fmt.Errorf("gcpkms %s: %s: %w", k.url, op, context.Canceled)
		case codes.DeadlineExceeded:
			return fmt.Errorf("gcpkms %s: %s: %w", k.url, op, context.DeadlineExceeded)
		}
	}
	return fmt.Errorf("gcpkms %s: %s: %w", k.url, op, err)
}
