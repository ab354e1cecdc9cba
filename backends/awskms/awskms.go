// Package awskms wraps data keys with AWS KMS. Importing it registers the
// "awskms" scheme in backends.Default:
//
//	import _ "github.com/stateseal/stateseal/backends/awskms"
//
//	kek, err := backends.Open(ctx, "awskms://alias/stateseal?region=eu-west-1", nil)
//
// URL forms: awskms://KEY?region=R&endpoint=E, where KEY is a key id
// (awskms://1234abcd-12ab-34cd-56ef-1234567890ab), an alias
// (awskms://alias/stateseal), or an ARN after three slashes
// (awskms:///arn:aws:kms:eu-west-1:111122223333:key/1234abcd-...).
// region defaults to the SDK's (AWS_REGION and the shared config);
// endpoint points at another server, such as local-kms in tests: https,
// or plain http only to loopback, since KMS answers Decrypt with the data
// key itself.
// Credentials come from the SDK's default chain.
//
// Wrap is Encrypt and Unwrap is Decrypt pinned to the same key, each with
// an encryption context that carries the associated data whole
// ("stateseal:ad", base64url) and, for keyset keys, its parts as named
// fields ("stateseal:keyset", "stateseal:key"), so that an IAM policy can
// limit a role to one keyset with a kms:EncryptionContext condition. The
// KEK also implements backends.Generator with GenerateDataKey, so new data
// keys are born inside KMS. Calls honour the context, retry throttling and
// 5xx responses at most three times (with a client of their own; a
// caller's client retries as it was configured to), and fail with the URL
// (credentials redacted) in the error, never key material.
//
// A KEK is opened from a URL (backends.Open), with a client of its own
// that its Close releases, or built by New from a *kms.Client the caller
// made and keeps: Close then leaves the client alone.
package awskms

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/smithy-go"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/loopback"
	"github.com/stateseal/stateseal/internal/redact"
)

// Scheme is the URL scheme this package registers.
const Scheme = "awskms"

func init() { backends.Default.Register(Scheme, Opener(nil)) }

// Opener returns an opener for awskms URLs. With a nil client (what
// backends.Default has), each KEK makes a client of its own from the AWS
// configuration and the URL (region, endpoint), and its Close releases
// it. With a client the caller made, every URL goes through that client
// (built with New): only the key comes from the URL, a region that is not
// the client's is refused, and so is an endpoint (the client says where
// requests go); the KEKs' Close leaves the client alone.
func Opener(client *kms.Client) backends.Opener {
	return func(ctx context.Context, u *url.URL, _ *backends.OpenOptions) (backends.KEK, error) {
		key, q, err := parse(u)
		if err != nil {
			return nil, err
		}
		if client == nil {
			return open(ctx, u, key, q)
		}
		name := redact.URL(u.String())
		if r := q.Get("region"); r != "" && r != client.Options().Region {
			return nil, fmt.Errorf("awskms: %s names region %s; the client given to awskms.Opener is for %q", name, r, client.Options().Region)
		}
		if q.Has("endpoint") {
			return nil, fmt.Errorf("awskms: %s: endpoint is refused with a client given to awskms.Opener, which says where requests go", name)
		}
		k := New(client, key, nil)
		k.url = name
		return k, nil
	}
}

// A KEK is an AWS KMS key.
type KEK struct {
	client *kms.Client
	key    string
	url    string // redacted, for errors
	// own is the HTTP transport of the client this KEK made from a URL
	// (nil when it was built from the caller's client): Close releases
	// its idle connections.
	own *http.Transport
}

var (
	_ backends.KEK       = (*KEK)(nil)
	_ backends.Generator = (*KEK)(nil)
	_ io.Closer          = (*KEK)(nil)
)

// Options configure a KEK built by New. There are none yet; nil is the
// value to pass.
type Options struct{}

// New returns the KEK of keyID (a key id, an alias "alias/NAME", or a key
// or alias ARN) through client, which the caller made and owns: its
// region, credentials, endpoint, HTTP client and retries apply, and the
// KEK's Close leaves it alone. o may be nil. Errors name the key as an
// awskms URL with the client's region.
func New(client *kms.Client, keyID string, o *Options) *KEK {
	u := "awskms://" + keyID
	if strings.HasPrefix(keyID, "arn:") {
		u = "awskms:///" + keyID
	}
	if r := client.Options().Region; r != "" {
		u += "?region=" + url.QueryEscape(r)
	}
	return &KEK{client: client, key: keyID, url: redact.URL(u)}
}

// parse returns the key a URL names and its query, refusing unknown
// parameters.
func parse(u *url.URL) (string, url.Values, error) {
	key := strings.TrimPrefix(u.Host+u.Path, "/")
	name := redact.URL(u.String())
	if key == "" {
		return "", nil, fmt.Errorf("awskms: %s names no key (awskms://KEY-ID, awskms://alias/NAME or awskms:///ARN)", name)
	}
	q := u.Query()
	for k := range q {
		if k != "region" && k != "endpoint" {
			return "", nil, fmt.Errorf("awskms: %s: unknown parameter %q (region, endpoint)", name, k)
		}
	}
	return key, q, nil
}

