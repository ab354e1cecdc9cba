package keyset

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/big"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/stateseal/stateseal/internal/testkit"
	"golang.org/x/crypto/chacha20poly1305"
)

// This file is a loader written from docs/KEYSET-FORMAT.md alone, with the
// standard library and XChaCha20-Poly1305: it uses nothing of package
// keyset, keyring or backends (the file shares the package only to share
// the vector types). Given a mutation, a deliberately wrong reading of one
// rule, it applies that reading instead. TestKeysetMutations holds it to
// every vector, then requires each wrong reading to fail the vector the
// spec's table names.

// kmValue is a JSON value. Objects keep their members in order.
type kmValue struct {
	kind    byte   // '{', '[', '"', '0' (number), 't', 'f', 'n'
	escaped bool   // a string written with an escape
	raw     string // a string as written, between its quotes
	str     string
	members []kmMember
	items   []*kmValue
}

type kmMember struct {
	name  string
	value *kmValue
}

type kmParser struct {
	b       []byte
	i       int
	mut     string
	escaped bool // the last string read had an escape
}

// kmParseJSON reads one JSON value (RFC 8259) strictly: UTF-8, nothing
// but whitespace around it, no duplicate member names.
func kmParseJSON(b []byte, mut string) (*kmValue, bool) {
	if !utf8.Valid(b) {
		if mut != "invalid-utf8-replaced" {
			return nil, false
		}
		b = []byte(strings.ToValidUTF8(string(b), "\uFFFD"))
	}
	p := &kmParser{b: b, mut: mut}
	p.ws()
	v, ok := p.value()
	if !ok {
		return nil, false
	}
	if p.ws(); p.i != len(p.b) && mut != "trailing-data-ignored" {
		return nil, false
	}
	return v, true
}

func (p *kmParser) ws() {
	for p.i < len(p.b) {
		switch {
		case strings.IndexByte(" \t\n\r", p.b[p.i]) >= 0:
			p.i++
		case p.mut == "whitespace-beyond-json" && strings.IndexByte("\f\v", p.b[p.i]) >= 0:
			p.i++
		case p.mut == "whitespace-beyond-json" && bytes.HasPrefix(p.b[p.i:], []byte("\u00a0")):
			p.i += 2
		default:
			return
		}
	}
}

func (p *kmParser) lit(s string) bool {
	if bytes.HasPrefix(p.b[p.i:], []byte(s)) {
		p.i += len(s)
		return true
	}
	return false
}

var (
	kmNumber      = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`)
	kmNumberZeros = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?`)
	kmNumberPlus  = regexp.MustCompile(`^[-+]?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`)
)

func (p *kmParser) value() (*kmValue, bool) {
	if p.i >= len(p.b) {
		return nil, false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		p.i++
		v := &kmValue{kind: '{'}
		p.ws()
		if p.lit("}") {
			return v, true
		}
		for {
			p.ws()
			name, ok := p.string()
			if !ok {
				return nil, false
			}
			if p.ws(); !p.lit(":") {
				return nil, false
			}
			p.ws()
			m, ok := p.value()
			if !ok {
				return nil, false
			}
			i := slices.IndexFunc(v.members, func(o kmMember) bool { return o.name == name })
			switch {
			case i < 0:
				v.members = append(v.members, kmMember{name, m})
			case p.mut == "duplicate-last-wins":
				v.members[i].value = m
			default:
				return nil, false
			}
			p.ws()
			if p.lit("}") {
				return v, true
			}
			if !p.lit(",") {
				return nil, false
			}
		}
	case c == '[':
		p.i++
		v := &kmValue{kind: '['}
		p.ws()
		if p.lit("]") {
			return v, true
		}
		for {
			p.ws()
			m, ok := p.value()
			if !ok {
				return nil, false
			}
			v.items = append(v.items, m)
			p.ws()
			if p.lit("]") {
				return v, true
			}
			if !p.lit(",") {
				return nil, false
			}
		}
	case c == '"':
		start := p.i
		s, ok := p.string()
		if !ok {
			return nil, false
		}
		return &kmValue{kind: '"', str: s, escaped: p.escaped, raw: string(p.b[start+1 : p.i-1])}, true
	case p.lit("true"):
		return &kmValue{kind: 't'}, true
	case p.lit("false"):
		return &kmValue{kind: 'f'}, true
	case p.lit("null"):
		return &kmValue{kind: 'n'}, true
	}
	re := kmNumber
	switch p.mut {
	case "leading-zeros-accepted":
		re = kmNumberZeros
	case "plus-sign-accepted":
		re = kmNumberPlus
	}
	n := re.Find(p.b[p.i:])
	if n == nil {
		return nil, false
	}
	p.i += len(n)
	return &kmValue{kind: '0', str: string(n)}, true // big.Int reads "01" and "+1" too
}

// string reads a JSON string: no raw control characters, JSON's escapes
// only, \u escapes of surrogates only in pairs.
func (p *kmParser) string() (string, bool) {
	if !p.lit(`"`) {
		return "", false
	}
	p.escaped = false
	var out []byte
	for p.i < len(p.b) {
		c := p.b[p.i]
		p.i++
		switch {
		case c == '"':
			return string(out), true
		case c < 0x20 && p.mut != "raw-control-accepted", c == 0x7f && p.mut == "del-refused":
			return "", false
		case c != '\\':
			out = append(out, c)
			continue
		}
		if p.i >= len(p.b) {
			return "", false
		}
		e := p.b[p.i]
		p.i++
		p.escaped = true
		if i := strings.IndexByte(`"\/bfnrt`, e); i >= 0 {
			out = append(out, "\"\\/\b\f\n\r\t"[i])
			continue
		}
		if e != 'u' {
			return "", false
		}
		r, ok := p.hex4()
		if !ok {
			return "", false
		}
		if utf16.IsSurrogate(r) {
			if r >= 0xdc00 || !p.lit(`\u`) {
				return "", false
			}
			r2, ok := p.hex4()
			if !ok || r2 < 0xdc00 || r2 > 0xdfff {
				return "", false
			}
			r = utf16.DecodeRune(r, r2)
		}
		out = utf8.AppendRune(out, r)
	}
	return "", false
}

func (p *kmParser) hex4() (rune, bool) {
	if p.i+4 > len(p.b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(p.b[p.i:p.i+4]), 16, 32)
	p.i += 4
	return rune(n), err == nil
}

