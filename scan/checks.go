package scan

// A Check describes one check: its stable id, its severity when it fails
// (None for an observation, which never fails), what it sends, and the
// spec sentence it tests (MCP 2026-07-28, basic patterns, "Multi
// Round-Trip Requests", server requirements; "none: ..." when no
// requirement backs it).
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
	specUnasked   = `Error Handling: "If additional, unexpected parameters are provided in the InputResponses object, the server SHOULD ignore any information it does not recognize or need"; and req. 8: "Servers MUST NOT assume that clients will fulfill the inputRequests"`
	// specNone is the spec column of an observation no requirement
	// backs: such a check never fails, so its severity is None.
	specNone = `none: the spec asks nothing of how a server words its refusals`
)

// Checks lists every check, in the order a scan runs them.
var Checks = []Check{
	{"baseline", None, "the honest flow: first round, answers, retry with the state echoed; it must complete", `req. 1-3 and the client requirements: the flow the other checks change`},
	{"tamper", High, "the state with one bit flipped in its decoded bytes, at its start, middle and end, re-encoded in its own spelling", specIntegrity},
	{"truncate", High, "the state with its last decoded byte dropped, and cut in half", specIntegrity},
	{"extend", High, "the state with bytes appended to its decoded bytes: one zero byte, and 256 KiB of them (plain text: characters)", specIntegrity},
	{"short-tag", High, "each segment that looks like a tag (16+ base64 or hex characters that do not read as text, in a state of two or more segments) emptied, dropped with its separator, cut by one character and to half, as text; then the same with the readable content forged", specIntegrity},
	{"encoding", Low, "the same decoded bytes spelled otherwise: the other base64 alphabet, padding added or removed, a spare bit set (Medium for a single-use target: a guard keyed by the string sees a new state)", specAttacker + "; " + specSingleUse},
	{"readable-state", None, "nothing: reads the state as a client can (text, JSON, base64 of either)", specOpaque},
	{"secret-in-state", Medium, "nothing: looks in the readable state for identifiers, amounts, scores, account and contact data", specOpaque},
	{"forge-plaintext", High, "the readable state with one JSON value edited, each in turn (at most 8), answer-shaped values first (a false or a word like pending, decline or no set to true, accept or yes, sent without inputResponses), stopping at the first accepted", specIntegrity},
	{"weak-key", High, "when a segment of the state is an HMAC-SHA256 tag under a common key (\"secret\", \"changeme\", ... tried offline): the state forged and tagged again", specIntegrity},
	{"other-tool", High, "the state sent to the target's MoveTo (same method), with that target's arguments (first a random state, which it must refuse)", specRequest},
	{"other-method", High, "the state sent to each of the target's OtherMethods (a prompt or a resource for a tool), with its arguments (first a random state, which it must refuse)", specRequest},
	{"other-server", High, "the state sent to a second deployment of the server (OtherURL) that may share its key: an audience binding (first that deployment's own flow must complete)", specRequest},
	{"other-args", High, "the state sent with one argument's value changed, each top-level argument in turn (sorted by name, at most 8), stopping at the first accepted", specRequest},
	{"other-principal", High, "the state sent with the second principal's credential (OtherHeader)", specPrincipal},
	{"no-credential", High, "the state sent without the credential (Header left out)", specPrincipal},
	{"expired", Medium, "the state sent after ExpiryWait", specExpiry},
	{"replay-single-use", High, "a completed retry of a single-use target sent again, as is and respelled", specSingleUse},
	{"replay-race", High, "the completing retry of one fresh flow of a single-use target sent 8 times at once; more than one completion fails (skipped when replay-single-use failed)", specSingleUse},
	{"no-responses", High, "the state sent without inputResponses", specInputs},
	{"declined", High, "the state sent with every elicitation declined", specInputs},
	{"unasked-answers", High, "a first call, without requestState, carrying the answers of the honest flow's last round", specUnasked},
	// distinct-errors is an observation, never a finding: no spec
	// sentence asks for one refusal, so it reports info or pass and its
	// severity is None, in -list, the JSON and the SARIF rule alike.
	{"distinct-errors", None, "nothing: compares the refusals of tamper, truncate, extend, short-tag, forge-plaintext and other-*; different ones tell an attacker which check a forgery failed (an observation: info or pass, never fail)", specNone},
}

var checkByID = func() map[string]*Check {
	m := map[string]*Check{}
	for i := range Checks {
		m[Checks[i].ID] = &Checks[i]
	}
	return m
}()
