package mrtr

import "errors"

// JSON-RPC error codes of an Answer.
const (
	CodeInvalidParams = -32602
	CodeInternalError = -32603
)

// An Answer is the JSON-RPC error a client is told about a request's
// state: what the adapters (mcpsdk, mcpgo) and the gateway send, made in
// one place so that every path says the same. It says no more than
// Reason: never which check failed, never the token or the state.
type Answer struct {
	// Code is CodeInvalidParams for a state refused (the client starts
	// the flow again, or for "replayed" asks its user), CodeInternalError
	// for one that could not be checked now (the same retry may pass
	// later) and for a state that could not be sealed.
	Code int
	// Message ends with ": " and Reason ("invalid requestState: expired"),
	// so that a client library that drops an error's data (mcp-go's does)
	// still shows its caller the reason. "cannot seal requestState", with
	// no reason, when the handler's state could not be sealed.
	Message string
	// Reason is the error's data.reason, Reason(err); "" for a state that
	// could not be sealed, whose error has no data.
	Reason string
}

// ClientError is the Answer for err, an error of [States.Handle],
// [States.Open] or [States.Refuse] (a *StateError, or what it wraps).
// A new reason of Reason flows through it unchanged: refused with
// CodeInvalidParams unless retryable lists it.
func ClientError(err error) Answer {
	var se *StateError
	if errors.As(err, &se) && se.Op == "seal" {
		return Answer{Code: CodeInternalError, Message: "cannot seal requestState"}
	}
	reason := Reason(err)
	if retryable(reason) {
		return Answer{Code: CodeInternalError, Message: "requestState not checked, try again: " + reason, Reason: reason}
	}
	return Answer{Code: CodeInvalidParams, Message: "invalid requestState: " + reason, Reason: reason}
}

// retryable reports the reasons after which the state is unused and the
// client may send the same retry again later.
func retryable(reason string) bool { return reason == "unavailable" }
