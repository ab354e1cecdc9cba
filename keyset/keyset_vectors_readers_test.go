package keyset

import (
	"encoding/base64"
	"fmt"
	"github.com/stateseal/stateseal/internal/testkit"
	"maps"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stateseal/stateseal/keyring"
)

// readersVectors are the vectors of issue 46: configured KEK URLs that
// URL libraries of other languages read otherwise (escapes, a bare name,
// the sort, a base a WHATWG parser rewrites), the plainness rules after
// '?' and a '%' before it, a local URL with a query, a scheme no backend
// opens, and a configured KEK whose file is refused. Kept apart from
// lastReadings, like it.
func (g *kvGen) readersVectors(s *kvBuild, single kvSpec, cfg kvConfig) {
	def := keyring.DefaultPolicy()
	sd := g.doc(s)

	// Identity: each document names an identity and is expired, so
	// "stale" says the configured URL's identity is the one named.
	named := func(label, kek string) []byte { return g.doc(g.keyset(label, 2, kek, def, -8*kvDay, single)) }
	identity := func(name, comment, configured, documentKEK string) {
		g.t.Helper()
		g.refuse(name, "stale", comment, named("identity "+name, documentKEK), kvConfigAt(kvNow, configured))
	}
	identity("kek-identity-escaped-characters", "configured ...?v=a%20b+c%2B*'!~(%C3%A9): decoded, a space (from %20 or +) is written +, a + (from %2B) %2B, * ' ! ( ) as %2A %27 %21 %28, ~ as itself, é as %C3%A9: neither URLSearchParams (* raw, ~ escaped) nor encodeURIComponent (!'()* raw, space %20)",
		"awskms://alias/k?v=a%20b+c%2B*'!~(%C3%A9)", "awskms://alias/k?v=a+b+c%2B%2A%27%21~%28%C3%A9%29")
	identity("kek-identity-bare-name", "configured ...?flag&region=r: a piece without '=' is a name with the value \"\", written flag=",
		"awskms://alias/k?flag&region=r", "awskms://alias/k?flag=&region=r")
	identity("kek-identity-sorted-bytes", "configured ...?%F0%9F%98%80=1&%EF%AC%B3=2: names sorted by their decoded bytes, U+FB33 (EF AC B3) before U+1F600 (F0 9F 98 80), though UTF-16 code units (D83D before FB33), as JavaScript's sort compares, order them the other way",
		"awskms://alias/k?%F0%9F%98%80=1&%EF%AC%B3=2", "awskms://alias/k?%EF%AC%B3=2&%F0%9F%98%80=1")
	identity("kek-identity-base-as-written", "configured vault://transit/keys/./k: the base is the identity as written, never normalized; a WHATWG URL parser would remove the ./",
		"vault://transit/keys/./k", "vault://transit/keys/./k")

	// Configurations refused whatever the document.
	config := func(name, comment, kek string) {
		g.t.Helper()
		g.refuse(name, "config", comment, sd, kvConfigAt(kvNow, kek))
	}
	config("config-kek-percent-before-query", "a '%' escape before the configured KEK URL's query (alias/k%41): not plain, never decoded", "awskms://alias/k%41?region=r")
	config("config-kek-fragment-in-query", "a '#' after the configured KEK URL's '?': not plain, a fragment wherever it starts", "awskms://alias/k?region=r#x")
	config("config-kek-del-in-query", "a raw DEL (0x7F) in the configured KEK URL's query: only 0x21 to 0x7E, after '?' too", "awskms://alias/k?region=r\x7f")
	config("config-kek-non-ascii-in-query", "a raw é in the configured KEK URL's query: only printable ASCII, after '?' too", "awskms://alias/k?region=é")
	config("config-kek-local-query", "a configured local KEK URL with a query: a local URL has none, and is refused, not stripped of it", "local:stateseal.kek?x=1")
	config("config-kek-local-bare-question-mark", "a configured local KEK URL ending in a bare '?': refused, since a reader that does not split at '?' would open the file stateseal.kek?", "local:stateseal.kek?")
	config("config-kek-unknown-scheme", "a configured KEK URL whose scheme no backend opens (foo:): refused when configured, before any document is read, not at every load", "foo:stateseal")

	// A configured KEK whose file is refused: the KEK does not open at
	// step 6, which is no refusal of the document.
	text := "\ufeffstateseal-kek-v1:" + base64.RawURLEncoding.EncodeToString(kvDerive("kek "+kvMainKEK, 32)) + "\n"
	c := kvConfigAt(kvNow)
	c.KEKFile = &text
	g.refuse("kek-file-refused-unavailable", "kek_unavailable", "the configured KEK's file starts with a byte-order mark, so it is refused (kek-file-byte-order-mark): the KEK does not open at step 6, which is reported as a KMS that does not answer, not as a refusal of this document (it loads once the file is put right: valid-single-aead)", sd, c)
}

// The wrong readings readersVectors catches, in KEYSET-FORMAT.md's fourth
// table.
func init() {
	kmMutations = append(kmMutations,
		"identity-urlsearchparams", "identity-encode-uri-component", "identity-bare-name-without-equals",
		"identity-sort-utf16", "identity-base-normalized",
		"config-escapes-before-query-accepted", "config-fragment-before-query-only", "config-query-unprintable-accepted",
		"config-local-query-ignored", "config-local-bare-question-dropped", "config-unknown-scheme-accepted",
		"refused-kek-file-unauthenticated",
	)
}

// TestVectorCounts holds the counts KEYSET-FORMAT.md states ("There are N
// vectors: ...") to the vectors file, so that the text and the file are
// changed together.
func TestVectorCounts(t *testing.T) {
	data, err := os.ReadFile("../docs/KEYSET-FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(data)), " ")
	m := regexp.MustCompile("There are ([0-9]+) vectors: ([^;]*); and ([0-9]+) `kek_files`").FindStringSubmatch(text)
	if m == nil {
		t.Fatal(`KEYSET-FORMAT.md states no "There are N vectors: ...; and M ` + "`kek_files`" + `"`)
	}
	f := readKeysetVectors(t)
	got := map[string]int{}
	for _, v := range f.Vectors {
		got[v.Expect]++
	}
	stated := map[string]int{}
	sum := 0
	for _, part := range strings.Split(m[2], ", ") {
		var n int
		var kind string
		if _, err := fmt.Sscanf(part, "%d `%s", &n, &kind); err != nil {
			t.Fatalf("%q: %v", part, err)
		}
		stated[strings.TrimSuffix(kind, "`")] = n
		sum += n
	}
	if total := testkit.Must(strconv.Atoi(m[1])); total != len(f.Vectors) || sum != total {
		t.Errorf("KEYSET-FORMAT.md states %s vectors (its parts sum to %d); the file has %d", m[1], sum, len(f.Vectors))
	}
	if !maps.Equal(stated, got) {
		t.Errorf("KEYSET-FORMAT.md states %v; the file has %v", stated, got)
	}
	if n := testkit.Must(strconv.Atoi(m[3])); n != len(f.KEKFiles) {
		t.Errorf("KEYSET-FORMAT.md states %d kek_files; the file has %d", n, len(f.KEKFiles))
	}
}