// kmDoc is a keyset document as the model reads it.
type kmDoc struct {
	format, id, kek, expires string
	version                  uint64
	expiresUnix              int64
	policy                   [5]int64 // seconds: propagation, max TTL, skew, rotation, freshness
	keys                     []kmKey
	history                  []kmLink
	retired                  []uint32 // retired_keys
	authWrapped, tag         []byte
	tagText                  string // auth.tag as written, for a reading that compares the text
}

type kmLink struct {
	version uint64
	tag     []byte
	tagText string
}

type kmKey struct {
	id                          uint32
	hexID, algorithm, state     string
	created, activation         string
	createdUnix, activationUnix int64
	wrapped                     []byte
}

var kmPolicyNames = []string{"propagation_delay_seconds", "max_ttl_seconds", "skew_seconds", "rotation_interval_seconds", "freshness_seconds"}

// kmReader reads the members of the document's objects.
type kmReader struct {
	mut     string
	bad     bool
	retired bool // reading a retired key
}

// object returns the members of v, an object, by name. Absent members
// and null ones are nil.
func (r *kmReader) object(v *kmValue, where string, names ...string) map[string]*kmValue {
	out := map[string]*kmValue{}
	if v == nil || v.kind == 'n' {
		if r.mut == "absent-refused" && where != "auth" {
			r.bad = true
		}
		return out
	}
	if v.kind != '{' {
		r.bad = true
		return out
	}
	for _, m := range v.members {
		name := m.name
		if r.mut == "case-insensitive-names" {
			for _, n := range names {
				if strings.EqualFold(n, name) {
					name = n
				}
			}
		}
		if !slices.Contains(names, name) {
			if r.mut == "unknown-null-members-ignored" && m.value.kind == 'n' {
				continue
			}
			if r.mut == "unknown-members-ignored" && where == "top" || r.mut == "nested-unknown-members-ignored" && where != "top" {
				continue
			}
			r.bad = true
			continue
		}
		if m.value.kind == 'n' {
			if r.mut == "null-refused" {
				r.bad = true
			}
			continue
		}
		out[name] = m.value
	}
	if r.mut == "absent-refused" {
		for _, n := range names {
			if out[n] == nil && n != "expires" {
				r.bad = true
			}
		}
	}
	return out
}

func (r *kmReader) str(v *kmValue) string {
	if v == nil {
		return ""
	}
	if v.kind != '"' {
		r.bad = true
	}
	return v.str
}

// integer reads an integer: a number without fraction or exponent. A
// reading that takes floats takes 1.0 and 1e0 too.
func (r *kmReader) integer(v *kmValue, floats bool) *big.Int {
	n := new(big.Int)
	if v == nil {
		return n
	}
	if v.kind != '0' {
		r.bad = true
		return n
	}
	if _, ok := n.SetString(v.str, 10); ok {
		return n
	}
	if f, _, err := big.ParseFloat(v.str, 10, 200, big.ToNearestEven); floats && err == nil && f.IsInt() {
		f.Int(n)
		return n
	}
	r.bad = true
	return n
}

var kmTimeRE = regexp.MustCompile(`^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?(Z|z|\+00:00)$`)

