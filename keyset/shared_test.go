package keyset

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/keymaterial"
	"github.com/stateseal/stateseal/internal/testkit"
	"github.com/stateseal/stateseal/keyring"
)

// sharedDoc returns the process's document for data and whether the KEK
// k has proved it (authenticated and unwrapped) already.
func sharedDoc(t *testing.T, data []byte, k *sharedKEK) (*document, bool) {
	t.Helper()
	d := lookupDocument(sha256.Sum256(data))
	if d == nil {
		return nil, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.results[resultKey{stageKeys, k}]
	return d, ok
}

// edit writes the version after prev with one more key, and returns it
// and its bytes.
func edit(t *testing.T, path string, prev *Keyset, kek backends.KEK) (*Keyset, []byte) {
	t.Helper()
	next := prev.Clone()
	next.Follow(prev)
	next.Keys = append(next.Keys, testkit.Must(next.Wrap(ctx, kek, key(t, keyring.AEAD, t0, next.ids()...))))
	testkit.Check(writeAuth(t, path, next, kek))
	return next, testkit.Must(os.ReadFile(path))
}

// TestSharedLoadChecksEveryLoader: loaders of one process that read the
// same bytes under the same KEK share the parse, the authentication and
// the unwrap, and each still refuses what it must: a version below its
// MinVersion, below one it installed, another branch than the one it
// installed, another keyset than the one it pinned, no usable primary at
// its clock. Each refusal comes after the document was proved for
// another loader, with the very KEK client the refusing loader uses.
func TestSharedLoadChecksEveryLoader(t *testing.T) {
	path, v1, kek := newKeysetFile(t, 1)
	at := func(d time.Duration) func() time.Time { return func() time.Time { return t0.Add(d) } }
	loader := func(o LoadOptions) *Loader {
		o.KEK = "local:kek"
		if o.Now == nil {
			o.Now = at(time.Hour)
		}
		l := &Loader{Path: path, Options: o}
		t.Cleanup(func() { l.Close() })
		return l
	}
	doc1 := testkit.Must(os.ReadFile(path))
	forked := loader(LoadOptions{})
	edit(t, path, v1, kek) // a version 2 of a branch that loses
	testkit.Must(forked.Load(ctx))
	testkit.Check(os.WriteFile(path, doc1, 0o600)) // back to version 1, to branch again

	seen := loader(LoadOptions{})
	v2, doc2 := edit(t, path, v1, kek)
	_, doc3 := edit(t, path, v2, kek)
	testkit.Must(seen.Load(ctx)) // version 3
	testkit.Check(os.WriteFile(path, doc2, 0o600))

	fresh := loader(LoadOptions{})
	var got []*Keyset
	fresh.OnReload = func(ks *Keyset) { got = append(got, ks) }
	ring := testkit.Must(fresh.Load(ctx))
	if ring.Current().Version() != 2 {
		t.Fatalf("fresh loader installed version %d, want 2", ring.Current().Version())
	}
	k := fresh.keks["local:kek"]
	d, proved := sharedDoc(t, doc2, k)
	if d == nil || !proved || fresh.held != d {
		t.Fatal("version 2 is not shared, proved under the loaders' KEK")
	}
	if seen.keks["local:kek"] != k || forked.keks["local:kek"] != k {
		t.Fatal("loaders configured alike do not share their KEK client")
	}

	for _, c := range []struct {
		name string
		l    *Loader
		want error
		text string
	}{
		{"seen a higher version", seen, ErrRollback, "went back from version 3 to 2"},
		{"installed another branch", forked, ErrFork, "is not the one this instance loaded"},
		{"MinVersion above", loader(LoadOptions{MinVersion: 3}), ErrRollback, "below the configured minimum 3"},
		{"pinned another keyset", loader(LoadOptions{KeysetID: "ks-0000000000000000"}), ErrOtherKeyset, "pinned ks-0000000000000000"},
		{"clock before any activation", loader(LoadOptions{Now: at(-time.Hour)}), keyring.ErrNoPrimary, "no usable primary"},
	} {
		var err error
		if c.l.ring != nil {
			err = c.l.Reload(ctx)
		} else {
			_, err = c.l.Load(ctx)
		}
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %v, want %v (%q)", c.name, err, c.want, c.text)
		}
		if c.l.held == d {
			t.Errorf("%s: the loader holds the document it refused", c.name)
		}
	}
	if v := seen.ring.Current().Version(); v != 3 {
		t.Errorf("the loader that saw version 3 serves version %d", v)
	}
	// The refusals changed nothing shared: the next loader installs.
	if ring := testkit.Must(loader(LoadOptions{}).Load(ctx)); ring.Current().Version() != 2 {
		t.Errorf("after the refusals a fresh loader installed version %d", ring.Current().Version())
	}
	// And the loader that saw version 3 goes on when it comes back.
	testkit.Check(os.WriteFile(path, doc3, 0o600))
	testkit.Check(seen.Reload(ctx))
	testkit.Check(fresh.Reload(ctx))
	if len(got) != 1 || got[0].Version != 3 {
		t.Fatalf("fresh loader's reloads: %v", got)
	}
}

