// Package keyring holds the keys that seal and open tokens.
//
// A [Key] has a random 32-bit id, one [Algorithm] for its whole life, a
// [State] and an activation time. A [Snapshot] is an immutable, validated set
// of keys; a [Ring] holds the current snapshot behind an atomic pointer, so
// a reload swaps every key at once while Seal and Open run without locks.
//
// Most programs start with [Generate], which returns a ring with one fresh
// key held only in memory, and hand the ring to seal.New. Keysets stored on
// disk and wrapped by a KMS build their snapshots with [NewSnapshot] and
// install them with [Ring.Store].
//
// The primary key, the one that seals, is the newest active key whose
// activation time has passed. Every instance of a fleet computes it from the
// same keyset and its own clock, so instances switch keys together once they
// have all loaded a keyset whose new key activates in the future.
package keyring
