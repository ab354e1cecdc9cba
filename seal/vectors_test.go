package seal

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/envelope"
	"github.com/stateseal/stateseal/keyring"
)

// The test vectors live in testdata/vectors.json at the top of the module,
// where a second implementation can find them. docs/FORMAT.md describes
// the fields. Regenerate with: go test ./seal -run TestVectors -update
var update = flag.Bool("update", false, "rewrite ../testdata/vectors.json")

const vectorsFile = "../testdata/vectors.json"

type vectorFile struct {
	Format      string       `json:"format"`
	Note        string       `json:"note"`
	Vectors     []vector     `json:"vectors"`
	ArgsVectors []argsVector `json:"args_vectors"`
}

type vector struct {
	Name    string      `json:"name"`
	Comment string      `json:"comment"`
	Key     vectorKey   `json:"key,omitzero"` // the opener's key; none for not_sealed
	Binding vectorBind  `json:"binding"`
	Payload string      `json:"payload"`        // hex
	Seal    *vectorSeal `json:"seal,omitempty"` // ok and not_sealed vectors: the sealer's side
	AD      string      `json:"associated_data,omitempty"`
	Token   string      `json:"token"`
	Open    vectorCheck `json:"open,omitzero"` // none for not_sealed
	Expect  string      `json:"expect"`
	// Reason is what a client may be told of the opener's error:
	// "invalid" or "expired" (seal.Reason); none for ok and not_sealed.
	Reason string `json:"reason,omitempty"`
}

type vectorKey struct {
	ID         string `json:"id"` // 8 hex digits
	Algorithm  string `json:"algorithm"`
	Material   string `json:"material"`   // hex
	State      string `json:"state"`      // active, decrypt-only or retired
	Activation int64  `json:"activation"` // Unix seconds
}

type vectorBind struct {
	Method    string `json:"method"`
	Target    string `json:"target"`
	Principal string `json:"principal"`
	// PrincipalHex, instead of Principal, when the principal's bytes are
	// not UTF-8.
	PrincipalHex string `json:"principal_hex,omitempty"`
	Audience     string `json:"audience"`
	Session      string `json:"session"`
	ArgsDigest   string `json:"args_digest"` // hex: bound as raw bytes
	Context      string `json:"context"`     // hex: bound as raw bytes
	// lone holds, by JSON name, the strings that hold a lone surrogate,
	// as written in JSON; their fields are empty (vectors_surrogate_test.go).
	lone map[string]string
}

// vectorSeal is the sealer's side of a vector: at now (Unix
// milliseconds), a requested ttl (milliseconds; 0 means the default) under
// the sealer's default and maximum TTL (seconds) and maximum token length,
// with the keyset keys (in keyset order) and this nonce (AEAD), seals the
// payload to the token, or refuses (not_sealed).
type vectorSeal struct {
	NowMillis   int64         `json:"now_ms"`
	TTLMillis   int64         `json:"ttl_ms"`
	DefaultTTL  *float64      `json:"default_ttl"` // seconds, whole or not; null: the server sets none
	MaxTTL      *float64      `json:"max_ttl"`     // null: the server sets none
	MaxTokenLen int           `json:"max_token_len"`
	Policy      *vectorPolicy `json:"policy,omitempty"` // the keyset's, if the keys come from one
	Keys        []vectorKey   `json:"keys"`
	Nonce       string        `json:"nonce,omitempty"` // hex
}

type vectorCheck struct {
	NowMillis   int64         `json:"now_ms"`           // Unix milliseconds
	MaxTTL      *float64      `json:"max_ttl"`          // seconds, whole or not; null: the server sets none
	Skew        *float64      `json:"skew"`             // null: the server sets none
	MaxTokenLen int           `json:"max_token_len"`    // bytes of the token as sent
	Policy      *vectorPolicy `json:"policy,omitempty"` // the keyset's, if the keys come from one
}

var expectErr = map[string]error{
	"ok": nil, "malformed": ErrMalformed, "too_large": ErrTooLarge,
	"unknown_key": ErrUnknownKey, "invalid": ErrInvalid,
	"expired": ErrExpired, "not_yet_valid": ErrNotYetValid,
	"not_sealed": nil, // the sealer refuses; nothing is opened
	"config":     nil, // the server's configuration is refused
}

func readVectors(t testing.TB) vectorFile {
	t.Helper()
	data, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var vf vectorFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&vf); err != nil {
		t.Fatal(err)
	}
	return vf
}

func TestVectors(t *testing.T) {
	if *update {
		writeVectors(t)
	}
	vf := readVectors(t)
	if len(vf.Vectors) < 40 {
		t.Fatalf("%d vectors, want at least 40", len(vf.Vectors))
	}
	kinds := map[string]bool{}
	for _, v := range vf.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			kinds[v.Expect] = true
			want, ok := expectErr[v.Expect]
			if !ok {
				t.Fatalf("unknown expectation %q", v.Expect)
			}
			if (v.Reason != "") != (want != nil) {
				t.Fatalf("reason %q with expect %s: an opener's error has a reason, ok and not_sealed none", v.Reason, v.Expect)
			}
			if len(v.Binding.lone) > 0 {
				v.checkLone(t)
				return
			}
			if v.Expect == "config" {
				if err := v.configure(t); err == nil {
					t.Fatal("configured; the vector says the configuration is refused")
				}
				return
			}
			if v.Expect == "not_sealed" {
				if _, err := v.seal(t, v.binding(t)); err == nil {
					t.Fatal("sealed; the vector says the sealer refuses")
				}
				return
			}
			s, b := v.opener(t)
			payload, err := s.Open(b, v.Token)
			if want == nil {
				if err != nil || !bytes.Equal(payload, unhex(t, v.Payload)) {
					t.Fatalf("Open = %x, %v; want payload %s", payload, err, v.Payload)
				}
				if v.Seal != nil {
					v.checkSeal(t, b)
				} else if !slices.Contains(handMade, v.Name) {
					t.Fatal("an ok vector without sealer settings")
				}
				return
			}
			if !errors.Is(err, want) {
				t.Fatalf("Open: %v, want %v", err, want)
			}
			if r := Reason(err); r != v.Reason {
				t.Fatalf("the client is told %q, the vector says %q", r, v.Reason)
			}
		})
	}
	for name := range expectErr {
		if !kinds[name] {
			t.Errorf("no vector expects %q", name)
		}
	}
}