// TestSharedOnReloadCopies: the Keyset a loader hands its OnReload is a
// copy of its own: a callback that changes it (its version, its tag, its
// keys) changes neither what that loader installed nor what any other
// loader of the process loads from the same bytes.
func TestSharedOnReloadCopies(t *testing.T) {
	path, v1, kek := newKeysetFile(t, 1)
	o := LoadOptions{KEK: "local:kek", Now: func() time.Time { return t0.Add(time.Hour) }}
	vandal := &Loader{Path: path, Options: o, OnReload: func(ks *Keyset) {
		ks.ID, ks.Version, ks.KEK = "ks-vandal", 99, "local:other"
		ks.Auth.Tag[0] ^= 0xff
		ks.Keys[0].Wrapped[0] ^= 0xff
		ks.Keys[0].State = keyring.Retired
		ks.History = nil
		ks.RetiredKeys = append(ks.RetiredKeys, ks.Keys[1].ID)
	}}
	var mu sync.Mutex
	var seen []*Keyset
	other := &Loader{Path: path, Options: o, OnReload: func(ks *Keyset) { mu.Lock(); seen = append(seen, ks); mu.Unlock() }}
	for _, l := range []*Loader{vandal, other} {
		testkit.Must(l.Load(ctx))
		defer l.Close()
	}
	v2, doc2 := edit(t, path, v1, kek)
	testkit.Check(vandal.Reload(ctx))
	testkit.Check(other.Reload(ctx))
	if len(seen) != 1 || !bytes.Equal(testkit.Must(seen[0].Marshal()), testkit.Must(v2.Marshal())) {
		t.Fatalf("the other loader got %+v", seen)
	}
	d, _ := sharedDoc(t, doc2, vandal.keks["local:kek"])
	if d == nil || !bytes.Equal(testkit.Must(d.ks.Marshal()), testkit.Must(v2.Marshal())) {
		t.Fatal("the shared document changed")
	}
	// Nor do the keys it serves: each loader's snapshot is its own.
	now := t0.Add(time.Hour)
	vk := testkit.Must(vandal.ring.Current().Primary(now))
	ok := testkit.Must(other.ring.Current().Primary(now))
	if !bytes.Equal(keymaterial.Of(vk), keymaterial.Of(ok)) {
		t.Fatal("the two loaders seal with different keys")
	}
	vk.Zero()
	if bytes.Equal(keymaterial.Of(vk), keymaterial.Of(ok)) {
		t.Fatal("a key zeroed in one loader's snapshot was zeroed in another's")
	}
	if vandal.current.Version != 2 || vandal.current.ID != v1.ID || vandal.ring.Current().Len() != 2 {
		t.Fatalf("the vandal's own keyset changed: %s version %d", vandal.current.ID, vandal.current.Version)
	}
	// Its floor and tag are intact: version 3 descends from what it installed.
	edit(t, path, v2, kek)
	testkit.Check(vandal.Reload(ctx))
	if vandal.ring.Current().Version() != 3 {
		t.Fatal("the vandal did not install version 3")
	}
	// A Keyset from Load is a copy too.
	_, ks, err := Load(ctx, path, &o)
	testkit.Check(err)
	ks.Keys[0].Wrapped[0] ^= 0xff
	if _, ks2, err := Load(ctx, path, &o); err != nil || ks2.Keys[0].Wrapped[0] == ks.Keys[0].Wrapped[0] {
		t.Fatalf("a change to Load's Keyset reached the next Load: %v", err)
	}
}

