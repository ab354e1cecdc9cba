// Package keyring holds the keys that seal and open tokens, in memory. It
// does no I/O: loading keys from a stored keyset is package keyset's job.
//
// A [Key] has a random 32-bit id, one [Algorithm] for its whole life, a
// [State] and an activation time. A [Snapshot] is an immutable, validated set
// of keys; a [Ring] holds the current snapshot behind an atomic pointer, so
// a reload swaps every key at once while Seal and Open run without locks.
// A [Policy] is the timing a fleet agrees on, carried by its keyset.
//
// Where to start:
//
//   - One process, keys in memory only: [Generate].
//   - A keyset shared by a fleet, in a file, Vault KV or Redis: a
//     keyset.Loader, whose Load returns a [Ring] and whose Run keeps it in
//     step with the store.
//   - Editing keysets: package rotation, or the sealctl command.
//
// The primary key, the one that seals, is the newest active key whose
// activation time has passed; of two that activated in the same second,
// the one listed later. Every instance of a fleet computes it from the same
// keyset and its own clock, so instances switch keys together once they
// have all loaded a keyset whose new key activates in the future.
package keyring
