// Package keymaterial lets the packages of this module that must hold a
// key's secret bytes (seal builds its ciphers from them, keyset wraps and
// unwraps them) reach them, while keyring.Key keeps them out of the
// exported API, as tink keeps keys behind a handle.
//
// The arrow runs backwards, on purpose: keymaterial imports nothing, and
// package keyring fills in Of and Set from its init function, so that a
// package below keyring (seal's ciphers, keyset's wrapping) can reach
// the bytes without keyring exporting them. Every importer of
// keymaterial also imports keyring (it is handed *keyring.Key values),
// so the variables are always set before use.
package keymaterial

// Of returns the material of k, a *keyring.Key; package keyring sets it.
// The caller does not keep the slice beyond its use, and clears any copy.
var Of func(k any) []byte

// Set replaces the material of k, a *keyring.Key, with a copy of m.
var Set func(k any, m []byte)
