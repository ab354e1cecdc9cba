package keyset

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"weak"

	"golang.org/x/sync/singleflight"
)

// Loaders in one process that follow one keyset (a fleet's instances in
// one process, the loaders of many tenants of one keyset) all read the
// same bytes at every rotation. Parsing them is a function of those bytes
// alone, authenticating them and unwrapping their keys one of the bytes
// and of the KEK that checks them (and of the KMS's will to answer): it
// is done once per process and shared. Nothing
// that depends on a loader is shared: the KEK it trusts, the id it
// pinned, its MinVersion, the versions, tags and retired keys it has
// seen and its clock are checked by every loader at every load, against
// the shared document read-only, and each loader gets its own copy of the
// Keyset and its own snapshot of the keys. One loader's acceptance of a
// document never stands in for another's checks. Nor does the KMS's
// answer stand for long: a loader's first load asks it itself, and a
// running loader takes another's result only for keys the KMS answered
// within proofWindow (the loaders told of one write) or that it holds
// itself (result): a loader's own keys are never a KMS answer for another.
//
// A document stays in the table while a loader holds it (the one it last
// loaded) and until the collector finds none does: the table holds weak
// pointers, so it keeps no keyset and no key material alive that no
// loader holds, and at most maxDocuments entries (beyond, a document is
// parsed and checked for the loader that read it alone, as if nothing
// were shared). What a KEK proved is kept by the KEK client that proved
// it (kek.go), and dropped from every document when the last loader using
// that client closes it: a KEK opened anew proves everything again.

// maxDocuments bounds the table: distinct documents held at once by the
// loaders of a process (one per keyset followed, two during a rotation).
const maxDocuments = 256

// A document is one keyset document's bytes, parsed, with what was
// proven of it under each KEK that checked it.
type document struct {
	sum [sha256.Size]byte
	ks  *Keyset // parsed and validated; read-only, never handed out

	mu      sync.Mutex
	results map[resultKey]result // successes only, the newest of each
}

// A stage is one step of loading that is shared: the authentication key
// unwrapped and the tag verified, or the data keys unwrapped and
// imported. They are separate because a loader checks the history (that
// the document descends from the one it installed) between the two:
// a fork is refused before any data key is unwrapped.
type stage uint8

const (
	stageAuth stage = iota + 1
	stageKeys
)

// A resultKey names a stage's result: a function of the document's
// bytes and of the KEK that checked them, the very client each loader
// that reads it uses.
type resultKey struct {
	stage stage
	kek   *sharedKEK
}

var documents = struct {
	sync.Mutex
	m map[[sha256.Size]byte]weak.Pointer[document]
}{m: map[[sha256.Size]byte]weak.Pointer[document]{}}

// shared deduplicates concurrent parses and KMS stages of one document.
var shared singleflight.Group