// TestSharedNotAcrossKEKs: what one KEK proved of a document is not
// shared with a loader whose KEK URL opens to another key (its own
// registry): that loader unwraps with its own KEK, which refuses.
func TestSharedNotAcrossKEKs(t *testing.T) {
	path, _, _ := newKeysetFile(t, 1)
	o := LoadOptions{KEK: "local:kek", Now: func() time.Time { return t0.Add(time.Hour) }}
	good := &Loader{Path: path, Options: o}
	testkit.Must(good.Load(ctx))
	defer good.Close()

	wrong := filepath.Join(t.TempDir(), "kek")
	testkit.Check(backends.GenerateLocal(wrong))
	reg := &backends.Registry{}
	reg.Register("local", func(ctx context.Context, _ *url.URL, _ *backends.OpenOptions) (backends.KEK, error) {
		return backends.Open(ctx, "local:"+wrong, nil)
	})
	o.Backends = reg
	other := &Loader{Path: path, Options: o}
	defer other.Close()
	if _, err := other.Load(ctx); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a loader whose KEK is another key: %v, want %v", err, ErrUnauthenticated)
	}
	if other.keks["local:kek"] == good.keks["local:kek"] {
		t.Fatal("two registries share a KEK client")
	}
}

// revocable is a KMS whose key can be disabled (a key version made
// unusable, a grant revoked), counting the unwraps it answers.
type revocable struct {
	reg     *backends.Registry
	revoked atomic.Bool
	unwraps atomic.Int64
}

type revocableKEK struct {
	backends.KEK
	k *revocable
}

func (r revocableKEK) Unwrap(ctx context.Context, w, ad []byte) ([]byte, error) {
	if r.k.revoked.Load() {
		return nil, errors.New("the KMS refuses: key disabled")
	}
	r.k.unwraps.Add(1)
	return r.KEK.Unwrap(ctx, w, ad)
}

func newRevocable() *revocable {
	k := &revocable{reg: &backends.Registry{}}
	k.reg.Register("local", func(ctx context.Context, u *url.URL, o *backends.OpenOptions) (backends.KEK, error) {
		inner, err := backends.Open(ctx, u.String(), o)
		return revocableKEK{inner, k}, err
	})
	return k
}

// TestSharedProofsAskTheKMS: what the KMS answered for a document stands
// only for running loaders that load it within proofWindow. A fresh
// loader asks the KMS itself even for a document proven a moment ago (so
// a key disabled in the KMS stops new instances at once, as in another
// process), and a running loader asks again once the window has passed.
func TestSharedProofsAskTheKMS(t *testing.T) {
	path, v1, kek := newKeysetFile(t, 1)
	k := newRevocable()
	o := LoadOptions{KEK: "local:kek", Backends: k.reg, Now: func() time.Time { return t0.Add(time.Hour) }}
	loader := func() *Loader {
		l := &Loader{Path: path, Options: o}
		t.Cleanup(func() { l.Close() })
		return l
	}
	a, b, late := loader(), loader(), loader()
	for _, l := range []*Loader{a, b, late} {
		before := k.unwraps.Load()
		testkit.Must(l.Load(ctx))
		if k.unwraps.Load() != before+2 { // the authentication key and the data key
			t.Fatalf("a fresh loader made %d KMS calls, want 2 of its own", k.unwraps.Load()-before)
		}
	}
	edit(t, path, v1, kek)
	testkit.Check(a.Reload(ctx))
	before := k.unwraps.Load()
	testkit.Check(b.Reload(ctx))
	if k.unwraps.Load() != before {
		t.Fatal("a running loader did not share what the KMS proved a moment ago")
	}

	k.revoked.Store(true)
	if _, err := loader().Load(ctx); err == nil || !strings.Contains(err.Error(), "key disabled") {
		t.Fatalf("a fresh loader, the KMS key disabled: %v", err)
	}
	saved := proofWindow
	proofWindow = 0
	t.Cleanup(func() { proofWindow = saved })
	if err := late.Reload(ctx); err == nil || !strings.Contains(err.Error(), "key disabled") || late.ring.Current().Version() != 1 {
		t.Fatalf("a running loader past the window, the KMS key disabled: %v", err)
	}
}