// time reads YYYY-MM-DDTHH:MM:SSZ, a valid UTC date and time from 1970 on,
// as Unix seconds.
func (r *kmReader) time(s string) int64 {
	if r.mut == "unicode-digits-in-times" { // as Python's \d and int() read them
		s = strings.Map(func(c rune) rune {
			if 0xFF10 <= c && c <= 0xFF19 {
				return '0' + c - 0xFF10
			}
			return c
		}, s)
	}
	m := kmTimeRE.FindStringSubmatch(s)
	switch {
	case m == nil,
		m[7] != "" && r.mut != "times-with-fraction",
		m[8] == "z" && r.mut != "times-lower-case-z",
		m[8] == "+00:00" && r.mut != "times-with-offset":
		r.bad = true
		return 0
	}
	n := make([]int64, 6)
	for i := range n {
		n[i] = testkit.Must(strconv.ParseInt(m[i+1], 10, 64))
	}
	y, mo, d := n[0], n[1], n[2]
	leap := y%4 == 0 && (y%100 != 0 || y%400 == 0 || r.mut == "times-leap-every-4-years")
	days := []int64{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	if leap {
		days[1] = 29
	}
	hour24 := r.mut == "times-hour-24" && n[3] == 24 && n[4] == 0 && n[5] == 0 // as the next day's midnight, ISO 8601's end of day
	if mo < 1 || mo > 12 || d < 1 || d > days[mo-1] || n[3] > 23 && !hour24 || n[4] > 59 || n[5] > 59 {
		r.bad = true
		return 0
	}
	// Days from 1970-01-01 to y-mo-d (the proleptic Gregorian calendar).
	yy := y
	if mo <= 2 {
		yy--
	}
	era := yy / 400
	if yy < 0 && yy%400 != 0 {
		era--
	}
	yoe := yy - era*400
	mp := (mo + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	unix := (era*146097+doe-719468)*86400 + n[3]*3600 + n[4]*60 + n[5]
	if unix < 0 && r.mut != "times-before-1970" {
		r.bad = true
	}
	return unix
}

// b64 reads unpadded base64url, strictly: its alphabet only, no length of
// 1 modulo 4, unused bits zero, at least one byte.
func (r *kmReader) b64(s string) []byte {
	switch r.mut {
	case "base64-padding-accepted":
		s = strings.TrimRight(s, "=")
	case "base64-standard-alphabet":
		s = strings.NewReplacer("+", "-", "/", "_").Replace(s)
	case "base64-line-breaks-skipped":
		s = strings.NewReplacer("\n", "", "\r", "").Replace(s)
	}
	for _, c := range []byte(s) {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			r.bad = true
			return nil
		}
	}
	enc := base64.RawURLEncoding.Strict()
	if r.mut == "base64-trailing-bits-ignored" {
		enc = base64.RawURLEncoding
	}
	b, err := enc.DecodeString(s)
	n := len(b)
	if r.mut == "wrapped-bound-in-characters" {
		n = len(s)
	}
	if err != nil || len(b) == 0 || n > 2048 && r.mut != "wrapped-unbounded" && !(r.retired && r.mut == "retired-wrapped-unchecked") {
		r.bad = true
	}
	return b
}

// kmRead reads and validates a document: everything a loader checks
// before it looks at its configuration.
func kmRead(data []byte, mut string) (*kmDoc, bool) {
	m := func(name string) bool { return mut == name }
	if len(data) > 1<<20 && !m("size-unbounded") || len(data) == 1<<20 && m("size-limit-exclusive") {
		return nil, false
	}
	v, ok := kmParseJSON(data, mut)
	if !ok {
		return nil, false
	}
	r := &kmReader{mut: mut}
	top := r.object(v, "top", "format", "id", "version", "kek", "expires", "policy", "keys", "history", "retired_keys", "auth")
	d := &kmDoc{format: r.str(top["format"]), id: r.str(top["id"]), kek: r.str(top["kek"]), expires: r.str(top["expires"])}
	if d.format != "stateseal-keyset-v4" && !(m("format-v3-accepted") && d.format == "stateseal-keyset-v3") {
		return nil, false
	}
	version := r.integer(top["version"], m("version-as-float"))
	if version.Sign() < 0 || version.BitLen() > 64 {
		return nil, false
	}
	d.version = version.Uint64()
	if m("version-as-double") && d.version < 1<<63 {
		d.version = uint64(float64(d.version))
	}
	pol := r.object(top["policy"], "policy", kmPolicyNames...)
	for i, name := range kmPolicyNames {
		n := r.integer(pol[name], m("policy-as-float"))
		if !n.IsInt64() {
			return nil, false
		}
		d.policy[i] = n.Int64()
	}
	if d.expires != "" {
		d.expiresUnix = r.time(d.expires)
	}
	if m("escapes-in-values-refused") && top["expires"] != nil && top["expires"].escaped {
		return nil, false
	}
	auth := r.object(top["auth"], "auth", "wrapped", "tag")
	if m("escapes-in-values-refused") && (auth["wrapped"] != nil && auth["wrapped"].escaped || auth["tag"] != nil && auth["tag"].escaped) {
		return nil, false
	}
	d.authWrapped, d.tag = r.b64(r.str(auth["wrapped"])), r.b64(r.str(auth["tag"]))
	if auth["tag"] != nil {
		d.tagText = auth["tag"].raw
	}
	if len(d.tag) != 32 && !m("tag-any-length") {
		return nil, false
	}
	keys := top["keys"]
	if keys != nil && keys.kind != '[' {
		return nil, false
	}
	if keys != nil {
		for _, kv := range keys.items {
			if kv.kind == 'n' && m("null-key-elements-skipped") {
				continue
			}
			f := r.object(kv, "key", "id", "algorithm", "state", "created", "activation", "wrapped")
			for _, n := range []string{"created", "activation", "wrapped"} {
				if m("escapes-in-values-refused") && f[n] != nil && f[n].escaped {
					return nil, false
				}
			}
			k := kmKey{hexID: r.str(f["id"]), algorithm: r.str(f["algorithm"]), state: r.str(f["state"]),
				created: r.str(f["created"]), activation: r.str(f["activation"])}
			idRE := "^[0-9a-f]{8}$"
			if m("key-id-any-case") {
				idRE = "^[0-9a-fA-F]{8}$"
			}
			if !regexp.MustCompile(idRE).MatchString(k.hexID) {
				return nil, false
			}
			id := testkit.Must(strconv.ParseUint(k.hexID, 16, 32))
			k.id = uint32(id)
			bad := r.bad
			r.retired = k.state == "retired"
			k.createdUnix, k.activationUnix = r.time(k.created), r.time(k.activation)
			k.wrapped = r.b64(r.str(f["wrapped"]))
			if r.retired && m("retired-keys-unvalidated") {
				r.bad = bad
			}
			r.retired = false
			d.keys = append(d.keys, k)
		}
	}
	if hv := top["history"]; hv != nil {
		if hv.kind != '[' {
			return nil, false
		}
		for _, lv := range hv.items {
			if lv.kind == 'n' && m("null-history-elements-skipped") {
				continue
			}
			f := r.object(lv, "link", "version", "tag")
			n := r.integer(f["version"], false)
			if n.Sign() < 0 || n.BitLen() > 64 {
				return nil, false
			}
			l := kmLink{version: n.Uint64(), tag: r.b64(r.str(f["tag"]))}
			if f["tag"] != nil {
				l.tagText = f["tag"].raw
			}
			if len(l.tag) != 32 && !m("history-tag-any-length") {
				return nil, false
			}
			d.history = append(d.history, l)
		}
	}
	if rv := top["retired_keys"]; rv != nil {
		if rv.kind != '[' {
			return nil, false
		}
		for _, iv := range rv.items {
			if iv.kind == 'n' && m("null-retired-elements-skipped") {
				continue
			}
			h := r.str(iv)
			if !regexp.MustCompile("^[0-9a-f]{8}$").MatchString(h) {
				return nil, false
			}
			id := testkit.Must(strconv.ParseUint(h, 16, 32))
			d.retired = append(d.retired, uint32(id))
		}
	}
	if r.bad {
		return nil, false
	}
	// History and retired keys.
	if !m("history-optional") && (d.version <= 1) != (len(d.history) == 0) || len(d.history) > 32 && !m("history-unbounded") ||
		len(d.history) == 32 && m("history-max-exclusive") {
		return nil, false
	}
	below := d.version
	for _, l := range d.history {
		if (l.version >= below || l.version == 0 && !m("history-link-zero-accepted")) && !m("history-order-ignored") {
			return nil, false
		}
		below = l.version
	}
	for i, id := range d.retired {
		if id == 0 || i > 0 && id <= d.retired[i-1] && !m("retired-keys-order-ignored") {
			return nil, false
		}
	}
	for _, k := range d.keys {
		if (k.state == "retired") != slices.Contains(d.retired, k.id) && !m("retired-keys-unchecked") {
			return nil, false
		}
	}
	// Validation.
	p := d.policy
	const maxSeconds = 9223372036 // the most whole seconds whose nanoseconds fit an int64
	durationsOK := func() bool {
		if m("durations-unbounded") {
			return true
		}
		for _, s := range p {
			if s > maxSeconds || s == maxSeconds && m("durations-bound-exclusive") {
				return false
			}
		}
		return true
	}
	switch {
	case d.id == "" || d.kek == "":
		return nil, false
	case d.version == 0 && !m("version-zero-accepted"):
		return nil, false
	case !durationsOK():
		return nil, false
	case p[0] < 0:
		return nil, false
	case p[1] < 1 && !m("max-ttl-from-zero") || p[1] < 0 || p[1] > 1<<24-1 && !m("max-ttl-uncapped"):
		return nil, false
	case p[2] < 0 || p[2] > 600 && !m("skew-uncapped") || p[2] >= 600 && m("skew-cap-exclusive"):
		return nil, false
	case p[3] < 0 || p[3] > 0 && (p[3] < p[0] || p[3] == p[0] && !m("rotation-may-equal-propagation")):
		return nil, false
	case p[4] < 0 || p[4] != 0 && (p[4] < 3600 || p[4] > 366*86400) && !m("freshness-unbounded"):
		return nil, false
	case p[4] == 0 && d.expires != "" && !m("expires-without-freshness"):
		return nil, false
	case p[4] == 0 && top["expires"] != nil && m("empty-expires-is-present"):
		return nil, false
	case p[4] != 0 && d.expires == "" && !m("freshness-without-expires"):
		return nil, false
	}
	seen := map[uint32]bool{}
	active := 0
	for _, k := range d.keys {
		if k.state == "retired" && m("retired-keys-unvalidated") {
			continue
		}
		switch {
		case k.id == 0 && !m("key-id-zero-accepted"):
			return nil, false
		case seen[k.id] && !m("duplicate-key-ids-accepted"):
			return nil, false
		case k.algorithm != "mac" && k.algorithm != "aead":
			return nil, false
		case k.state != "active" && k.state != "decrypt-only" && k.state != "retired":
			return nil, false
		case k.activationUnix < k.createdUnix && !m("activation-before-created-accepted"):
			return nil, false
		}
		seen[k.id] = true
		if k.state == "active" {
			active++
		}
	}
	if active == 0 && !m("no-active-key-accepted") {
		return nil, false
	}
	return d, true
}

// kmPlain reports whether a configured KEK URL is plain, or what a wrong
// reading takes for plain.
func kmPlain(u, mut string) bool {
	m := func(name string) bool { return mut == name }
	if m("config-url-trimmed") {
		u = strings.Trim(u, " \t\r\n")
	}
	scheme, _, found := strings.Cut(u, ":")
	if m("config-scheme-lowered") {
		scheme = strings.ToLower(scheme)
	}
	if !found || !regexp.MustCompile(`^[a-z][a-z0-9+.-]*$`).MatchString(scheme) {
		return false
	}
	printable := u
	if m("config-query-unprintable-accepted") {
		printable, _, _ = strings.Cut(u, "?")
	}
	for _, c := range []byte(printable) {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	if m("config-fragment-dropped") {
		u, _, _ = strings.Cut(u, "#")
	}
	if m("config-fragment-before-query-only") {
		if b, _, _ := strings.Cut(u, "?"); strings.Contains(b, "#") {
			return false
		}
	} else if strings.Contains(u, "#") {
		return false
	}
	base, query, _ := strings.Cut(u, "?")
	if at := strings.IndexByte(base, '@'); at >= 0 && m("config-user-dropped") {
		if i := strings.Index(base, "//"); i >= 0 && i < at {
			base = base[:i+2] + base[at+1:]
		}
	}
	for _, c := range []byte(base) {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-._~/:$&+,;=", c) >= 0 ||
			c == '%' && m("config-escapes-before-query-accepted")) {
			return false
		}
	}
	if strings.Contains(query, ";") && !m("config-semicolon-separator") {
		return false
	}
	hex := func(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }
	for i := 0; i < len(query); i++ {
		if query[i] == '%' && !(i+2 < len(query) && hex(query[i+1]) && hex(query[i+2])) && !m("config-bad-escape-dropped") {
			return false
		}
	}
	return true
}

// kmIdentity is a configured KEK URL's identity: without the transport
// parameters endpoint and insecure, the rest sorted by name.
func kmIdentity(u, mut string) string {
	m := func(name string) bool { return mut == name }
	base, query, found := strings.Cut(u, "?")
	if m("identity-base-normalized") {
		// A WHATWG URL parser removes dot segments from the path.
		base = strings.ReplaceAll(base, "/./", "/")
	}
	if !found || query == "" && !m("identity-bare-question-kept") {
		return base
	}
	if query == "" {
		return u
	}
	type param struct{ name, value, raw string } // raw: the name as written
	var ps []param
	for _, part := range strings.Split(query, "&") {
		if part == "" && !m("identity-empty-pieces-kept") {
			continue
		}
		if m("identity-raw-query") {
			if n, _, _ := strings.Cut(part, "="); n != "endpoint" && n != "insecure" {
				ps = append(ps, param{part, "", part})
			}
			continue
		}
		n, v, _ := strings.Cut(part, "=")
		if i := strings.LastIndexByte(part, '='); i >= 0 && m("identity-split-at-last-equals") {
			n, v = part[:i], part[i+1:]
		}
		raw := n
		n, err1 := kmUnescape(n)
		v, err2 := kmUnescape(v)
		if m("transport-names-raw") && (raw == "endpoint" || raw == "insecure") {
			continue
		}
		if err1 != nil || err2 != nil || (n == "endpoint" || n == "insecure") && !m("transport-names-raw") {
			continue
		}
		ps = append(ps, param{n, v, raw})
	}
	switch {
	case m("identity-sort-utf16"):
		slices.SortStableFunc(ps, func(a, b param) int {
			return slices.Compare(utf16.Encode([]rune(a.name)), utf16.Encode([]rune(b.name)))
		})
	case m("identity-unsorted"):
	case m("identity-sort-escaped"):
		slices.SortStableFunc(ps, func(a, b param) int { return strings.Compare(a.raw, b.raw) })
	case m("identity-values-sorted"):
		slices.SortFunc(ps, func(a, b param) int {
			return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.value, b.value))
		})
	default:
		slices.SortStableFunc(ps, func(a, b param) int { return strings.Compare(a.name, b.name) })
	}
	var out []string
	for _, p := range ps {
		if m("identity-raw-query") {
			out = append(out, p.name)
			continue
		}
		if p.value == "" && m("identity-bare-name-without-equals") {
			out = append(out, kmEscape(p.name, mut))
			continue
		}
		out = append(out, kmEscape(p.name, mut)+"="+kmEscape(p.value, mut))
	}
	if len(out) == 0 {
		return base
	}
	return base + "?" + strings.Join(out, "&")
}

