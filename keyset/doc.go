// Package keyset holds the stored form of a keyring: the keyset document,
// its authentication under a key-encryption key (KEK), and the loader that
// keeps a keyring.Ring in step with it.
//
// Where to start:
//
//   - A server: a [Loader] with [LoadOptions] naming the KEK it trusts
//     (and, better, the keyset id). Load returns the ring; Run follows the
//     store; Close releases the KEK's client. [Load] reads a keyset once.
//   - An editor: package rotation, or the sealctl command, which read with
//     [Read], check with [Check], and write with [Write] (compare-and-swap).
//
// The security contract: a keyset changes what an instance does only if it
// authenticates under a KEK the instance's own configuration names, has
// the pinned id, is not older than a version the instance installed (nor
// below LoadOptions.MinVersion), descends from the version it installed
// (its authenticated history names it), leaves every key the instance
// saw retired retired, and is inside its freshness window. So a key a
// running instance has seen retired never opens a token there again,
// whatever the store later holds and whoever edits it.
// Everything but the authentication is decided before any KMS call, so a
// store writer without the KEK can neither make an instance trust another
// KEK nor make it contact another endpoint ([ErrUntrustedKEK],
// [ErrOtherKeyset], [ErrRollback], [ErrStale], [ErrFork],
// [ErrUnauthenticated]). docs/KEYSET.md specifies the document and says who
// can do what.
package keyset