// TestCloneSlicesApart: a clone's byte slices share one allocation, and
// an append to one writes none of the others, nor the original.
func TestCloneSlicesApart(t *testing.T) {
	_, ks, _ := newKeysetFile(t, 2)
	c := ks.Clone()
	want := bytes.Clone(c.Keys[1].Wrapped)
	c.Keys[0].Wrapped = append(c.Keys[0].Wrapped, 0xaa, 0xbb)
	c.Auth.Wrapped = append(c.Auth.Wrapped, 0xcc)
	if !bytes.Equal(c.Keys[1].Wrapped, want) || !bytes.Equal(ks.Keys[1].Wrapped, want) || !bytes.Equal(c.Auth.Tag, ks.Auth.Tag) {
		t.Fatal("an append to one of a clone's slices wrote another")
	}
}

// TestSharedReencodedNotFresh: a running loader shares another loader's
// result only for what the KMS answered within proofWindow or what it
// holds itself. Loader B, refused by the KMS (the key disabled) for
// version 2's new key, is not given it by loader A, which holds it: a
// store writer writes version 2 again as other bytes (JSON whitespace is
// not authenticated), A proves those from its own keys, no KMS asked,
// and B must ask the KMS for the key it lacks, which refuses.
func TestSharedReencodedNotFresh(t *testing.T) {
	path, v1, kek := newKeysetFile(t, 1)
	k := newRevocable()
	o := LoadOptions{KEK: "local:kek", Backends: k.reg, Now: func() time.Time { return t0.Add(time.Hour) }}
	a := &Loader{Path: path, Options: o}
	b := &Loader{Path: path, Options: o}
	for _, l := range []*Loader{a, b} {
		testkit.Must(l.Load(ctx))
		t.Cleanup(func() { l.Close() })
	}
	_, doc2 := edit(t, path, v1, kek) // one new key
	testkit.Check(a.Reload(ctx))      // A asks the KMS for it; B has not loaded version 2

	saved := proofWindow
	proofWindow = 50 * time.Millisecond
	t.Cleanup(func() { proofWindow = saved })
	k.revoked.Store(true)
	revoked := time.Now()
	unwraps := k.unwraps.Load()
	// Past the window: wait on the clock, the condition the rule is about.
	testkit.WaitFor(t, "the proof window to pass", func() bool { return time.Since(revoked) > 2*proofWindow })
	if err := b.Reload(ctx); err == nil || !strings.Contains(err.Error(), "key disabled") {
		t.Fatalf("B, the KMS key disabled: %v", err)
	}

	doc2b := append(bytes.Replace(doc2, []byte("{"), []byte("{ "), 1), '\n')
	testkit.Check(os.WriteFile(path, doc2b, 0o600))
	testkit.Check(a.Reload(ctx)) // from A's own keys, no KMS call
	if a.held != lookupDocument(sha256.Sum256(doc2b)) {
		t.Fatal("A does not hold the re-encoded document")
	}
	if err := b.Reload(ctx); err == nil || !strings.Contains(err.Error(), "key disabled") {
		t.Errorf("B loaded version 2 from A's keys, the KMS key disabled: %v", err)
	}
	if v := b.ring.Current().Version(); v != 1 {
		t.Errorf("B serves version %d, want 1", v)
	}
	if n := k.unwraps.Load() - unwraps; n != 0 {
		t.Errorf("the KMS answered %d unwraps while disabled", n)
	}
	// B asks for what it lacks (version 2's authentication key and new
	// key), not for the key it holds, though A unwrapped that long ago.
	k.revoked.Store(false)
	testkit.Check(b.Reload(ctx))
	if b.ring.Current().Version() != 2 || k.unwraps.Load()-unwraps != 2 {
		t.Errorf("B at version %d after %d KMS calls, want 2 after 2", b.ring.Current().Version(), k.unwraps.Load()-unwraps)
	}
}

