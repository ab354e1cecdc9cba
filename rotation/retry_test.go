package rotation

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/stateseal/stateseal/keyring"
	"github.com/stateseal/stateseal/keyset"
	"github.com/stateseal/stateseal/stores"
)

// racy is a file store where another writer gets in before the first
// write of each edit: that write loses its compare-and-swap.
type racy struct {
	*stores.File
	rival func()
	raced int
}

func (r *racy) Write(ctx context.Context, data []byte, rev string) (string, error) {
	if r.raced == 0 {
		r.raced++
		r.rival()
	}
	return r.File.Write(ctx, data, rev)
}

// TestEditRetries: an edit that decides again on the keyset it edits
// (retire, here) is redone after a lost compare-and-swap; a rotation,
// which would add a second key if redone, reports the conflict.
func TestEditRetries(t *testing.T) {
	path, clk, o := setup(t)
	// A keyset in a store names its local KEK by an absolute path.
	abs := "local:" + filepath.Join(filepath.Dir(path), "kek")
	if _, err := Rewrap(ctx, path, abs, o); err != nil {
		t.Fatal(err)
	}
	o.KEK = abs
	Rotate(ctx, path, nil, o)
	clk.advance(2 * time.Hour)
	old := read(t, path).Keys[0].ID
	r := &racy{File: stores.NewFile(path), rival: func() {
		// Another operator rotates meanwhile.
		if _, err := Rotate(ctx, path, nil, o); err != nil {
			t.Fatal(err)
		}
	}}
	reg := new(stores.Registry)
	reg.Register("racy", func(context.Context, *url.URL) (stores.Store, error) { return r, nil })
	ro := *o
	ro.Stores = reg
	loc := "racy://keyset"
	if _, err := Retire(ctx, loc, old, nil, &ro); err != nil {
		t.Fatalf("retire after a lost race: %v", err)
	}
	if k, _ := read(t, path).Key(old); k.State != keyring.Retired || r.raced != 1 {
		t.Fatalf("key %08x is %v after %d races", old, k.State, r.raced)
	}
	r.raced = 0
	before := len(read(t, path).Keys)
	if _, err := Rotate(ctx, loc, nil, &ro); !errors.Is(err, keyset.ErrConflict) {
		t.Fatalf("rotate after a lost race: %v, want ErrConflict", err)
	}
	// The rival's rotation went in; the one that lost did not.
	if n := len(read(t, path).Keys); n != before+1 {
		t.Fatalf("%d keys after the rival's rotation and a lost one, had %d: want %d", n, before, before+1)
	}
}
