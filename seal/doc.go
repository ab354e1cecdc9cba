// Package seal turns short server state into tokens that can round-trip
// through an untrusted client, and back.
//
// Build a [Sealer] from a keyring with [New], then call [Sealer.Seal] when a
// handler hands state to the client and [Sealer.Open] when the client sends
// it back. Both take a [Binding]: the method, target, principal, audience,
// optional session, argument digest ([ArgsDigest]) and optional caller
// context that the token belongs to. The binding is not stored in the token;
// it is authenticated with it, so a token opened under any other binding
// fails exactly like a forgery.
//
// The security contract: a token that Open accepts was sealed by a key of
// the ring, under the same binding, not after now+skew, and has not expired.
// Its payload is the one sealed, unchanged. With an AEAD key the client
// cannot read the payload; with a MAC key it can read it but not change it.
// Open does not stop a client from presenting the same valid token twice:
// where a second use would do harm, record the first (package replay, which
// the MCP middleware applies per tool).
//
// Open checks, in this order: length, base64url encoding, version, key id,
// authentication, then time. A token is reported expired or not yet valid
// only once it has authenticated, so a forger learns nothing from the error
// beyond "invalid". Errors match the sentinels below with errors.Is, and
// [Reason] reduces any of them to what a client may be told.
//
// [Sealer.AppendSeal] and [Sealer.AppendOpen] write into caller buffers and
// allocate nothing; [Sealer.Seal] and [Sealer.Open] allocate only the token
// or payload they return. docs/FORMAT.md specifies the bytes.
package seal
