package seal

// A Binding names the request a token belongs to. It is never stored in the
// token: Seal and Open both feed it, length-prefixed, into the MAC or the
// AEAD associated data, so Open succeeds only under the binding Seal used.
// Empty fields are bound as empty; a field set at Seal must be set the same
// at Open.
type Binding struct {
	// Method is the request method, such as "tools/call".
	Method string
	// Target is the tool name, prompt name or resource URI.
	Target string
	// Principal is the authenticated caller. Bind it whenever requests are
	// authenticated, so one user's token cannot be replayed by another.
	Principal string
	// Audience names this server or deployment, so a token cannot move to
	// another service that shares the keyset.
	Audience string
	// Session is an optional application session or conversation id.
	Session string
	// ArgsDigest is the digest of the request arguments, from ArgsDigest.
	ArgsDigest []byte
	// Context is optional caller-defined context, bound as opaque bytes.
	Context []byte
}
