package seal

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/crypto/chacha20poly1305"
)

// model opens a vector the way docs/FORMAT.md says, written from the
// document with the standard library, not from this package. Given a
// mutation (a deliberately wrong reading of one rule) it applies that
// reading instead. It returns the expectation it reaches and the payload.
func model(t *testing.T, v vector, mut string) (string, []byte) {
	m := func(name string) bool { return mut == name }
	tok := v.Token
	// 1. Length, in bytes of the token as sent.
	n := len(tok)
	if m("length-in-characters") {
		n = utf8.RuneCountInString(tok)
	}
	if n > v.Open.MaxTokenLen || m("length-inclusive") && n == v.Open.MaxTokenLen {
		return "too_large", nil
	}
	// 2. Strict base64url.
	if m("standard-alphabet") {
		tok = strings.NewReplacer("+", "-", "/", "_").Replace(tok)
	}
	if m("padding-accepted") {
		tok = strings.TrimRight(tok, "=")
	}
	enc := base64.RawURLEncoding.Strict()
	if m("trailing-bits-ignored") {
		enc = base64.RawURLEncoding
	}
	// Go's decoders skip line breaks even when strict; the format does not.
	if strings.ContainsAny(tok, "\r\n") && !m("line-breaks-skipped") {
		return "malformed", nil
	}
	raw, err := enc.DecodeString(tok)
	if err != nil {
		return "malformed", nil
	}
	id := hex.EncodeToString(raw[1:min(5, len(raw))])
	keyOK := func() bool {
		if id != v.Key.ID {
			return false
		}
		switch v.Key.State {
		case "retired":
			return m("retired-opens")
		case "decrypt-only":
			return !m("decrypt-only-refused")
		}
		return !(m("pending-refused") && v.Key.Activation > v.Open.Now)
	}
	if m("key-before-version") && len(raw) >= 5 && !keyOK() {
		return "unknown_key", nil
	}
	// 3. Version and minimum size.
	over := map[byte]int{1: 45, 2: 53}[raw[0]]
	if m("minimum-is-header-plus-overhead") {
		over += 13
	}
	if len(raw) < 13 || over == 0 || len(raw) < over {
		return "malformed", nil
	}
	// 4. Key id.
	if !keyOK() {
		return "unknown_key", nil
	}
	// 5. The key's kind, not the token's.
	alg := v.Key.Algorithm
	if m("kind-from-token") {
		alg = map[byte]string{1: "mac", 2: "aead"}[raw[0]]
	}
	if alg != map[byte]string{1: "mac", 2: "aead"}[raw[0]] {
		return "invalid", nil
	}
	times := binary.BigEndian.Uint64(raw[5:13])
	iat, life := int64(times>>24), int64(times&(1<<24-1))
	timeCheck := func() string {
		switch {
		case life > v.Open.MaxTTL && !m("no-lifetime-check"), m("lifetime-at-max-refused") && life >= v.Open.MaxTTL:
			return "invalid"
		case iat-v.Open.Skew > v.Open.Now && !m("no-skew-not-yet-valid"), m("no-skew-not-yet-valid") && iat > v.Open.Now:
			return "not_yet_valid"
		case m("no-skew-expiry") && v.Open.Now >= iat+life,
			m("expiry-inclusive") && v.Open.Now > iat+life+v.Open.Skew,
			!m("no-skew-expiry") && !m("expiry-inclusive") && v.Open.Now >= iat+life+v.Open.Skew:
			return "expired"
		}
		return ""
	}
	if m("time-before-authentication") {
		if r := timeCheck(); r != "" {
			return r, nil
		}
	}
	// 6. Authentication under header ‖ binding.
	ad := modelBinding(t, v, mut)
	if !m("header-not-in-ad") {
		ad = append(append([]byte(nil), raw[:13]...), ad...)
	}
	key := unhex(t, v.Key.Material)
	var payload []byte
	if alg == "mac" {
		body, tag := raw[13:len(raw)-32], raw[len(raw)-32:]
		h := hmac.New(sha256.New, key)
		h.Write(ad)
		h.Write(body)
		if !hmac.Equal(h.Sum(nil), tag) {
			return "invalid", nil
		}
		payload = body
	} else {
		a, _ := chacha20poly1305.NewX(key)
		if payload, err = a.Open(nil, raw[13:37], raw[37:], ad); err != nil {
			return "invalid", nil
		}
	}
	if r := timeCheck(); r != "" {
		return r, nil
	}
	return "ok", payload
}

