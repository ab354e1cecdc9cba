// Package rotation edits keysets: it creates them, rotates, promotes,
// demotes, retires and prunes keys, and rewraps every data key under a new
// KEK. It never touches tokens.
//
// Every operation takes the keyset's location, a file path or a store URL
// (vault-kv://..., redis://...: see Options.Stores), and, as its last
// argument, the *Options that say which KEK and keyset to trust and how to
// reach them; nil means the defaults, for a keyset file under the local
// KEK beside it. Rotate and Retire also take their own options
// (*RotateOptions, *RetireOptions) before it, nil again meaning the
// defaults.
//
// Every operation is one compare-and-swap edit: read the keyset, change a
// copy, write it back only if nobody wrote in between (keyset.ErrConflict
// otherwise). Two operators, or two instances running the [Scheduler], can
// act at once without losing a key.
//
// The safety rules live here. [Rotate] gives the new key an activation time
// one propagation delay ahead, so every instance has loaded it before any
// seals with it. [Retire] refuses a key while tokens it may have sealed can
// still be valid: until its successor's activation plus the maximum TTL
// plus the clock skew. The last usable key is never retired or demoted.
// Every edit links the new version to the one it read (keyset.Keyset.Follow)
// and keeps every retired key recorded. An edit renews the keyset's expiry
// only when its editor can vouch that the keyset it read is the newest
// (Options.Loader, Options.Vouch, Options.Current); an editor that cannot
// keeps the expiry, so it never keeps a rolled-back copy loadable longer
// than the copy itself would have been. docs/ROTATION.md is the
// operator's runbook.
package rotation
