package fuzz

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/stateseal/stateseal/internal/envelope"
)

// FuzzDecode holds the token decoder (AVX2 base64url) to the reference,
// encoding/base64's strict RawURLEncoding with line breaks rejected, on any
// input: the same verdict and the same bytes.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"", "AAAA", "AQ", "AR", "A/B+", "AAA\nA", "____",
		"-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_/"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		want, werr := base64.RawURLEncoding.Strict().DecodeString(string(src))
		if bytes.ContainsAny(src, "\r\n") {
			werr = envelope.ErrMalformed
		}
		got, err := envelope.AppendDecode([]byte("x"), src)
		if (err == nil) != (werr == nil) {
			t.Fatalf("decode %q: error %v, reference %v", src, err, werr)
		}
		if err == nil && !bytes.Equal(got[1:], want) {
			t.Fatalf("decode %q: %x, reference %x", src, got[1:], want)
		}
		if err == nil && !bytes.Equal(envelope.AppendEncode(nil, want), src) {
			t.Fatalf("decode %q accepted a non-canonical encoding", src)
		}
	})
}