// TestSharedForgetsClosedKEKs: what a KEK client proved of a document is
// dropped once the last loader using that client closes, though another
// loader still holds the document: short-lived loads with a KEK client
// of their own (keyset.Load with another backends registry, as an admin
// check would call it) leave nothing behind, and the holder's own
// results stay.
func TestSharedForgetsClosedKEKs(t *testing.T) {
	path, _, _ := newKeysetFile(t, 2)
	o := LoadOptions{KEK: "local:kek", Now: func() time.Time { return t0.Add(time.Hour) }}
	holder := &Loader{Path: path, Options: o}
	testkit.Must(holder.Load(ctx))
	defer holder.Close()
	data := testkit.Must(os.ReadFile(path))
	reg := &backends.Registry{}
	reg.Register("local", func(ctx context.Context, u *url.URL, oo *backends.OpenOptions) (backends.KEK, error) {
		return backends.Open(ctx, u.String(), oo)
	})
	o.Backends = reg
	results := func() int {
		d := lookupDocument(sha256.Sum256(data))
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.results)
	}
	before := results()
	for range 50 {
		testkit.Must2(Load(ctx, path, &o))
	}
	if after := results(); after != before {
		t.Errorf("the held document keeps %d results after 50 loads with KEK clients since closed, had %d", after, before)
	}
	if _, proved := sharedDoc(t, data, holder.keks["local:kek"]); !proved {
		t.Error("the holder's own results were dropped")
	}
}

