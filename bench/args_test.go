package bench

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/stateseal/stateseal/seal"
)

// argsInputs are the inputs of BenchmarkArgsDigest: a typical tool call,
// a 150 KB object of mixed members, and a 400 KB array of zeros.
func argsInputs() []struct {
	name string
	in   []byte
} {
	var big strings.Builder
	big.WriteString(`{"items":[`)
	for i := 0; big.Len() < 150_000; i++ {
		if i > 0 {
			big.WriteByte(',')
		}
		fmt.Fprintf(&big, `{"id":%d,"name":"item number %d","price":%d.25,"tags":["a","b","c"],"ok":true,"note":null}`, i, i, i%1000)
	}
	big.WriteString(`],"requestState":"abc","_meta":{"progressToken":1}}`)
	zeros := `{"z":[` + strings.Repeat("0,", 200_000) + `0]}`
	return []struct {
		name string
		in   []byte
	}{
		{"108B", []byte(`{"from":"BER","to":"LIS","when":{"day":3,"flex":[1,2.5,true,null]},"note":"caf\u00e9 <a>","seats":2}`)},
		{"150KB", []byte(big.String())},
		{"400KB-zeros", []byte(zeros)},
	}
}

// BenchmarkArgsDigest measures seal.ArgsDigest against the RFC 8785
// implementation it replaced (gowebpki/jcs, plus SHA-256), on the same
// inputs in the same run. Target: the 150 KB object at >= 50 MB/s with at
// most 16 allocations.
func BenchmarkArgsDigest(b *testing.B) {
	for _, in := range argsInputs() {
		b.Run("stateseal/"+in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := seal.ArgsDigest(in.in); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("jcs/"+in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.in)))
			b.ReportAllocs()
			for b.Loop() {
				c, err := jcs.Transform(in.in)
				if err != nil {
					b.Fatal(err)
				}
				sha256.Sum256(c)
			}
		})
	}
}
