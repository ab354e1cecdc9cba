// Package integration holds the tests that put loaders, rotation,
// schedulers and seal together on each kind of keyset store, against the
// real servers, in several processes: what a fleet does with a store. The
// stores' own contract is tested by stores/storetest, the KEKs' by
// backends/kektest.
package integration