// TestSharedOnceOwnKeysNotShared: document.once gives a running loader
// another loader's result only if it stands for it, whether that result
// was kept or is that of a call in flight the loader joined: a result
// made of keys the KMS answered long ago, which the other loader holds
// and this one does not, makes this one compute its own (here, as its
// fn would, from the KMS). The second loader joins the first one's
// flight (without once's check of a joined flight's result, this fails
// every run).
func TestSharedOnceOwnKeysNotShared(t *testing.T) {
	k := &sharedKEK{}
	// Kept first: a result that stands for no one and counts the loaders
	// that checked it, to tell when the second one is about to join.
	checks := &checked{}
	d := &document{results: map[resultKey]result{{stageKeys, k}: checks}}
	ck := cacheKey{"ks-test", k, 1, "wrapped"}
	m := []byte("material")
	long := part{m, time.Now().Add(-time.Hour)}
	held := map[cacheKey]part{ck: long}
	theirs := &unwrapped{material: map[cacheKey]part{ck: long}}
	entered, release := make(chan struct{}), make(chan struct{})
	done := make(chan result, 1)
	go func() { // the loader that holds the key, slow to finish
		r, err := d.once(ctx, stageKeys, k, held, false, func(context.Context) (result, error) {
			close(entered)
			<-release
			return theirs, nil
		})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	<-entered
	var asked atomic.Int64
	mine := make(chan result, 1)
	go func() { // a loader that lacks it: joins the flight or finds it kept
		r, err := d.once(ctx, stageKeys, k, nil, false, func(context.Context) (result, error) {
			asked.Add(1)
			return &unwrapped{material: map[cacheKey]part{ck: {m, time.Now()}}}, nil
		})
		if err != nil {
			t.Error(err)
		}
		mine <- r
	}()
	// The holder checked it twice (before its flight and in it), then
	// the other loader once, before it joins the flight.
	testkit.WaitFor(t, "the second loader's check", func() bool { return checks.n.Load() == 3 })
	close(release)
	if r := <-done; r != theirs {
		t.Fatal("the holder did not get its own result")
	}
	if r := <-mine; r == theirs || asked.Load() != 1 {
		t.Fatalf("a loader lacking the key got the holder's result (asked the KMS %d times)", asked.Load())
	}
	// The newest is kept, and it stands for either loader now.
	if r, err := d.once(ctx, stageKeys, k, nil, false, func(context.Context) (result, error) {
		t.Fatal("computed again")
		return nil, nil
	}); err != nil || r == theirs {
		t.Fatalf("the older result was kept (%v)", err)
	}
	if r, err := d.once(ctx, stageKeys, k, held, false, nil); err != nil || r == theirs {
		t.Fatalf("the holder was given the older result (%v)", err)
	}
	// And the holder's result still stands for the holder, past the window.
	if !theirs.stands(held, time.Now()) || theirs.stands(nil, time.Now()) {
		t.Fatal("stands")
	}
}

type checked struct{ n atomic.Int64 }

func (c *checked) stands(map[cacheKey]part, time.Time) bool { c.n.Add(1); return false }

// TestSharedFlightNotCancelledByOne: the loader whose call to the KMS the
// others joined gives up (its context is cancelled: it closed, or its
// deadline passed). A loader that joined and has not given up does not
// fail with that loader's context error: it asks the KMS itself.
func TestSharedFlightNotCancelledByOne(t *testing.T) {
	k := &sharedKEK{}
	checks := &checked{}
	d := &document{results: map[resultKey]result{{stageAuth, k}: checks}}
	first, cancel := context.WithCancel(ctx)
	defer cancel()
	entered := make(chan struct{})
	done := make(chan error, 1)
	go func() { // the loader that runs the flight, then gives up
		_, err := d.once(first, stageAuth, k, nil, false, func(ctx context.Context) (result, error) {
			close(entered)
			<-ctx.Done()
			return nil, ctx.Err()
		})
		done <- err
	}()
	<-entered
	var asked atomic.Int64
	mine := make(chan error, 1)
	go func() { // a loader that joins it, and does not give up
		_, err := d.once(ctx, stageAuth, k, nil, false, func(context.Context) (result, error) {
			asked.Add(1)
			return &verified{}, nil
		})
		mine <- err
	}()
	testkit.WaitFor(t, "the second loader's check", func() bool { return checks.n.Load() == 3 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the loader that gave up: %v, want context.Canceled", err)
	}
	if err := <-mine; err != nil || asked.Load() != 1 {
		t.Fatalf("the loader that joined: %v (asked the KMS %d times), want its own answer", err, asked.Load())
	}
}

// TestSharedKMSDeadlineNotGivingUp: a KMS that answers with a timeout of
// its own (a server-side deadline, which a client library may report as
// context.DeadlineExceeded) while the loader that asked has not given up:
// the loaders that joined get that answer, and do not each ask again (a
// slow KMS would get one call per loader at once: found by an attacker
// review).
func TestSharedKMSDeadlineNotGivingUp(t *testing.T) {
	k := &sharedKEK{}
	checks := &checked{}
	d := &document{results: map[resultKey]result{{stageAuth, k}: checks}}
	entered, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := d.once(ctx, stageAuth, k, nil, false, func(context.Context) (result, error) {
			close(entered)
			<-release
			return nil, fmt.Errorf("kms: %w", context.DeadlineExceeded)
		})
		done <- err
	}()
	<-entered
	var asked atomic.Int64
	mine := make(chan error, 1)
	go func() {
		_, err := d.once(ctx, stageAuth, k, nil, false, func(context.Context) (result, error) {
			asked.Add(1)
			return &verified{}, nil
		})
		mine <- err
	}()
	testkit.WaitFor(t, "the second loader's check", func() bool { return checks.n.Load() == 3 })
	close(release)
	if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the loader that asked: %v", err)
	}
	if err := <-mine; !errors.Is(err, context.DeadlineExceeded) || asked.Load() != 0 {
		t.Fatalf("the loader that joined: %v, asked the KMS %d times; want the KMS's answer, not a call of its own", err, asked.Load())
	}
}
