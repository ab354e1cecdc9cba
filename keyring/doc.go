// Package keyring holds the keys that seal and open tokens.
//
// A [Key] has a random 32-bit id, one [Algorithm] for its whole life, a
// [State] and an activation time. A [Snapshot] is an immutable, validated set
// of keys; a [Ring] holds the current snapshot behind an atomic pointer, so
// a reload swaps every key at once while Seal and Open run without locks.
//
// Where to start:
//
//   - One process, keys in memory only: [Generate].
//   - A keyset file shared by a fleet: a [Loader], whose Load returns the
//     ring and whose Run keeps it in step with the file. [LoadFile] reads
//     a keyset once. Its [LoadOptions] are the trust root: the KEK (and
//     keyset id) come from there, never from the keyset, which a store
//     writer without the KEK cannot make load ([ErrUntrustedKEK],
//     [ErrOtherKeyset], [ErrRollback], [ErrStale], [ErrFork]).
//   - Editing keysets: package rotation, or the sealctl command.
//
// A [Keyset] is the stored form: a versioned JSON document (docs/KEYSET.md)
// whose data keys are wrapped by a key-encryption key from package
// backends, bound to their keyset and key id. Writes are atomic and
// compare-and-swap on the version ([WriteKeysetFile], [ErrConflict]). KEKs
// are called when a keyset is loaded, never when a token is sealed or
// opened.
//
// The primary key, the one that seals, is the newest active key whose
// activation time has passed. Every instance of a fleet computes it from the
// same keyset and its own clock, so instances switch keys together once they
// have all loaded a keyset whose new key activates in the future.
package keyring