// open makes a KEK with a client of its own, from the AWS configuration
// and the URL's region and endpoint.
func open(ctx context.Context, u *url.URL, key string, q url.Values) (*KEK, error) {
	name := redact.URL(u.String())
	if e := q.Get("endpoint"); e != "" {
		// Plain http only to loopback (local-kms): KMS answers Decrypt
		// with the data key itself, and the request carries credentials.
		eu, err := url.Parse(e)
		if err != nil || eu.Host == "" || (eu.Scheme != "https" && eu.Scheme != "http") {
			return nil, fmt.Errorf("awskms: %s: endpoint: want an https:// URL", name)
		}
		if eu.Scheme == "http" && !loopback.Host(eu.Hostname()) {
			return nil, fmt.Errorf("awskms: %s: a plain-http endpoint on a host that is not loopback would send every data key in the clear (KMS answers Decrypt with it): use https", name)
		}
	}
	opts := []func(*config.LoadOptions) error{config.WithRetryMaxAttempts(3)}
	if r := q.Get("region"); r != "" {
		opts = append(opts, config.WithRegion(r))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("awskms: %s: loading the AWS configuration: %w", name, err)
	}
	// A transport of this KEK's own, with the settings the configuration
	// gave the SDK's client (AWS_CA_BUNDLE, timeouts), so that Close can
	// release its connections: the SDK's client hides the transport it
	// builds, whose idle connections (two goroutines each) would stay
	// until they time out.
	var own *http.Transport
	if bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient); ok {
		own = bc.GetTransport()
	} else {
		own = awshttp.NewBuildableClient().GetTransport()
	}
	hc := &http.Client{Transport: own, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // as the SDK's client: redirects are answers
	}}
	client := kms.NewFromConfig(cfg, func(o *kms.Options) {
		if e := q.Get("endpoint"); e != "" {
			o.BaseEndpoint = aws.String(e)
		}
		o.HTTPClient = hc
	})
	return &KEK{client: client, key: key, url: name, own: own}, nil
}

// Close releases the idle connections of a client the KEK made from a
// URL. Calls in flight finish; the KEK is not used after Close. A KEK
// built from the caller's client (New, or Opener with a client) leaves
// that client alone: its owner closes it.
func (k *KEK) Close() error {
	if k.own != nil {
		k.own.CloseIdleConnections()
	}
	return nil
}

// encryptionContext carries ad whole, and the keyset id and key id as
// named fields when ad is a keyset's (format NUL keyset NUL key).
func encryptionContext(ad []byte) map[string]string {
	ec := map[string]string{"stateseal:ad": base64.RawURLEncoding.EncodeToString(ad)}
	if parts := strings.Split(string(ad), "\x00"); len(parts) == 3 && strings.HasPrefix(parts[0], "stateseal-keyset-") {
		ec["stateseal:keyset"], ec["stateseal:key"] = parts[1], parts[2]
	}
	return ec
}

// Wrap encrypts plaintext under the key.
func (k *KEK) Wrap(ctx context.Context, plaintext, associatedData []byte) ([]byte, error) {
	out, err := k.client.Encrypt(ctx, &kms.EncryptInput{
		KeyId: aws.String(k.key), Plaintext: plaintext, EncryptionContext: encryptionContext(associatedData),
	})
	if err != nil {
		return nil, k.fail("Encrypt", err)
	}
	return out.CiphertextBlob, nil
}

// Unwrap decrypts wrapped with the key and no other.
func (k *KEK) Unwrap(ctx context.Context, wrapped, associatedData []byte) ([]byte, error) {
	out, err := k.client.Decrypt(ctx, &kms.DecryptInput{
		KeyId: aws.String(k.key), CiphertextBlob: wrapped, EncryptionContext: encryptionContext(associatedData),
	})
	if err != nil {
		return nil, k.fail("Decrypt", err)
	}
	return out.Plaintext, nil
}

// GenerateKey has KMS generate a data key of size bytes and return it
// with its ciphertext, under the same encryption context as Wrap.
func (k *KEK) GenerateKey(ctx context.Context, size int, associatedData []byte) (plaintext, wrapped []byte, err error) {
	out, err := k.client.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{
		KeyId: aws.String(k.key), NumberOfBytes: aws.Int32(int32(size)), EncryptionContext: encryptionContext(associatedData),
	})
	if err != nil {
		return nil, nil, k.fail("GenerateDataKey", err)
	}
	return out.Plaintext, out.CiphertextBlob, nil
}

// fail wraps err with the operation and the URL. A ciphertext that does
// not decrypt (changed, another key's, other context) is backends.ErrUnwrap;
// one under a disabled key, or one pending deletion, backends.ErrKeyDisabled.
func (k *KEK) fail(op string, err error) error {
	var invalid *types.InvalidCiphertextException
	var incorrect *types.IncorrectKeyException
	var api smithy.APIError
	// A ciphertext KMS rejects as malformed (ValidationException: too long,
	// say) does not unwrap, now or later; taken for an outage, it would
	// cost a KMS call at every poll.
	malformed := op == "Decrypt" && errors.As(err, &api) && api.ErrorCode() == "ValidationException"
	if errors.As(err, &invalid) || errors.As(err, &incorrect) || malformed {
		return fmt.Errorf("awskms %s: %s: %w (%v)", k.url, op, backends.ErrUnwrap, err)
	}
	var disabled *types.DisabledException
	var state *types.KMSInvalidStateException
	if op == "Decrypt" && (errors.As(err, &disabled) || errors.As(err, &state)) {
		// The key is disabled or pending deletion: an operator's act.
		return fmt.Errorf("awskms %s: %s: %w (%v)", k.url, op, backends.ErrKeyDisabled, err)
	}
	return fmt.Errorf("awskms %s: %s: %w", k.url, op, err)
}