// parseShared returns the document for data: the one a loader of this
// process holds, or a new one, parsed once however many loaders ask at
// once. A document that does not parse is not kept.
func parseShared(data []byte) (*document, error) {
	sum := sha256.Sum256(data)
	if d := lookupDocument(sum); d != nil {
		return d, nil
	}
	v, err, _ := shared.Do(fmt.Sprintf("parse %x", sum), func() (any, error) {
		if d := lookupDocument(sum); d != nil {
			return d, nil
		}
		ks, err := Parse(data)
		if err != nil {
			return nil, err
		}
		d := &document{sum: sum, ks: ks, results: map[resultKey]result{}}
		keepDocument(d)
		return d, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*document), nil
}

func lookupDocument(sum [sha256.Size]byte) *document {
	documents.Lock()
	defer documents.Unlock()
	return documents.m[sum].Value()
}

// keepDocument enters d in the table, if there is room, until no loader
// holds it.
func keepDocument(d *document) {
	documents.Lock()
	defer documents.Unlock()
	if len(documents.m) >= maxDocuments {
		for sum, w := range documents.m {
			if w.Value() == nil {
				delete(documents.m, sum)
			}
		}
		if len(documents.m) >= maxDocuments {
			return // d serves the loader that parsed it, unshared
		}
	}
	documents.m[d.sum] = weak.Make(d)
	runtime.AddCleanup(d, forgetDocument, d.sum)
}

// forgetDocument drops a collected document's entry, unless another
// document of the same bytes took its place since.
func forgetDocument(sum [sha256.Size]byte) {
	documents.Lock()
	defer documents.Unlock()
	if w, ok := documents.m[sum]; ok && w.Value() == nil {
		delete(documents.m, sum)
	}
}

// proofWindow is how long what a KMS answered for a document stands for
// the running loaders of the process that load the same document after:
// long enough for every loader told of one write to load it (a rotation
// reached 1,000 loaders within 1.6 s on a loaded machine), short enough
// that a KMS that stops answering for a key (a key version disabled, a
// grant revoked: docs/ROTATION.md, "A leaked key") is asked again
// by every loader within seconds, not trusted from memory.
var proofWindow = 5 * time.Second

// A result is a stage's result: a *verified or an *unwrapped. It stands
// for a running loader whose own previous material is prev if every part
// of it (the authentication key; each data key's material) was answered
// by the KMS within proofWindow of now, or is in prev, the same bytes:
// what the loader holds itself needs no KMS answer to load again, and
// what it does not hold it gets only from a recent one. A part a loader
// took from its own material keeps the time the KMS answered it, never
// the time it was taken, so a result made from a loader's own keys (a
// document re-encoded, a forced Reload) is no fresh answer for another.
type result interface {
	stands(prev map[cacheKey]part, now time.Time) bool
}

// A part is a key's material and when the KMS answered it.
type part struct {
	m  []byte
	at time.Time
}

// stands reports whether p, the material of ck, counts as a KMS answer
// for a loader whose own material is prev.
func (p part) stands(ck cacheKey, prev map[cacheKey]part, now time.Time) bool {
	if now.Sub(p.at) < proofWindow {
		return true
	}
	q, ok := prev[ck]
	return ok && bytes.Equal(q.m, p.m)
}

// once returns the result of the stage for k, computing it with fn unless
// a loader of this process did and it stands for this one (result, with
// prev the loader's own material): fn runs once however many ask at
// once, and the newest success is kept. A loader that joins a call in
// flight checks its result as it would a kept one, and computes its own
// if it does not stand (fn uses the caller's own material). A fresh
// loader (its first load: a new instance) reuses nothing kept: it asks
// the KMS, as a new instance in another process would, and shares only a
// call in flight of fresh loaders, which ask the KMS for everything (as
// unwrapShared does). When the caller that ran a flight gave up (its
// context ended), the loaders that joined it and have not make or join
// the next flight, up to three: one loader's context never decides
// another's load, and a slow KMS still gets one call, not one per
// loader. fn's result must not be written after: every loader reads it.
//
// Only the caller that ran the flight says it gave up (gaveUp): an error
// of the KMS that reads as a deadline (a server-side timeout) is no
// reason for the loaders that joined to ask again.
func (d *document) once(ctx context.Context, s stage, k *sharedKEK, prev map[cacheKey]part, fresh bool, fn func(context.Context) (result, error)) (result, error) {
	rk := resultKey{s, k}
	recent := func() (result, bool) {
		d.mu.Lock()
		r, ok := d.results[rk]
		d.mu.Unlock()
		return r, ok && r.stands(prev, time.Now())
	}
	if !fresh {
		if r, ok := recent(); ok {
			return r, nil
		}
	}
	compute := func() (result, error) {
		r, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		d.results[rk] = r
		d.mu.Unlock()
		return r, nil
	}
	var (
		v   any
		err error
		ran bool // this caller ran the flight: its result is its own
	)
	for try := 0; ; try++ {
		ran = false
		v, err, _ = shared.Do(fmt.Sprintf("%d %x %p %t", s, d.sum, k, fresh), func() (any, error) {
			ran = true
			if !fresh {
				if r, ok := recent(); ok {
					return r, nil
				}
			}
			r, err := compute()
			if err != nil && ctx.Err() != nil {
				// This loader gave up (closed, or past its deadline):
				// said so, for the loaders that joined and have not.
				return nil, gaveUp{err}
			}
			return r, err
		})
		var g gaveUp
		if !errors.As(err, &g) {
			break
		}
		if ran || ctx.Err() != nil || try == 2 {
			err = g.err // its own context's error, as if unshared
			break
		}
		// The loader whose flight this one joined gave up; this one
		// has not: it joins (or makes) the next flight, not one call
		// of its own per loader, which a slow KMS would get from every
		// loader at once.
	}
	if err != nil {
		return nil, err
	}
	r := v.(result)
	if !ran && !fresh && !r.stands(prev, time.Now()) {
		return compute() // another loader's, made of keys this one lacks
	}
	return r, nil
}

// gaveUp is the error of a flight whose caller gave up (its context
// ended), as the loaders that joined it see it.
type gaveUp struct{ err error }

func (g gaveUp) Error() string { return g.err.Error() }
func (g gaveUp) Unwrap() error { return g.err }
