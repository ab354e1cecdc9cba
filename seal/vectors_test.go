package seal

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
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
	Key     vectorKey   `json:"key"`
	Binding vectorBind  `json:"binding"`
	Payload string      `json:"payload"`        // hex
	Seal    *vectorSeal `json:"seal,omitempty"` // ok vectors: how the token was sealed
	AD      string      `json:"associated_data,omitempty"`
	Token   string      `json:"token"`
	Open    vectorCheck `json:"open"`
	Expect  string      `json:"expect"`
}

type vectorKey struct {
	ID         string `json:"id"` // 8 hex digits
	Algorithm  string `json:"algorithm"`
	Material   string `json:"material"`   // hex
	State      string `json:"state"`      // active, decrypt-only or retired
	Activation int64  `json:"activation"` // Unix seconds
}

type vectorBind struct {
	Method     string `json:"method"`
	Target     string `json:"target"`
	Principal  string `json:"principal"`
	Audience   string `json:"audience"`
	Session    string `json:"session"`
	ArgsDigest string `json:"args_digest"` // hex: bound as raw bytes
	Context    string `json:"context"`     // hex: bound as raw bytes
}

// vectorSeal is the sealer's side of an ok vector: at now, a requested ttl
// (milliseconds; 0 means the default) under the sealer's default and
// maximum TTL (seconds), with this nonce (AEAD), seals to the token.
type vectorSeal struct {
	Now        int64  `json:"now"`
	TTLMillis  int64  `json:"ttl_ms"`
	DefaultTTL int64  `json:"default_ttl"`
	MaxTTL     int64  `json:"max_ttl"`
	Nonce      string `json:"nonce,omitempty"` // hex
}

type vectorCheck struct {
	Now         int64 `json:"now"`
	MaxTTL      int64 `json:"max_ttl"`
	Skew        int64 `json:"skew"`
	MaxTokenLen int   `json:"max_token_len"` // bytes of the token as sent
}

var expectErr = map[string]error{
	"ok": nil, "malformed": ErrMalformed, "too_large": ErrTooLarge,
	"unknown_key": ErrUnknownKey, "invalid": ErrInvalid,
	"expired": ErrExpired, "not_yet_valid": ErrNotYetValid,
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
			s, b := v.opener(t)
			payload, err := s.Open(b, v.Token)
			if want == nil {
				if err != nil || !bytes.Equal(payload, unhex(t, v.Payload)) {
					t.Fatalf("Open = %x, %v; want payload %s", payload, err, v.Payload)
				}
				v.checkSeal(t, b)
				return
			}
			if !errors.Is(err, want) {
				t.Fatalf("Open: %v, want %v", err, want)
			}
		})
	}
	for name := range expectErr {
		if !kinds[name] {
			t.Errorf("no vector expects %q", name)
		}
	}
}

// opener builds the opener a vector describes. The ring also holds an
// unrelated active key, since a ring needs one that can seal.
func (v *vector) opener(t *testing.T) (*Sealer, Binding) {
	t.Helper()
	k := v.key(t)
	filler := vkey("filler", keyring.AEAD)
	now := time.Unix(v.Open.Now, 0)
	s, err := New(newRing(t, k, filler), WithClock(func() time.Time { return now }),
		WithMaxTTL(time.Duration(v.Open.MaxTTL)*time.Second),
		WithDefaultTTL(time.Second),
		WithSkew(time.Duration(v.Open.Skew)*time.Second),
		WithMaxTokenLen(v.Open.MaxTokenLen))
	if err != nil {
		t.Fatal(err)
	}
	return s, v.binding(t)
}

func (v *vector) key(t *testing.T) keyring.Key {
	t.Helper()
	alg, err := keyring.ParseAlgorithm(v.Key.Algorithm)
	if err != nil {
		t.Fatal(err)
	}
	st, err := keyring.ParseState(v.Key.State)
	if err != nil {
		t.Fatal(err)
	}
	id, err := hex.DecodeString(v.Key.ID)
	if err != nil || len(id) != 4 {
		t.Fatalf("key id %q", v.Key.ID)
	}
	return keyring.Key{ID: binary.BigEndian.Uint32(id), Algorithm: alg, State: st,
		Activation: time.Unix(v.Key.Activation, 0), Material: unhex(t, v.Key.Material)}
}

func (v *vector) binding(t *testing.T) Binding {
	return Binding{
		Method: v.Binding.Method, Target: v.Binding.Target, Principal: v.Binding.Principal,
		Audience: v.Binding.Audience, Session: v.Binding.Session,
		ArgsDigest: unhex(t, v.Binding.ArgsDigest), Context: unhex(t, v.Binding.Context),
	}
}

// checkSeal seals the vector's payload again with its sealer settings and
// nonce, and expects the very same token and associated data.
func (v *vector) checkSeal(t *testing.T, b Binding) {
	t.Helper()
	if v.Seal == nil {
		t.Fatal("an ok vector without sealer settings")
	}
	k := v.key(t)
	k.State, k.Activation = keyring.Active, time.Unix(v.Seal.Now, 0)
	at := time.Unix(v.Seal.Now, 0)
	s, err := New(newRing(t, k), WithClock(func() time.Time { return at }),
		WithMaxTTL(time.Duration(v.Seal.MaxTTL)*time.Second), WithDefaultTTL(time.Duration(v.Seal.DefaultTTL)*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	sc := &scratch{}
	raw, err := s.sealRaw(sc, b, unhex(t, v.Payload), time.Duration(v.Seal.TTLMillis)*time.Millisecond, unhex(t, v.Seal.Nonce))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(envelope.AppendEncode(nil, raw)); got != v.Token {
		t.Fatalf("sealed again:\n%s\nwant\n%s", got, v.Token)
	}
	// sealRaw leaves the associated data at the start of its buffer.
	if ad := hex.EncodeToString(sc.buf[:len(v.AD)/2]); ad != v.AD {
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
