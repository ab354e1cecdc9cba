package canonjson

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// A Mutation is a deliberately wrong reading of one rule of
// docs/FORMAT.md, for the test that requires each to fail at least one
// test vector (a rule whose wrong reading passes every vector is missing a
// vector). Only tests set Mutations; its zero value is the specification.
type Mutation uint32

// Mutations in force. Never set outside tests.
var Mutations Mutation

// The wrong readings, named as FORMAT.md lists them.
const (
	MutSizeAfterTrim       Mutation = 1 << iota // rule 1: size measured after trimming
	MutNoSizeLimit                              // rule 1: no size limit
	MutTrimUnicodeSpace                         // rule 2: bytes.TrimSpace
	MutNullRefused                              // rule 2: null is not the empty object
	MutLoneSurrogates                           // rule 4: lone surrogate escapes accepted
	MutNoDepthLimit                             // rule 5: no depth limit
	MutDepthFromZero                            // rule 5: the arguments object is depth 0
	MutNoDuplicateCheck                         // rule 6: duplicate names accepted
	MutNoFoldCheck                              // rule 7: no case-folding check
	MutASCIIFold                                // rule 7: ASCII case folding only
	MutLowerFold                                // rule 7: unicode.ToLower instead of simple folding
	MutFoldKeptOnly                             // rule 7: names left out by rule 9 not compared
	MutNoNumberCheck                            // rule 8: any number accepted
	MutIntegerNumberCheck                       // rule 8: only integers checked
	MutExcludeAtAnyDepth                        // rule 9: protocol members removed at every depth
	MutExcludeIgnoringCase                      // rule 9: protocol names compared case-insensitively
	MutExcludeRawName                           // rule 9: names compared before unescaping
)

// MutationNames maps each wrong reading to its name in FORMAT.md.
var MutationNames = map[Mutation]string{
	MutSizeAfterTrim:       "size-after-trim",
	MutNoSizeLimit:         "no-size-limit",
	MutTrimUnicodeSpace:    "trim-unicode-space",
	MutNullRefused:         "null-refused",
	MutLoneSurrogates:      "lone-surrogates",
	MutNoDepthLimit:        "no-depth-limit",
	MutDepthFromZero:       "depth-from-zero",
	MutNoDuplicateCheck:    "no-duplicate-check",
	MutNoFoldCheck:         "no-fold-check",
	MutASCIIFold:           "ascii-fold",
	MutLowerFold:           "lower-fold",
	MutFoldKeptOnly:        "fold-kept-only",
	MutNoNumberCheck:       "no-number-check",
	MutIntegerNumberCheck:  "integer-number-check",
	MutExcludeAtAnyDepth:   "exclude-at-any-depth",
	MutExcludeIgnoringCase: "exclude-ignoring-case",
	MutExcludeRawName:      "exclude-raw-name",
}

func mutated(m Mutation) bool { return Mutations&m != 0 }

// decoderOptions are the jsontext options a mutation relaxes.
func decoderOptions() []jsontext.Options {
	var o []jsontext.Options
	if mutated(MutNoDuplicateCheck) {
		o = append(o, jsontext.AllowDuplicateNames(true))
	}
	if mutated(MutLoneSurrogates) {
		o = append(o, jsontext.AllowInvalidUTF8(true))
	}
	return o
}

// mutatedFold folds name the wrong ways the mutations read rule 7.
func mutatedFold(dst, name []byte) []byte {
	switch {
	case mutated(MutASCIIFold):
		return append(dst, bytes.ToUpper(asciiOnly(name))...)
	case mutated(MutLowerFold):
		return append(dst, strings.ToLower(string(name))...)
	}
	return appendFolded(dst, name)
}

func asciiOnly(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

func mutDepth() int {
	if mutated(MutDepthFromZero) {
		return 1
	}
	return 0
}

// appendMutated is Append under the mutations that change its first steps.
func appendMutated(dst, args []byte, lim Limits, exclude []string) ([]byte, error) {
	if len(args) > lim.MaxBytes && !mutated(MutNoSizeLimit|MutSizeAfterTrim) {
		return dst, ErrTooLarge
	}
	if mutated(MutTrimUnicodeSpace) {
		args = bytes.TrimSpace(args)
	} else {
		args = bytes.Trim(args, " \t\r\n")
	}
	if mutated(MutSizeAfterTrim) && len(args) > lim.MaxBytes {
		return dst, ErrTooLarge
	}
	if len(args) == 0 || string(args) == "null" && !mutated(MutNullRefused) {
		return append(dst, "{}"...), nil
	}
	return appendObject(dst, args, lim, exclude)
}

// mutatedName is walker.name under the mutations of rules 7 and 9.
func (w *walker) mutatedName(quoted []byte, depth int, exclude []string) (bool, error) {
	name := w.tmp
	if mutated(MutExcludeRawName) {
		name = quoted[1 : len(quoted)-1]
	}
	skip := false
	if depth == 1 || mutated(MutExcludeAtAnyDepth) {
		for _, e := range exclude {
			if string(name) == e || mutated(MutExcludeIgnoringCase) && strings.EqualFold(string(name), e) {
				skip = true
			}
		}
	}
	if !(skip && mutated(MutFoldKeptOnly)) {
		w.addName(w.tmp)
	}
	if depth == 1 {
		end := w.dec.InputOffset()
		w.spans = append(w.spans, span{start: end - int64(len(quoted)), end: -1})
	}
	if skip && depth > 1 {
		return false, nil // stripDeep removes it from the canonical text
	}
	return skip, nil
}

// stripDeep removes the protocol members at every depth, for
// MutExcludeAtAnyDepth.
func stripDeep(canon []byte, exclude []string) []byte {
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return canon
	}
	var strip func(any)
	strip = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, e := range exclude {
				delete(v, e)
			}
			for _, x := range v {
				strip(x)
			}
		case []any:
			for _, x := range v {
				strip(x)
			}
		}
	}
	strip(v)
	out, _ := json.Marshal(v)
	out, _ = jsontext.AppendFormat(nil, out, canonical...)
	return out
}
