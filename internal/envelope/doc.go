// Package envelope holds the byte-level format of a stateseal token: the
// header, the binding encoding, strict base64url, and the two envelope
// ciphers. docs/FORMAT.md is its specification; this package is the only
// place that parses token bytes, so the exported API in package seal stays
// small.
package envelope
