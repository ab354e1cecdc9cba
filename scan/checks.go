package scan

// A Check describes one check: its stable id, its severity when it fails,
// what it sends, and the spec sentence it tests (MCP 2026-07-28, basic
// patterns, "Multi Round-Trip Requests", server requirements).
type Check struct {
	ID       string
	Severity Severity
	Sends    string
	Spec     string
}

const (
	specIntegrity = `req. 4: "If requestState influences authorization, resource access, or business logic, servers MUST protect its integrity (e.g. HMAC or AEAD) and MUST reject state that fails verification."`
	specPrincipal = `req. 5: servers SHOULD include "the authenticated principal, rejecting state presented by a different principal"`
	specExpiry    = `req. 5: servers SHOULD include "a short expiry (TTL), rejecting state presented after it lapses"`
	specRequest   = `req. 5: servers SHOULD include "an identifier for the originating request, e.g. the method name and a digest of its salient parameters, rejecting state presented on a request that does not match"`
	specSingleUse = `req. 5, warning: "Servers for which a given requestState must be consumed at most once (e.g., one-time redemptions) MUST enforce that invariant server-side."`
	specInputs    = `req. 8: "Servers MUST NOT assume that clients will fulfill the inputRequests"; Error Handling: the server "SHOULD respond with a new InputRequiredResult requesting the missing information again"`
	specOpaque    = `req. 3: requestState "is an opaque string meaningful only to the server" that passes through the client (Security Considerations): whatever it carries, every client can read unless it is encrypted`
	specAttacker  = `req. 4: "servers MUST treat requestState as an attacker-controlled input"`
)

// Checks lists every check, in the order a scan runs them.
var Checks = []Check{
	{"baseline", None, "the honest flow: first round, answers, retry with the state echoed; it must complete", `req. 1-3 and the client requirements: the flow the other checks change`},
	{"tamper", High, "the state with one bit flipped in its decoded bytes, at its start, middle and end, re-encoded in its own spelling", specIntegrity},
	{"truncate", High, "the state with its last decoded byte dropped, and cut in half", specIntegrity},
	{"extend", High, "the state with bytes appended to its decoded bytes: one zero byte, and 256 KiB of them (plain text: characters)", specIntegrity},
	{"encoding", Low, "the same decoded bytes spelled otherwise: the other base64 alphabet, padding added or removed, a spare bit set (Medium for a single-use target: a guard keyed by the string sees a new state)", specAttacker + "; " + specSingleUse},
	{"readable-state", None, "nothing: reads the state as a client can (text, JSON, base64 of either)", specOpaque},
	{"secret-in-state", Medium, "nothing: looks in the readable state for identifiers, amounts, scores, account and contact data", specOpaque},
	{"forge-plaintext", High, "the readable state edited (a JSON value changed) and encoded back the way it was", specIntegrity},
	{"weak-key", High, "when a segment of the state is an HMAC-SHA256 tag under a common key (\"secret\", \"changeme\", ... tried offline): the state forged and tagged again", specIntegrity},
	{"other-tool", High, "the state sent to the target's MoveTo (same method), with that target's arguments", specRequest},
	{"other-args", High, "the state sent with one argument's value changed, each top-level argument in turn (sorted by name, at most 8), stopping at the first accepted", specRequest},
	{"other-principal", High, "the state sent with the second principal's credential (OtherHeader)", specPrincipal},
	{"no-credential", High, "the state sent without the credential (Header left out)", specPrincipal},
	{"expired", Medium, "the state sent after ExpiryWait", specExpiry},
	{"replay-single-use", High, "a completed retry of a single-use target sent again, as is and respelled", specSingleUse},
	{"no-responses", High, "the state sent without inputResponses", specInputs},
	{"declined", High, "the state sent with every elicitation declined", specInputs},
	{"distinct-errors", Low, "nothing: compares the refusals of tamper, truncate, extend, forge-plaintext and other-*; different ones tell an attacker which check failed (Info: the spec asks nothing here)", specIntegrity},
}

var checkByID = func() map[string]*Check {
	m := map[string]*Check{}
	for i := range Checks {
		m[Checks[i].ID] = &Checks[i]
	}
	return m
}()
