package keyring

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
)

var t0 = testkit.T0

func key(t *testing.T, alg Algorithm, activation time.Time, existing ...Key) Key {
	t.Helper()
	k, err := NewKey(alg, t0, activation, existing)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestNewKey(t *testing.T) {
	var keys []Key
	for range 1000 {
		k := key(t, AEAD, t0, keys...)
		if k.ID == 0 || len(k.material) != KeySize || k.State != Active {
			t.Fatalf("bad key %+v", k)
		}
		keys = append(keys, k)
	}
	if _, err := NewSnapshot(keys); err != nil {
		t.Fatalf("1000 generated keys: %v", err)
	}
	if bytes.Equal(keys[0].material, keys[1].material) {
		t.Fatal("two keys share material")
	}
	if _, err := NewKey(Algorithm(9), t0, t0, nil); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("unknown algorithm: %v", err)
	}
}

func TestSnapshotValidates(t *testing.T) {
	good := key(t, MAC, t0)
	for name, mutate := range map[string]func(*Key){
		"id 0":            func(k *Key) { k.ID = 0 },
		"short material":  func(k *Key) { k.material = k.material[:31] },
		"no material":     func(k *Key) { k.material = nil },
		"unknown algo":    func(k *Key) { k.Algorithm = 3 },
		"unknown state":   func(k *Key) { k.State = 0 },
		"only not active": func(k *Key) { k.State = DecryptOnly },
	} {
		k := good
		k.material = bytes.Clone(good.material)
		mutate(&k)
		if _, err := NewSnapshot([]Key{k}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	dup := key(t, MAC, t0)
	dup.ID = good.ID
	if _, err := NewSnapshot([]Key{good, dup}); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("duplicate id: %v", err)
	}
	if _, err := NewSnapshot(nil); err == nil {
		t.Error("empty snapshot accepted")
	}
}

func TestPrimary(t *testing.T) {
	a := key(t, AEAD, t0)
	b := key(t, AEAD, t0.Add(time.Hour), a)
	c := key(t, AEAD, t0.Add(2*time.Hour), a, b)
	c.State = DecryptOnly
	s, err := NewSnapshot([]Key{c, b, a})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		at   time.Time
		want uint32
	}{
		{t0, a.ID},
		{t0.Add(time.Hour - time.Nanosecond), a.ID},
		{t0.Add(time.Hour), b.ID},
		{t0.Add(3 * time.Hour), b.ID}, // c is newer but decrypt-only
	} {
		k, err := s.Primary(tc.at)
		if err != nil || k.ID != tc.want {
			t.Errorf("Primary(%v) = %v, %v; want %08x", tc.at, k, err, tc.want)
		}
	}
	if _, err := s.Primary(t0.Add(-time.Second)); !errors.Is(err, ErrNoPrimary) {
		t.Errorf("before any activation: %v", err)
	}
}

// Two keys with the same activation: the one listed later seals, so that
// a key added or promoted in the same second as the primary's activation
// takes over, and every instance, reading the same keyset, agrees.
func TestPrimaryTieBreak(t *testing.T) {
	a := key(t, MAC, t0)
	b := key(t, MAC, t0, a)
	for _, order := range [][]Key{{a, b}, {b, a}} {
		s := testkit.Must(NewSnapshot(order))
		k := testkit.Must(s.Primary(t0))
		if want := order[1].ID; k.ID != want {
			t.Errorf("primary of %08x, %08x is %08x, want the later-listed %08x", order[0].ID, order[1].ID, k.ID, want)
		}
	}
}

func TestLookup(t *testing.T) {
	a := key(t, MAC, t0)
	r := key(t, MAC, t0, a)
	r.State = Retired
	d := key(t, MAC, t0.Add(time.Hour), a, r)
	d.State = DecryptOnly
	s := testkit.Must(NewSnapshot([]Key{a, r, d}))
	if _, ok := s.Lookup(a.ID); !ok {
		t.Error("active key not found")
	}
	if _, ok := s.Lookup(d.ID); !ok {
		t.Error("decrypt-only key not found")
	}
	if _, ok := s.Lookup(r.ID); ok {
		t.Error("retired key found")
	}
	if _, ok := s.Lookup(a.ID ^ r.ID ^ d.ID ^ 1); ok {
		t.Error("unknown id found")
	}
}

