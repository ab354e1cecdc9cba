package seal

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stateseal/stateseal/internal/testkit"
	"golang.org/x/crypto/chacha20poly1305"
)

// model opens a vector the way docs/FORMAT.md says, written from the
// document with the standard library, not from this package. Given a
// mutation (a deliberately wrong reading of one rule) it applies that
// reading instead. It returns the expectation it reaches and the payload.
func model(t *testing.T, v vector, mut string) (string, []byte) {
	m := func(name string) bool { return mut == name }
	if len(v.Binding.lone) > 0 && m("lone-surrogate-refused-first") {
		return "invalid", nil // before any step, rather than at step 6
	}
	tok := v.Token
	// 1. Length, in bytes of the token as sent.
	n := len(tok)
	if m("length-in-characters") {
		n = utf8.RuneCountInString(tok)
	}
	if _, err := base64.RawURLEncoding.Strict().DecodeString(tok); m("encoding-before-length") && err != nil {
		return "malformed", nil
	}
	if maxLen := modelTokenLen(v.Open.MaxTokenLen, mut); n > maxLen || m("length-inclusive") && n == maxLen {
		return "too_large", nil
	}
	// 2. Strict base64url.
	if m("whitespace-trimmed") {
		tok = strings.TrimSpace(tok)
	}
	if m("standard-alphabet") {
		tok = strings.NewReplacer("+", "-", "/", "_").Replace(tok)
	}
	if m("padding-accepted") {
		tok = strings.TrimRight(tok, "=")
	}
	if m("dangling-character-ignored") && len(tok)%4 == 1 {
		tok = tok[:len(tok)-1]
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
	// now, in whole seconds.
	now := floorDiv(v.Open.NowMillis, 1000)
	switch {
	case m("open-now-ceil"):
		now = -floorDiv(-v.Open.NowMillis, 1000)
	case m("open-now-rounded"):
		now = floorDiv(v.Open.NowMillis+500, 1000)
	case m("open-now-truncated"):
		now = v.Open.NowMillis / 1000
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
		return !(m("pending-refused") && v.Key.Activation > now)
	}
	if m("key-id-zero-malformed") && len(raw) >= 5 && id == "00000000" {
		return "malformed", nil
	}
	if (m("key-before-version") && len(raw) >= 5 || m("minimum-after-key") && len(raw) >= 13) && !keyOK() {
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
	maxTTL := modelLimit(v.Open.MaxTTL, 3600, v.Open.Policy, false, mut)
	skew := modelLimit(v.Open.Skew, 30, v.Open.Policy, true, mut)
	times := binary.BigEndian.Uint64(raw[5:13])
	iat, life := int64(times>>24), int64(times&(1<<24-1))
	lifetimeCheck := func() string {
		if life > maxTTL && !m("no-lifetime-check") || m("lifetime-at-max-refused") && life >= maxTTL ||
			m("lifetime-zero-refused") && life == 0 {
			return "invalid"
		}
		return ""
	}
	clockCheck := func() string {
		switch {
		case iat-skew > now && !m("no-skew-not-yet-valid"), m("no-skew-not-yet-valid") && iat > now:
			return "not_yet_valid"
		case m("no-skew-expiry") && now >= iat+life,
			m("expiry-inclusive") && now > iat+life+skew,
			!m("no-skew-expiry") && !m("expiry-inclusive") && now >= iat+life+skew:
			return "expired"
		}
		return ""
	}
	timeCheck := func() string {
		if m("lifetime-after-time") {
			return cmp.Or(clockCheck(), lifetimeCheck())
		}
		return cmp.Or(lifetimeCheck(), clockCheck())
	}
	if m("time-before-authentication") {
		if r := timeCheck(); r != "" {
			return r, nil
		}
	}
	// 6. Authentication under header ‖ binding.
	if n := len(v.Binding.ArgsDigest) / 2; m("digest-must-be-32") && n != 0 && n != 32 {
		return "invalid", nil
	}
	ad, encoded := modelAD(t, v, raw[:13], mut)
	if !encoded {
		// A binding string with a lone surrogate has no UTF-8: no token
		// is authentic under it.
		return "invalid", nil
	}
	if v.AD != "" && mut == "" && hex.EncodeToString(ad) != v.AD {
		t.Errorf("%s: the model's associated data %x, the vector's %s", v.Name, ad, v.AD)
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
		a := testkit.Must(chacha20poly1305.NewX(key))
		if payload, err = a.Open(nil, raw[13:37], raw[37:], ad); err != nil {
			return "invalid", nil
		}
	}
	if r := timeCheck(); r != "" {
		return r, nil
	}
	return "ok", payload
}

// modelLimit is the maximum TTL or the skew in force: the keyset's policy
// value, or the smaller of it and the server's where the server sets one;
// without a keyset the server's, or the default.
func modelLimit(given *float64, def int64, p *vectorPolicy, skew bool, mut string) int64 {
	m := func(name string) bool { return mut == name }
	// A duration given finer than seconds is rounded down.
	var server *int64
	switch {
	case given != nil && *given == 0 && !skew && m("zero-max-ttl-unbounded"):
		return math.MaxInt64 / 2
	case given != nil && *given == 0 && !skew:
		// A maximum TTL of 0 is unset, as null is; a skew of 0 is no skew.
		given = nil
	}
	if given != nil {
		n := int64(math.Floor(*given))
		switch {
		case m("durations-rounded-up"):
			n = int64(math.Ceil(*given))
		case m("durations-rounded-to-nearest"):
			n = int64(math.Round(*given))
		}
		server = &n
	}
	if server != nil && skew && *server == 0 && m("server-zero-skew-as-unset") {
		server = nil
	}
	if p == nil && server != nil && skew && *server == 0 && m("zero-skew-as-unset-without-keyset") {
		server = nil
	}
	if p == nil || m("policy-ignored") {
		if server == nil {
			return def
		}
		return *server
	}
	pv := p.MaxTTL
	if skew {
		pv = p.Skew
		if pv == 0 && m("policy-skew-zero-as-default") {
			pv = def
		}
	}
	switch {
	case server == nil && m("policy-default-as-server-value"):
		return min(def, pv)
	case server == nil, m("policy-overrides-server"):
		return pv
	case m("policy-server-wins"):
		return *server
	case m("policy-larger-wins"):
		return max(*server, pv)
	}
	return min(*server, pv)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// modelConfigRefused reports whether the vector's sealer (if it has one)
// or opener is refused when configured: every value in its range, never
// clamped (FORMAT.md, "Opening" and "Sealing"). A maximum TTL, a default
// TTL or a maximum token length of 0 is unset, as null is.
func modelConfigRefused(v vector, mut string) bool {
	m := func(name string) bool { return mut == name }
	// The range is checked on the value as given, before it is rounded.
	given := func(p *float64) *float64 {
		if p != nil && m("durations-range-after-rounding") {
			f := math.Floor(*p)
			return &f
		}
		return p
	}
	maxTTLOK := func(p *float64) bool {
		p = given(p)
		if p != nil && *p < 1 && m("max-ttl-range-after-rounding") {
			f := math.Floor(*p)
			p = &f
		}
		switch {
		case p == nil, *p == 0 && !m("zero-max-ttl-refused"):
			return true
		}
		return 1 <= *p && *p <= 1<<24-1 || m("max-ttl-clamped") && *p > 1<<24-1
	}
	lenOK := func(n int) bool {
		return n >= 71 || n == 0 && !m("zero-token-len-refused") || m("token-len-under-71-accepted")
	}
	// The maximum TTL a default TTL is compared with: the server's, rounded
	// down, or 3600 s if it sets none, keyset or not.
	maxForDefault := func(p *float64, policy *vectorPolicy) float64 {
		switch {
		case p != nil && *p != 0 && m("default-ttl-against-max-as-given"):
			return *p
		case p != nil && *p != 0:
			return math.Floor(*p)
		case policy != nil && m("default-ttl-checked-against-keyset"):
			return float64(policy.MaxTTL)
		}
		return 3600
	}
	// An unset default TTL is 600 s, or the maximum if that is lower.
	defaultOK := func(d *float64, max float64) bool {
		if d == nil || *d == 0 {
			if d != nil && m("zero-default-ttl-refused") {
				return false
			}
			return !m("unset-default-ttl-refused") || 600 <= max
		}
		return *d >= 1 && (*d <= max || m("default-ttl-capped-when-configured"))
	}
	if vs := v.Seal; vs != nil {
		sealLenOK := lenOK(vs.MaxTokenLen) || m("sealer-token-len-unchecked") && vs.MaxTokenLen > 0
		if !maxTTLOK(vs.MaxTTL) || !defaultOK(vs.DefaultTTL, maxForDefault(vs.MaxTTL, vs.Policy)) || !sealLenOK {
			return true
		}
	}
	if c := v.Open; c.MaxTokenLen != 0 || c.MaxTTL != nil || c.Skew != nil { // a vector without an opener has none
		s := given(c.Skew)
		skewOK := s == nil || 0 <= *s && *s <= 600 || m("skew-clamped") && *s > 600 || m("negative-skew-as-none") && *s < 0
		// The opener sets no default TTL.
		return !maxTTLOK(c.MaxTTL) || !skewOK || !lenOK(c.MaxTokenLen) || !defaultOK(nil, maxForDefault(c.MaxTTL, c.Policy))
	}
	return false
}

// modelTokenLen is a maximum token length in force: 0 is unset, the
// default.
func modelTokenLen(n int, mut string) int {
	if n == 0 && mut == "zero-token-len-unbounded" {
		return math.MaxInt
	}
	if n == 0 {
		return 65536
	}
	return n
}

// modelSeal seals a vector's payload the way FORMAT.md's "Sealing" says,
// with the sealer settings and keyset of its seal field. It returns the
// token, or ok false if the sealer refuses.
func modelSeal(t *testing.T, v vector, mut string) (token string, ok bool) {
	m := func(name string) bool { return mut == name }
	vs := v.Seal
	payload := unhex(t, v.Payload)
	// The lifetime: a negative TTL is refused, 0 is the default, above
	// the maximum is the maximum; whole seconds, rounded up.
	ttl := vs.TTLMillis
	switch {
	case ttl < 0 && m("negative-ttl-as-default"):
		ttl = 0
	case ttl < 0 && m("negative-ttl-absolute"):
		ttl = -ttl
	case ttl < 0:
		return "", false
	}
	maxTTL := modelLimit(vs.MaxTTL, 3600, vs.Policy, false, mut)
	if m("seal-max-ttl-rounded-to-nearest") && vs.MaxTTL != nil && *vs.MaxTTL != 0 {
		maxTTL = int64(math.Round(*vs.MaxTTL))
	}
	if ttl == 0 {
		// The default TTL is not rounded when configured: step 1 rounds it
		// up, as any requested TTL. Unset (null or 0), it is 600 s, which
		// the cap below brings down to a lower maximum.
		def := float64(600)
		if vs.DefaultTTL != nil && *vs.DefaultTTL != 0 {
			def = *vs.DefaultTTL
		}
		ttl = int64(math.Round(def * 1000))
		if m("default-ttl-rounded-down") {
			ttl = int64(math.Floor(def)) * 1000
		}
		if !m("default-ttl-uncapped") {
			ttl = min(ttl, maxTTL*1000)
		}
	} else {
		ttl = min(ttl, maxTTL*1000)
	}
	life := (ttl + 999) / 1000
	switch {
	case m("ttl-half-up"):
		life = (ttl + 500) / 1000
	case m("ttl-floor"):
		life = ttl / 1000
	}
	// now, in whole seconds, rounded down, within the header's 40 bits.
	now := floorDiv(vs.NowMillis, 1000)
	switch {
	case m("seal-now-ceil"):
		now = -floorDiv(-vs.NowMillis, 1000)
	case m("seal-now-rounded"):
		now = floorDiv(vs.NowMillis+500, 1000)
	}
	switch {
	case m("seal-clock-unchecked"):
	case m("seal-clock-max-exclusive") && now >= 1<<40-1, m("seal-clock-upper-only") && now > 1<<40-1:
		return "", false
	case now < 0 && !m("seal-clock-upper-only"), now > 1<<40-1:
		return "", false
	}
	// The primary key: active, activated at or before now, the latest
	// activation; of equal ones, the one listed last.
	var primary *vectorKey
	for i := range vs.Keys {
		k := &vs.Keys[i]
		if k.State != "active" && !m("seal-decrypt-only-seals") && !m("seal-retired-seals") || k.State == "retired" && !m("seal-retired-seals") {
			continue
		}
		switch {
		case m("seal-ignores-activation"):
		case m("seal-activation-exclusive") && k.Activation*1000 >= vs.NowMillis:
			continue
		case m("seal-activation-with-skew") && (k.Activation-modelLimit(nil, 30, vs.Policy, true, ""))*1000 <= vs.NowMillis:
		case k.Activation*1000 > vs.NowMillis:
			continue
		}
		if primary == nil {
			primary = k
			continue
		}
		later := k.Activation > primary.Activation
		if m("seal-earliest-key") {
			later = k.Activation < primary.Activation
		}
		if k.Activation == primary.Activation {
			switch {
			case m("seal-tie-first-listed"):
				later = false
			case m("seal-tie-highest-id"):
				later = k.ID > primary.ID
			case m("seal-tie-lowest-id"):
				later = k.ID < primary.ID
			default:
				later = true
			}
		}
		if later || m("seal-last-listed") {
			primary = k
		}
	}
	if primary == nil {
		return "", false
	}
	version, over := byte(1), 45
	if primary.Algorithm == "aead" {
		version, over = 2, 53
	}
	// The token's length, in characters of base64url without padding.
	n := (4*(over+len(payload)) + 2) / 3
	if m("sealer-length-in-envelope-bytes") {
		n = over + len(payload)
	}
	if maxLen := modelTokenLen(vs.MaxTokenLen, mut); !m("no-sealer-length-limit") && (n > maxLen || m("sealer-length-inclusive") && n == maxLen) {
		return "", false
	}
	header := []byte{version}
	id := unhex(t, primary.ID)
	header = append(header, id...)
	header = binary.BigEndian.AppendUint64(header, uint64(now)<<24|uint64(life))
	if n := len(v.Binding.ArgsDigest) / 2; m("digest-must-be-32") && n != 0 && n != 32 {
		return "", false
	}
	ad, encoded := modelAD(t, v, header, mut)
	if !encoded {
		return "", false
	}
	key := unhex(t, primary.Material)
	env := append([]byte(nil), header...)
	if version == 1 {
		h := hmac.New(sha256.New, key)
		h.Write(ad)
		h.Write(payload)
		env = h.Sum(append(env, payload...))
	} else {
		nonce := unhex(t, vs.Nonce)
		if len(nonce) != chacha20poly1305.NonceSizeX {
			return "(an AEAD key, where the vector's sealer used a MAC key)", true
		}
		a := testkit.Must(chacha20poly1305.NewX(key))
		env = a.Seal(append(env, nonce...), nonce, payload, ad)
	}
	return base64.RawURLEncoding.EncodeToString(env), true
}

// modelAD is the associated data: the header, then the binding; ok false
// if a binding string cannot be encoded.
func modelAD(t *testing.T, v vector, header []byte, mut string) (ad []byte, ok bool) {
	b, ok := modelBinding(t, v, mut)
	if mut == "header-not-in-ad" {
		return b, ok
	}
	return append(append([]byte(nil), header...), b...), ok
}

// modelString is a binding string as a reader whose strings are UTF-16
// code units or code points has it: as written in JSON, where a lone
// surrogate can be, and then encoded as UTF-8, which it has none of. A
// wrong reading encodes it as U+FFFD or as WTF-8 instead.
func modelString(raw, mut string) (string, bool) {
	var b []byte
	ok := true
	for i := 0; i < len(raw); {
		if raw[i] != '\\' || i+6 > len(raw) || raw[i+1] != 'u' {
			b = append(b, raw[i])
			i++
			continue
		}
		r := rune(testkit.Must(strconv.ParseUint(raw[i+2:i+6], 16, 16)))
		i += 6
		if 0xD800 <= r && r < 0xDC00 && i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
			if lo := rune(testkit.Must(strconv.ParseUint(raw[i+2:i+6], 16, 16))); 0xDC00 <= lo && lo < 0xE000 {
				b = utf8.AppendRune(b, 0x10000+(r-0xD800)<<10+(lo-0xDC00))
				i += 6
				continue
			}
		}
		switch {
		case r < 0xD800 || r >= 0xE000:
			b = utf8.AppendRune(b, r)
		case mut == "lone-surrogate-replaced":
			b = utf8.AppendRune(b, utf8.RuneError)
		case mut == "lone-surrogate-as-wtf8":
			b = append(b, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
		default:
			ok = false
		}
	}
	return string(b), ok
}

func modelBinding(t *testing.T, v vector, mut string) ([]byte, bool) {
	digest := unhex(t, v.Binding.ArgsDigest)
	if mut == "digest-as-hex-text" {
		digest = []byte(v.Binding.ArgsDigest)
	}
	str := func(s string) []byte {
		if mut == "binding-nfc" {
			s = composeAcute.Replace(s)
		}
		if mut == "binding-invalid-utf8-replaced" {
			s = strings.ToValidUTF8(s, "\uFFFD")
		}
		return []byte(s)
	}
	encoded := true
	field := func(name, s string) []byte {
		if raw, ok := v.Binding.lone[name]; ok {
			s, ok = modelString(raw, mut)
			encoded = encoded && ok
		}
		return str(s)
	}
	fields := [][]byte{field("method", v.Binding.Method), field("target", v.Binding.Target), field("principal", v.Binding.principal(t)),
		field("audience", v.Binding.Audience), field("session", v.Binding.Session), digest, unhex(t, v.Binding.Context)}
	length := func(b []byte, n int) []byte {
		switch mut {
		case "one-byte-lengths":
			return append(b, byte(n))
		case "varint-threshold-256":
			if n < 256 {
				return append(b, byte(n))
			}
		case "varint-high-group-first":
			var groups []byte
			for groups = []byte{byte(n & 0x7f)}; n >= 0x80; groups = append(groups, byte(n&0x7f)|0x80) {
				n >>= 7
			}
			slices.Reverse(groups)
			return append(b, groups...)
		}
		return binary.AppendUvarint(b, uint64(n))
	}
	var b []byte
	if mut != "binding-without-count" {
		b = length(b, 7)
	}
	for i, f := range fields {
		n := len(f)
		if mut == "lengths-in-characters" && i < 5 {
			n = utf8.RuneCount(f)
		}
		b = length(b, n)
		b = append(b, f...)
	}
	return b, encoded
}

// composeAcute is NFC for the vectors' one decomposed character, e and
// U+0301 COMBINING ACUTE ACCENT: enough to model a reader that normalizes.
var composeAcute = strings.NewReplacer("e\u0301", "\u00e9")

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

// TestTokenMutations: the model agrees with every vector, sealing and
// opening, and each wrong reading FORMAT.md lists fails the vector it
// names there.
func TestTokenMutations(t *testing.T) {
	vf := readVectors(t)
	for _, v := range vf.Vectors {
		if bad := modelDisagrees(t, v, ""); bad != "" {
			t.Errorf("%s: %s", v.Name, bad)
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
			if modelDisagrees(t, v, mut) != "" {
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
	t.Logf("%d wrong readings of the token rules tried, each caught by a vector", len(tokenMutations))
}

// modelDisagrees runs a vector through the model, sealing (for vectors
// with sealer settings) and opening, and says how the result differs from
// the vector's, or "" if it does not.
func modelDisagrees(t *testing.T, v vector, mut string) string {
	switch refused := modelConfigRefused(v, mut); {
	case refused && v.Expect == "config":
		return ""
	case refused:
		return "the model refuses the configuration, the vector says " + v.Expect
	case v.Expect == "config":
		return "the model accepts the configuration, the vector refuses it"
	}
	if v.Seal != nil {
		tok, ok := modelSeal(t, v, mut)
		switch {
		case v.Expect == "not_sealed" && ok:
			return "the model seals, the vector says the sealer refuses"
		case v.Expect == "not_sealed":
			return ""
		case !ok:
			return "the model refuses to seal"
		case tok != v.Token:
			return "the model seals to another token"
		}
	}
	got, payload := model(t, v, mut)
	if got != v.Expect || got == "ok" && !bytes.Equal(payload, unhex(t, v.Payload)) {
		return "the model opens to " + got + ", the vector says " + v.Expect
	}
	return ""
}

var tokenMutations = []string{
	"length-in-characters", "length-inclusive", "standard-alphabet", "padding-accepted",
	"trailing-bits-ignored", "line-breaks-skipped", "key-before-version", "minimum-is-header-plus-overhead",
	"retired-opens", "decrypt-only-refused", "pending-refused", "kind-from-token",
	"header-not-in-ad", "binding-without-count", "digest-as-hex-text", "time-before-authentication",
	"no-lifetime-check", "lifetime-at-max-refused", "no-skew-not-yet-valid", "no-skew-expiry", "expiry-inclusive",
	// Readings no vector caught before the vectors for issue 17.
	"one-byte-lengths", "varint-high-group-first", "lengths-in-characters", "binding-nfc",
	"whitespace-trimmed", "dangling-character-ignored", "minimum-after-key", "key-id-zero-malformed",
	"lifetime-after-time", "lifetime-zero-refused", "open-now-ceil", "open-now-rounded",
	"seal-now-ceil", "seal-now-rounded", "ttl-half-up", "ttl-floor",
	"negative-ttl-as-default", "negative-ttl-absolute",
	"no-sealer-length-limit", "sealer-length-inclusive", "sealer-length-in-envelope-bytes",
	"seal-earliest-key", "seal-last-listed", "seal-ignores-activation", "seal-activation-exclusive",
	"seal-decrypt-only-seals", "seal-tie-first-listed", "seal-tie-highest-id", "seal-tie-lowest-id",
	"encoding-before-length",
	// Readings no vector caught before the vectors for issue 25.
	"policy-ignored", "policy-server-wins", "policy-larger-wins", "policy-overrides-server",
	"policy-default-as-server-value", "default-ttl-uncapped", "policy-skew-zero-as-default",
	"server-zero-skew-as-unset", "varint-threshold-256", "seal-retired-seals", "seal-clock-unchecked", "seal-clock-max-exclusive",
	"seal-clock-upper-only", "binding-invalid-utf8-replaced", "digest-must-be-32",
	// Readings no vector caught before the vectors for issue 37.
	"open-now-truncated", "zero-skew-as-unset-without-keyset", "seal-activation-with-skew",
	"skew-clamped", "negative-skew-as-none", "max-ttl-clamped", "token-len-under-71-accepted",
	"default-ttl-capped-when-configured", "default-ttl-checked-against-keyset",
	"durations-rounded-up", "durations-rounded-to-nearest", "durations-range-after-rounding", "default-ttl-rounded-down",
	// Readings no vector caught before the vectors for issue 46.
	"max-ttl-range-after-rounding", "unset-default-ttl-refused", "default-ttl-against-max-as-given",
	"seal-max-ttl-rounded-to-nearest", "sealer-token-len-unchecked", "zero-max-ttl-refused", "zero-max-ttl-unbounded",
	"zero-default-ttl-refused", "zero-token-len-refused", "zero-token-len-unbounded",
	"lone-surrogate-replaced", "lone-surrogate-as-wtf8", "lone-surrogate-refused-first",
}
