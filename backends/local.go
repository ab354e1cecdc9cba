package backends

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/stateseal/stateseal/internal/localkek"
	"github.com/stateseal/stateseal/internal/redact"
)

// The local backend keeps a 32-byte KEK in a file or an environment
// variable and wraps with XChaCha20-Poly1305. It needs no network and is
// the embedded default. URLs:
//
//	local:NAME             a file, relative to the keyset's directory
//	local:/abs/path        a file, absolute (also local:///abs/path)
//	local://env/VARIABLE   an environment variable
//
// The file or variable holds one line, "stateseal-kek-v1:" followed by the
// key in unpadded base64url, with only spaces, tabs, LF and CR around it. [GenerateLocal] writes a new one. The URL
// names where the key is, never the key: local:stateseal-kek-v1:... (the
// key itself after "local:", which a keyset would then store in the clear)
// is refused, and the error does not repeat it.
func init() { Default.Register(LocalScheme, openLocal) }

// LocalScheme is the URL scheme of the local backend, always registered
// in Default.
const LocalScheme = "local"

const localPrefix = "stateseal-kek-v1:"

// localVersion leads every wrapped key, so the wrapping can change later.
const localVersion = 1

type localKEK struct{ aead cipher.AEAD }

var (
	_ KEK       = (*localKEK)(nil)
	_ io.Closer = (*localKEK)(nil)
)

// Close does nothing: a local KEK holds no connection. It is there so that
// callers close every KEK alike.
func (k *localKEK) Close() error { return nil }

func openLocal(_ context.Context, u *url.URL, o *OpenOptions) (KEK, error) {
	if o == nil {
		o = new(OpenOptions)
	}
	path, env, err := localkek.Source(u, o.Dir)
	if err != nil {
		return nil, err
	}
	if env == "" && o.AbsoluteOnly && !filepath.IsAbs(path) {
		return nil, fmt.Errorf("backends: local KEK URL %s: a keyset outside a file needs an absolute path or local://env/VARIABLE", redact.URL(u.String()))
	}
	var text string
	if env != "" {
		v, ok := os.LookupEnv(env)
		if !ok {
			return nil, fmt.Errorf("backends: local KEK: environment variable %s is not set", env)
		}
		text = v
	} else {
		b, err := os.ReadFile(path)
		if err != nil {
			// The path as redact.URL shows it: a component shaped like a
			// pasted key is accepted as a name but not echoed.
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("backends: local KEK %s: %w", redact.Path(path), err)
		}
		text = string(b)
	}
	// Only space, tab, LF and CR around the line (docs/KEYSET-FORMAT.md,
	// "local"): strings.TrimSpace would also take \v, \f, U+0085 and
	// U+00A0, which JavaScript's trim() and Python's strip() take
	// differently, so one file would be a key to one reader and refused
	// by another.
	key, err := parseLocalKey(strings.Trim(text, " \t\n\r"))
	if err != nil {
		where := redact.Path(path)
		if env != "" {
			where = "$" + env
		}
		return nil, fmt.Errorf("backends: local KEK %s: %w", where, err)
	}
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, err
	}
	return &localKEK{aead: aead}, nil
}

func parseLocalKey(s string) ([]byte, error) {
	enc, ok := strings.CutPrefix(s, localPrefix)
	if !ok {
		return nil, errors.New(`not a stateseal KEK (want "` + localPrefix + `..." on one line)`)
	}
	key, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil || len(key) != chacha20poly1305.KeySize {
		return nil, errors.New("the key is not 32 bytes of unpadded base64url")
	}
	return key, nil
}

// Wrap and Unwrap make no call, but honour a done context as every KEK
// does, so that callers see one behaviour whatever the backend.
func (k *localKEK) Wrap(ctx context.Context, plaintext, ad []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]byte, 1+chacha20poly1305.NonceSizeX, 1+chacha20poly1305.NonceSizeX+len(plaintext)+k.aead.Overhead())
	out[0] = localVersion
	rand.Read(out[1:])
	return k.aead.Seal(out, out[1:], plaintext, ad), nil
}

func (k *localKEK) Unwrap(ctx context.Context, wrapped, ad []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(wrapped) < 1+chacha20poly1305.NonceSizeX+k.aead.Overhead() || wrapped[0] != localVersion {
		return nil, ErrUnwrap
	}
	nonce, ct := wrapped[1:1+chacha20poly1305.NonceSizeX], wrapped[1+chacha20poly1305.NonceSizeX:]
	pt, err := k.aead.Open(nil, nonce, ct, ad)
	if err != nil {
		return nil, ErrUnwrap
	}
	return pt, nil
}

// GenerateLocal writes a new local KEK to path, readable by its owner only.
// It never overwrites: an existing file is an error.
func GenerateLocal(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("backends: creating local KEK: %w", err)
	}
	if _, err := f.WriteString(NewLocalKey() + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("backends: writing local KEK: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("backends: writing local KEK: %w", err)
	}
	return f.Close()
}

// NewLocalKey returns a new local KEK in its text form, for a file or an
// environment variable.
func NewLocalKey() string {
	key := make([]byte, chacha20poly1305.KeySize)
	rand.Read(key)
	return localPrefix + base64.RawURLEncoding.EncodeToString(key)
}