func TestSnapshotIsImmutable(t *testing.T) {
	k := key(t, AEAD, t0)
	orig := bytes.Clone(k.material)
	s := testkit.Must(NewSnapshot([]Key{k}))
	k.material[0] ^= 0xff // the caller's copy
	got := s.Keys()
	got[0].material[1] ^= 0xff // a copy handed out
	if !bytes.Equal(s.Keys()[0].material, orig) {
		t.Fatal("snapshot material changed through a caller's slice")
	}
}

func TestRing(t *testing.T) {
	r, err := Generate(MAC)
	if err != nil {
		t.Fatal(err)
	}
	first := r.Current()
	if first.Len() != 1 {
		t.Fatalf("generated ring has %d keys", first.Len())
	}
	if _, err := first.Primary(time.Now()); err != nil {
		t.Fatalf("generated key is not primary now: %v", err)
	}
	s := testkit.Must(NewSnapshot([]Key{key(t, MAC, t0)}))
	if err := r.Store(s); err != nil || r.Current() != s {
		t.Fatal("Store did not swap")
	}
	if err := r.Store(nil); err == nil || r.Current() != s {
		t.Fatal("Store(nil) accepted or dropped the keys")
	}
	if _, err := NewRing(nil); err == nil {
		t.Fatal("NewRing(nil) accepted")
	}
}

func TestParse(t *testing.T) {
	for _, a := range []Algorithm{MAC, AEAD} {
		if got, err := ParseAlgorithm(a.String()); err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q) = %v, %v", a, got, err)
		}
	}
	for _, s := range []State{Active, DecryptOnly, Retired} {
		if got, err := ParseState(s.String()); err != nil || got != s {
			t.Errorf("ParseState(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseAlgorithm("AES"); err == nil {
		t.Error("unknown algorithm parsed")
	}
	if _, err := ParseState("gone"); err == nil {
		t.Error("unknown state parsed")
	}
	if FormatID(0xab) != "000000ab" {
		t.Error(FormatID(0xab))
	}
}

func TestParseID(t *testing.T) {
	if id, err := ParseID("0a1b2c3d"); err != nil || id != 0x0a1b2c3d || FormatID(id) != "0a1b2c3d" {
		t.Fatalf("ParseID = %x, %v", id, err)
	}
	for _, s := range []string{"", "0A1B2C3D", "a1b2c3d", "0a1b2c3d0", "0x1b2c3d", "zzzzzzzz", " a1b2c3d", "00000000", "+a1b2c3d"} {
		if _, err := ParseID(s); err == nil {
			t.Errorf("ParseID(%q) accepted", s)
		}
	}
}

// TestSnapshotClone: a clone has the same keys, policy and version, and
// nothing done to one's keys (their material zeroed, their fields
// changed through the *Key that Primary returns) reaches the other.
func TestSnapshotClone(t *testing.T) {
	a, b := key(t, AEAD, t0), key(t, MAC, t0.Add(time.Hour))
	s := testkit.Must(NewSnapshot([]Key{a, b})).WithPolicy(DefaultPolicy(), 7)
	c := s.Clone()
	if c.Version() != 7 || c.Len() != 2 {
		t.Fatalf("clone: version %d, %d keys", c.Version(), c.Len())
	}
	if p, ok := c.Policy(); !ok || p != DefaultPolicy() {
		t.Fatalf("clone's policy: %+v %v", p, ok)
	}
	want := bytes.Clone(testkit.Must(s.Primary(t0.Add(2 * time.Hour))).material)
	k := testkit.Must(c.Primary(t0.Add(2 * time.Hour)))
	if k.ID != b.ID || !bytes.Equal(k.material, want) {
		t.Fatal("the clone seals with another key")
	}
	lookup := func(s *Snapshot, id uint32) []byte {
		k, ok := s.Lookup(id)
		if !ok {
			t.Fatalf("no key %s", FormatID(id))
		}
		return k.material
	}
	other := bytes.Clone(lookup(c, a.ID))
	k.Zero()
	k.material = append(k.material, 1) // past its length: a new array, not the next key's
	k.State = Retired
	if p := testkit.Must(s.Primary(t0.Add(2 * time.Hour))); p.State != Active || !bytes.Equal(p.material, want) {
		t.Fatal("a change to the clone's key reached the original")
	}
	if !bytes.Equal(lookup(c, a.ID), other) {
		t.Fatal("a change to one of the clone's keys reached another")
	}
}
