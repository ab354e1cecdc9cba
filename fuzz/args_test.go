package fuzz

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stateseal/stateseal/seal"
)

// FuzzArgsDigest: for any arguments object ArgsDigest accepts, the same
// value re-serialized with other member order and whitespace has the same
// digest.
func FuzzArgsDigest(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1,"b":[true,null,"x"]}`, `{"z":{"y":1.5e3,"x":-0},"_meta":{"k":1}}`,
		`{"s":"\u00e9\ud83d\ude00<>&","n":1e-7,"big":12345678901234567890}`,
		`{"inputResponses":{},"requestState":"t","keep":0.1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		want, err := seal.ArgsDigest(args)
		if err != nil {
			return
		}
		if t := bytes.Trim(args, " \t\r\n"); len(t) == 0 || string(t) == "null" {
			return // digested as {}, which the seal tests check
		}
		var v any
		if err := json.Unmarshal(args, &v); err != nil {
			t.Fatalf("ArgsDigest accepted what encoding/json rejects: %v", err)
		}
		// encoding/json writes members sorted, which reorders them;
		// indenting changes the whitespace.
		again, err := json.MarshalIndent(v, " ", "\t")
		if err != nil {
			t.Fatal(err)
		}
		got, err := seal.ArgsDigest(again)
		if err != nil {
			t.Fatalf("re-serialized arguments rejected: %v\n%s", err, again)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("digest changed under re-serialization:\n%s\n%s", args, again)
		}
	})
}