func modelBinding(t *testing.T, v vector, mut string) []byte {
	digest := unhex(t, v.Binding.ArgsDigest)
	if mut == "digest-as-hex-text" {
		digest = []byte(v.Binding.ArgsDigest)
	}
	fields := [][]byte{[]byte(v.Binding.Method), []byte(v.Binding.Target), []byte(v.Binding.Principal),
		[]byte(v.Binding.Audience), []byte(v.Binding.Session), digest, unhex(t, v.Binding.Context)}
	var b []byte
	if mut != "binding-without-count" {
		b = binary.AppendUvarint(b, 7)
	}
	for _, f := range fields {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

// mutationTable reads a table of FORMAT.md whose rows are
// | `mutation` | rule | `vector` |, after the heading that starts with title.
func mutationTable(t *testing.T, title string) map[string]string {
	data, err := os.ReadFile("../docs/FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i := strings.Index(doc, "\n### "+title)
	if i < 0 {
		t.Fatalf("FORMAT.md has no section %q", title)
	}
	doc = doc[i+1:]
	if j := strings.Index(doc[4:], "\n#"); j >= 0 {
		doc = doc[:j+4]
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\|[^|]*\\| `([a-z0-9-]+)` \\|")
	out := map[string]string{}
	for _, r := range row.FindAllStringSubmatch(doc, -1) {
		out[r[1]] = r[2]
	}
	if len(out) == 0 {
		t.Fatalf("FORMAT.md section %q has no table rows", title)
	}
	return out
}

// TestTokenMutations: the model agrees with every vector, and each wrong
// reading FORMAT.md lists fails the vector it names there.
func TestTokenMutations(t *testing.T) {
	vf := readVectors(t)
	for _, v := range vf.Vectors {
		got, payload := model(t, v, "")
		if got != v.Expect || got == "ok" && !bytes.Equal(payload, unhex(t, v.Payload)) {
			t.Errorf("the model opens %s to %s, the vector says %s", v.Name, got, v.Expect)
		}
	}
	table := mutationTable(t, "Token rules and the vectors that pin them")
	for _, mut := range tokenMutations {
		catcher, ok := table[mut]
		if !ok {
			t.Errorf("FORMAT.md does not list the wrong reading %q", mut)
			continue
		}
		var caught []string
		for _, v := range vf.Vectors {
			if got, payload := model(t, v, mut); got != v.Expect || got == "ok" && !bytes.Equal(payload, unhex(t, v.Payload)) {
				caught = append(caught, v.Name)
			}
		}
		if !slices.Contains(caught, catcher) {
			t.Errorf("%s: FORMAT.md names %s, but the vectors that fail are %v", mut, catcher, caught)
		}
	}
	for mut := range table {
		if !slices.Contains(tokenMutations, mut) {
			t.Errorf("FORMAT.md lists %q, which the test does not try", mut)
		}
	}
}

var tokenMutations = []string{
	"length-in-characters", "length-inclusive", "standard-alphabet", "padding-accepted",
	"trailing-bits-ignored", "line-breaks-skipped", "key-before-version", "minimum-is-header-plus-overhead",
	"retired-opens", "decrypt-only-refused", "pending-refused", "kind-from-token",
	"header-not-in-ad", "binding-without-count", "digest-as-hex-text", "time-before-authentication",
	"no-lifetime-check", "lifetime-at-max-refused", "no-skew-not-yet-valid", "no-skew-expiry", "expiry-inclusive",
}
