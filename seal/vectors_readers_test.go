package seal

import (
	"encoding/hex"
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

// readersVectors are the vectors of issue 46: what three implementations
// written from docs/FORMAT.md alone could still read two ways. A value of
// 0 given for a maximum TTL, a default TTL or a maximum token length (it
// is unset, as null is), an unset default TTL under a lower maximum, a
// default compared with a fractional maximum, a sealer's fractional
// maximum and its maximum token length below 71, and a maximum TTL of
// 0.5 s. Kept apart from lastReadings, like it.
func (g *gen) readersVectors(macKey keyring.Key, tool Binding) {
	t := g.t
	five := makeVector(t, "", "", []keyring.Key{macKey}, tool, []byte("p8"), sealAt(300_000), g.check)
	openerConfig := func(name, comment string, edit func(*vectorCheck)) {
		v := five
		v.Name, v.Comment, v.Expect, v.Seal, v.AD = name, comment, "config", nil, ""
		edit(&v.Open)
		g.vs = append(g.vs, v)
	}
	sealerConfig := func(name, comment string, edit func(*vectorSeal)) {
		vs := sealAt(300_000)
		edit(&vs)
		vs.Keys = []vectorKey{keyJSON(macKey)}
		g.vs = append(g.vs, vector{Name: name, Comment: comment, Binding: bindJSON(tool), Payload: hex.EncodeToString([]byte("c")), Seal: &vs, Expect: "config"})
	}
	sealed := func(name, comment, payload string, edit func(*vectorSeal), open func(*vectorCheck)) vector {
		vs := sealAt(300_000)
		edit(&vs)
		check := g.check
		if open != nil {
			open(&check)
		}
		v := makeVector(t, name, comment, []keyring.Key{macKey}, tool, []byte(payload), vs, check)
		g.vs = append(g.vs, v)
		return v
	}

	// A maximum TTL of 0.5 s: refused, though rounded down it would be 0,
	// which is unset.
	openerConfig("config-max-ttl-half-second", "the opener's maximum TTL is 0.5 s: refused, since the range (1 s to 2^24 - 1 s) is checked on the value as given; rounded down first it would be 0, which means unset", func(c *vectorCheck) {
		c.MaxTTL = secs(0.5)
	})

	// The default TTL: unset, it follows a lower maximum; set, it is
	// compared with the maximum as used, rounded down.
	sealed("mac-default-ttl-unset-under-max", "the sealer sets no default TTL (null) and a maximum of 299.9 s: its default is min(600 s, 299 s), not a refused configuration; ttl 0 seals for 299 s, which the opener, with the same maximum, opens",
		"u1", func(vs *vectorSeal) { vs.TTLMillis, vs.DefaultTTL, vs.MaxTTL = 0, nil, secs(299.9) }, func(c *vectorCheck) { c.MaxTTL = secs(299.9) })
	sealerConfig("config-default-ttl-over-fractional-max", "the sealer's default TTL is 299.5 s, its maximum 299.9 s: the maximum in use is 299 s, rounded down, and the default would seal for 300 s: refused, though 299.5 <= 299.9 as given", func(vs *vectorSeal) {
		vs.DefaultTTL, vs.MaxTTL = secs(299.5), secs(299.9)
	})
	sealed("mac-seal-fractional-max-ttl", "the sealer's maximum TTL is 299.9 s and its default 60 s: a ttl of 2 h seals for 299 s, the maximum rounded down (not 300 s, to the nearest)",
		"u2", func(vs *vectorSeal) { vs.TTLMillis, vs.DefaultTTL, vs.MaxTTL = 7_200_000, secs(60), secs(299.9) }, nil)
	sealerConfig("config-seal-max-token-len-70", "the sealer's maximum token length is 70, which cannot hold an empty AEAD token (71): refused when configured, as the opener's is, whatever it seals", func(vs *vectorSeal) {
		vs.MaxTokenLen = 70
	})

	// 0 is unset, as null is: the default, never a bound of 0, never no
	// bound, never refused (the skew alone reads 0 as a value: no skew).
	long := sealed("", "", "z1", func(vs *vectorSeal) { vs.TTLMillis = 3_601_000 }, nil)
	g.vs = g.vs[:len(g.vs)-1]
	g.bad(long, "mac-zero-max-ttl-is-default", "invalid", "authentic, lifetime 3601 s; the opener's maximum TTL is given as 0, which is unset: the default 3600 s holds (not refused, not unbounded), and the lifetime is over it", func(v *vector) {
		v.Open.MaxTTL = secs(0)
	})
	sealed("mac-seal-zero-max-ttl", "the sealer's maximum TTL is given as 0, which is unset: a ttl of 2 h seals for 3600 s, the default maximum",
		"z2", func(vs *vectorSeal) { vs.TTLMillis, vs.MaxTTL = 7_200_000, secs(0) }, nil)
	sealed("mac-zero-default-ttl", "the sealer's default TTL is given as 0, which is unset: ttl 0 seals for 600 s (not refused as under 1 s)",
		"z3", func(vs *vectorSeal) { vs.TTLMillis, vs.DefaultTTL = 0, secs(0) }, nil)
	sealed("mac-seal-zero-max-token-len", "the sealer's and the opener's maximum token length is given as 0, which is unset: 65 536, so a 70-character token seals and opens (not refused as under 71)",
		"z4", func(vs *vectorSeal) { vs.MaxTokenLen = 0 }, func(c *vectorCheck) { c.MaxTokenLen = 0 })
	g.bad(five, "zero-max-token-len-too-large", "too_large", "65 537 characters against the opener's maximum token length given as 0, which is unset: the default 65 536 holds (not no bound: unbounded, a length of 1 modulo 4 would be malformed)", func(v *vector) {
		v.Token, v.Open.MaxTokenLen = strings.Repeat("A", DefaultMaxTokenLen+1), 0
	})
}

// TestVectorCounts holds the counts FORMAT.md states ("There are N
// vectors: ...") to the vectors file, so that the text and the file are
// changed together.
func TestVectorCounts(t *testing.T) {
	data, err := os.ReadFile("../docs/FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(data)), " ")
	m := regexp.MustCompile("There are ([0-9]+) vectors: ([^;]*); and ([0-9]+) `args_vectors`: ([0-9]+) accepted, ([0-9]+) refused and ([0-9]+) `config`").FindStringSubmatch(text)
	if m == nil {
		t.Fatal(`FORMAT.md states no "There are N vectors: ...; and M ` + "`args_vectors`" + `: ..."`)
	}
	vf := readVectors(t)
	got := map[string]int{}
	for _, v := range vf.Vectors {
		got[v.Expect]++
	}
	stated, sum := map[string]int{}, 0
	for _, part := range strings.Split(m[2], ", ") {
		var n int
		var kind string
		if _, err := fmt.Sscanf(part, "%d `%s", &n, &kind); err != nil {
			t.Fatalf("%q: %v", part, err)
		}
		stated[strings.TrimSuffix(kind, "`")] = n
		sum += n
	}
	if total := testkit.Must(strconv.Atoi(m[1])); total != len(vf.Vectors) || sum != total {
		t.Errorf("FORMAT.md states %s vectors (its parts sum to %d); the file has %d", m[1], sum, len(vf.Vectors))
	}
	if !maps.Equal(stated, got) {
		t.Errorf("FORMAT.md states %v; the file has %v", stated, got)
	}
	args := [3]int{}
	for _, v := range vf.ArgsVectors {
		switch v.Refused {
		case "":
			args[0]++
		case "config":
			args[2]++
		default:
			args[1]++
		}
	}
	want := [3]int{}
	for i := range want {
		want[i] = testkit.Must(strconv.Atoi(m[4+i]))
	}
	if n := testkit.Must(strconv.Atoi(m[3])); n != len(vf.ArgsVectors) || args != want {
		t.Errorf("FORMAT.md states %s args_vectors, %v accepted, refused, config; the file has %d, %v", m[3], want, len(vf.ArgsVectors), args)
	}
}
