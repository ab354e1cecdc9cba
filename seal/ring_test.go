package seal

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
)

// TestKeyStates follows a key through its life: active and sealing,
// superseded but still opening, decrypt-only, then retired.
func TestKeyStates(t *testing.T) {
	old := newKey(t, keyring.AEAD, t0.Add(-time.Hour))
	ring := newRing(t, old)
	clk := &fakeClock{t: t0}
	s := testkit.Must(New(ring, &Options{Now: clk.now}))
	tok := testkit.Must(s.Seal(testBinding, []byte("old"), time.Minute))

	// A successor that activates in the future is not primary yet.
	next := testkit.Must(keyring.NewKey(keyring.AEAD, t0, t0.Add(10*time.Second), []keyring.Key{old}))
	store(t, ring, old, next)
	if h := sealHeader(t, s); h.KeyID != old.ID {
		t.Fatalf("sealed with %08x before the successor's activation", h.KeyID)
	}
	clk.advance(10 * time.Second)
	if h := sealHeader(t, s); h.KeyID != next.ID {
		t.Fatalf("sealed with %08x after the successor's activation", h.KeyID)
	}
	if _, err := s.Open(testBinding, tok); err != nil {
		t.Fatalf("old key's token after rotation: %v", err)
	}

	old.State = keyring.DecryptOnly
	store(t, ring, old, next)
	if _, err := s.Open(testBinding, tok); err != nil {
		t.Fatalf("decrypt-only key's token: %v", err)
	}

	old.State = keyring.Retired
	store(t, ring, old, next)
	if _, err := s.Open(testBinding, tok); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("retired key's token: %v, want ErrUnknownKey", err)
	}
	store(t, ring, next) // pruned
	if _, err := s.Open(testBinding, tok); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("pruned key's token: %v, want ErrUnknownKey", err)
	}
}

func TestDecryptOnlyNeverSeals(t *testing.T) {
	a := newKey(t, keyring.MAC, t0.Add(-2*time.Hour))
	b := newKey(t, keyring.MAC, t0.Add(-time.Hour))
	b.State = keyring.DecryptOnly // newer, but may not seal
	ring := newRing(t, a, b)
	clk := &fakeClock{t: t0}
	s := testkit.Must(New(ring, &Options{Now: clk.now}))
	if h := sealHeader(t, s); h.KeyID != a.ID {
		t.Fatalf("sealed with %08x, want the active key %08x", h.KeyID, a.ID)
	}
}

func TestNoPrimaryYet(t *testing.T) {
	ring := newRing(t, newKey(t, keyring.MAC, t0.Add(time.Hour)))
	clk := &fakeClock{t: t0}
	s := testkit.Must(New(ring, &Options{Now: clk.now}))
	if _, err := s.Seal(testBinding, nil, time.Minute); !errors.Is(err, keyring.ErrNoPrimary) {
		t.Fatalf("seal before any activation: %v, want keyring.ErrNoPrimary", err)
	}
}

// TestConcurrentSwap seals and opens from several goroutines while the
// ring's snapshot is replaced, for the race detector. Every token sealed
// opens, since each snapshot keeps every key.
func TestConcurrentSwap(t *testing.T) {
	keys := []keyring.Key{newKey(t, keyring.AEAD, time.Time{})}
	ring := newRing(t, keys...)
	s := testkit.Must(New(ring, nil))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				tok, err := s.Seal(testBinding, []byte("x"), time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := s.Open(testBinding, tok); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for range 50 {
		k := testkit.Must(keyring.NewKey(keyring.AEAD, time.Now(), time.Time{}, keys))
		keys = append(keys, k)
		store(t, ring, keys...)
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
}

func store(t *testing.T, ring *keyring.Ring, keys ...keyring.Key) {
	t.Helper()
	snap, err := keyring.NewSnapshot(keys)
	if err != nil {
		t.Fatal(err)
	}
	if err := ring.Store(snap); err != nil {
		t.Fatal(err)
	}
}

func sealHeader(t *testing.T, s *Sealer) Header {
	t.Helper()
	tok, err := s.Seal(testBinding, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	h, err := Inspect(tok)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
