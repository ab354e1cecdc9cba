package seal

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	"github.com/stateseal/stateseal/internal/canonjson"
)

// Default bounds of the arguments ArgsDigest accepts, and the largest
// depth bound ArgsOptions may set.
const (
	DefaultMaxArgsBytes = 4 << 20 // 4 MiB
	DefaultMaxArgsDepth = 64
	MaxArgsDepthLimit   = canonjson.MaxDepthLimit // 10,000
)

// ErrArguments reports arguments that ArgsDigest refuses: not a JSON
// object, invalid JSON or UTF-8, duplicate member names (exact, or equal
// under case folding), a number a double cannot hold exactly, or input past
// the size or depth bound. The wrapped message says which.
var ErrArguments = errors.New("seal: arguments refused")

// Members of the arguments object that the digest leaves out: they carry
// protocol metadata and the input-required round itself, which differ
// between the request that sealed a token and the retry that opens it.
var excludedArgs = []string{"_meta", "inputResponses", "requestState"}

// ArgsOptions bound the arguments a digest accepts. The zero value means
// DefaultMaxArgsBytes and DefaultMaxArgsDepth.
type ArgsOptions struct {
	// MaxBytes bounds the length of the arguments as received. 0 means
	// DefaultMaxArgsBytes; a negative bound makes Digest fail with another
	// error than ErrArguments.
	MaxBytes int
	// MaxDepth bounds the nesting of objects and arrays; the arguments
	// object itself is depth 1, and an empty array or object counts as a
	// level. 0 means DefaultMaxArgsDepth. It is at most MaxArgsDepthLimit:
	// Digest fails with another error than ErrArguments if it is larger
	// or negative.
	MaxDepth int
}

// ArgsDigest is ArgsOptions{}.Digest: the digest under the default bounds.
func ArgsDigest(args []byte) ([]byte, error) { return ArgsOptions{}.Digest(args) }

// Digest returns the SHA-256 digest of a JSON arguments object in the
// canonical form of RFC 8785 (JSON Canonicalization Scheme), leaving out
// the top-level members "_meta", "inputResponses" and "requestState",
// whose values must still pass every rule below. Key
// order and insignificant whitespace do not change the digest; any change
// of a value does. Empty input, JSON whitespace and null digest as {}.
//
// The digest vouches for what a Go handler will read, so input that
// parsers could read two ways is refused with ErrArguments rather than
// digested: invalid JSON or UTF-8, a value other than an object, duplicate
// member names, member names of one object that are equal under the case
// folding encoding/json applies ("Amount" and "amount"), and numbers whose
// text is not exactly the decimal RFC 8785 writes for them
// (9007199254740993, which a double rounds, but not 1.0 or 1e2). Input
// longer than MaxBytes or nested deeper than MaxDepth is refused too.
func (o ArgsOptions) Digest(args []byte) ([]byte, error) {
	return o.AppendDigest(nil, args)
}

// AppendDigest is Digest appending the 32-byte digest to dst. With enough
// capacity in dst it allocates nothing for the result. dst may overlap
// args in any way (args[:0] reuses its storage): the digest is computed
// whole before it is appended.
func (o ArgsOptions) AppendDigest(dst, args []byte) ([]byte, error) {
	sum, err := o.sum(args)
	if err != nil {
		return dst, err
	}
	return append(dst, sum[:]...), nil
}

func (o ArgsOptions) sum(args []byte) (sum [sha256.Size]byte, err error) {
	lim := canonjson.Limits{MaxBytes: o.MaxBytes, MaxDepth: o.MaxDepth}
	// A bound outside its range is a configuration error, never clamped:
	// every implementation must refuse the same inputs (docs/FORMAT.md).
	if lim.MaxBytes < 0 || lim.MaxDepth < 0 || lim.MaxDepth > MaxArgsDepthLimit {
		return sum, fmt.Errorf("seal: ArgsOptions bounds %d bytes, depth %d: outside [0, ...] and [0, %d]", lim.MaxBytes, lim.MaxDepth, MaxArgsDepthLimit)
	}
	if lim.MaxBytes == 0 {
		lim.MaxBytes = DefaultMaxArgsBytes
	}
	if lim.MaxDepth == 0 {
		lim.MaxDepth = DefaultMaxArgsDepth
	}
	buf := canonBufs.Get().(*[]byte)
	defer canonBufs.Put(buf)
	canon, err := canonjson.Append((*buf)[:0], args, lim, excludedArgs)
	if err != nil {
		return sum, fmt.Errorf("%w: %w", ErrArguments, err)
	}
	*buf = canon
	return sha256.Sum256(canon), nil
}

// canonBufs holds the canonical text between calls: a digest then costs no
// allocation for it, whatever the size of the arguments.
var canonBufs = sync.Pool{New: func() any { return new([]byte) }}