// configure builds the sealer (if the vector has one) or else the opener
// a config vector describes, and returns New's error.
func (v *vector) configure(t *testing.T) error {
	t.Helper()
	if v.Seal != nil {
		var keys []keyring.Key
		for _, k := range v.Seal.Keys {
			keys = append(keys, k.parse(t))
		}
		_, err := New(policyRing(t, v.Seal.Policy, keys...), &Options{MaxTTL: seconds(v.Seal.MaxTTL), DefaultTTL: seconds(v.Seal.DefaultTTL), MaxTokenLen: v.Seal.MaxTokenLen})
		return err
	}
	// The opener sets no default TTL: a vector gives it none.
	o := &Options{MaxTTL: seconds(v.Open.MaxTTL), Skew: seconds(v.Open.Skew), MaxTokenLen: v.Open.MaxTokenLen}
	if o.Skew == 0 && v.Open.Skew != nil {
		o.Skew = NoSkew
	}
	_, err := New(policyRing(t, v.Open.Policy, v.Key.parse(t), vkey("filler", keyring.AEAD)), o)
	return err
}

// opener builds the opener a vector describes. The ring also holds an
// unrelated active key, since a ring needs one that can seal.
func (v *vector) opener(t *testing.T) (*Sealer, Binding) {
	t.Helper()
	k := v.Key.parse(t)
	filler := vkey("filler", keyring.AEAD)
	now := time.UnixMilli(v.Open.NowMillis)
	o := &Options{Now: func() time.Time { return now }, MaxTTL: seconds(v.Open.MaxTTL), Skew: seconds(v.Open.Skew), MaxTokenLen: v.Open.MaxTokenLen}
	if o.Skew == 0 && v.Open.Skew != nil {
		o.Skew = NoSkew
	}
	s, err := New(policyRing(t, v.Open.Policy, k, filler), o)
	if err != nil {
		t.Fatal(err)
	}
	return s, v.binding(t)
}

func (k vectorKey) parse(t *testing.T) keyring.Key {
	t.Helper()
	alg, err := keyring.ParseAlgorithm(k.Algorithm)
	if err != nil {
		t.Fatal(err)
	}
	st, err := keyring.ParseState(k.State)
	if err != nil {
		t.Fatal(err)
	}
	id, err := hex.DecodeString(k.ID)
	if err != nil || len(id) != 4 {
		t.Fatalf("key id %q", k.ID)
	}
	key, err := keyring.ImportKey(binary.BigEndian.Uint32(id), alg, st, time.Time{}, time.Unix(k.Activation, 0), unhex(t, k.Material))
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func (v *vector) binding(t *testing.T) Binding {
	return Binding{
		Method: v.Binding.Method, Target: v.Binding.Target, Principal: v.Binding.principal(t),
		Audience: v.Binding.Audience, Session: v.Binding.Session,
		ArgsDigest: unhex(t, v.Binding.ArgsDigest), Context: unhex(t, v.Binding.Context),
	}
}

// handMade are the ok vectors no sealer makes, made by hand with the key.
var handMade = []string{"mac-lifetime-zero"}

// sealed is a token sealed again from a vector, and the scratch whose
// buffer starts with its associated data.
type sealed struct {
	sc  *scratch
	tok string
}

// seal seals the vector's payload with its sealer settings, keyset and
// nonce.
func (v *vector) seal(t *testing.T, b Binding) (sealed, error) {
	t.Helper()
	var keys []keyring.Key
	for _, k := range v.Seal.Keys {
		keys = append(keys, k.parse(t))
	}
	at := time.UnixMilli(v.Seal.NowMillis)
	s, err := New(policyRing(t, v.Seal.Policy, keys...), &Options{Now: func() time.Time { return at }, MaxTTL: seconds(v.Seal.MaxTTL), DefaultTTL: seconds(v.Seal.DefaultTTL), MaxTokenLen: v.Seal.MaxTokenLen})
	if err != nil {
		t.Fatal(err)
	}
	sc := &scratch{}
	raw, err := s.sealRaw(sc, b, unhex(t, v.Payload), time.Duration(v.Seal.TTLMillis)*time.Millisecond, unhex(t, v.Seal.Nonce))
	if err != nil {
		return sealed{}, err
	}
	return sealed{sc, string(envelope.AppendEncode(nil, raw))}, nil
}

// checkSeal seals the vector's payload again with its sealer settings and
// nonce, and expects the very same token and associated data.
func (v *vector) checkSeal(t *testing.T, b Binding) {
	t.Helper()
	s, err := v.seal(t, b)
	if err != nil {
		t.Fatal(err)
	}
	if s.tok != v.Token {
		t.Fatalf("sealed again:\n%s\nwant\n%s", s.tok, v.Token)
	}
	// sealRaw leaves the associated data at the start of its buffer.
	if ad := hex.EncodeToString(s.sc.buf[:len(v.AD)/2]); ad != v.AD {
		t.Fatalf("associated data %s, want %s", ad, v.AD)
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	if s == "" {
		return nil
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