func kmUnescape(s string) (string, error) {
	var b []byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '+':
			b = append(b, ' ')
		case '%':
			if i+2 >= len(s) {
				return "", fmt.Errorf("bad escape")
			}
			n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return "", err
			}
			b = append(b, byte(n))
			i += 2
		default:
			b = append(b, s[i])
		}
	}
	return string(b), nil
}

func kmEscape(s, mut string) string {
	var b strings.Builder
	unreserved := "-._~"
	switch mut {
	case "identity-urlsearchparams": // application/x-www-form-urlencoded, WHATWG
		unreserved = "*-._"
	case "identity-encode-uri-component":
		unreserved = "-_.!~*'()"
	}
	for _, c := range []byte(s) {
		switch {
		case 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte(unreserved, c) >= 0:
			b.WriteByte(c)
		case c == ' ' && mut != "identity-space-as-percent-20" && mut != "identity-encode-uri-component":
			b.WriteByte('+')
		case mut == "identity-lower-hex":
			fmt.Fprintf(&b, "%%%02x", c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// kmLoaded is what the model loads, or why it refuses.
type kmLoaded struct {
	expect  string
	loaded  kvLoaded
	digest  [32]byte
	tag     []byte
	retired []uint32
	tagText string
}

// kmHistory is what a loader keeps from the document it installed.
type kmHistory struct {
	id      string
	version uint64
	digest  [32]byte
	tag     []byte
	retired []uint32
	tagText string
}

type kmModel struct {
	t      *testing.T
	f      kvFile
	byName map[string]*kvVector
	mut    string
}

// load runs a vector through the model loader.
func (km *kmModel) load(v kvVector) kmLoaded {
	var h *kmHistory
	for _, name := range v.Config.After {
		first := *km.byName[name]
		first.Config = v.Config
		first.Config.After = nil
		r := km.loadDoc(first, h)
		if r.expect != "ok" {
			return kmLoaded{expect: "(" + name + ", installed first, does not load: " + r.expect + ")"}
		}
		// The highest version installed is the reference; the retired
		// ids are the union over every document installed.
		retired := r.retired
		if h != nil && km.mut != "retired-ids-from-last-install" {
			retired = append(slices.Clone(h.retired), r.retired...)
		}
		if h == nil || r.loaded.Version > h.version {
			h = &kmHistory{r.loaded.ID, r.loaded.Version, r.digest, r.tag, nil, r.tagText}
		}
		h.retired = retired
	}
	return km.loadDoc(v, h)
}

func (km *kmModel) loadDoc(v kvVector, h *kmHistory) kmLoaded {
	mut := km.mut
	m := func(name string) bool { return mut == name }
	data := v.document(km.t)
	c := v.Config
	// The configuration: every configured KEK URL plain, before the
	// document is read.
	configRefused := func() bool {
		keks := c.KEKs
		if m("previous-kek-unchecked") {
			keks = keks[:min(1, len(keks))]
		}
		for _, u := range keks {
			if !kmPlain(u, mut) {
				return true
			}
			// A scheme the loader opens: the vectors' loader knows these.
			scheme, _, _ := strings.Cut(u, ":")
			if m("config-scheme-lowered") {
				scheme = strings.ToLower(scheme)
			}
			if !slices.Contains([]string{"local", "awskms", "gcpkms", "vault"}, scheme) && !m("config-unknown-scheme-accepted") {
				return true
			}
			// A local URL has no query, not even an empty one.
			_, query, found := strings.Cut(u, "?")
			if scheme == "local" && found && !m("config-local-query-ignored") && !(query == "" && m("config-local-bare-question-dropped")) {
				return true
			}
		}
		return false
	}
	if !m("config-after-document") && configRefused() {
		return kmLoaded{expect: "config"}
	}
	// 1. The document.
	d, ok := kmRead(data, mut)
	if !ok {
		return kmLoaded{expect: "malformed"}
	}
	if m("config-after-document") && configRefused() {
		return kmLoaded{expect: "config"}
	}
	// 2-5. The configuration, before any KMS call.
	var kekURL string
	kekCheck := func() string {
		trusted := c.KEKs
		if m("previous-kek-ignored") {
			trusted = trusted[:1]
		}
		for _, u := range trusted {
			id, name := kmIdentity(u, mut), d.kek
			switch {
			case m("kek-compared-with-transport-params"):
				id = u
			case m("document-kek-identity"):
				name = kmIdentity(d.kek, mut)
			}
			if id == name || m("kek-case-insensitive") && strings.EqualFold(id, name) {
				kekURL = u
				return ""
			}
		}
		if m("kek-from-document") {
			kekURL = d.kek
			return ""
		}
		return "untrusted_kek"
	}
	pinCheck := func() string {
		pinned := c.KeysetID
		if m("pin-ignored") {
			pinned = ""
		}
		if pinned == "" && h != nil && !m("first-loaded-not-pinned") {
			pinned = h.id
		}
		if pinned != "" && d.id != pinned && !(m("pin-case-insensitive") && strings.EqualFold(d.id, pinned)) {
			return "other_keyset"
		}
		return ""
	}
	versionCheck := func() string {
		switch {
		case d.version < c.MinVersion && !m("min-version-ignored"), d.version == c.MinVersion && m("min-version-exclusive"):
			return "rollback"
		case h != nil && h.id == d.id && d.version < h.version && !m("rollback-running-accepted") && !(m("min-version-replaces-installed") && c.MinVersion != 0):
			return "rollback"
		}
		if h == nil || h.id != d.id || m("retired-revived-accepted") {
			return ""
		}
		for _, k := range d.keys {
			if k.state != "retired" && slices.Contains(h.retired, k.id) {
				return "rollback"
			}
		}
		return ""
	}
	freshCheck := func() string {
		if d.policy[4] == 0 {
			return ""
		}
		now := c.NowMillis
		if m("now-rounded") {
			now = (now + 500) / 1000 * 1000
		}
		exp := d.expiresUnix * 1000
		if now >= exp && !m("stale-after-expires") || m("stale-after-expires") && now > exp {
			return "stale"
		}
		ahead := now + (d.policy[4]+d.policy[2])*1000
		if m("window-skew-30") {
			ahead = now + (d.policy[4]+30)*1000
		}
		if m("expiry-ahead-without-skew") {
			ahead = now + d.policy[4]*1000
		}
		if (exp > ahead || exp == ahead && m("expiry-ahead-exclusive")) && !m("expiry-ahead-accepted") {
			return "stale"
		}
		return ""
	}
	checks := []func() string{kekCheck, pinCheck, versionCheck, freshCheck}
	switch mut {
	case "stale-before-kek":
		checks = []func() string{freshCheck, kekCheck, pinCheck, versionCheck}
	case "stale-before-pin":
		checks = []func() string{kekCheck, freshCheck, pinCheck, versionCheck}
	case "stale-before-version":
		checks = []func() string{kekCheck, pinCheck, freshCheck, versionCheck}
	case "version-before-pin":
		checks = []func() string{kekCheck, versionCheck, pinCheck, freshCheck}
	case "pin-before-kek":
		checks = []func() string{pinCheck, kekCheck, versionCheck, freshCheck}
	}
	var late []func() string
	if m("checks-after-authentication") {
		checks, late = checks[:1], checks[1:]
	}
	for _, check := range checks {
		if e := check(); e != "" {
			return kmLoaded{expect: e}
		}
	}
	// 6. The KEK: the configuration's URL, never the document's.
	if !strings.HasPrefix(kekURL, "local:") {
		return kmLoaded{expect: "(a call to the KMS at " + kekURL + ")"}
	}
	i := slices.IndexFunc(km.f.KEKs, func(k kvKEK) bool { return k.URL == kekURL })
	if i < 0 {
		return kmLoaded{expect: "(no local KEK " + kekURL + ")"}
	}
	kek, err := hex.DecodeString(km.f.KEKs[i].Key)
	if err != nil {
		km.t.Fatal(err)
	}
	if c.KEKFile != nil && kekURL == c.KEKs[0] {
		// The KEK's own file, read by "local"'s rules: one that is
		// refused does not open, which is no refusal of the document.
		key, ok := kmKEKFile(*c.KEKFile, "")
		switch {
		case !ok && m("refused-kek-file-unauthenticated"):
			return kmLoaded{expect: "unauthenticated"}
		case !ok:
			return kmLoaded{expect: "kek_unavailable"}
		}
		kek = key
	}
	keks := [][]byte{kek}
	if m("unwrap-with-any-trusted-kek") {
		for _, u := range c.KEKs {
			if j := slices.IndexFunc(km.f.KEKs, func(k kvKEK) bool { return k.URL == u }); j >= 0 && j != i {
				other := testkit.Must(hex.DecodeString(km.f.KEKs[j].Key))
				keks = append(keks, other)
			}
		}
	}
	unwrap := func(w, ad []byte) ([]byte, bool) {
		if m("local-without-version-byte") {
			w = append([]byte{1}, w...)
		}
		if len(w) < 1+24+16 || w[0] != 1 && !m("local-version-byte-ignored") {
			return nil, false
		}
		for _, kek := range keks {
			a := testkit.Must(chacha20poly1305.NewX(kek))
			if pt, err := a.Open(nil, w[1:25], w[25:], ad); err == nil {
				return pt, true
			}
		}
		return nil, false
	}
	digest := sha256.Sum256(data)
	forkCheck := func() string {
		if h == nil || h.id != d.id {
			return ""
		}
		if d.version > h.version && !m("history-ignored") {
			for _, l := range d.history {
				if m("history-link-by-tag-only") && bytes.Equal(l.tag, h.tag) {
					return ""
				}
				if l.version == h.version {
					same := bytes.Equal(l.tag, h.tag)
					switch {
					case m("fork-tag-as-text"):
						same = l.tagText == h.tagText
					case m("history-link-by-document-digest"):
						same = bytes.Equal(l.tag, h.digest[:])
					}
					if same || m("history-tags-ignored") {
						return ""
					}
					return "fork"
				}
			}
			if m("history-gap-accepted") {
				return ""
			}
			return "fork"
		}
		if m("fork-ignored") || h.version != d.version {
			return ""
		}
		if m("fork-tag-as-text") {
			if h.tagText == d.tagText {
				return ""
			}
			return "fork"
		}
		if !m("fork-by-bytes") && bytes.Equal(h.tag, d.tag) || m("fork-by-bytes") && h.digest == digest {
			return ""
		}
		return "fork"
	}

	if m("fork-before-authentication") {
		if e := forkCheck(); e != "" {
			return kmLoaded{expect: e}
		}
	}
	// 9. Every key that is not retired, in document order.
	unwrapKeys := func() ([]kvKey, string) {
		keys := []kvKey{}
		for _, k := range d.keys {
			if k.state == "retired" && !m("retired-keys-unwrapped") || k.state == "decrypt-only" && m("decrypt-only-not-unwrapped") {
				continue
			}
			var ad []byte
			switch {
			case m("wrap-ad-without-key-id"):
				ad = kmJoin("stateseal-keyset-v2", d.id)
			case m("wrap-ad-without-keyset-id"):
				ad = kmJoin("stateseal-keyset-v2", k.hexID)
			case m("wrap-ad-v3-domain"):
				ad = kmJoin("stateseal-keyset-v3", d.id, k.hexID)
			case m("wrap-ad-key-id-binary"):
				ad = kmJoin("stateseal-keyset-v2", d.id, string(binary.BigEndian.AppendUint32(nil, k.id)))
			default:
				ad = kmJoin("stateseal-keyset-v2", d.id, k.hexID)
			}
			dk, ok := unwrap(k.wrapped, ad)
			if !ok || len(dk) != 32 && !m("data-key-any-length") {
				return nil, "unwrap"
			}
			if k.state != "retired" {
				keys = append(keys, kvKey{ID: k.hexID, Algorithm: k.algorithm, State: k.state, Created: k.created,
					Activation: k.activation, AD: hex.EncodeToString(ad), Material: hex.EncodeToString(dk)})
			}
		}
		return keys, ""
	}
	if m("keys-before-authentication") {
		if _, e := unwrapKeys(); e != "" {
			return kmLoaded{expect: e}
		}
	}
	// 6-7. The authentication key and the tag.
	format := "stateseal-keyset-v4"
	authAD := kmJoin(format, d.id, "auth")
	switch {
	case m("auth-ad-wrong-format"):
		authAD = kmJoin("stateseal-keyset-v3", d.id, "auth")
	case m("auth-ad-without-keyset-id"):
		authAD = kmJoin(format, "auth")
	}
	authKey, ok := unwrap(d.authWrapped, authAD)
	if !ok || m("auth-key-must-be-32") && len(authKey) != 32 || len(authKey) == 0 && !m("auth-key-empty-accepted") {
		return kmLoaded{expect: "unauthenticated"}
	}
	input := kmTagInput(d, mut)
	mac := hmac.New(sha256.New, authKey)
	mac.Write(input)
	if !hmac.Equal(mac.Sum(nil), d.tag) {
		return kmLoaded{expect: "unauthenticated"}
	}
	for _, check := range late {
		if e := check(); e != "" {
			return kmLoaded{expect: e}
		}
	}
	// 8. A fork.
	if !m("fork-before-authentication") {
		if e := forkCheck(); e != "" {
			return kmLoaded{expect: e}
		}
	}
	out := kmLoaded{expect: "ok", digest: digest, tag: d.tag, retired: d.retired, tagText: d.tagText, loaded: kvLoaded{
		ID: d.id, Version: d.version, KEK: d.kek, Expires: d.expires,
		Policy: kvPolicy{d.policy[0], d.policy[1], d.policy[2], d.policy[3], d.policy[4]},
		Auth:   kvAuth{AD: hex.EncodeToString(authAD), Key: hex.EncodeToString(authKey), TagInput: hex.EncodeToString(input)},
		Keys:   []kvKey{},
	}}
	// 10. The primary: of the active keys activated at or before now, the
	// latest activation; of equal ones, the one listed last.
	primary := func() string {
		var best *kmKey
		for i := range d.keys {
			k := &d.keys[i]
			if k.state != "active" && !(m("primary-decrypt-only") && k.state == "decrypt-only") {
				continue
			}
			at := k.activationUnix * 1000
			if m("primary-activation-with-skew") {
				at -= d.policy[2] * 1000
			}
			if !m("primary-ignores-activation") && (at > c.NowMillis || m("primary-activation-exclusive") && at == c.NowMillis) {
				continue
			}
			switch {
			case best == nil, m("primary-last-listed"), m("primary-latest-created") && k.createdUnix > best.createdUnix:
				best = k
			case m("primary-latest-created"):
			case k.activationUnix > best.activationUnix:
				best = k
			case k.activationUnix == best.activationUnix && !m("primary-tie-first-listed") && (!m("primary-tie-highest-id") || k.id > best.id):
				best = k
			}
		}
		if best == nil {
			return ""
		}
		return best.hexID
	}
	if m("primary-before-unwrap") {
		if out.loaded.Primary = primary(); out.loaded.Primary == "" {
			return kmLoaded{expect: "no_primary"}
		}
	}
	keys, e := unwrapKeys()
	if e != "" {
		return kmLoaded{expect: e}
	}
	out.loaded.Keys = keys
	if out.loaded.Primary = primary(); out.loaded.Primary == "" && !m("no-primary-accepted") {
		return kmLoaded{expect: "no_primary"}
	}
	return out
}

// kmJoin joins parts with 0x00.
func kmJoin(parts ...string) []byte { return []byte(strings.Join(parts, "\x00")) }

// kmTagInput is the input of the authentication tag.
func kmTagInput(d *kmDoc, mut string) []byte {
	m := func(name string) bool { return mut == name }
	order := binary.AppendByteOrder(binary.BigEndian)
	if m("tag-little-endian") {
		order = binary.LittleEndian
	}
	u32 := func(b []byte, n uint32) []byte { return order.AppendUint32(b, n) }
	u64 := func(b []byte, n uint64) []byte { return order.AppendUint64(b, n) }
	field := func(b, f []byte) []byte {
		if m("tag-without-length-prefixes") {
			return append(b, f...)
		}
		n := len(f)
		if m("tag-lengths-in-characters") {
			n = utf8.RuneCount(f)
		}
		return append(u32(b, uint32(n)), f...)
	}
	seconds := func(b []byte, s int64) []byte {
		if m("tag-durations-in-seconds") {
			return u64(b, uint64(s))
		}
		return u64(b, uint64(s)*1e9)
	}
	when := func(b []byte, text string, unix int64) []byte {
		if m("tag-times-as-text") {
			return field(b, []byte(text))
		}
		return u64(b, uint64(unix))
	}
	wrapped := func(b, w []byte) []byte {
		if m("tag-wrapped-as-text") {
			return field(b, []byte(base64.RawURLEncoding.EncodeToString(w)))
		}
		return field(b, w)
	}
	label := "stateseal-keyset-v4 auth"
	if m("tag-label-without-auth") {
		label = "stateseal-keyset-v4"
	}
	b := field(nil, []byte(label))
	b = field(b, []byte(d.id))
	if m("tag-version-u32") {
		b = u32(b, uint32(d.version))
	} else {
		b = u64(b, d.version)
	}
	b = field(b, []byte(d.kek))
	for _, s := range d.policy[:4] {
		b = seconds(b, s)
	}
	if !m("tag-without-freshness") {
		b = seconds(b, d.policy[4])
		if d.expires != "" || !m("tag-expiry-omitted-when-off") {
			b = when(b, d.expires, d.expiresUnix)
		}
	}
	if !m("tag-without-history") {
		b = u32(b, uint32(len(d.history)))
		for _, l := range d.history {
			b = field(u64(b, l.version), l.tag)
		}
	}
	if !m("tag-without-retired-keys") {
		b = u32(b, uint32(len(d.retired)))
		for _, id := range d.retired {
			b = u32(b, id)
		}
	}
	keys := slices.Clone(d.keys)
	if m("tag-keys-in-id-order") {
		slices.SortStableFunc(keys, func(a, b kmKey) int { return cmp.Compare(a.id, b.id) })
	}
	if m("tag-retired-keys-omitted") {
		keys = slices.DeleteFunc(keys, func(k kmKey) bool { return k.state == "retired" })
	}
	if !m("tag-key-count-omitted") {
		b = u32(b, uint32(len(keys)))
	}
	for _, k := range keys {
		if m("tag-key-id-as-text") {
			b = field(b, []byte(k.hexID))
		} else {
			b = u32(b, k.id)
		}
		b = field(b, []byte(k.algorithm))
		b = field(b, []byte(k.state))
		b = when(b, k.created, k.createdUnix)
		b = when(b, k.activation, k.activationUnix)
		b = wrapped(b, k.wrapped)
	}
	if !m("tag-without-auth-wrapped") {
		b = wrapped(b, d.authWrapped)
	}
	return b
}

// disagrees says how the model's result differs from the vector's, or "".
func (km *kmModel) disagrees(v kvVector) string {
	r := km.load(v)
	if r.expect != v.Expect {
		return fmt.Sprintf("the model: %s; the vector: %s", r.expect, v.Expect)
	}
	if r.expect != "ok" {
		return ""
	}
	got, want := r.loaded, *v.Loaded
	if km.mut != "" {
		// The informative values (associated data, the authentication
		// key, the tag's input) are compared only as written: a wrong
		// reading must be caught by what it loads, not by what it shows.
		got.Auth, want.Auth = kvAuth{}, kvAuth{}
		for i := range got.Keys {
			got.Keys[i].AD = ""
		}
		want.Keys = slices.Clone(want.Keys)
		for i := range want.Keys {
			want.Keys[i].AD = ""
		}
	}
	if g, w := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", want); g != w {
		return fmt.Sprintf("the model loads %s; the vector %s", g, w)
	}
	return ""
}

// kmMutationTable reads the table of KEYSET-FORMAT.md whose rows are
// | `mutation` | rule | `vector` |.
func kmMutationTable(t *testing.T) map[string]string {
	data, err := os.ReadFile("../docs/KEYSET-FORMAT.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	const title = "\n### Keyset rules and the vectors that pin them"
	i := strings.Index(doc, title)
	if i < 0 {
		t.Fatalf("KEYSET-FORMAT.md has no section %q", title[5:])
	}
	doc = doc[i+1:]
	if j := strings.Index(doc[4:], "\n#"); j >= 0 {
		doc = doc[:j+4]
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\|[^|]*\\| `([a-z0-9-]+)` \\|")
	out := map[string]string{}
	for _, r := range row.FindAllStringSubmatch(doc, -1) {
		if _, dup := out[r[1]]; dup {
			t.Errorf("KEYSET-FORMAT.md lists %s twice", r[1])
		}
		out[r[1]] = r[2]
	}
	if len(out) == 0 {
		t.Fatal("KEYSET-FORMAT.md's mutation table has no rows")
	}
	return out
}

// TestKeysetMutations: the model, written from KEYSET-FORMAT.md, agrees
// with every vector; and each wrong reading the spec lists fails the
// vector it names there.
func TestKeysetMutations(t *testing.T) {
	f := readKeysetVectors(t)
	byName := map[string]*kvVector{}
	for i := range f.Vectors {
		byName[f.Vectors[i].Name] = &f.Vectors[i]
	}
	km := &kmModel{t: t, f: f, byName: byName}
	for _, v := range f.Vectors {
		if bad := km.disagrees(v); bad != "" {
			t.Errorf("%s: %s", v.Name, bad)
		}
	}
	if t.Failed() {
		return
	}
	table := kmMutationTable(t)
	for _, mut := range kmMutations {
		catcher, ok := table[mut]
		if !ok {
			t.Errorf("KEYSET-FORMAT.md does not list the wrong reading %q", mut)
			continue
		}
		if byName[catcher] == nil {
			t.Errorf("%s: KEYSET-FORMAT.md names %s, which is not a vector", mut, catcher)
			continue
		}
		km := &kmModel{t: t, f: f, byName: byName, mut: mut}
		var caught []string
		for _, v := range f.Vectors {
			if km.disagrees(v) != "" {
				caught = append(caught, v.Name)
			}
		}
		if !slices.Contains(caught, catcher) {
			t.Errorf("%s: KEYSET-FORMAT.md names %s, but the vectors that fail are %v", mut, catcher, caught)
		}
	}
	for mut := range table {
		if !slices.Contains(kmMutations, mut) {
			t.Errorf("KEYSET-FORMAT.md lists %q, which the test does not try", mut)
		}
	}
	t.Logf("%d wrong readings of the keyset rules tried, each caught by the vector the spec names", len(kmMutations))
}

var kmMutations = []string{
	// The document.
	"invalid-utf8-replaced", "trailing-data-ignored", "duplicate-last-wins", "case-insensitive-names",
	"unknown-members-ignored", "nested-unknown-members-ignored", "null-refused", "absent-refused",
	"format-v3-accepted", "version-as-float", "policy-as-float", "version-zero-accepted",
	"times-with-fraction", "times-with-offset", "times-lower-case-z", "times-before-1970",
	"base64-padding-accepted", "base64-standard-alphabet", "base64-line-breaks-skipped", "base64-trailing-bits-ignored",
	"tag-any-length", "durations-unbounded", "max-ttl-from-zero", "max-ttl-uncapped", "skew-uncapped", "skew-cap-exclusive",
	"rotation-may-equal-propagation", "freshness-unbounded", "expires-without-freshness", "freshness-without-expires",
	"key-id-any-case", "key-id-zero-accepted", "duplicate-key-ids-accepted", "activation-before-created-accepted",
	"no-active-key-accepted",
	"history-optional", "history-unbounded", "history-order-ignored", "history-tag-any-length",
	"retired-keys-order-ignored", "retired-keys-unchecked",
	// The configuration.
	"kek-from-document", "kek-compared-with-transport-params", "document-kek-identity", "previous-kek-ignored",
	"pin-ignored", "first-loaded-not-pinned", "min-version-ignored", "min-version-exclusive", "rollback-running-accepted",
	"stale-after-expires", "now-rounded", "expiry-ahead-accepted",
	"stale-before-kek", "stale-before-pin", "stale-before-version", "version-before-pin", "pin-before-kek",
	"checks-after-authentication",
	// The authentication.
	"auth-ad-wrong-format", "auth-ad-without-keyset-id", "auth-key-must-be-32",
	"tag-without-length-prefixes", "tag-lengths-in-characters", "tag-little-endian", "tag-label-without-auth",
	"tag-version-u32", "tag-durations-in-seconds", "tag-without-freshness", "tag-expiry-omitted-when-off",
	"tag-times-as-text", "tag-keys-in-id-order", "tag-retired-keys-omitted", "tag-key-count-omitted",
	"tag-key-id-as-text", "tag-wrapped-as-text", "tag-without-auth-wrapped",
	"tag-without-history", "tag-without-retired-keys",
	"fork-ignored", "fork-by-bytes", "fork-before-authentication", "wrapped-unbounded",
	"history-ignored", "history-tags-ignored", "history-gap-accepted", "retired-revived-accepted",
	// Wrapping and the keys.
	"local-without-version-byte", "local-version-byte-ignored",
	"wrap-ad-without-key-id", "wrap-ad-without-keyset-id", "wrap-ad-v3-domain", "wrap-ad-key-id-binary",
	"keys-before-authentication", "data-key-any-length", "retired-keys-unwrapped", "decrypt-only-not-unwrapped",
	"primary-decrypt-only", "primary-ignores-activation", "primary-activation-exclusive",
	"primary-tie-first-listed", "primary-tie-highest-id", "no-primary-accepted", "primary-before-unwrap",
}
