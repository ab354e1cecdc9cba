package keyset

import (
	"io"

	"github.com/stateseal/stateseal/backends"
	"github.com/stateseal/stateseal/internal/share"
)

// The loaders of a process that would open one KEK URL the same way share
// one KEK client while any of them is open, as the stores of a process
// share one Redis client: what that KEK proved of a document (that it
// authenticates, what its keys unwrap to) is then proved for all of them
// by the very KEK each uses (shared.go). Once the last of them closes, the
// KEK is closed, and the next loader opens it again: a KEK replaced behind
// its URL (a new key file) is read by the first loader opened after every
// loader that used the old one has closed, and what the old one proved is
// dropped from every document (forgetKEK).

// A kekKey is everything that decides what a KEK URL opens to besides
// the environment: the URL with its transport settings, the registry
// that opens it and the directory relative paths resolve against.
type kekKey struct {
	url string
	reg *backends.Registry
	dir backends.OpenOptions
}

// A sharedKEK is one opened KEK and the loaders that use it; its pointer
// names that client in the results documents keep (shared.go).
type sharedKEK = share.Share[kekKey, backends.KEK]

var openKEKs share.Map[kekKey, backends.KEK]

// acquireKEK returns the open KEK for k, opening it with open if no loader
// holds it. open runs outside the table's lock: a KMS slow to answer
// holds up no other KEK.
func acquireKEK(k kekKey, open func() (backends.KEK, error)) (*sharedKEK, error) {
	return openKEKs.Acquire(k, open, func(kek backends.KEK) { closeKEK(kek) })
}

// releaseKEK drops one loader's use of s; the last closes the KEK.
func releaseKEK(s *sharedKEK) error {
	if !s.Release() {
		return nil
	}
	forgetKEK(s)
	return closeKEK(s.Value())
}

// forgetKEK drops what s proved from every document of the table: no
// loader uses s any more, and a KEK opened after it is another client
// that proves everything again, so its results (key material, and s
// itself) would only be kept alive by a document another loader holds.
func forgetKEK(s *sharedKEK) {
	documents.Lock()
	var docs []*document
	for _, w := range documents.m {
		if d := w.Value(); d != nil {
			docs = append(docs, d)
		}
	}
	documents.Unlock()
	for _, d := range docs {
		d.mu.Lock()
		delete(d.results, resultKey{stageAuth, s})
		delete(d.results, resultKey{stageKeys, s})
		d.mu.Unlock()
	}
}

func closeKEK(k backends.KEK) error {
	if c, ok := k.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
